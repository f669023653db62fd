--
-- memory_use (1.5): what a memory node requests by use, from the plan's
-- estimates, kind by kind, against a hand calculation (doc/memory.md):
--
--   request = its estimate x 1.5, in kB rounded up, at least 64 kB, at
--             most its limit (work_mem, or work_mem x hash_mem_multiplier)
--   a sorted row  MAXALIGN(width) + 16 + 24 + 16
--   a stored row  MAXALIGN(width) + 16 + 8 + 16
--   a hashed row  MAXALIGN(width) + 16 + 16 + 8
--   a group       MAXALIGN(width) + 16 + transition space + 16 + 32 + 48
--   a bitmap      80 per row of its index scan
--
-- The tables are small enough for ANALYZE to read every row, so the
-- planner's estimates (and these figures) are the same on 15 to 19.
--
SET bulkhead.memory_request = 'use';
SET work_mem = '64MB';
SET hash_mem_multiplier = 2;
SET max_parallel_workers_per_gather = 0;
SET jit = off;
CREATE TABLE use_t AS SELECT g AS a, md5(g::text) AS b FROM generate_series(1, 20000) g;
CREATE INDEX use_t_a ON use_t (a);
ANALYZE use_t;
-- (a, b) is 37 bytes wide, 40 aligned; a alone 4, 8 aligned

-- the request (bytes) of a query, and the hand calculation's (rows x row
-- bytes x 1.5, in kB rounded up, at least 64 kB)
CREATE FUNCTION use_req(q text) RETURNS bigint LANGUAGE sql
AS $$ SELECT memory_requested FROM bulkhead_classify(q) $$;
CREATE FUNCTION use_rows(q text, path text[]) RETURNS float8 LANGUAGE plpgsql
AS $$ DECLARE j json; BEGIN EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO j; RETURN (j #>> path)::float8; END $$;
CREATE FUNCTION use_hand(nodes int, rows float8, row_bytes int) RETURNS bigint
LANGUAGE sql IMMUTABLE
AS $$ SELECT nodes * 1024 * greatest(64, ceil(rows * row_bytes * 1.5 / 1024))::bigint $$;

-- Sort: its input's 20000 rows of 40 + 56 bytes (2,880,000 x 1.5)
SELECT use_req('SELECT * FROM use_t ORDER BY b') AS sort,
       use_hand(1, 20000, 40 + 56) AS by_hand;
-- top-N: a LIMIT 1000 sort keeps at most 2 x 1000 + 1 rows; LIMIT 10: the floor
SELECT use_req('SELECT * FROM use_t ORDER BY b LIMIT 1000') AS top_n,
       use_hand(1, 2001, 40 + 56) AS by_hand,
       use_req('SELECT * FROM use_t ORDER BY b LIMIT 10 OFFSET 5') AS top_10,
       use_hand(1, 31, 40 + 56) AS by_hand;
-- a hash join's table: its inner side, 20000 rows of 40 + 40 bytes
SELECT use_req('SELECT * FROM use_t t1 JOIN use_t t2 USING (b)') AS hash_join,
       use_hand(1, 20000, 40 + 40) AS by_hand;
-- a hash aggregate: 20000 groups of (b, count) 48 + 112 bytes
SET enable_sort = off;
SELECT use_req('SELECT b, count(*) FROM use_t GROUP BY b') AS hash_agg,
       use_hand(1, 20000, 48 + 112) AS by_hand;
RESET enable_sort;
-- an ordered aggregate sorts its group's rows (one group: all 20000, of 40)
SELECT use_req('SELECT string_agg(b, '','' ORDER BY b) FROM use_t') AS ordered_agg,
       use_hand(1, 20000, 40 + 56) AS by_hand;
-- a function scan keeps its rows (generate_series says 5000, of 8 + 40)
SELECT use_req('SELECT * FROM generate_series(1, 5000) g') AS function_scan,
       use_hand(1, 5000, 8 + 40) AS by_hand;
-- a CTE's store: the CTE's 20000 rows of 40 + 40
SELECT use_req('WITH c AS MATERIALIZED (SELECT * FROM use_t) SELECT count(*) FROM c') AS cte,
       use_hand(1, 20000, 40 + 40) AS by_hand;
-- a window: its input's rows (20000 of a: 8 + 40)
SELECT use_req('SELECT a, sum(a) OVER () FROM use_t') AS window_agg,
       use_hand(1, 20000, 8 + 40) AS by_hand;
-- Material: the inner side of a nested loop (20000 rows of b: 40 + 40)
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT use_req('SELECT count(*) FROM use_t t1, use_t t2 WHERE t1.b < t2.b') AS material,
       use_hand(1, 20000, 40 + 40) AS by_hand;
RESET enable_hashjoin;
RESET enable_mergejoin;
-- a bitmap: 80 bytes per row its index scan expects
SET enable_indexscan = off;
SET enable_seqscan = off;
SELECT use_req('SELECT * FROM use_t WHERE a <= 5000') AS bitmap,
       use_hand(1, use_rows('SELECT * FROM use_t WHERE a <= 5000',
                            '{0,Plan,Plans,0,Plan Rows}'), 80) AS by_hand;
RESET enable_indexscan;
RESET enable_seqscan;

-- never above its limit: a sort of more than work_mem asks work_mem
SET work_mem = '1MB';
SELECT use_req('SELECT * FROM use_t ORDER BY b') AS capped;
-- a hash table's limit is work_mem x hash_mem_multiplier
SELECT use_req('SELECT * FROM use_t t1 JOIN use_t t2 USING (b)') AS hash_capped;
RESET work_mem;

-- where it comes from; as 1.4 at bulkhead.memory_request = limit
SELECT memory_requested, memory_source FROM bulkhead_classify('SELECT * FROM use_t ORDER BY b');
SET bulkhead.memory_request = 'limit';
SELECT memory_requested, memory_source FROM bulkhead_classify('SELECT * FROM use_t ORDER BY b');
SET bulkhead.memory_request = 'use';
-- a plain role may not choose what memory nodes request
CREATE ROLE use_plain;
SET ROLE use_plain;
SET bulkhead.memory_request = 'limit';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE use_plain;

-- the views ask for (almost) nothing, whatever work_mem is (1.4: 4 x work_mem
-- for bulkhead_activity)
SET work_mem = '1GB';
SELECT use_req('SELECT * FROM bulkhead_activity') < 1024 * 1024 AS activity_small,
       use_req('SELECT * FROM bulkhead_stats') < 1024 * 1024 AS stats_small;
RESET work_mem;

DROP FUNCTION use_req(text);
DROP FUNCTION use_hand(int, float8, int);
DROP FUNCTION use_rows(text, text[]);
DROP TABLE use_t;

--
-- memory (1.4): what a statement requests, node kind by node kind, by hand;
-- max_memory and memory_timeout checked when written; the figures shown
--

-- max_memory takes what a memory setting takes (a number is kB), 22023
-- otherwise, and at least 64 kB; memory_timeout is not negative
INSERT INTO bulkhead_workload (name, max_running, max_memory) VALUES ('bad', 1, 'lots');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_memory) VALUES ('bad', 1, '10XB');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_memory) VALUES ('bad', 1, '-1');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_memory) VALUES ('bad', 1, '63');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_memory) VALUES ('bad', 1, '9999999TB');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_memory)
VALUES ('bad', 1, repeat(' ', 40) || '1GB');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, memory_timeout) VALUES ('bad', 1, '-1s');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('bad', 1);
UPDATE bulkhead_workload SET max_memory = '1 parsec' WHERE name = 'bad';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM bulkhead_workload WHERE name = 'bad';
SELECT bulkhead_check_memory(NULL, 'x'), bulkhead_check_memory('64', 'x'),
       bulkhead_check_memory('700MB', 'x'), bulkhead_check_memory('2GB', 'x');

-- shown as written in bulkhead_stats, with nothing granted at rest
INSERT INTO bulkhead_workload (name, max_running, max_memory, memory_timeout)
VALUES ('mem_a', 2, '700MB', '1s'), ('mem_b', 2, '2048', NULL), ('mem_c', 2, NULL, NULL);
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'mem_%') = 3$$);
SELECT workload, max_memory, memory_granted, memory_waiting, memory_waits,
       memory_shrunk, memory_wait_p99_ms
  FROM bulkhead_stats WHERE workload LIKE 'mem_%' ORDER BY 1;
DELETE FROM bulkhead_workload WHERE name LIKE 'mem_%';
-- the server's level: off (bulkhead.max_memory = -1)
SELECT max_memory, memory_waiting, memory_waits, memory_shrunk FROM bulkhead_memory;
-- bulkhead.max_memory takes -1 (off) or at least 64 kB, as a workload's
-- max_memory does: 0 is not "off" (it would shrink every statement to its
-- floors), so 0, 1 kB and 63 kB are refused (22023, a hint naming -1)
ALTER SYSTEM SET bulkhead.max_memory = 0;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET bulkhead.max_memory = '1kB';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET bulkhead.max_memory = '63kB';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET bulkhead.max_memory = -1;
ALTER SYSTEM SET bulkhead.max_memory = '64kB';
ALTER SYSTEM SET bulkhead.max_memory = '1GB';
ALTER SYSTEM RESET bulkhead.max_memory;

-- What a statement requests: bulkhead_classify(query).memory_requested,
-- in bytes and MB, with work_mem = 1MB (1048576 bytes) and
-- hash_mem_multiplier = 2 (a hash node: 2 MB).  pg_temp.req shows the
-- plan's memory nodes (from EXPLAIN: with their strategy, a Gather's
-- planned workers, the rows the planner expects of a table that never
-- spills, where an init plan or subplan starts); the figure worked out by
-- hand is in the comment above each.
SET work_mem = '1MB';
SET hash_mem_multiplier = 2;
SET max_parallel_workers_per_gather = 0;
SET jit = off;
CREATE TABLE mem_t (a int, b int);
INSERT INTO mem_t SELECT g, g % 10 FROM generate_series(1, 1000) g;
CREATE INDEX mem_t_a ON mem_t (a);
CREATE TABLE mem_s (a int);
INSERT INTO mem_s SELECT g FROM generate_series(1, 100) g;
ANALYZE mem_t, mem_s;
CREATE FUNCTION pg_temp.req(query text, OUT nodes text, OUT bytes bigint, OUT mb numeric)
LANGUAGE plpgsql AS $f$
DECLARE
    j jsonb;
BEGIN
    IF query !~* '^\s*(select|with|explain \(analyze\))' THEN
        nodes := 'utility';
    ELSE
        EXECUTE 'EXPLAIN (FORMAT JSON) ' || regexp_replace(query, '^\s*explain \(analyze\)', '', 'i')
            INTO j;
        SELECT coalesce(string_agg(
                 CASE WHEN n->>'Parent Relationship' IN ('InitPlan', 'SubPlan')
                      THEN (n->>'Parent Relationship') || ': ' ELSE '' END ||
                 (n->>'Node Type') ||
                 coalesce(' ' || (n->>'Strategy'), '') ||
                 coalesce(' workers=' || (n->>'Workers Planned'), '') ||
                 CASE WHEN n->>'Node Type' IN ('SetOp', 'Recursive Union') OR
                           n->>'Parent Relationship' = 'SubPlan'
                      THEN ' rows=' || (n->>'Plan Rows') ELSE '' END ||
                 CASE WHEN jsonb_array_length(jsonb_path_query_array(n,
                               'lax $."Grouping Sets"[*] ? (exists (@."Sort Key"))')) > 0
                      THEN ' sorts=' || jsonb_array_length(jsonb_path_query_array(n,
                               'lax $."Grouping Sets"[*] ? (exists (@."Sort Key"))'))
                      ELSE '' END, ', '), 'none')
          INTO nodes
          FROM jsonb_path_query(j, 'strict $.** ? (exists (@."Node Type"))') n
         WHERE n->>'Node Type' IN ('Sort', 'Incremental Sort', 'Materialize',
                   'WindowAgg', 'CTE Scan', 'Function Scan', 'Table Function Scan',
                   'Bitmap Index Scan', 'Aggregate', 'Hash', 'Memoize', 'SetOp',
                   'Recursive Union', 'Gather', 'Gather Merge')
            OR n->>'Parent Relationship' IN ('InitPlan', 'SubPlan');
    END IF;
    SELECT memory_requested, round(memory_requested / 1048576.0, 4)
      INTO bytes, mb FROM bulkhead_classify(query);
END
$f$;

-- no memory node: 0
SELECT * FROM pg_temp.req('SELECT a FROM mem_t WHERE a = 1');
-- Sort: 1
SELECT * FROM pg_temp.req('SELECT * FROM mem_t ORDER BY b');
-- Incremental Sort: 2 (its full and prefix sorts)
SELECT * FROM pg_temp.req('SELECT * FROM mem_t ORDER BY a, b LIMIT 5');
-- Materialize (a nested loop's inner side): 1
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT * FROM pg_temp.req('SELECT * FROM mem_s s1, mem_s s2 WHERE s1.a < s2.a');
-- Memoize (hash_mem): 2
SELECT * FROM pg_temp.req('SELECT * FROM mem_t t1 JOIN mem_t t2 ON t2.a = t1.b');
RESET enable_hashjoin;
-- Hash (a hash join): 2
SET enable_nestloop = off;
SELECT * FROM pg_temp.req('SELECT * FROM mem_t t1 JOIN mem_s USING (a)');
RESET enable_mergejoin;
RESET enable_nestloop;
-- WindowAgg and its Sort: 1 + 1
SELECT * FROM pg_temp.req('SELECT a, sum(a) OVER (PARTITION BY b ORDER BY a) FROM mem_t');
-- a CTE scanned twice: its store once, 1
SELECT * FROM pg_temp.req($$WITH c AS MATERIALIZED (SELECT a FROM mem_s)
                            SELECT (SELECT count(*) FROM c), (SELECT max(a) FROM c)$$);
-- a function scan: 1 per function (here 1, then 2)
SELECT * FROM pg_temp.req('SELECT * FROM generate_series(1, 10)');
SELECT * FROM pg_temp.req('SELECT * FROM ROWS FROM (generate_series(1, 2), generate_series(1, 3))');
-- a table-function scan: 1 (XMLTABLE; from 17 JSON_TABLE, for a server
-- built without libxml)
SELECT * FROM pg_temp.req(CASE WHEN current_setting('server_version_num')::int >= 170000
    THEN $$SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (x int PATH '$'))$$
    ELSE $$SELECT * FROM XMLTABLE('/r' PASSING '<r/>' COLUMNS x int)$$ END);
-- bitmaps: the BitmapOr's, into which its index scans add (1.5; 1.4 counted
-- each index scan, 2): 1
CREATE INDEX mem_t_b ON mem_t (b);
SET enable_indexscan = off;
SET enable_seqscan = off;
SELECT * FROM pg_temp.req('SELECT * FROM mem_t WHERE a = 1 OR b = 2');
RESET enable_indexscan;
RESET enable_seqscan;
DROP INDEX mem_t_b;
-- a DISTINCT aggregate (its own sort, or from 16 a Sort under it): 1
SELECT nodes IN ('Aggregate Plain', 'Aggregate Plain, Sort') AS one_sort, bytes, mb
  FROM pg_temp.req('SELECT count(DISTINCT b) FROM mem_t');
-- a hashed Agg: 2; its grouping sets share the one limit: 2
SET enable_sort = off;
SELECT * FROM pg_temp.req('SELECT b, count(*) FROM mem_t GROUP BY b');
SELECT * FROM pg_temp.req('SELECT a, b, count(*) FROM mem_t GROUP BY GROUPING SETS ((a), (b))');
-- a mixed Agg: hashed sets, and the empty set sorted (it needs no sort): 2
SELECT * FROM pg_temp.req('SELECT a, b, count(*) FROM mem_t GROUP BY ROLLUP (b, a)');
RESET enable_sort;
-- a sorted Agg of grouping sets in two phases (its input comes sorted by
-- a from the index): the second phase's sort, 1
SET enable_hashagg = off;
SELECT * FROM pg_temp.req('SELECT a, b, count(*) FROM mem_t GROUP BY GROUPING SETS ((a), (b))');
RESET enable_hashagg;
-- an init plan's Sort: 1
SELECT * FROM pg_temp.req('SELECT (SELECT a FROM mem_t ORDER BY b, a LIMIT 1)');
-- a correlated subplan's Sort: 1
SELECT * FROM pg_temp.req('SELECT (SELECT b FROM mem_t t2 WHERE t2.a = s.a ORDER BY b LIMIT 1) FROM mem_s s');
-- Tables that never spill request the planner's estimate: its groups (a
-- SubPlan: its rows) x (MAXALIGN(width) + MAXALIGN(SizeofMinimalTupleHeader)),
-- each of width 4 here: rows x (8 + 16).  A hashed SubPlan over mem_s, of
-- 100 rows: 2400 bytes
SELECT * FROM pg_temp.req('SELECT count(*) FROM mem_t WHERE a NOT IN (SELECT a FROM mem_s)');
-- a hashed SetOp, its groups those of mem_s, 100: 2400 bytes
SET enable_sort = off;
SELECT * FROM pg_temp.req('SELECT a FROM mem_s INTERSECT SELECT a FROM mem_s');
RESET enable_sort;
-- RecursiveUnion: its two tables, 2, and the CTE's store, 1: 3 ...
SELECT * FROM pg_temp.req($$WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10)
                            SELECT * FROM r$$);
-- ... and for a UNION its hash table's estimate: its groups, the Recursive
-- Union's rows (the non-recursive part's 1, plus 10 x the recursive
-- part's 3), 31 x (8 + 16) = 744 bytes more: 3145728 + 744 = 3146472
SELECT * FROM pg_temp.req($$WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r WHERE n < 10)
                            SELECT * FROM r$$);
-- Parallel plans: each node under a Gather, times its planned workers + 1
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = on;
-- a partial hashed Agg in 3 processes (2 x 3) and the finalize one (2): 8
SET enable_sort = off;
SELECT * FROM pg_temp.req('SELECT b, count(*) FROM mem_t GROUP BY b');
RESET enable_sort;
-- a Parallel Hash, sized for its 3 participants: 6
SET enable_mergejoin = off;
SET enable_nestloop = off;
SELECT * FROM pg_temp.req('SELECT count(*) FROM mem_t t1 JOIN mem_t t2 USING (a)');
RESET enable_mergejoin;
RESET enable_nestloop;
SET max_parallel_workers_per_gather = 0;
-- utilities: maintenance_work_mem x (1 + max_parallel_maintenance_workers),
-- 2 MB x 2 = 4
SET maintenance_work_mem = '2MB';
SET max_parallel_maintenance_workers = 1;
SELECT * FROM pg_temp.req('CREATE INDEX ON mem_t (b)');
SELECT * FROM pg_temp.req('REINDEX TABLE mem_t');
SELECT * FROM pg_temp.req('CLUSTER mem_t USING mem_t_a');
SELECT * FROM pg_temp.req('VACUUM mem_t');
SELECT * FROM pg_temp.req('VACUUM (FULL) mem_t');
CREATE MATERIALIZED VIEW mem_mv AS SELECT a FROM mem_t;
-- an ALTER TABLE that builds an index or rewrites the table (and so
-- rebuilds its indexes); a non-concurrent REFRESH (a new heap, its indexes
-- rebuilt): 4
SELECT * FROM pg_temp.req('ALTER TABLE mem_t ADD UNIQUE (a)');
SELECT * FROM pg_temp.req('ALTER TABLE mem_t ALTER COLUMN b TYPE bigint');
SELECT * FROM pg_temp.req('ALTER TABLE mem_t SET UNLOGGED');
SELECT * FROM pg_temp.req('ALTER TABLE mem_t ADD COLUMN r float8 DEFAULT random()');
SELECT * FROM pg_temp.req('ALTER TABLE mem_t ADD COLUMN g int GENERATED ALWAYS AS (a + 1) STORED');
SELECT * FROM pg_temp.req('REFRESH MATERIALIZED VIEW mem_mv');
-- a constant default (no rewrite), CONCURRENTLY, no index: 0
SELECT * FROM pg_temp.req('ALTER TABLE mem_t ADD COLUMN z int DEFAULT 0');
SELECT * FROM pg_temp.req('REFRESH MATERIALIZED VIEW CONCURRENTLY mem_mv');
SELECT * FROM pg_temp.req('ALTER TABLE mem_t ALTER COLUMN b SET STATISTICS 100');
-- and nothing else: 0
SELECT * FROM pg_temp.req('ANALYZE mem_t');
SELECT * FROM pg_temp.req('TRUNCATE mem_s');
-- EXPLAIN without ANALYZE runs nothing, 0; with it, what it runs, 1
SELECT * FROM bulkhead_classify('EXPLAIN SELECT * FROM mem_t ORDER BY b');
SELECT * FROM pg_temp.req('EXPLAIN (ANALYZE) SELECT * FROM mem_t ORDER BY b');
-- the values are those the statement runs with: work_mem 4MB, 4
SET work_mem = '4MB';
SELECT * FROM pg_temp.req('SELECT * FROM mem_t ORDER BY b');
-- DECLARE and COPY (query) TO request what their query requests, planned
-- as they plan it: the same as the query alone (cursor_tuple_fraction = 1:
-- a cursor's plan is then the one a plain statement gets); a SCROLL cursor
-- over a plan that cannot run backwards adds a Materialize on top, 4 more
SET cursor_tuple_fraction = 1;
CREATE FUNCTION pg_temp.same(query text, stmt text)
RETURNS TABLE (same_memory boolean, memory_added numeric)
LANGUAGE sql AS $f$
  SELECT s.memory_requested = q.memory_requested,
         round((s.memory_requested - q.memory_requested) / 1048576.0, 4)
    FROM bulkhead_classify(query) q, bulkhead_classify(stmt) s
$f$;
SELECT * FROM pg_temp.same('SELECT * FROM mem_t ORDER BY b',
                           'DECLARE c CURSOR FOR SELECT * FROM mem_t ORDER BY b');
SELECT * FROM pg_temp.same('SELECT b, count(*) FROM mem_t GROUP BY b',
                           'DECLARE c NO SCROLL CURSOR WITH HOLD FOR SELECT b, count(*) FROM mem_t GROUP BY b');
SELECT * FROM pg_temp.same('SELECT b, count(*) FROM mem_t GROUP BY b',
                           'DECLARE c SCROLL CURSOR FOR SELECT b, count(*) FROM mem_t GROUP BY b');
SELECT * FROM pg_temp.same('SELECT * FROM mem_t ORDER BY b',
                           'COPY (SELECT * FROM mem_t ORDER BY b) TO STDOUT');
SELECT * FROM pg_temp.same('SELECT b, count(*) FROM mem_t GROUP BY b',
                           'COPY (SELECT b, count(*) FROM mem_t GROUP BY b) TO STDOUT (FORMAT csv)');
SELECT * FROM pg_temp.same('EXPLAIN (ANALYZE) SELECT * FROM mem_t ORDER BY b',
                           'EXPLAIN (ANALYZE) DECLARE c CURSOR FOR SELECT * FROM mem_t ORDER BY b');
-- a COPY of a table requests nothing
SELECT * FROM pg_temp.req('COPY mem_t TO STDOUT');
DROP FUNCTION pg_temp.same(text, text);
RESET cursor_tuple_fraction;
RESET work_mem;
RESET hash_mem_multiplier;
RESET maintenance_work_mem;
RESET max_parallel_maintenance_workers;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;
RESET jit;

-- a lane's caps apply: a statement rule sends the role's SELECTs to a lane
-- capped at work_mem = 256kB, and their requests are worked out with it
CREATE ROLE regress_bh_mem;
INSERT INTO bulkhead_workload (name, max_running, settings, max_memory)
VALUES ('mem_lane', 2, '{work_mem=256kB}', '10MB');
INSERT INTO bulkhead_rule (position, role, workload, command)
VALUES (1, 'regress_bh_mem', 'mem_lane', '{select}');
GRANT SELECT ON mem_t TO regress_bh_mem;
SET bulkhead.exempt_superuser = off;
SET ROLE regress_bh_mem;
SELECT bh_wait($$(SELECT workload FROM bulkhead_classify('SELECT 1')) = 'mem_lane'$$);
SELECT workload, source, memory_requested FROM bulkhead_classify('SELECT * FROM mem_t ORDER BY b');
-- DECLARE and COPY (query) are utilities, as they run (no rule takes them
-- here: no workload), with their query's request
SELECT workload, source, memory_requested
  FROM bulkhead_classify('DECLARE c CURSOR FOR SELECT * FROM mem_t ORDER BY b');
SELECT workload, source, memory_requested
  FROM bulkhead_classify('COPY (SELECT * FROM mem_t ORDER BY b) TO STDOUT');
RESET ROLE;
RESET bulkhead.exempt_superuser;

DROP FUNCTION pg_temp.req(text);
DELETE FROM bulkhead_rule;
DELETE FROM bulkhead_workload WHERE name = 'mem_lane';
REVOKE SELECT ON mem_t FROM regress_bh_mem;
DROP ROLE regress_bh_mem;
DROP MATERIALIZED VIEW mem_mv;
DROP TABLE mem_t, mem_s;

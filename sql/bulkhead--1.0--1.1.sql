/* bulkhead--1.0--1.1.sql: upgrade from 1.0 to 1.1 (ALTER EXTENSION bulkhead UPDATE) */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.1'" to load this file. \quit

-- Deadlocks through permits (issue 11)

-- bulkhead_stats gains a last column, deadlocks: the function's OUT list
-- cannot change in place, so the view and the function are made again, with
-- the view's grant (the same objects as a fresh 1.1 install).
DROP VIEW @extschema@.bulkhead_stats;
DROP FUNCTION @extschema@.bulkhead_stats();

CREATE FUNCTION @extschema@.bulkhead_stats(
    OUT workload text,
    OUT mode text,
    OUT max_running integer,
    OUT max_queued integer,
    OUT running integer,
    OUT queued integer,
    OUT acquired bigint,
    OUT rejected_full bigint,
    OUT timed_out bigint,
    OUT cancelled bigint,
    OUT released bigint,
    OUT shadow_queued bigint,
    OUT shadow_rejected bigint,
    OUT peak_running integer,
    OUT peak_queued integer,
    OUT wait_time_total_ms double precision,
    OUT wait_time_max_ms double precision,
    OUT wait_p50_ms double precision,
    OUT wait_p95_ms double precision,
    OUT wait_p99_ms double precision,
    OUT hold_time_total_ms double precision,
    OUT hold_p50_ms double precision,
    OUT hold_p99_ms double precision,
    OUT stats_reset timestamptz,
    OUT deadlocks bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_stats AS
    SELECT * FROM @extschema@.bulkhead_stats();

GRANT SELECT ON @extschema@.bulkhead_stats TO PUBLIC;

-- For a backend queued for a permit, the pids holding that workload's
-- permits; empty for any other backend.  With pg_blocking_pids, the whole
-- wait graph that deadlock detection searches.
CREATE FUNCTION @extschema@.bulkhead_blocking_pids(pid integer)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'bulkhead_blocking_pids'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

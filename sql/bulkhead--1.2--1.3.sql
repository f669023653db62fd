/* bulkhead--1.2--1.3.sql: update an installed bulkhead 1.2 to 1.3 */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.3'" to load this file. \quit

-- 1.3: lanes that cap settings.  A workload's settings, 'name=value' as in
-- pg_db_role_setting.setconfig, bound the resources of every statement run
-- while one of its permits is held: work_mem, hash_mem_multiplier,
-- maintenance_work_mem, temp_file_limit, max_parallel_workers_per_gather,
-- max_parallel_maintenance_workers (the smaller of the lane's and the
-- session's value) and jit (off wins).  The check raises 22023 for a name a
-- lane cannot cap or a value the setting refuses (PostgreSQL's own message
-- as detail); NULL passes.
CREATE FUNCTION @extschema@.bulkhead_check_settings(settings text[], workload text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_check_settings'
LANGUAGE C STABLE PARALLEL SAFE;

ALTER TABLE @extschema@.bulkhead_workload
    ADD COLUMN settings text[]
        CONSTRAINT bulkhead_workload_settings_valid
        CHECK (@extschema@.bulkhead_check_settings(settings, name));

-- 1.3: statement rules.  A rule with min_cost or command chooses the lane of
-- a statement by its planned cost (the top plan node's total_cost) and its
-- kind, among the sessions its other columns match; statement rules are
-- matched before the session rules.
ALTER TABLE @extschema@.bulkhead_rule
    ADD COLUMN min_cost double precision
        CONSTRAINT bulkhead_rule_min_cost_valid
        CHECK (min_cost >= 0 AND min_cost <> 'NaN'),
    ADD COLUMN command text[]
        CONSTRAINT bulkhead_rule_command_valid
        CHECK (command IS NULL OR
               CASE WHEN array_ndims(command) = 1
                    THEN cardinality(command) >= 1 AND
                         array_position(command, NULL) IS NULL AND
                         command <@ '{select,insert,update,delete,merge,utility}'::text[]
                    ELSE false END);

-- bulkhead_stats gains its last column, settings: the view and the function
-- are made again, with the view's grant, as 1.1 -> 1.2 did.
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
    OUT deadlocks bigint,
    OUT current_limit integer,
    OUT parent text,
    OUT reserved integer,
    OUT weight integer,
    OUT borrowed integer,
    OUT over_hold bigint,
    OUT moved_out bigint,
    OUT moved_in bigint,
    OUT settings text[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_stats AS
    SELECT * FROM @extschema@.bulkhead_stats();

GRANT SELECT ON @extschema@.bulkhead_stats TO PUBLIC;

-- 1.3: the workload a query would take as the first statement of the
-- calling session's transaction, and why: the query is planned, not run.
-- STRICT, as bulkhead_classify(pid): bulkhead_classify(NULL), which may
-- mean either, answers a row of NULLs.
CREATE FUNCTION @extschema@.bulkhead_classify(
    query text,
    OUT workload text,
    OUT source text,
    OUT rule_position integer)
RETURNS record
AS 'MODULE_PATHNAME', 'bulkhead_classify_query'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

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

-- bulkhead_stats gains its last column, settings, from a function of its
-- own: the view is replaced, not dropped, so that the privileges an
-- operator set on it (and views of theirs on it) stay.
CREATE FUNCTION @extschema@.bulkhead_lane_settings(
    OUT workload text,
    OUT settings text[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_lane_settings'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE VIEW @extschema@.bulkhead_stats AS
    SELECT s.*, l.settings
      FROM @extschema@.bulkhead_stats() s
      LEFT JOIN @extschema@.bulkhead_lane_settings() l ON l.workload = s.workload;

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

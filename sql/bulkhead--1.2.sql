/* bulkhead--1.2.sql: the SQL interface of bulkhead 1.2 (full install) */

\echo Use "CREATE EXTENSION bulkhead" to load this file. \quit

-- Workload definitions: the table is the configuration API.  The background
-- worker reads it in the database named by bulkhead.database; a committed
-- change reaches shared memory within a second.
CREATE TABLE @extschema@.bulkhead_workload (
    name              text     PRIMARY KEY
                      CONSTRAINT bulkhead_workload_name_length
                      CHECK (octet_length(name) BETWEEN 1 AND 63),
    max_running       integer  NOT NULL
                      -- 0 pauses the workload: nothing is granted, callers queue
                      CONSTRAINT bulkhead_workload_max_running_nonnegative
                      CHECK (max_running >= 0),
    max_queued        integer  NOT NULL DEFAULT 0
                      CONSTRAINT bulkhead_workload_max_queued_nonnegative
                      CHECK (max_queued >= 0),
    queue_timeout     interval NOT NULL DEFAULT '5s'
                      CONSTRAINT bulkhead_workload_queue_timeout_nonnegative
                      CHECK (queue_timeout >= '0'),
    statement_timeout interval
                      CONSTRAINT bulkhead_workload_statement_timeout_nonnegative
                      CHECK (statement_timeout >= '0'),
    lock_timeout      interval
                      CONSTRAINT bulkhead_workload_lock_timeout_nonnegative
                      CHECK (lock_timeout >= '0'),
    idle_timeout      interval
                      CONSTRAINT bulkhead_workload_idle_timeout_nonnegative
                      CHECK (idle_timeout >= '0'),
    roles             text[]
                      CONSTRAINT bulkhead_workload_roles_valid
                      CHECK (roles IS NULL OR
                             CASE WHEN array_ndims(roles) = 1
                                  THEN cardinality(roles) BETWEEN 1 AND 16 AND
                                       array_position(roles, NULL) IS NULL
                                  ELSE false END),
    mode              text     NOT NULL DEFAULT 'enforce'
                      CONSTRAINT bulkhead_workload_mode_valid
                      CHECK (mode IN ('enforce', 'shadow')),
    -- 1.1, last (an update adds them at the end): the worker sets the limit
    -- in force between min_running and max_running
    adaptive          boolean  NOT NULL DEFAULT false,
    min_running       integer  NOT NULL DEFAULT 1,
    -- min_running applies only to a workload that is not paused
    CONSTRAINT bulkhead_workload_min_running_valid
        CHECK (min_running >= 1 AND (max_running = 0 OR min_running <= max_running)),
    -- 1.2, last (an update adds them at the end): shared budgets.  A
    -- workload with children is a budget: its limit bounds its subtree.
    parent            text
                      CONSTRAINT bulkhead_workload_parent_fkey
                      REFERENCES @extschema@.bulkhead_workload (name)
                      ON UPDATE CASCADE,
    -- permits of the parent kept for this subtree alone, never lent
    reserved          integer  NOT NULL DEFAULT 0,
    -- share of the parent's unreserved permits when siblings compete
    weight            integer  NOT NULL DEFAULT 100
                      CONSTRAINT bulkhead_workload_weight_range
                      CHECK (weight BETWEEN 1 AND 10000),
    -- a paused workload (max_running 0) keeps its reservation, idle
    CONSTRAINT bulkhead_workload_reserved_valid
        CHECK (reserved >= 0 AND (max_running = 0 OR reserved <= max_running))
);

COMMENT ON TABLE @extschema@.bulkhead_workload IS
    'bulkhead workloads: execution permits (max_running) and admission queue (max_queued) per name';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.bulkhead_workload', '');

-- Refuses changes outside bulkhead.database and beyond bulkhead.max_workloads,
-- and tells the worker to reload when the transaction commits.
CREATE FUNCTION @extschema@.bulkhead_workload_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'bulkhead_workload_changed'
LANGUAGE C;

-- A trigger function runs with the privileges of whoever fires it: no one
-- but the extension's own tables has a use for it (the C function also
-- refuses to run on any other table).
REVOKE ALL ON FUNCTION @extschema@.bulkhead_workload_changed() FROM PUBLIC;

CREATE TRIGGER bulkhead_workload_check
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.bulkhead_workload
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_workload_changed();

CREATE TRIGGER bulkhead_workload_notify
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.bulkhead_workload
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_workload_changed();

-- The rules of the trees of budgets that a row alone cannot check: no
-- cycle of parents, at most 4 levels, and the reservations of a budget's
-- children within its max_running.  Checked after each statement that
-- inserts or updates rows (a DELETE cannot break them: a parent with
-- children cannot be deleted).  SECURITY DEFINER: a role allowed to change
-- some columns need not read the whole table to have the rules checked;
-- it takes no argument and only reads the extension's own table.
CREATE FUNCTION @extschema@.bulkhead_workload_check_budgets()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        WITH RECURSIVE up(name, ancestor, depth, path) AS (
            SELECT w.name, w.parent, 1, ARRAY[w.name]
              FROM @extschema@.bulkhead_workload w
            UNION ALL
            SELECT up.name, p.parent, up.depth + 1, up.path || p.name
              FROM up JOIN @extschema@.bulkhead_workload p ON p.name = up.ancestor
             WHERE NOT p.name = ANY (up.path) AND up.depth <= 4
        )
        SELECT up.name, up.ancestor = ANY (up.path) AS cycle,
               up.path || up.ancestor AS path
          FROM up
         WHERE up.ancestor = ANY (up.path) OR up.depth > 4
         ORDER BY up.ancestor = ANY (up.path) DESC, up.ancestor = up.name DESC, up.name
         LIMIT 1
    LOOP
        IF r.cycle THEN
            RAISE EXCEPTION 'parents of workload "%" form a cycle', r.name
                USING ERRCODE = 'check_violation',
                      DETAIL = format('Its path up: %s.', array_to_string(r.path, ' -> ')),
                      HINT = 'A budget cannot draw from its own subtree.';
        END IF;
        RAISE EXCEPTION 'workload "%" is more than 4 levels deep', r.name
            USING ERRCODE = 'check_violation',
                  DETAIL = format('Its path up: %s.', array_to_string(r.path, ' -> ')),
                  HINT = 'A tree of budgets has at most 4 levels.';
    END LOOP;

    FOR r IN
        SELECT p.name, p.max_running, sum(c.reserved) AS total,
               string_agg(format('"%s" (%s)', c.name, c.reserved), ', ' ORDER BY c.name) AS children
          FROM @extschema@.bulkhead_workload p
          JOIN @extschema@.bulkhead_workload c ON c.parent = p.name
         GROUP BY p.name, p.max_running
        HAVING sum(c.reserved) > p.max_running
         ORDER BY p.name
         LIMIT 1
    LOOP
        RAISE EXCEPTION 'reservations under budget "%" exceed its max_running', r.name
            USING ERRCODE = 'check_violation',
                  DETAIL = format('Its children''s reservations add up to %s: %s; its max_running is %s.',
                                  r.total, r.children, r.max_running),
                  HINT = 'Lower the children''s reserved, or raise the budget''s max_running, in one statement.';
    END LOOP;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION @extschema@.bulkhead_workload_check_budgets() FROM PUBLIC;

CREATE TRIGGER bulkhead_workload_budgets
    AFTER INSERT OR UPDATE ON @extschema@.bulkhead_workload
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_workload_check_budgets();

-- Permits

CREATE FUNCTION @extschema@.bulkhead_acquire(workload text, timeout interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_acquire_xact(workload text, timeout interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_try_acquire(workload text, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_try_acquire_xact(workload text, timeout interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_try_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_release(workload text)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'bulkhead_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Monitoring

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
    OUT borrowed integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_stats AS
    SELECT * FROM @extschema@.bulkhead_stats();

CREATE FUNCTION @extschema@.bulkhead_activity(
    OUT pid integer,
    OUT workload text,
    OUT state text,
    OUT scope text,
    OUT since timestamptz,
    OUT wait_ms double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_activity'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_activity AS
    SELECT * FROM @extschema@.bulkhead_activity();

-- For a backend queued for a permit, the pids holding that workload's
-- permits; empty for any other backend.  With pg_blocking_pids, the whole
-- wait graph that deadlock detection searches.
CREATE FUNCTION @extschema@.bulkhead_blocking_pids(pid integer)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'bulkhead_blocking_pids'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.bulkhead_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_stats_reset_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_stats_reset(workload text)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Cumulative statistics are reset by the workloads' administrators only.
REVOKE ALL ON FUNCTION @extschema@.bulkhead_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.bulkhead_stats_reset(text) FROM PUBLIC;

GRANT SELECT ON @extschema@.bulkhead_stats TO PUBLIC;
GRANT SELECT ON @extschema@.bulkhead_activity TO PUBLIC;

-- Classification rules: the first row in position order that matches a
-- session names the workload its transactions take, as bulkhead.workload
-- does (which wins over them).  NULL matches anything.
CREATE TABLE @extschema@.bulkhead_rule (
    position          integer  PRIMARY KEY,
    role              text
                      CONSTRAINT bulkhead_rule_role_length
                      CHECK (octet_length(role) BETWEEN 1 AND 63),
    database          text
                      CONSTRAINT bulkhead_rule_database_length
                      CHECK (octet_length(database) BETWEEN 1 AND 63),
    application_name  text
                      CONSTRAINT bulkhead_rule_application_name_length
                      CHECK (octet_length(application_name) BETWEEN 1 AND 63)
                      -- a LIKE pattern, escape character \ (chr(92)): it
                      -- cannot end in an escape that escapes nothing
                      CONSTRAINT bulkhead_rule_application_name_pattern
                      CHECK ((length(application_name) -
                              length(rtrim(application_name, chr(92)))) % 2 = 0),
    client_addr       inet,
    workload          text     NOT NULL
                      CONSTRAINT bulkhead_rule_workload_length
                      CHECK (octet_length(workload) BETWEEN 1 AND 63)
                      CONSTRAINT bulkhead_rule_workload_fkey
                      REFERENCES @extschema@.bulkhead_workload (name)
                      ON UPDATE CASCADE
);

COMMENT ON TABLE @extschema@.bulkhead_rule IS
    'bulkhead classification rules: sessions matched by role, database, application_name and client_addr take the permits of workload';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.bulkhead_rule', '');

-- Refuses changes outside bulkhead.database and beyond bulkhead.max_rules,
-- and tells the worker to reload when the transaction commits.
CREATE FUNCTION @extschema@.bulkhead_rule_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'bulkhead_rule_changed'
LANGUAGE C;

REVOKE ALL ON FUNCTION @extschema@.bulkhead_rule_changed() FROM PUBLIC;

CREATE TRIGGER bulkhead_rule_check
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.bulkhead_rule
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_rule_changed();

CREATE TRIGGER bulkhead_rule_notify
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.bulkhead_rule
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_rule_changed();

-- The workload the calling session's next transaction takes, and why:
-- source 'setting' (bulkhead.workload), 'rule' (rule_position), 'superuser'
-- (bulkhead.exempt_superuser) or 'none'.
CREATE FUNCTION @extschema@.bulkhead_classify(
    OUT workload text,
    OUT source text,
    OUT rule_position integer)
RETURNS record
AS 'MODULE_PATHNAME', 'bulkhead_classify'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The same for any backend, as it published it (superusers only).
CREATE FUNCTION @extschema@.bulkhead_classify(
    pid integer,
    OUT workload text,
    OUT source text,
    OUT rule_position integer)
RETURNS record
AS 'MODULE_PATHNAME', 'bulkhead_classify_pid'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- How many times any backend matched its session against the rules.
CREATE FUNCTION @extschema@.bulkhead_rule_evaluations()
RETURNS bigint
AS 'MODULE_PATHNAME', 'bulkhead_rule_evaluations'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/* bulkhead--1.0--1.1.sql: upgrade from 1.0 to 1.1 (ALTER EXTENSION bulkhead UPDATE) */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.1'" to load this file. \quit

-- Deadlocks through permits (issue 11) and the adaptive limit (issue 12)

-- bulkhead_stats gains two last columns, deadlocks and current_limit: the
-- function's OUT list cannot change in place, so the view and the function
-- are made again, with the view's grant (the same objects as a fresh 1.1
-- install).
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
    OUT current_limit integer)
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

-- Adaptive limit and pause (issue 12).  max_running = 0 pauses a workload;
-- with adaptive, the worker sets the limit in force (bulkhead_stats.
-- current_limit, new above) between min_running and max_running.
ALTER TABLE @extschema@.bulkhead_workload
    DROP CONSTRAINT bulkhead_workload_max_running_positive,
    ADD CONSTRAINT bulkhead_workload_max_running_nonnegative
        CHECK (max_running >= 0),
    ADD COLUMN adaptive boolean NOT NULL DEFAULT false,
    ADD COLUMN min_running integer NOT NULL DEFAULT 1,
    ADD CONSTRAINT bulkhead_workload_min_running_valid
        CHECK (min_running >= 1 AND (max_running = 0 OR min_running <= max_running));

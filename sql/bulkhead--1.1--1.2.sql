/* bulkhead--1.1--1.2.sql: update an installed bulkhead 1.1 to 1.2 */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.2'" to load this file. \quit

-- The trigger functions of the configuration tables are no one's to call:
-- a role that attached one to a table of its own could make every commit
-- of that table wake the worker for a reload (the C functions now also
-- refuse to run on any table but the extension's own).
REVOKE ALL ON FUNCTION @extschema@.bulkhead_workload_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.bulkhead_rule_changed() FROM PUBLIC;

-- Shared budgets (issue 21), runaway holders (issue 23) and the warm
-- hand-off (issue 25): columns appended to the table, as a fresh 1.2
-- install has them (existing rows are roots, reserving nothing, of weight
-- 100, with no max_hold, served in arrival order).
ALTER TABLE @extschema@.bulkhead_workload
    ADD COLUMN parent text
        CONSTRAINT bulkhead_workload_parent_fkey
        REFERENCES @extschema@.bulkhead_workload (name)
        ON UPDATE CASCADE,
    ADD COLUMN reserved integer NOT NULL DEFAULT 0,
    ADD COLUMN weight integer NOT NULL DEFAULT 100
        CONSTRAINT bulkhead_workload_weight_range
        CHECK (weight BETWEEN 1 AND 10000),
    ADD CONSTRAINT bulkhead_workload_reserved_valid
        CHECK (reserved >= 0 AND (max_running = 0 OR reserved <= max_running)),
    ADD COLUMN max_hold interval
        CONSTRAINT bulkhead_workload_max_hold_positive
        CHECK (max_hold > '0'),
    ADD COLUMN on_max_hold text NOT NULL DEFAULT 'log'
        CONSTRAINT bulkhead_workload_on_max_hold_valid
        CHECK (on_max_hold IN ('log', 'cancel', 'terminate', 'move')),
    ADD COLUMN move_to text
        CONSTRAINT bulkhead_workload_move_to_fkey
        REFERENCES @extschema@.bulkhead_workload (name)
        ON UPDATE CASCADE,
    ADD CONSTRAINT bulkhead_workload_move_to_valid
        CHECK ((on_max_hold = 'move') = (move_to IS NOT NULL) AND move_to <> name),
    ADD COLUMN max_bypass interval
        CONSTRAINT bulkhead_workload_max_bypass_positive
        CHECK (max_bypass > '0'),
    ADD COLUMN max_running_per_key integer
        CONSTRAINT bulkhead_workload_max_running_per_key_positive
        CHECK (max_running_per_key >= 1),
    ADD COLUMN max_queued_per_key integer
        CONSTRAINT bulkhead_workload_max_queued_per_key_not_negative
        CHECK (max_queued_per_key >= 0);

-- bulkhead_stats gains seven last columns (parent, reserved, weight,
-- borrowed, over_hold, moved_out, moved_in) and bulkhead_activity one
-- (moved_from) and, for tenants, key: the views and the functions are made again, with the
-- views' grants, as 1.0 -> 1.1 did.
DROP VIEW @extschema@.bulkhead_stats;
DROP FUNCTION @extschema@.bulkhead_stats();
DROP VIEW @extschema@.bulkhead_activity;
DROP FUNCTION @extschema@.bulkhead_activity();

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
    OUT moved_in bigint)
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
    OUT wait_ms double precision,
    OUT moved_from text,
    OUT key text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_activity'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_activity AS
    SELECT * FROM @extschema@.bulkhead_activity();

GRANT SELECT ON @extschema@.bulkhead_stats TO PUBLIC;
GRANT SELECT ON @extschema@.bulkhead_activity TO PUBLIC;

-- 1.2: the acquire functions take a key (a tenant, a customer): callers
-- of one key are served in arrival order, keys in turn, the least served
-- first.  A NULL or empty key is no key.  Each function of 1.1 is replaced
-- by one with a third argument, every argument after the workload with a
-- default, so that any of them may be given by name
-- (bulkhead_acquire('w', key => 'c')); two overloads could not both
-- default their timeout without making bulkhead_acquire('w') ambiguous.
CREATE FUNCTION @extschema@.bulkhead_acquire(workload text,
    timeout interval DEFAULT NULL, key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_acquire_xact(workload text,
    timeout interval DEFAULT NULL, key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_try_acquire(workload text,
    timeout interval DEFAULT '0', key text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_try_acquire_xact(workload text,
    timeout interval DEFAULT '0', key text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_try_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The new functions get the grants an operator made on the ones they
-- replace (one who revoked EXECUTE on bulkhead_acquire from PUBLIC, to
-- grant it to some roles, finds the new one closed the same way); then the
-- 1.1 functions go.  (An object of the operator's that depends on one of
-- them, a view calling it say, makes the update fail, naming it: drop it
-- first and create it again after the update.)
DO $$
DECLARE
    f text;
    acl aclitem[];
    g record;
BEGIN
    FOREACH f IN ARRAY ARRAY['bulkhead_acquire', 'bulkhead_acquire_xact',
                             'bulkhead_try_acquire', 'bulkhead_try_acquire_xact']
    LOOP
        SELECT p.proacl INTO acl FROM pg_catalog.pg_proc p
         WHERE p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(
               '@extschema@.' || f || '(text, interval)');
        IF acl IS NOT NULL THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION @extschema@.%I(text, interval, text) FROM PUBLIC', f);
            FOR g IN SELECT a.grantee FROM pg_catalog.aclexplode(acl) a
                      WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
            LOOP
                IF g.grantee OPERATOR(pg_catalog.=) 0 THEN
                    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.%I(text, interval, text) TO PUBLIC', f);
                ELSE
                    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.%I(text, interval, text) TO %s',
                                              f, g.grantee::pg_catalog.regrole::pg_catalog.text);
                END IF;
            END LOOP;
            -- A GRANT in an extension script is recorded as the function's
            -- initial privileges (pg_init_privs), which pg_dump leaves out:
            -- the copies are the operator's, as the privileges they copy
            -- are, and must survive a dump and restore as those do.
            DELETE FROM pg_catalog.pg_init_privs
             WHERE objoid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(
                   '@extschema@.' OPERATOR(pg_catalog.||) f OPERATOR(pg_catalog.||) '(text, interval, text)')::pg_catalog.oid
               AND classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
               AND objsubid OPERATOR(pg_catalog.=) 0;
        END IF;
        EXECUTE pg_catalog.format('DROP FUNCTION @extschema@.%I(text, interval)', f);
    END LOOP;
END
$$;

-- 1.2: the keys in use (holding or waiting), per workload.  Keys name
-- tenants: readable by pg_read_all_stats, as other sessions' queries are.
CREATE FUNCTION @extschema@.bulkhead_keys(
    OUT workload text,
    OUT key text,
    OUT running integer,
    OUT queued integer,
    OUT oldest_wait_ms double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_keys'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_keys AS
    SELECT * FROM @extschema@.bulkhead_keys();

REVOKE ALL ON FUNCTION @extschema@.bulkhead_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.bulkhead_keys() TO pg_read_all_stats;
GRANT SELECT ON @extschema@.bulkhead_keys TO pg_read_all_stats;

/* bulkhead--1.3--1.4.sql: update an installed bulkhead 1.3 to 1.4 */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.4'" to load this file. \quit

-- 1.4: memory grants.  A workload's max_memory bounds the memory its
-- running statements (a budget: its subtree's) may be granted at once,
-- with units as a memory setting takes them; NULL: no limit.  A statement
-- waits for its grant up to memory_timeout (NULL: queue_timeout), then runs
-- with less (work_mem lowered), never an error.  The check raises 22023 for
-- a value a memory setting would refuse, or one below 64 kB.
CREATE FUNCTION @extschema@.bulkhead_check_memory(max_memory text, workload text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_check_memory'
LANGUAGE C STABLE PARALLEL SAFE;

ALTER TABLE @extschema@.bulkhead_workload
    ADD COLUMN max_memory text
        CONSTRAINT bulkhead_workload_max_memory_valid
        CHECK (@extschema@.bulkhead_check_memory(max_memory, name)),
    ADD COLUMN memory_timeout interval
        CONSTRAINT bulkhead_workload_memory_timeout_nonnegative
        CHECK (memory_timeout >= '0');

-- bulkhead_stats and bulkhead_activity gain their last columns from
-- functions of their own: the views are replaced, not dropped, so that the
-- privileges an operator set on them (and views of theirs on them) stay.
CREATE FUNCTION @extschema@.bulkhead_memory_stats(
    OUT workload text,
    OUT max_memory text,
    OUT memory_granted bigint,
    OUT memory_waiting integer,
    OUT memory_waits bigint,
    OUT memory_shrunk bigint,
    OUT memory_wait_p99_ms double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_memory_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE VIEW @extschema@.bulkhead_stats AS
    SELECT s.*, l.settings,
           m.max_memory, m.memory_granted, m.memory_waiting, m.memory_waits,
           m.memory_shrunk, m.memory_wait_p99_ms
      FROM @extschema@.bulkhead_stats() s
      LEFT JOIN @extschema@.bulkhead_lane_settings() l ON l.workload = s.workload
      LEFT JOIN @extschema@.bulkhead_memory_stats() m ON m.workload = s.workload;

CREATE FUNCTION @extschema@.bulkhead_memory_activity(
    OUT pid integer,
    OUT workload text,
    OUT memory_requested bigint,
    OUT memory_granted bigint,
    OUT waiting boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_memory_activity'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE VIEW @extschema@.bulkhead_activity AS
    SELECT a.pid, a.workload,
           CASE WHEN m.waiting THEN 'waiting for memory' ELSE a.state END AS state,
           a.scope, a.since, a.wait_ms, a.moved_from, a.key,
           m.memory_requested, m.memory_granted
      FROM @extschema@.bulkhead_activity() a
      LEFT JOIN @extschema@.bulkhead_memory_activity() m
             ON m.pid = a.pid AND m.workload = a.workload AND a.state = 'running';

-- The server's memory grants (bulkhead.max_memory), one row
CREATE FUNCTION @extschema@.bulkhead_memory(
    OUT max_memory text,
    OUT memory_granted bigint,
    OUT memory_waiting integer,
    OUT memory_waits bigint,
    OUT memory_shrunk bigint,
    OUT memory_wait_p99_ms double precision,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'bulkhead_memory'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_memory AS
    SELECT * FROM @extschema@.bulkhead_memory();

GRANT SELECT ON @extschema@.bulkhead_memory TO PUBLIC;

-- bulkhead_classify(query) gains memory_requested: a new result type, so
-- the function is made again, with the privileges an operator granted on
-- the 1.3 one: each grant made again by its grantor (the owner's by the
-- owner, a grantee's with grant option by that grantee, after the grant it
-- holds), with its grant option; see 1.1 -> 1.2 for why the copies leave
-- pg_init_privs.  An object of the operator's own that depends on it (a
-- view) cannot be kept over the drop: the update stops first, with 2BP01
-- and what to do, and changes nothing.
DO $$
DECLARE
    fn constant text := '@extschema@.bulkhead_classify(text)';
    old_oid pg_catalog.oid := pg_catalog.to_regprocedure(fn);
    me constant text := pg_catalog.quote_ident(current_user);
    owner_old pg_catalog.oid;
    acl aclitem[];
    dependents text;
    g record;
    done text[] := '{}';
    progress boolean;
    key text;
    stmt text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), ', ')
      INTO dependents
      FROM pg_catalog.pg_depend d
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) old_oid
       AND d.deptype OPERATOR(pg_catalog.=) 'n';
    IF dependents IS NOT NULL THEN
        RAISE EXCEPTION 'cannot update extension bulkhead to 1.4: objects depend on function bulkhead_classify(text)'
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'The update makes the function again (its result gains memory_requested); these depend on it: ' || dependents || '.',
                  HINT = 'Drop them, run ALTER EXTENSION bulkhead UPDATE, then create them again.';
    END IF;
    SELECT p.proacl, p.proowner INTO acl, owner_old FROM pg_catalog.pg_proc p
     WHERE p.oid OPERATOR(pg_catalog.=) old_oid;
    DROP FUNCTION @extschema@.bulkhead_classify(text);
    CREATE FUNCTION @extschema@.bulkhead_classify(
        query text,
        OUT workload text,
        OUT source text,
        OUT rule_position integer,
        OUT memory_requested bigint)
    RETURNS record
    AS 'MODULE_PATHNAME', 'bulkhead_classify_query'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
    IF acl IS NULL THEN
        RETURN;
    END IF;
    REVOKE ALL ON FUNCTION @extschema@.bulkhead_classify(text) FROM PUBLIC;
    -- in rounds: a grantee's grant once its grantor holds the grant option
    LOOP
        progress := false;
        FOR g IN SELECT a.grantor, a.grantee, a.is_grantable
                   FROM pg_catalog.aclexplode(acl) a
                  WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
                    AND NOT (a.grantee OPERATOR(pg_catalog.=) owner_old
                             AND a.grantor OPERATOR(pg_catalog.=) owner_old)
        LOOP
            key := g.grantor::text || '/' || g.grantee::text;
            CONTINUE WHEN key OPERATOR(pg_catalog.=) ANY (done);
            CONTINUE WHEN g.grantor OPERATOR(pg_catalog.<>) owner_old AND
                NOT pg_catalog.has_function_privilege(g.grantor, fn, 'EXECUTE WITH GRANT OPTION');
            stmt := pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', fn,
                CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                     ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
                CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            IF g.grantor OPERATOR(pg_catalog.=) owner_old THEN
                EXECUTE stmt;
            ELSE
                BEGIN
                    -- (regrole's text is quoted already)
                    EXECUTE 'SET LOCAL ROLE ' || g.grantor::pg_catalog.regrole::pg_catalog.text;
                    EXECUTE stmt;
                    EXECUTE 'SET LOCAL ROLE ' || me;
                EXCEPTION WHEN insufficient_privilege THEN
                    -- (the grantor may not see the schema now): the owner's
                    EXECUTE stmt;
                    RAISE WARNING 'the privilege on bulkhead_classify(text) that % granted to % is granted by the owner now',
                        g.grantor::pg_catalog.regrole, CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                        ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END;
                END;
            END IF;
            done := done || key;
            progress := true;
        END LOOP;
        EXIT WHEN NOT progress;
    END LOOP;
    DELETE FROM pg_catalog.pg_init_privs
     WHERE objoid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(fn)::pg_catalog.oid
       AND classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND objsubid OPERATOR(pg_catalog.=) 0;
END
$$;

-- 1.4 (issue 42): what admission did.
--
-- bulkhead_history: a row per workload per interval (bulkhead.history_interval),
-- the last bulkhead.history_length intervals, oldest first: what happened
-- during the interval (counts), the p99 of the waits and holds that ended in
-- it, and the highest counts and memory granted it saw.
CREATE FUNCTION @extschema@.bulkhead_history(
    OUT workload text,
    OUT interval_start timestamptz,
    OUT interval_end timestamptz,
    OUT acquired bigint,
    OUT released bigint,
    OUT rejected_full bigint,
    OUT timed_out bigint,
    OUT cancelled bigint,
    OUT moved_in bigint,
    OUT moved_out bigint,
    OUT wait_p99_ms double precision,
    OUT hold_p99_ms double precision,
    OUT peak_running integer,
    OUT peak_queued integer,
    OUT peak_memory_granted bigint,
    OUT memory_waits bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_history'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_history AS
    SELECT * FROM @extschema@.bulkhead_history()
     ORDER BY interval_start, workload;

-- bulkhead_statements: what admission did per (queryid, workload), while
-- bulkhead.track_statements is on; join pg_stat_statements on queryid for
-- the text.
CREATE FUNCTION @extschema@.bulkhead_statements(
    OUT queryid bigint,
    OUT workload text,
    OUT calls bigint,
    OUT waits bigint,
    OUT wait_time_total_ms double precision,
    OUT wait_time_max_ms double precision,
    OUT rejected bigint,
    OUT timed_out bigint,
    OUT moved_in bigint,
    OUT max_memory_requested bigint,
    OUT shrunk bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_statements'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_statements AS
    SELECT * FROM @extschema@.bulkhead_statements();

CREATE FUNCTION @extschema@.bulkhead_statements_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_statements_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- as bulkhead_stats: any role may read, superusers (and whom they grant it) reset
GRANT SELECT ON @extschema@.bulkhead_history TO PUBLIC;
GRANT SELECT ON @extschema@.bulkhead_statements TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.bulkhead_statements_reset() FROM PUBLIC;

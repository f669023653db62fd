--
-- transparent: bulkhead.workload puts every transaction through a workload
--
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, statement_timeout)
VALUES ('gate', 2, 0, '0', '5s'), ('other', 2, 0, '0', NULL);
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 2$$);
CREATE ROLE bh_app;
GRANT CREATE ON SCHEMA public TO bh_app;
CREATE TABLE gated_log (n int);
GRANT ALL ON gated_log TO bh_app;

-- what this session holds, and how many gate permits were granted so far
CREATE VIEW gate_held AS
    SELECT workload, scope FROM bulkhead_activity
     WHERE pid = pg_backend_pid() ORDER BY workload, scope;
CREATE FUNCTION gate_granted() RETURNS bigint LANGUAGE sql
    AS $$ SELECT acquired FROM bulkhead_stats WHERE workload = 'gate' $$;
GRANT SELECT ON gate_held TO bh_app;
-- counts are read as the (exempt) superuser, so that reading them takes no
-- permit: RESET ROLE and SET ROLE themselves need none

-- only superusers may set it (ALTER ROLE/DATABASE ... SET, postgresql.conf)
SET bulkhead.workload = 'gate';
SELECT gate_granted() AS before \gset
SET ROLE bh_app;
SHOW bulkhead.workload;

-- each statement outside a transaction block: one permit, scope 'auto',
-- returned at its end
SELECT * FROM gate_held;
SELECT count(*) FROM gate_held;
RESET ROLE;
SELECT gate_granted() - :before AS granted;
SELECT gate_granted() AS before \gset
SET ROLE bh_app;

-- a transaction block: one permit for the whole transaction
BEGIN;
SELECT 1;
INSERT INTO gated_log VALUES (1);
SELECT * FROM gate_held;
COMMIT;
RESET ROLE;
SELECT gate_granted() - :before AS granted;

-- what needs no permit: transaction control, SET/SHOW/RESET, DISCARD,
-- LISTEN/UNLISTEN, PREPARE/DEALLOCATE
SELECT gate_granted() AS before \gset
SET ROLE bh_app;
BEGIN;
SET LOCAL work_mem = '8MB';
SHOW work_mem;
RESET work_mem;
LISTEN bh_channel;
UNLISTEN bh_channel;
PREPARE q AS SELECT 42;
DEALLOCATE q;
SAVEPOINT s;
RELEASE SAVEPOINT s;
COMMIT;
DISCARD TEMP;
RESET ROLE;
SELECT gate_granted() - :before AS granted;

-- statements inside functions are not gated again
CREATE FUNCTION bh_app_work() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gated_log VALUES (2);
    INSERT INTO gated_log VALUES (3);
    RETURN (SELECT count(*) FROM gated_log);
END
$$;
SELECT gate_granted() AS before \gset
SET ROLE bh_app;
SELECT bh_app_work();
RESET ROLE;
SELECT gate_granted() - :before AS granted;

-- a procedure that commits gets a new permit for each new transaction
CREATE PROCEDURE bh_app_batches() LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..3 LOOP
        INSERT INTO gated_log VALUES (i);
        COMMIT;
    END LOOP;
END
$$;
SELECT gate_granted() AS before \gset
SET ROLE bh_app;
CALL bh_app_batches();
RESET ROLE;
SELECT gate_granted() - :before AS granted;

-- an aborted transaction takes no new permit (one for the failed statement)
SELECT gate_granted() AS before \gset
SET ROLE bh_app;
BEGIN;
SELECT 1 / (random() * 0)::int;
SELECT 1;
ROLLBACK;
RESET ROLE;
SELECT gate_granted() - :before AS granted;
SET ROLE bh_app;

-- explicit calls: another workload is fine; the gating workload is already
-- held for the transaction, so the transaction variants succeed at once
-- without a second permit, and a session permit of it is refused
BEGIN;
SELECT bulkhead_acquire_xact('other');
SELECT bulkhead_acquire_xact('gate');
SELECT bulkhead_try_acquire_xact('gate');
SELECT * FROM gate_held;
SELECT bulkhead_acquire('gate');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT bulkhead_release('gate');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT bulkhead_release_all();
-- (gate: running = 1 is this statement's own permit)
SELECT workload, running FROM bulkhead_stats ORDER BY workload;

-- the guards apply, to the gated statement itself
SHOW statement_timeout;
SELECT current_setting('statement_timeout') AS inside_a_transaction;

-- no escape for a plain user
SET bulkhead.workload = '';
\echo :LAST_ERROR_SQLSTATE
RESET bulkhead.workload;
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('bulkhead.workload', 'other', false);
\echo :LAST_ERROR_SQLSTATE
SET bulkhead.exempt_superuser = on;
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION bh_escape() RETURNS void LANGUAGE sql SET bulkhead.workload = '' AS 'SELECT';
\echo :LAST_ERROR_SQLSTATE
SHOW bulkhead.workload;

-- a SECURITY DEFINER function does not change which workload gates the
-- transaction, even one that sets bulkhead.workload
RESET ROLE;
CREATE FUNCTION bh_definer() RETURNS text LANGUAGE sql SECURITY DEFINER
    SET bulkhead.workload = 'other'
    AS $$ SELECT string_agg(workload || ':' || scope, ',') FROM bulkhead_activity WHERE pid = pg_backend_pid() $$;
SET ROLE bh_app;
SELECT bh_definer();
SHOW bulkhead.workload;

-- parallel workers are never gated: the leader's permit covers them
RESET ROLE;
CREATE TABLE bh_par AS SELECT g FROM generate_series(1, 200000) g;
ANALYZE bh_par;
GRANT SELECT ON bh_par TO bh_app;
-- The "Workers" lines of EXPLAIN ANALYZE (the rest of the plan is printed
-- differently by each PostgreSQL version)
CREATE FUNCTION parallel_workers(query text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query
    LOOP
        IF line ~ 'Workers' THEN
            RETURN NEXT btrim(line);
        END IF;
    END LOOP;
END
$$;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = off;
SELECT gate_granted() AS before \gset
SET ROLE bh_app;
SELECT parallel_workers('SELECT count(*) FROM bh_par');
SELECT count(*) FROM bh_par;
RESET ROLE;
SELECT gate_granted() - :before AS granted;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;
DROP TABLE bh_par;
DROP FUNCTION parallel_workers(text);

-- superusers are exempt while bulkhead.exempt_superuser is on (the default)
RESET ROLE;
SELECT gate_granted() AS before \gset
SELECT 1;
SELECT gate_granted() - :before AS granted;
SET bulkhead.exempt_superuser = off;
SELECT * FROM gate_held;
RESET bulkhead.exempt_superuser;

-- unknown workload: every statement that needs a permit fails clearly
SET bulkhead.workload = 'nonesuch';
SET ROLE bh_app;
SELECT 1;
\echo :LAST_ERROR_SQLSTATE
SHOW bulkhead.workload;
RESET ROLE;
RESET bulkhead.workload;

SELECT count(*) FROM bulkhead_activity;
DROP FUNCTION bh_definer();
DROP FUNCTION bh_app_work();
DROP PROCEDURE bh_app_batches();
DROP VIEW gate_held;
DROP FUNCTION gate_granted();
DROP TABLE gated_log;
REVOKE CREATE ON SCHEMA public FROM bh_app;
DROP ROLE bh_app;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

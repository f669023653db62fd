--
-- failed_statement: a session permit whose acquiring statement fails is
-- returned; once that statement has completed, the permit survives the
-- rollback of its transaction (DESIGN.md, "Permits and failed statements").
-- Also: no permit can be taken or returned during a parallel operation.
--
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('fs', 2, 0, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 1$$);

-- What this session holds, and what the workload counts
CREATE FUNCTION fs_state() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM bulkhead_activity
             WHERE pid = pg_backend_pid() AND workload = 'fs') || ' held, ' ||
           s.running || ' running, ' || s.acquired || ' acquired, ' ||
           s.released || ' released'
      FROM bulkhead_stats s WHERE s.workload = 'fs'
$$;

-- A run-time error after the grant, in the acquiring statement (the CASE
-- makes the acquire come first; random() * 0 keeps the division from being
-- folded at plan time)
SELECT CASE WHEN bulkhead_try_acquire('fs') THEN 1 / (random() * 0)::int END;
SELECT fs_state();

-- statement_timeout after the grant, in the acquiring statement: 57014,
-- and the permit is not held (the error table's promise)
SET statement_timeout = '200ms';
SELECT bulkhead_acquire('fs'), pg_sleep(2);
RESET statement_timeout;
SELECT fs_state();

-- In a transaction block: the failing statement's permit goes at once
BEGIN;
SELECT CASE WHEN bulkhead_try_acquire('fs') THEN 1 / (random() * 0)::int END;
SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid();
ROLLBACK;
SELECT fs_state();

-- In a savepoint (psql's ON_ERROR_ROLLBACK, pgJDBC's autosave): the same,
-- and the transaction goes on without it
BEGIN;
SAVEPOINT s;
SELECT CASE WHEN bulkhead_try_acquire('fs') THEN 1 / (random() * 0)::int END;
ROLLBACK TO s;
SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid();
COMMIT;
SELECT fs_state();

-- A completed acquire survives the rollback of its transaction, a failing
-- later statement, and the rollback of a savepoint it was taken in
BEGIN;
SELECT bulkhead_acquire('fs');
SELECT 1 / (random() * 0)::int;
ROLLBACK;
SELECT fs_state();
SELECT bulkhead_release('fs');
BEGIN;
SAVEPOINT s;
SELECT bulkhead_acquire('fs');
SELECT 1 / (random() * 0)::int;
ROLLBACK TO s;
COMMIT;
SELECT fs_state();
SELECT bulkhead_release('fs');

-- PL/pgSQL: an error caught by an EXCEPTION block whose block took the
-- permit returns it (the block's work is rolled back as a unit); one taken
-- before the block stays
DO $$
BEGIN
    BEGIN
        PERFORM bulkhead_acquire('fs');
        PERFORM 1 / (random() * 0)::int;
    EXCEPTION WHEN division_by_zero THEN
        RAISE NOTICE 'caught; held: %',
            (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid());
    END;
END
$$;
SELECT fs_state();
DO $$
BEGIN
    PERFORM bulkhead_acquire('fs');
    BEGIN
        PERFORM 1 / (random() * 0)::int;
    EXCEPTION WHEN division_by_zero THEN
        RAISE NOTICE 'caught; held: %',
            (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid());
    END;
END
$$;
SELECT fs_state();
SELECT bulkhead_release('fs');

-- A rollback asked for, with no error, is no failed statement: a procedure
-- that rolls back a batch keeps its session permit and can release it; so
-- does a ROLLBACK or ROLLBACK TO in the acquire's own query string
CREATE PROCEDURE fs_rollback_batch() LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bulkhead_acquire('fs');
    ROLLBACK;
    RAISE NOTICE 'after ROLLBACK; held: %',
        (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid());
    PERFORM bulkhead_release('fs');
END
$$;
CALL fs_rollback_batch();
SELECT fs_state();
BEGIN\; SELECT bulkhead_acquire('fs')\; ROLLBACK;
SELECT fs_state();
SELECT bulkhead_release('fs');
BEGIN;
SAVEPOINT s;
SELECT bulkhead_acquire('fs')\; ROLLBACK TO s;
COMMIT;
SELECT fs_state();
SELECT bulkhead_release('fs');
-- ... but a procedure that fails after its ROLLBACK returns the permit
CREATE PROCEDURE fs_rollback_then_fail() LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bulkhead_acquire('fs');
    ROLLBACK;
    PERFORM 1 / (random() * 0)::int;
END
$$;
CALL fs_rollback_then_fail();
SELECT fs_state();
DROP PROCEDURE fs_rollback_batch(), fs_rollback_then_fail();

-- Transaction permits are unaffected: they end with their transaction
BEGIN;
SELECT bulkhead_acquire_xact('fs');
SELECT fs_state();
COMMIT;
SELECT fs_state();

-- Parallel operation: refused with 25000, in a worker or in the leader
-- (PL/pgSQL, so that the planner cannot inline them and see the callee)
CREATE FUNCTION fs_parallel_acquire() RETURNS boolean
LANGUAGE plpgsql PARALLEL SAFE AS $$ BEGIN RETURN bulkhead_try_acquire('fs'); END $$;
CREATE FUNCTION fs_parallel_release() RETURNS integer
LANGUAGE plpgsql PARALLEL SAFE AS $$ BEGIN RETURN bulkhead_release_all(); END $$;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                  'on', false) IS NOT NULL AS parallel_forced;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET max_parallel_workers_per_gather = 1;
\set VERBOSITY terse
SELECT fs_parallel_acquire() FROM (VALUES (1)) v(x);
SELECT fs_parallel_release() FROM (VALUES (1)) v(x);
\set VERBOSITY default
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET max_parallel_workers_per_gather;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                  'off', false) IS NOT NULL AS parallel_off;
SELECT fs_state();

DROP FUNCTION fs_parallel_acquire(), fs_parallel_release();
DROP FUNCTION fs_state();
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

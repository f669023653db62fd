--
-- permits: acquire and release in one session
--
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('reports', 2, 1, '100ms'), ('batch', 1, 0, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 2$$);

-- session scope
SELECT bulkhead_acquire('reports');
SELECT workload, state, scope, pid = pg_backend_pid() AS mine FROM bulkhead_activity;
SELECT running, queued, acquired FROM bulkhead_stats WHERE workload = 'reports';
SELECT bulkhead_release('reports');
SELECT count(*) FROM bulkhead_activity;
SELECT running, acquired, released FROM bulkhead_stats WHERE workload = 'reports';

-- explicit timeout, and the try_ variants
SELECT bulkhead_acquire('reports', '50ms');
SELECT bulkhead_try_acquire('batch');
SELECT bulkhead_try_acquire('batch', '10ms');
\echo :LAST_ERROR_SQLSTATE
SELECT workload, state, scope FROM bulkhead_activity ORDER BY workload;

-- the gate is not re-entrant: a second acquire is an error, not a self-deadlock
SELECT bulkhead_acquire('reports');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('reports');
\echo :LAST_ERROR_SQLSTATE

-- release_all returns the session permits and counts them
SELECT bulkhead_release_all();
SELECT bulkhead_release_all();
SELECT count(*) FROM bulkhead_activity;

-- release of a permit not held
SELECT bulkhead_release('reports');
\echo :LAST_ERROR_SQLSTATE

-- transaction scope
BEGIN;
SELECT bulkhead_acquire_xact('reports');
SELECT bulkhead_try_acquire_xact('batch');
SELECT workload, state, scope FROM bulkhead_activity ORDER BY workload;
SELECT bulkhead_release('reports');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) FROM bulkhead_activity;

BEGIN;
SELECT bulkhead_acquire_xact('reports');
-- release_all leaves transaction permits alone
SELECT bulkhead_release_all();
SELECT count(*) FROM bulkhead_activity;
COMMIT;
SELECT count(*) FROM bulkhead_activity;

-- unknown workload
SELECT bulkhead_acquire('nonesuch');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('nonesuch');
\echo :LAST_ERROR_SQLSTATE

-- a permit held when its workload is deleted can still be released
SELECT bulkhead_acquire('batch');
DELETE FROM bulkhead_workload WHERE name = 'batch';
SELECT bh_wait($$NOT EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'batch')$$);
SELECT workload, state FROM bulkhead_activity;
SELECT bulkhead_release('batch');
SELECT count(*) FROM bulkhead_activity;

-- re-created under the same name once drained, it starts afresh
INSERT INTO bulkhead_workload (name, max_running) VALUES ('batch', 1);
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'batch')$$);
SELECT bulkhead_try_acquire('batch');
SELECT bulkhead_release('batch');

-- at most bulkhead.max_permits_per_backend (8) permits per session
INSERT INTO bulkhead_workload (name, max_running)
SELECT 'p' || i, 1 FROM generate_series(1, 8) i;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 10$$);
SELECT bool_and(bulkhead_try_acquire('p' || i)) FROM generate_series(1, 8) i;
SELECT bulkhead_acquire('reports');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release_all();
DELETE FROM bulkhead_workload WHERE name LIKE 'p_';
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 2$$);

SELECT workload, running, queued, acquired, rejected_full, timed_out, cancelled, released
  FROM bulkhead_stats ORDER BY workload;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

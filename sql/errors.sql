--
-- errors: bad input gets a clear error with a stable SQLSTATE
--
INSERT INTO bulkhead_workload (name, max_running, queue_timeout) VALUES ('w', 1, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 1$$);

-- NULL workload: never a silent no-op
SELECT bulkhead_acquire(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact(NULL, '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire_xact(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_stats_reset(NULL);
\echo :LAST_ERROR_SQLSTATE

-- empty and too-long names
SELECT bulkhead_acquire('');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire(repeat('x', 64));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release('');
\echo :LAST_ERROR_SQLSTATE
-- 63 bytes is a valid name (that no workload has)
SELECT bulkhead_acquire(repeat('x', 63));
\echo :LAST_ERROR_SQLSTATE

-- timeouts
SELECT bulkhead_acquire('w', '-1ms');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('w', '-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact('w', '1 day -25 hours');
\echo :LAST_ERROR_SQLSTATE
-- zero, huge and month-based timeouts are valid
SELECT bulkhead_try_acquire('w', '0');
SELECT bulkhead_release('w');
SELECT bulkhead_acquire('w', '100 years');
SELECT bulkhead_release('w');
SELECT bulkhead_acquire('w', '1 mon');
SELECT bulkhead_release('w');
-- NULL timeout: the workload's queue_timeout
SELECT bulkhead_acquire('w', NULL);
SELECT bulkhead_release('w');
SELECT bulkhead_try_acquire('w', NULL);
SELECT bulkhead_release('w');

-- stats_reset of an unknown workload
SELECT bulkhead_stats_reset('nonesuch');
\echo :LAST_ERROR_SQLSTATE

-- nothing is left held
SELECT count(*) FROM bulkhead_activity;
SELECT running, queued, acquired, released FROM bulkhead_stats;

-- the functions are not STRICT and are PARALLEL UNSAFE: a parallel plan
-- never runs them in a worker
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
CREATE TABLE t AS SELECT 'w'::text AS name FROM generate_series(1, 1000);
EXPLAIN (COSTS OFF) SELECT count(*) FROM t WHERE bulkhead_try_acquire_xact(name);
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP TABLE t;

DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

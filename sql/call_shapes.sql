--
-- call_shapes: every documented way of calling the acquire functions, by
-- position and by name.  Each of the four has one signature, every
-- argument after the workload defaulted (timeout: NULL, the workload's
-- queue_timeout, or '0' for the try_ forms; key: NULL, no key), so that
-- any of them may be named without the others.
--
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('shapes', 4, 0, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE workload = 'shapes') = 1$$);

SELECT p.proname, pg_get_function_arguments(p.oid) AS arguments
  FROM pg_proc p
 WHERE p.proname IN ('bulkhead_acquire', 'bulkhead_acquire_xact',
                     'bulkhead_try_acquire', 'bulkhead_try_acquire_xact')
 ORDER BY 1, 2;

-- What this session holds: workload, scope and key of each permit
CREATE FUNCTION bh_held() RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(workload || '/' || scope || '/' || coalesce(key, '-'),
                               ', ' ORDER BY workload, key), 'nothing')
      FROM bulkhead_activity WHERE pid = pg_backend_pid()
$$;

-- session scope, positional
SELECT bulkhead_acquire('shapes');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_acquire('shapes', '10ms');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_acquire('shapes', '10ms', 'c1');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_acquire('shapes', NULL, 'c1');
SELECT bh_held(), bulkhead_release('shapes');
-- session scope, by name
SELECT bulkhead_acquire('shapes', key => 'c2');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_acquire('shapes', timeout => '10ms');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_acquire(workload => 'shapes');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_acquire(key => 'c3', workload => 'shapes', timeout => '10ms');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_acquire('shapes', '10ms', key => 'c4');
SELECT bh_held(), bulkhead_release('shapes');

SELECT bulkhead_try_acquire('shapes');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_try_acquire('shapes', '10ms');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_try_acquire('shapes', '10ms', 'c1');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_try_acquire('shapes', key => 'c2');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_try_acquire(workload => 'shapes', timeout => '10ms');
SELECT bh_held(), bulkhead_release('shapes');
SELECT bulkhead_try_acquire(key => 'c3', workload => 'shapes');
SELECT bh_held(), bulkhead_release('shapes');

-- transaction scope: the permit goes at commit
BEGIN;
SELECT bulkhead_acquire_xact('shapes');
SELECT bh_held();
COMMIT;
BEGIN;
SELECT bulkhead_acquire_xact('shapes', '10ms', 'c1');
SELECT bh_held();
COMMIT;
BEGIN;
SELECT bulkhead_acquire_xact('shapes', key => 'c2');
SELECT bh_held();
COMMIT;
BEGIN;
SELECT bulkhead_acquire_xact(workload => 'shapes', timeout => '10ms');
SELECT bh_held();
COMMIT;
BEGIN;
SELECT bulkhead_try_acquire_xact('shapes');
SELECT bh_held();
COMMIT;
BEGIN;
SELECT bulkhead_try_acquire_xact('shapes', '10ms', 'c1');
SELECT bh_held();
COMMIT;
BEGIN;
SELECT bulkhead_try_acquire_xact('shapes', key => 'c2');
SELECT bh_held();
COMMIT;
BEGIN;
SELECT bulkhead_try_acquire_xact(key => 'c3', timeout => '10ms', workload => 'shapes');
SELECT bh_held();
COMMIT;
SELECT bh_held();

-- a NULL workload is an error, whichever argument is named
SELECT bulkhead_acquire(key => 'c1', workload => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire(workload => NULL::text);
\echo :LAST_ERROR_SQLSTATE
-- a name that is not an argument (terse: the hint differs between versions)
\set VERBOSITY terse
SELECT bulkhead_acquire('shapes', tenant => 'c1');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default

SELECT running, acquired, released FROM bulkhead_stats WHERE workload = 'shapes';
DROP FUNCTION bh_held();
DELETE FROM bulkhead_workload WHERE name = 'shapes';

--
-- stats: counters after a scripted sequence, and resets
--
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('a', 1, 0), ('b', 1, 0);
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 2$$);

SELECT bulkhead_acquire('a');
SELECT bulkhead_release('a');
BEGIN;
SELECT bulkhead_acquire_xact('a');
COMMIT;
SELECT bulkhead_try_acquire('b');
SELECT bulkhead_release_all();

SELECT workload, mode, running, queued, acquired, rejected_full, timed_out,
       cancelled, released, shadow_queued, shadow_rejected, peak_running, peak_queued,
       wait_time_total_ms >= 0 AS wait_total_ok, wait_p50_ms IS NOT NULL AS has_wait_p50,
       hold_time_total_ms >= 0 AS hold_total_ok, hold_p99_ms IS NOT NULL AS has_hold_p99
  FROM bulkhead_stats ORDER BY workload;

-- reset of one workload leaves the others alone
SELECT stats_reset AS b_reset FROM bulkhead_stats WHERE workload = 'b' \gset
SELECT bulkhead_stats_reset('a');
SELECT workload, acquired, released, peak_running,
       wait_p50_ms IS NULL AS no_wait_p50, hold_p50_ms IS NULL AS no_hold_p50
  FROM bulkhead_stats ORDER BY workload;
SELECT stats_reset = :'b_reset' AS b_unchanged FROM bulkhead_stats WHERE workload = 'b';

-- current state is never reset
SELECT bulkhead_acquire('b');
SELECT bulkhead_stats_reset();
SELECT workload, running, acquired, released, peak_running FROM bulkhead_stats ORDER BY workload;
SELECT stats_reset > :'b_reset' AS b_advanced FROM bulkhead_stats WHERE workload = 'b';
SELECT bulkhead_release('b');
SELECT workload, running, acquired, released FROM bulkhead_stats ORDER BY workload;

-- only the workloads' administrators may reset
CREATE ROLE bh_plain;
SET ROLE bh_plain;
SELECT bulkhead_stats_reset();
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM bulkhead_stats;
RESET ROLE;
DROP ROLE bh_plain;

DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

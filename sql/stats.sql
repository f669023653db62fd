--
-- stats: counters after a scripted sequence, and resets
--
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('a', 1, 0), ('b', 1, 0);
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 2$$);

-- 'a' is held at least 50 ms once; nothing ever waits (free permits are
-- granted at once)
SELECT bulkhead_acquire('a');
SELECT pg_sleep(0.05);
SELECT bulkhead_release('a');
BEGIN;
SELECT bulkhead_acquire_xact('a');
COMMIT;
SELECT bulkhead_try_acquire('b');
SELECT bulkhead_release_all();

SELECT workload, mode, running, queued, acquired, rejected_full, timed_out,
       cancelled, released, shadow_queued, shadow_rejected, peak_running, peak_queued,
       wait_time_total_ms = 0 AS no_wait, wait_time_max_ms = 0 AS no_wait_max,
       wait_p50_ms = 0 AS wait_p50_zero,
       hold_time_total_ms > 0 AS held,
       hold_time_total_ms >= CASE workload WHEN 'a' THEN 50 ELSE 0 END AS held_long_enough,
       -- a percentile is a bucket's midpoint: within 1/16 of the value
       hold_p99_ms >= CASE workload WHEN 'a' THEN 40 ELSE 0 END AS hold_p99_ok
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

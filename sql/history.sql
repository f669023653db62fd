--
-- history (1.4): bulkhead_history's columns, privileges and settings, and
-- what the worker's samples hold once their intervals have ended (polled:
-- TAP 310 tests restarts, a full ring, workloads added and dropped)
--
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'bulkhead_history'::regclass AND attnum > 0
 ORDER BY attnum;

-- any role may read it, as bulkhead_stats
CREATE ROLE regress_bh_hist_reader;
SELECT has_table_privilege('regress_bh_hist_reader', 'bulkhead_history', 'SELECT'),
       has_function_privilege('regress_bh_hist_reader', 'bulkhead_history()', 'EXECUTE');
SET ROLE regress_bh_hist_reader;
SELECT count(*) >= 0 AS readable FROM bulkhead_history;
RESET ROLE;
DROP ROLE regress_bh_hist_reader;

-- settings: the interval is reloaded (not SET), the length needs a restart
SHOW bulkhead.history_interval;
SHOW bulkhead.history_length;
SET bulkhead.history_interval = '10s';
\echo :LAST_ERROR_SQLSTATE
SET bulkhead.history_length = 10;
\echo :LAST_ERROR_SQLSTATE
-- (the message's range has units from PostgreSQL 18 on: the SQLSTATE only)
\set VERBOSITY sqlstate
ALTER SYSTEM SET bulkhead.history_interval = 0;
ALTER SYSTEM SET bulkhead.history_interval = '2d';
\set VERBOSITY default
ALTER SYSTEM SET bulkhead.history_length = 0;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET bulkhead.history_length = 1441;
\echo :LAST_ERROR_SQLSTATE

-- one-second intervals for the rest of this file
ALTER SYSTEM SET bulkhead.history_interval = 1;
SELECT pg_reload_conf();

-- a workload made now counts from zero: what its intervals add up to is
-- what bulkhead_stats says, once an interval has ended after the last
-- change; two permits held at once show as a peak of 2 in some interval
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('hist', 2, 0, '0'), ('hist_other', 1, 0, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'hist%') = 2$$);
CREATE EXTENSION dblink;
SELECT dblink_connect('other',
       format('dbname=%s port=%s host=%s', current_database(),
              current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)));
SELECT bulkhead_acquire('hist');
SELECT * FROM dblink('other', $$SELECT bulkhead_acquire('hist')::text$$) AS t(r text);
SELECT dblink_connect('third',
       format('dbname=%s port=%s host=%s', current_database(),
              current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)));
SELECT * FROM dblink('third', $$SELECT bulkhead_try_acquire('hist')::text$$) AS t(r text);
SELECT dblink_disconnect('third');
SELECT bh_wait($$EXISTS (SELECT FROM bulkhead_history
                          WHERE workload = 'hist' AND peak_running = 2)$$);
SELECT * FROM dblink('other', $$SELECT bulkhead_release('hist')::text$$) AS t(r text);
SELECT bulkhead_release('hist');
SELECT bh_wait($$(SELECT sum(acquired) = 2 AND sum(released) = 2 AND sum(rejected_full) = 1
                    FROM bulkhead_history WHERE workload = 'hist')$$);
SELECT sum(acquired) AS acquired, sum(released) AS released,
       sum(rejected_full) AS rejected_full, sum(timed_out) AS timed_out,
       sum(cancelled) AS cancelled, max(peak_running) AS peak_running,
       max(peak_queued) AS peak_queued, count(hold_p99_ms) > 0 AS hold_measured
  FROM bulkhead_history WHERE workload = 'hist';
-- every row is whole: an interval that ends after it starts, counts that
-- are not negative, a percentile only where something ended (a grant that
-- moved from another lane counts in moved_in, its wait in wait_p99_ms)
SELECT count(*) AS malformed FROM bulkhead_history
 WHERE interval_end <= interval_start
    OR least(acquired, released, rejected_full, timed_out, cancelled,
             moved_in, moved_out, memory_waits, peak_running, peak_queued,
             peak_memory_granted) < 0
    OR (wait_p99_ms IS NOT NULL AND acquired + moved_in = 0)
    OR (hold_p99_ms IS NOT NULL AND released + moved_out = 0);
-- a reset between two samples counts from zero: the history goes on
SELECT bulkhead_stats_reset('hist');
SELECT bulkhead_acquire('hist');
SELECT bulkhead_release('hist');
SELECT bh_wait($$(SELECT sum(acquired) = 3 FROM bulkhead_history WHERE workload = 'hist')$$);
-- a deleted workload keeps its rows; it has none in the intervals after,
-- while a workload still defined has a row in each, whatever it did
DELETE FROM bulkhead_workload WHERE name = 'hist';
SELECT bh_wait($$NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload = 'hist')$$);
SELECT max(interval_end) AS last_end FROM bulkhead_history WHERE workload = 'hist' \gset
SELECT bh_wait($$(SELECT count(*) >= 2 FROM bulkhead_history
                    WHERE workload = 'hist_other' AND interval_start >= '$$ || :'last_end' || $$')$$);
SELECT count(*) FILTER (WHERE interval_end > :'last_end') AS rows_after_delete,
       sum(acquired) AS acquired
  FROM bulkhead_history WHERE workload = 'hist';
SELECT count(*) = count(DISTINCT interval_start) AS one_row_per_interval,
       sum(acquired) AS acquired
  FROM bulkhead_history WHERE workload = 'hist_other';
DELETE FROM bulkhead_workload WHERE name = 'hist_other';
SELECT bh_wait($$NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload = 'hist_other')$$);

SELECT dblink_disconnect('other');
DROP EXTENSION dblink;
ALTER SYSTEM RESET bulkhead.history_interval;
SELECT pg_reload_conf();

--
-- statements (1.4): bulkhead_statements' columns, privileges and settings;
-- what it counts for a statement's calls, waits, rejections and timeouts
-- (TAP 311 joins it with pg_stat_statements and fills the table)
--
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'bulkhead_statements'::regclass AND attnum > 0
 ORDER BY attnum;

-- settings: off by default, superusers only; the table's size at start
SHOW bulkhead.track_statements;
SHOW bulkhead.max_statements;
SET bulkhead.max_statements = 100;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET bulkhead.max_statements = 99;
\echo :LAST_ERROR_SQLSTATE
CREATE ROLE regress_bh_stmt_app;
SET ROLE regress_bh_stmt_app;
SET bulkhead.track_statements = on;
\echo :LAST_ERROR_SQLSTATE
-- any role reads the view; only superusers (and whom they grant it) reset
SELECT count(*) AS entries FROM bulkhead_statements;
SELECT bulkhead_statements_reset();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT has_table_privilege('regress_bh_stmt_app', 'bulkhead_statements', 'SELECT'),
       has_function_privilege('regress_bh_stmt_app', 'bulkhead_statements_reset()', 'EXECUTE');

INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('stmt', 1, 1, '0'), ('stmt_full', 1, 0, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'stmt%') = 2$$);
CREATE EXTENSION dblink;
SELECT dblink_connect('other',
       format('dbname=%s port=%s host=%s', current_database(),
              current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)));

-- tracking off: nothing is counted
SELECT bulkhead_acquire('stmt');
SELECT 1 AS one;
SELECT bulkhead_release('stmt');
SELECT count(*) AS entries FROM bulkhead_statements;

-- tracking on, without query identifiers: nothing is counted either
SET compute_query_id = off;
SET bulkhead.track_statements = on;
SELECT bulkhead_acquire('stmt');
SELECT 1 AS one;
SELECT bulkhead_release('stmt');
SELECT count(*) AS entries FROM bulkhead_statements;

-- with them: a call for each statement that starts holding a permit (the
-- acquire itself does not; its release does), counted per queryid
SET compute_query_id = on;
SELECT bulkhead_acquire('stmt');
SELECT 1 AS one;
SELECT 2 AS two;
SELECT bulkhead_release('stmt');
SELECT count(*) AS entries, sum(calls) AS calls, max(calls) AS most_calls,
       count(*) FILTER (WHERE queryid = 0) AS without_queryid
  FROM bulkhead_statements WHERE workload = 'stmt';

-- another session holds both: a rejection (53B01), a timeout without a
-- wait (53B02, queue_timeout 0) and one after a wait of 50 ms
SELECT * FROM dblink('other', $$SELECT bulkhead_acquire('stmt')::text, bulkhead_acquire('stmt_full')::text$$)
    AS t(a text, b text);
SELECT bulkhead_acquire('stmt_full');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('stmt');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('stmt', '50ms');
\echo :LAST_ERROR_SQLSTATE
-- a try_ function's false counts as well
SELECT bulkhead_try_acquire('stmt_full');
SELECT * FROM dblink('other', $$SELECT bulkhead_release_all()::text$$) AS t(n text);
SELECT workload, calls, waits, wait_time_total_ms >= 50 AS waited_50ms,
       wait_time_max_ms = wait_time_total_ms AS one_wait, rejected, timed_out,
       moved_in, max_memory_requested, shrunk
  FROM bulkhead_statements WHERE workload IN ('stmt', 'stmt_full') AND calls = 0
 ORDER BY workload, waits, rejected, timed_out;

-- the reset empties the table
SELECT bulkhead_statements_reset();
SELECT count(*) AS entries FROM bulkhead_statements;
RESET bulkhead.track_statements;
RESET compute_query_id;

SELECT dblink_disconnect('other');
DROP EXTENSION dblink;
DELETE FROM bulkhead_workload WHERE name LIKE 'stmt%';
DROP ROLE regress_bh_stmt_app;

--
-- waitlog (1.4): the wait log's settings, and its lines for rejections
-- (sent to the client here with client_min_messages = log; queryid is 0:
-- no query identifiers are computed in this instance).  Waits, whose
-- lengths vary, and the rate limit are tested by TAP 312.
--
SHOW bulkhead.log_min_wait;
SHOW bulkhead.log_rejections;
SHOW bulkhead.log_max_rate;
\set VERBOSITY sqlstate
SET bulkhead.log_min_wait = -2;
\set VERBOSITY default
SET bulkhead.log_min_wait = '1.5s';
SHOW bulkhead.log_min_wait;
RESET bulkhead.log_min_wait;
SET bulkhead.log_max_rate = 100;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET bulkhead.log_max_rate = 0;
\echo :LAST_ERROR_SQLSTATE
CREATE ROLE regress_bh_log_app;
SET ROLE regress_bh_log_app;
SET bulkhead.log_min_wait = 0;
\echo :LAST_ERROR_SQLSTATE
SET bulkhead.log_rejections = on;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE regress_bh_log_app;

INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('log q', 0, 1, '0'), ('log_full', 0, 0, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'log%') = 2$$);

-- off: the errors only
SET client_min_messages = log;
SELECT bulkhead_acquire('log_full');
SELECT bulkhead_acquire('log q');
-- on: a line before each error (a workload name with a space is quoted)
SET bulkhead.log_rejections = on;
SELECT bulkhead_acquire('log_full');
SELECT bulkhead_acquire('log q');
-- a try_ function answers false, which is no error: no line
SELECT bulkhead_try_acquire('log_full');
-- log_min_wait logs waits: an answer at once is none
SET bulkhead.log_rejections = off;
SET bulkhead.log_min_wait = 0;
SELECT bulkhead_acquire('log_full');
RESET client_min_messages;
RESET bulkhead.log_min_wait;

DELETE FROM bulkhead_workload WHERE name LIKE 'log%';
SELECT bh_wait($$NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload LIKE 'log%')$$);

--
-- workload_table: the bulkhead_workload table is the configuration API
--
-- every rule is a constraint
INSERT INTO bulkhead_workload (name, max_running) VALUES ('', 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES (repeat('x', 64), 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES (repeat('é', 32), 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES (NULL, 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('w', -1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('w', NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('w', 1, -1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, queue_timeout) VALUES ('w', 1, '-1s');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, queue_timeout) VALUES ('w', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, statement_timeout) VALUES ('w', 1, '-1ms');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, lock_timeout) VALUES ('w', 1, '-1ms');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, idle_timeout) VALUES ('w', 1, '-1ms');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, roles) VALUES ('w', 1, '{}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, roles) VALUES ('w', 1, '{a,NULL}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, mode) VALUES ('w', 1, 'lenient');
\echo :LAST_ERROR_SQLSTATE
-- 63 bytes (multibyte: 21 three-byte characters) is the longest name
INSERT INTO bulkhead_workload (name, max_running) VALUES (repeat('€', 21), 1);
INSERT INTO bulkhead_workload (name, max_running) VALUES (repeat('€', 22), 1);
\echo :LAST_ERROR_SQLSTATE
SELECT octet_length(name) FROM bulkhead_workload;
DELETE FROM bulkhead_workload;

-- a committed change reaches shared memory
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
                               statement_timeout, lock_timeout, idle_timeout)
VALUES ('reports', 4, 16, '200ms', '30s', '2s', '1min');
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'reports')$$);
SELECT workload, mode, max_running, max_queued, running, queued FROM bulkhead_stats;

UPDATE bulkhead_workload SET max_running = 2, mode = 'shadow' WHERE name = 'reports';
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'reports' AND max_running = 2)$$);
SELECT workload, mode, max_running, max_queued FROM bulkhead_stats;

-- a rolled-back change does not
BEGIN;
UPDATE bulkhead_workload SET max_running = 3 WHERE name = 'reports';
ROLLBACK;
SELECT pg_sleep(1.5);
SELECT workload, mode, max_running FROM bulkhead_stats;

-- names are case-sensitive, like text
INSERT INTO bulkhead_workload (name, max_running) VALUES ('Reports', 1);
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 2$$);
SELECT workload, max_running FROM bulkhead_stats ORDER BY workload COLLATE "C";

DELETE FROM bulkhead_workload WHERE name = 'Reports';
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 1$$);
SELECT workload FROM bulkhead_stats;

-- no more rows than bulkhead.max_workloads (10 in this test instance)
INSERT INTO bulkhead_workload (name, max_running)
SELECT 'w' || i, 1 FROM generate_series(1, 9) i;
INSERT INTO bulkhead_workload (name, max_running) VALUES ('one_too_many', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 10$$);
DELETE FROM bulkhead_workload WHERE name LIKE 'w_';
-- bulkhead_rule references it: TRUNCATE both, or TRUNCATE ... CASCADE
TRUNCATE bulkhead_workload, bulkhead_rule;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

-- changes are refused outside bulkhead.database
CREATE DATABASE bulkhead_other;
\c bulkhead_other
CREATE EXTENSION bulkhead;
INSERT INTO bulkhead_workload (name, max_running) VALUES ('elsewhere', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('elsewhere');
\echo :LAST_ERROR_SQLSTATE
\c contrib_regression
DROP DATABASE bulkhead_other;

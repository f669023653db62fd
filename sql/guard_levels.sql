--
-- guard_levels: guards against SET LOCAL, savepoints and rollbacks.  Session
-- permits set the session-level value (what the session itself set, or what
-- RESET restores) and leave a SET LOCAL in force until its transaction ends;
-- transaction and automatic permits lower the current value locally, at the
-- level of the (sub)transaction their permit belongs to.
--
INSERT INTO bulkhead_workload (name, max_running, statement_timeout, lock_timeout)
VALUES ('short', 4, '1s', NULL),
       ('long', 4, '1min', '4s');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 2$$);

CREATE VIEW held AS
    SELECT workload, scope FROM bulkhead_activity
     WHERE pid = pg_backend_pid() ORDER BY workload;

-- a session permit acquired while a transaction permit's guard is in force:
-- the session-level value is guarded once the transaction ends
BEGIN;
SELECT bulkhead_acquire_xact('short');
SELECT bulkhead_acquire('long');
SHOW statement_timeout;
COMMIT;
SHOW statement_timeout;
SHOW lock_timeout;
SELECT bulkhead_release('long');
SHOW statement_timeout;
SHOW lock_timeout;

-- released under a SET LOCAL: the SET LOCAL stays until the transaction
-- ends, then the session's own value shows again
SELECT bulkhead_acquire('long');
BEGIN;
SET LOCAL statement_timeout = '2s';
SELECT bulkhead_release('long');
SHOW statement_timeout;
COMMIT;
SHOW statement_timeout;
SHOW lock_timeout;

-- acquired under a SET LOCAL (larger than the guard): the SET LOCAL ends with
-- its transaction, the guard holds while the permit is held
BEGIN;
SET LOCAL statement_timeout = '10min';
SELECT bulkhead_acquire('long');
SHOW statement_timeout;
COMMIT;
SHOW statement_timeout;
SELECT bulkhead_release('long');
SHOW statement_timeout;

-- the same, rolled back: the session permit, and so its guard, survive
BEGIN;
SET LOCAL statement_timeout = '10min';
SELECT bulkhead_acquire('long');
ROLLBACK;
SHOW statement_timeout;
SELECT * FROM held;
-- and a release rolled back stays released, under a SET LOCAL too
BEGIN;
SET LOCAL statement_timeout = '2s';
SELECT bulkhead_release('long');
ROLLBACK;
SHOW statement_timeout;
SELECT * FROM held;

-- in a savepoint under an outer SET LOCAL: the rollback of the savepoint
-- brings back the outer SET LOCAL, the end of the transaction the guard
BEGIN;
SET LOCAL statement_timeout = '2s';
SAVEPOINT s;
SELECT bulkhead_acquire('long');
ROLLBACK TO SAVEPOINT s;
SHOW statement_timeout;
COMMIT;
SHOW statement_timeout;
BEGIN;
SET LOCAL statement_timeout = '2s';
SAVEPOINT s;
SELECT bulkhead_release('long');
ROLLBACK TO SAVEPOINT s;
SHOW statement_timeout;
COMMIT;
SHOW statement_timeout;

-- SET LOCAL while held is not a change of the session's value: the release
-- restores; a plain SET rolled back neither; a plain SET committed is left
SELECT bulkhead_acquire('long');
BEGIN;
SET LOCAL statement_timeout = '5s';
COMMIT;
SELECT bulkhead_release('long');
SHOW statement_timeout;
SELECT bulkhead_acquire('long');
BEGIN;
SET statement_timeout = '5s';
ROLLBACK;
SELECT bulkhead_release('long');
SHOW statement_timeout;
SELECT bulkhead_acquire('long');
BEGIN;
SET statement_timeout = '5s';
COMMIT;
SELECT bulkhead_release('long');
SHOW statement_timeout;
RESET statement_timeout;

-- a function's SET clause is local to the function: the session value is
-- guarded, the clause's value ends with the call
CREATE FUNCTION acquire_in_function(w text) RETURNS text
    LANGUAGE plpgsql SET statement_timeout = '3s'
    AS $$ BEGIN PERFORM bulkhead_acquire(w); RETURN current_setting('statement_timeout'); END $$;
SELECT acquire_in_function('long');
SHOW statement_timeout;
SELECT bulkhead_release('long');
SHOW statement_timeout;

-- a transaction permit taken before a savepoint keeps its guard through the
-- savepoint's rollback; one taken in a savepoint is released with it, and
-- its guard goes too; one passed to the parent by RELEASE keeps it
BEGIN;
SELECT bulkhead_acquire_xact('short');
SAVEPOINT s;
SET LOCAL statement_timeout = '5min';
ROLLBACK TO SAVEPOINT s;
SHOW statement_timeout;
COMMIT;
BEGIN;
SAVEPOINT s;
SELECT bulkhead_acquire_xact('short');
SHOW statement_timeout;
ROLLBACK TO SAVEPOINT s;
SHOW statement_timeout;
SELECT * FROM held;
SAVEPOINT s2;
SELECT bulkhead_acquire_xact('short');
RELEASE SAVEPOINT s2;
SAVEPOINT s3;
ROLLBACK TO SAVEPOINT s3;
SHOW statement_timeout;
COMMIT;
SHOW statement_timeout;

-- automatic permits (bulkhead.workload) belong to the top-level transaction:
-- taken in a savepoint, their guard outlives its rollback
CREATE ROLE bh_guard_app;
GRANT SELECT ON held TO bh_guard_app;
SET bulkhead.workload = 'short';
SET ROLE bh_guard_app;
BEGIN;
SAVEPOINT s;
SELECT 1;
SHOW statement_timeout;
ROLLBACK TO SAVEPOINT s;
SHOW statement_timeout;
SELECT * FROM held;
SELECT pg_sleep(1.6);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SHOW statement_timeout;

-- deeper: SET LOCAL and a plain SET before the savepoints; each rollback
-- brings back a guarded value, the plain SET is what the commit keeps
BEGIN;
SET statement_timeout = '5min';
SAVEPOINT a;
SET LOCAL statement_timeout = '500ms';
SAVEPOINT b;
SELECT 1;
SHOW statement_timeout;
ROLLBACK TO SAVEPOINT b;
SHOW statement_timeout;
ROLLBACK TO SAVEPOINT a;
SHOW statement_timeout;
RELEASE SAVEPOINT a;
SHOW statement_timeout;
COMMIT;
SHOW statement_timeout;
RESET statement_timeout;
BEGIN;
SAVEPOINT a;
SELECT 1;
RELEASE SAVEPOINT a;
SAVEPOINT b;
ROLLBACK TO SAVEPOINT b;
SHOW statement_timeout;
ROLLBACK;
SHOW statement_timeout;

-- psql's ON_ERROR_ROLLBACK runs each statement in a savepoint and rolls
-- back to it on error: the statement that took the permit failed, the
-- permit stays for the transaction, and so does its guard
\set ON_ERROR_ROLLBACK on
BEGIN;
SELECT 1 / count(*) FROM pg_class WHERE false;
SHOW statement_timeout;
SELECT * FROM held;
SELECT pg_sleep(1.6);
\echo :LAST_ERROR_SQLSTATE
SHOW statement_timeout;
COMMIT;
\set ON_ERROR_ROLLBACK off
SHOW statement_timeout;
RESET ROLE;
RESET bulkhead.workload;
DROP OWNED BY bh_guard_app;
DROP ROLE bh_guard_app;

DROP FUNCTION acquire_in_function(text);
DROP VIEW held;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

--
-- guards: the workload's timeouts apply while a permit is held
--
INSERT INTO bulkhead_workload (name, max_running, statement_timeout, lock_timeout, idle_timeout)
VALUES ('guarded', 2, '600ms', '2s', '1min'),
       ('tight', 2, '250ms', NULL, NULL),
       ('plain', 2, NULL, NULL, NULL);
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 3$$);

CREATE VIEW timeouts AS
    SELECT current_setting('statement_timeout') AS statement,
           current_setting('lock_timeout') AS lock,
           current_setting('idle_in_transaction_session_timeout') AS idle_in_xact,
           current_setting('idle_session_timeout') AS idle_session;
SELECT * FROM timeouts;

-- transaction scope: SET LOCAL, undone at transaction end
BEGIN;
SELECT bulkhead_acquire_xact('guarded');
SELECT * FROM timeouts;
COMMIT;
SELECT * FROM timeouts;
BEGIN;
SELECT bulkhead_acquire_xact('guarded');
ROLLBACK;
SELECT * FROM timeouts;

-- the guard fires: statement_timeout applies from the next statement
BEGIN;
SELECT bulkhead_acquire_xact('guarded');
SELECT pg_sleep(1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM timeouts;
SELECT running FROM bulkhead_stats WHERE workload = 'guarded';

-- session scope: set for the session, restored at release
SELECT bulkhead_acquire('guarded');
SELECT * FROM timeouts;
SELECT pg_sleep(1);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid();
SELECT bulkhead_release('guarded');
SELECT * FROM timeouts;

-- the smaller of guard and session value applies
SET statement_timeout = '400ms';
SET lock_timeout = '5s';
BEGIN;
SELECT bulkhead_acquire_xact('guarded');
SELECT * FROM timeouts;
COMMIT;

-- with two session permits, each release recomputes from what remains
SELECT bulkhead_acquire('guarded');
SELECT bulkhead_acquire('tight');
SELECT * FROM timeouts;
SELECT bulkhead_release('tight');
SELECT * FROM timeouts;
SELECT bulkhead_release('guarded');
SELECT * FROM timeouts;
RESET statement_timeout;
RESET lock_timeout;

-- a value the user sets while holding the permit is left alone at release
SELECT bulkhead_acquire('guarded');
SET statement_timeout = '7s';
SELECT bulkhead_release('guarded');
SELECT * FROM timeouts;
RESET statement_timeout;

-- session guards follow the permit, not the transaction: a rollback undoes
-- neither the acquire nor the release, nor their guards
BEGIN;
SELECT bulkhead_acquire('guarded');
ROLLBACK;
SELECT * FROM timeouts;
BEGIN;
SAVEPOINT s;
SELECT bulkhead_release('guarded');
ROLLBACK TO SAVEPOINT s;
SELECT * FROM timeouts;
ROLLBACK;
SELECT * FROM timeouts;
SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid();

-- a workload without guards changes nothing
SELECT bulkhead_acquire('plain');
SELECT * FROM timeouts;
SELECT bulkhead_release('plain');

-- a reset value comes back as RESET: a later role or database default applies
ALTER ROLE CURRENT_USER SET lock_timeout = '9s';
\c
SELECT * FROM timeouts;
SELECT bulkhead_acquire('guarded');
SELECT bulkhead_release('guarded');
SELECT * FROM timeouts;
ALTER ROLE CURRENT_USER RESET lock_timeout;

-- roles: only members of the workload's roles may acquire
CREATE ROLE bh_analyst;
CREATE ROLE bh_outsider;
CREATE ROLE bh_reporting;
-- roles are not shown in bulkhead_stats: max_running, changed in the same row
-- and loaded with them, tells when they are in
UPDATE bulkhead_workload SET roles = '{bh_reporting, bh_no_such_role}', max_running = 3
 WHERE name = 'plain';

SELECT bh_wait($$(SELECT max_running = 3 FROM bulkhead_stats WHERE workload = 'plain')$$);
SET ROLE bh_outsider;
SELECT bulkhead_acquire('plain');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- membership is evaluated at acquire, against the current membership
GRANT bh_reporting TO bh_analyst;
SET ROLE bh_analyst;
SELECT bulkhead_try_acquire('plain');
SELECT bulkhead_release('plain');
RESET ROLE;
REVOKE bh_reporting FROM bh_analyst;
SET ROLE bh_analyst;
SELECT bulkhead_try_acquire('plain');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- superusers are members of every role
SELECT bulkhead_try_acquire('plain');
SELECT bulkhead_release('plain');
DROP ROLE bh_analyst;
DROP ROLE bh_outsider;
DROP ROLE bh_reporting;

DROP VIEW timeouts;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

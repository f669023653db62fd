--
-- scopes: when transaction and session permits end
--
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('w', 2, 2), ('v', 2, 2);
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 2$$);

CREATE VIEW held AS
    SELECT workload, scope FROM bulkhead_activity
     WHERE pid = pg_backend_pid() ORDER BY workload, scope;

-- a transaction permit ends at commit and at rollback
BEGIN;
SELECT bulkhead_acquire_xact('w');
SELECT * FROM held;
COMMIT;
SELECT * FROM held;
BEGIN;
SELECT bulkhead_acquire_xact('w');
ROLLBACK;
SELECT * FROM held;

-- and at an error that aborts its transaction
BEGIN;
SELECT bulkhead_acquire_xact('w');
SELECT 1 / 0;
ROLLBACK;
SELECT * FROM held;

-- in autocommit, it lasts one statement
SELECT bulkhead_acquire_xact('w');
SELECT * FROM held;

-- rollback to savepoint releases the permits taken since the savepoint
BEGIN;
SELECT bulkhead_acquire_xact('v');
SAVEPOINT s1;
SELECT bulkhead_acquire_xact('w');
SELECT * FROM held;
ROLLBACK TO SAVEPOINT s1;
SELECT * FROM held;
-- a committed subtransaction passes its permit to the parent
SAVEPOINT s2;
SELECT bulkhead_acquire_xact('w');
RELEASE SAVEPOINT s2;
SELECT * FROM held;
COMMIT;
SELECT * FROM held;

-- a PL/pgSQL exception block is a subtransaction too
DO $$
BEGIN
    BEGIN
        PERFORM bulkhead_acquire_xact('w');
        RAISE EXCEPTION 'work failed';
    EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'caught: %', SQLERRM;
    END;
    RAISE NOTICE 'permits held: %', (SELECT count(*) FROM held);
END
$$;

-- a session permit survives the rollback of the transaction that took it
BEGIN;
SELECT bulkhead_acquire('w');
ROLLBACK;
SELECT * FROM held;
-- and the rollback of its subtransaction
BEGIN;
SAVEPOINT s;
SELECT bulkhead_acquire('v');
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT * FROM held;
SELECT bulkhead_release_all();

-- a session and a transaction permit side by side
BEGIN;
SELECT bulkhead_acquire('w');
SELECT bulkhead_acquire_xact('v');
SELECT * FROM held;
COMMIT;
SELECT * FROM held;
SELECT bulkhead_release('w');

-- PREPARE TRANSACTION is refused while a transaction permit is held ...
BEGIN;
SELECT bulkhead_acquire_xact('w');
PREPARE TRANSACTION 'bh1';
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM held;
SELECT gid FROM pg_prepared_xacts;
-- ... but not with a session permit, which stays with the session
BEGIN;
SELECT bulkhead_acquire('w');
PREPARE TRANSACTION 'bh2';
SELECT * FROM held;
COMMIT PREPARED 'bh2';
SELECT * FROM held;
SELECT bulkhead_release('w');

-- DISCARD ALL ends the session permits, as it ends advisory locks: a pooler
-- that runs it when a client leaves does not hand a permit on
SELECT bulkhead_acquire('w');
SELECT bulkhead_acquire('v');
DISCARD ALL;
SELECT * FROM held;
-- other DISCARDs leave them alone
SELECT bulkhead_acquire('w');
DISCARD PLANS;
DISCARD TEMP;
SELECT * FROM held;
SELECT bulkhead_release('w');

-- bulkhead.allow_session_permits = off (for connections through a
-- transaction-pooling proxy) refuses session permits only
SET bulkhead.allow_session_permits = off;
SELECT bulkhead_acquire('w');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('w');
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT bulkhead_acquire_xact('w');
SELECT * FROM held;
COMMIT;
RESET bulkhead.allow_session_permits;
CREATE ROLE bh_pooled;
SET ROLE bh_pooled;
SET bulkhead.allow_session_permits = off;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE bh_pooled;

SELECT workload, running, queued, acquired, released FROM bulkhead_stats ORDER BY workload;
DROP VIEW held;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

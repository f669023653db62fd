--
-- privileges: who may read and change the workloads, who may take permits,
-- that a permit belongs to the backend that holds it, and that nothing the
-- extension runs can be redirected through search_path.
--
CREATE ROLE regress_bh_admin;       -- administers workloads, by GRANT
CREATE ROLE regress_bh_app;         -- an application role
CREATE ROLE regress_bh_group;       -- named in a workload's roles
CREATE ROLE regress_bh_subgroup IN ROLE regress_bh_group;
CREATE ROLE regress_bh_noinherit NOINHERIT IN ROLE regress_bh_group;
CREATE ROLE regress_bh_member IN ROLE regress_bh_subgroup;  -- indirect member
CREATE ROLE regress_bh_evil;        -- may create objects in schema public
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, roles)
VALUES ('open', 1, 0, '0', NULL),
       ('guarded', 1, 0, '0', '{regress_bh_group}'),
       ('nobody', 1, 0, '0', '{regress_bh_nonesuch, Regress_Bh_Group}');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 3$$);
-- a second session, to hold permits
CREATE EXTENSION dblink;
SELECT dblink_connect('holder',
       format('dbname=%s port=%s host=%s', current_database(),
              current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)));

--
-- 1. The table: its owner (the superuser who ran CREATE EXTENSION) and
--    superusers only, until privileges are granted
--
SELECT pg_get_userbyid(relowner) = current_user AS owned_by_creator, relacl
  FROM pg_class WHERE oid = 'bulkhead_workload'::regclass;
SELECT p, has_table_privilege('regress_bh_app', 'bulkhead_workload', p)
  FROM unnest('{SELECT,INSERT,UPDATE,DELETE,TRUNCATE}'::text[]) p;
-- every role may read the views and take permits of a workload without roles
SELECT v, has_table_privilege('regress_bh_app', v, 'SELECT')
  FROM unnest('{bulkhead_stats,bulkhead_activity}'::text[]) v;
SELECT f, has_function_privilege('regress_bh_app', f, 'EXECUTE')
  FROM unnest(ARRAY['bulkhead_acquire(text,interval,text)', 'bulkhead_acquire_xact(text,interval,text)',
                    'bulkhead_try_acquire(text,interval,text)', 'bulkhead_try_acquire_xact(text,interval,text)',
                    'bulkhead_release(text)', 'bulkhead_release_all()',
                    'bulkhead_stats_reset()', 'bulkhead_stats_reset(text)']) f;

SET ROLE regress_bh_app;
SELECT * FROM bulkhead_workload;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('mine', 100);
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET max_running = 100;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM bulkhead_workload;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE bulkhead_workload;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE bulkhead_workload DISABLE TRIGGER bulkhead_workload_notify;
\echo :LAST_ERROR_SQLSTATE
SET session_replication_role = replica;   -- would skip the triggers
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_stats_reset();
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_stats_reset('open');
\echo :LAST_ERROR_SQLSTATE
SELECT workload, max_running FROM bulkhead_stats ORDER BY workload;
SELECT bulkhead_acquire('open');
SELECT workload, state, pid = pg_backend_pid() AS mine FROM bulkhead_activity;
SELECT bulkhead_release('open');
RESET ROLE;

-- delegation: GRANT the table's privileges (and, if wanted, the statistics
-- reset) to an administering role
GRANT SELECT, INSERT, UPDATE, DELETE ON bulkhead_workload TO regress_bh_admin;
GRANT EXECUTE ON FUNCTION bulkhead_stats_reset(), bulkhead_stats_reset(text)
    TO regress_bh_admin;
SET ROLE regress_bh_admin;
INSERT INTO bulkhead_workload (name, max_running) VALUES ('delegated', 2);
UPDATE bulkhead_workload SET max_queued = 3 WHERE name = 'delegated';
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats
                         WHERE workload = 'delegated' AND max_queued = 3)$$);
SELECT bulkhead_stats_reset('delegated');
DELETE FROM bulkhead_workload WHERE name = 'delegated';
TRUNCATE bulkhead_workload;               -- not granted
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT bh_wait($$NOT EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'delegated')$$);
-- INSERT alone is enough to insert: the trigger's own checks need no
-- privilege of the caller
GRANT INSERT ON bulkhead_workload TO regress_bh_app;
SET ROLE regress_bh_app;
INSERT INTO bulkhead_workload (name, max_running) VALUES ('inserted', 1);
RESET ROLE;
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'inserted')$$);
DELETE FROM bulkhead_workload WHERE name = 'inserted';
REVOKE INSERT ON bulkhead_workload FROM regress_bh_app;
REVOKE ALL ON bulkhead_workload FROM regress_bh_admin;
REVOKE ALL ON FUNCTION bulkhead_stats_reset(), bulkhead_stats_reset(text)
    FROM regress_bh_admin;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 3$$);

--
-- 2. roles: checked at each acquire, against the current user (the one SET
--    ROLE chose; inside a SECURITY DEFINER function, its owner) and the
--    current role memberships; a change of membership needs no reload
--
-- not a member: 42501 from every acquire function, even try_ (which
-- returns false only for a full or timed-out workload), and not counted
SET ROLE regress_bh_app;
SELECT bulkhead_acquire('guarded');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact('guarded');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('guarded');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire_xact('guarded', '1s');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- the check comes before admission: a non-member learns nothing about how
-- full the workload is (the other session is a superuser, a member of
-- every role)
SELECT * FROM dblink('holder', $$SELECT bulkhead_acquire('guarded')$$) AS t(r text);
SET ROLE regress_bh_app;
SELECT bulkhead_try_acquire('guarded');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('guarded', '1s');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT bulkhead_try_acquire('guarded');
SELECT * FROM dblink('holder', $$SELECT bulkhead_release('guarded')$$) AS t(r text);
-- (the one rejection is the superuser's try_acquire)
SELECT acquired, rejected_full, timed_out FROM bulkhead_stats WHERE workload = 'guarded';

-- direct and indirect members, and a NOINHERIT member (membership is what
-- counts, as for SET ROLE)
SET ROLE regress_bh_group;
SELECT bulkhead_try_acquire('guarded'), bulkhead_release('guarded');
SET ROLE regress_bh_member;
SELECT bulkhead_try_acquire('guarded'), bulkhead_release('guarded');
SET ROLE regress_bh_noinherit;
SELECT bulkhead_try_acquire('guarded'), bulkhead_release('guarded');
RESET ROLE;

-- membership granted after the worker loaded the workload: applies at once
GRANT regress_bh_group TO regress_bh_app;
SET ROLE regress_bh_app;
SELECT bulkhead_acquire('guarded');
RESET ROLE;
-- and revoked: a permit already held stays held and can be released; the
-- next acquire is refused
REVOKE regress_bh_group FROM regress_bh_app;
SET ROLE regress_bh_app;
SELECT workload, state FROM bulkhead_activity WHERE pid = pg_backend_pid();
SELECT bulkhead_release('guarded');
SELECT bulkhead_acquire('guarded');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- the same through a role in the middle of the chain
REVOKE regress_bh_subgroup FROM regress_bh_member;
SET ROLE regress_bh_member;
SELECT bulkhead_try_acquire('guarded');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT regress_bh_subgroup TO regress_bh_member;

-- SET SESSION AUTHORIZATION, like SET ROLE, changes who is checked
SET SESSION AUTHORIZATION regress_bh_app;
SELECT bulkhead_try_acquire('guarded');
\echo :LAST_ERROR_SQLSTATE
SET ROLE regress_bh_group;                -- not a member: SET ROLE itself is refused
\echo :LAST_ERROR_SQLSTATE
RESET SESSION AUTHORIZATION;

-- SECURITY DEFINER: the check is against the function's owner, so a
-- wrapper owned by a member is how to let other roles in on purpose (the
-- permit is the calling session's, released as usual)
CREATE FUNCTION regress_bh_acquire_guarded() RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT public.bulkhead_try_acquire('guarded') $$;
ALTER FUNCTION regress_bh_acquire_guarded() OWNER TO regress_bh_member;
REVOKE ALL ON FUNCTION regress_bh_acquire_guarded() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION regress_bh_acquire_guarded() TO regress_bh_app;
SET ROLE regress_bh_app;
SELECT regress_bh_acquire_guarded();
SELECT workload, state FROM bulkhead_activity WHERE pid = pg_backend_pid();
SELECT bulkhead_release('guarded');
RESET ROLE;
-- and a definer that is not a member keeps a member out
ALTER FUNCTION regress_bh_acquire_guarded() OWNER TO regress_bh_admin;
GRANT EXECUTE ON FUNCTION regress_bh_acquire_guarded() TO regress_bh_group;
SET ROLE regress_bh_group;
SELECT regress_bh_acquire_guarded();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP FUNCTION regress_bh_acquire_guarded();

-- roles are names, resolved at each acquire: case-sensitive, a role that
-- does not exist matches no one (superusers included), a renamed role no
-- longer matches, a re-created one matches again
SELECT bulkhead_try_acquire('nobody');
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE regress_bh_group RENAME TO regress_bh_renamed;
SET ROLE regress_bh_member;
SELECT bulkhead_try_acquire('guarded');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
ALTER ROLE regress_bh_renamed RENAME TO regress_bh_group;
SET ROLE regress_bh_member;
SELECT bulkhead_try_acquire('guarded'), bulkhead_release('guarded');
RESET ROLE;

--
-- 3. A permit belongs to the backend that holds it: no other session can
--    release it, not even one of the same user or a superuser
--
SELECT * FROM dblink('holder', $$SELECT bulkhead_acquire('open')$$) AS t(r text);
SELECT dblink_exec('holder', 'BEGIN');
SELECT * FROM dblink('holder', $$SELECT bulkhead_acquire_xact('guarded')$$) AS t(r text);
SELECT workload, state, scope, pid = pg_backend_pid() AS mine
  FROM bulkhead_activity ORDER BY workload;
-- who sees the holder's rows follows pg_stat_activity's rule: a plain role
-- sees the rows of backends of roles it has the privileges of (the holder
-- is a superuser's), a member of pg_read_all_stats sees every row; the
-- counts of bulkhead_stats are for everyone
SET ROLE regress_bh_app;
SELECT count(*) AS rows_seen FROM bulkhead_activity;
SELECT workload, running FROM bulkhead_stats
 WHERE workload IN ('open', 'guarded') ORDER BY workload;
RESET ROLE;
GRANT pg_read_all_stats TO regress_bh_app;
SET ROLE regress_bh_app;
SELECT workload, state, scope FROM bulkhead_activity ORDER BY workload;
RESET ROLE;
REVOKE pg_read_all_stats FROM regress_bh_app;
SELECT bulkhead_release('open');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release('guarded');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release_all();
SET ROLE regress_bh_app;
SELECT bulkhead_release('open');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release_all();
RESET ROLE;
SELECT workload, state, scope, pid = pg_backend_pid() AS mine
  FROM bulkhead_activity ORDER BY workload;
SELECT workload, running, released FROM bulkhead_stats
 WHERE workload IN ('open', 'guarded') ORDER BY workload;
-- the holder's own release and commit return them
SELECT dblink_exec('holder', 'COMMIT');
SELECT * FROM dblink('holder', $$SELECT bulkhead_release('open')$$) AS t(r text);
SELECT count(*) FROM bulkhead_activity;
SELECT dblink_disconnect('holder');
DROP EXTENSION dblink;

--
-- 4. search_path: nothing the extension runs resolves a name through a
--    schema a user controls.  A role that may create objects in schema
--    public (where the extension is) plants look-alikes of what the
--    worker's and the trigger's queries use, and a table of the same name in
--    a schema of its own; each look-alike writes to a log when it runs.
--
GRANT CREATE ON SCHEMA public TO regress_bh_evil;
CREATE SCHEMA regress_bh_evil AUTHORIZATION regress_bh_evil;
SET ROLE regress_bh_evil;
CREATE TABLE public.regress_bh_evil_log (what text, by_superuser text);
GRANT INSERT ON public.regress_bh_evil_log TO PUBLIC;
CREATE FUNCTION public.regress_bh_evil_mul(numeric, integer) RETURNS numeric
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.regress_bh_evil_log VALUES ('numeric * integer', current_setting('is_superuser'));
    RETURN 0;
END $$;
-- better match than pg_catalog's numeric * numeric for "numeric * 1000"
CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer,
                          FUNCTION = public.regress_bh_evil_mul);
CREATE FUNCTION public.regress_bh_evil_eq(text, text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.regress_bh_evil_log VALUES ('text = text', current_setting('is_superuser'));
    RETURN false;
END $$;
CREATE OPERATOR regress_bh_evil.= (LEFTARG = text, RIGHTARG = text,
                                   FUNCTION = public.regress_bh_evil_eq);
CREATE FUNCTION regress_bh_evil.count_step(bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.regress_bh_evil_log VALUES ('count(*)', current_setting('is_superuser'));
    RETURN 0;
END $$;
CREATE AGGREGATE regress_bh_evil.count(*) (SFUNC = regress_bh_evil.count_step,
                                           STYPE = bigint, INITCOND = '0');
CREATE FUNCTION regress_bh_evil.ceil(numeric) RETURNS numeric
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.regress_bh_evil_log VALUES ('ceil', current_setting('is_superuser'));
    RETURN 0;
END $$;
CREATE TABLE regress_bh_evil.bulkhead_workload (name text, max_running int);
RESET ROLE;
-- the look-alikes do take over for whoever puts them first
SET search_path = regress_bh_evil, pg_catalog, public;
SELECT count(*) FROM (VALUES (1)) v;
SELECT 'a'::text = 'a'::text AS a_equals_a;
RESET search_path;
SELECT ceil(extract(epoch FROM interval '1s') * 1000000) AS looks_like_the_worker;
SELECT what, by_superuser FROM public.regress_bh_evil_log ORDER BY what;
TRUNCATE public.regress_bh_evil_log;

-- the worker reloads after a change (with the look-alike operator in
-- public, first in its default search_path after pg_catalog): nothing of it
-- runs, and the values are read right (queue_timeout 2 s, mode shadow)
INSERT INTO bulkhead_workload (name, max_running, queue_timeout, statement_timeout, mode)
VALUES ('probe', 1, '2s', '3s', 'shadow');
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'probe')$$);
SELECT workload, mode, max_running FROM bulkhead_stats WHERE workload = 'probe';
SELECT bulkhead_acquire('probe');
SHOW statement_timeout;
SELECT bulkhead_release('probe');
SELECT count(*) AS ran FROM public.regress_bh_evil_log;

-- the same with the database's default search_path putting the look-alikes
-- first (the worker reads it when it connects: make it reconnect)
CREATE FUNCTION regress_bh_worker_back(old int) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..600 LOOP
        PERFORM pg_stat_clear_snapshot();
        IF EXISTS (SELECT 1 FROM pg_stat_activity
                   WHERE backend_type = 'bulkhead' AND pid <> old) THEN
            RETURN 'a new worker runs';
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN 'no new worker';
END $$;
ALTER DATABASE :"DBNAME" SET search_path = regress_bh_evil, public, pg_catalog;
SELECT pid AS worker_pid FROM pg_stat_activity WHERE backend_type = 'bulkhead' \gset
SELECT pg_terminate_backend(:worker_pid);
SELECT regress_bh_worker_back(:worker_pid);
UPDATE bulkhead_workload SET max_running = 2 WHERE name = 'probe';
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'probe' AND max_running = 2)$$);
SELECT workload, mode, max_running FROM bulkhead_stats WHERE workload = 'probe';
ALTER DATABASE :"DBNAME" RESET search_path;
DROP FUNCTION regress_bh_worker_back(int);
SELECT count(*) AS ran FROM public.regress_bh_evil_log;

-- the trigger, run by a superuser whose search_path puts the look-alikes
-- first: nothing of them runs, and bulkhead.max_workloads (10 here) is still
-- counted right (a count(*) that answers 0 would let rows past it).  (This
-- session's own text comparisons would meet the look-alike "=": they name
-- pg_catalog's.)
SET search_path = regress_bh_evil, pg_catalog, public;
INSERT INTO public.bulkhead_workload (name, max_running)
SELECT 'p' || i, 1 FROM generate_series(1, 6) i;
INSERT INTO public.bulkhead_workload (name, max_running) VALUES ('one_too_many', 1);
\echo :LAST_ERROR_SQLSTATE
UPDATE public.bulkhead_workload SET max_queued = 1 WHERE name OPERATOR(pg_catalog.=) 'p1';
DELETE FROM public.bulkhead_workload WHERE name LIKE 'p_';
-- an unqualified name is the caller's own business: this goes to the
-- look-alike table, and the worker never reads it
INSERT INTO bulkhead_workload (name, max_running) VALUES ('not_a_workload', 1);
RESET search_path;
SELECT count(*) AS ran FROM public.regress_bh_evil_log;
SELECT name FROM regress_bh_evil.bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 4$$);
SELECT workload FROM bulkhead_stats ORDER BY workload;

-- acquire and release as the evil role, and with its search_path: they are
-- C functions and run no SQL; the views name what they read with its schema
SET ROLE regress_bh_evil;
SET search_path = regress_bh_evil, pg_catalog, public;
SELECT public.bulkhead_acquire('open');
SELECT workload, state FROM public.bulkhead_activity;
SELECT public.bulkhead_release('open');
SELECT sum(running) AS running FROM public.bulkhead_stats;
RESET search_path;
RESET ROLE;
SELECT count(*) AS ran FROM public.regress_bh_evil_log;

--
-- cleanup: no workloads, roles or objects left behind
--
DROP OWNED BY regress_bh_evil;
REVOKE CREATE ON SCHEMA public FROM regress_bh_evil;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);
SELECT count(*) FROM bulkhead_activity;
DROP ROLE regress_bh_admin, regress_bh_app, regress_bh_member, regress_bh_noinherit,
          regress_bh_subgroup, regress_bh_group, regress_bh_evil;

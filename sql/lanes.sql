--
-- lanes (1.3): statement rules, lane settings, bulkhead_classify(query)
--

-- A lane's settings are checked when the row is written: 22023, with
-- PostgreSQL's own message as detail for a value the setting refuses
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, '{work_mem=abc}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, '{max_parallel_workers_per_gather=-1}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, '{shared_buffers=1GB}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, '{statement_timeout=1s}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, '{work_mem}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, '{work_mem=1MB,WORK_MEM=2MB}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, '{jit=maybe}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, ARRAY['work_mem=1MB', NULL]);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, '{{work_mem=1MB},{jit=off}}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, settings)
VALUES ('bad', 1, ARRAY['work_mem=' || repeat('1', 40)]);
\echo :LAST_ERROR_SQLSTATE
-- an UPDATE is checked the same way
INSERT INTO bulkhead_workload (name, max_running) VALUES ('bad', 1);
UPDATE bulkhead_workload SET settings = '{temp_file_limit=lots}' WHERE name = 'bad';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM bulkhead_workload WHERE name = 'bad';

-- every setting a lane caps, in any case, with blanks; shown as written
-- (names in lower case, in a fixed order); -1 and on cap nothing but are
-- shown
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('web', 2, 4, '100ms');
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, settings)
VALUES ('heavy', 1, 2, '100ms',
        '{Work_Mem = 1MB, max_parallel_workers_per_gather=0, jit=off}'),
       ('maint', 1, 2, '100ms',
        '{maintenance_work_mem=2MB,max_parallel_maintenance_workers=0,temp_file_limit=-1,hash_mem_multiplier=1.5}');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE workload IN ('web', 'heavy', 'maint')) = 3$$);
SELECT workload, settings FROM bulkhead_stats WHERE workload IN ('web', 'heavy', 'maint') ORDER BY 1;
SELECT bulkhead_check_settings(NULL, 'x'), bulkhead_check_settings('{}', 'x'),
       bulkhead_check_settings('{jit=on}', 'x');

-- statement rules' columns are checked by constraints (23514)
INSERT INTO bulkhead_rule (position, workload, min_cost) VALUES (1, 'heavy', -1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload, min_cost) VALUES (1, 'heavy', 'NaN');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload, command) VALUES (1, 'heavy', '{}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload, command) VALUES (1, 'heavy', '{select,vacuum}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload, command) VALUES (1, 'heavy', ARRAY['select', NULL]);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload, command) VALUES (1, 'heavy', '{{select},{insert}}');
\echo :LAST_ERROR_SQLSTATE

-- The lanes: costly statements (a plan of at least 100000) go to heavy,
-- utilities to maint, the role's other statements to web (a session rule,
-- matched after every statement rule whatever its position)
CREATE ROLE regress_bh_lane;
-- (one statement, so that the worker loads the four rules at once: the wait
-- below sees rule 2, and so every rule)
INSERT INTO bulkhead_rule (position, role, workload, min_cost, command)
VALUES (1, 'regress_bh_lane', 'web', NULL, NULL),
       (2, NULL, 'heavy', 100000, NULL),
       (3, NULL, 'maint', NULL, '{utility}'),
       (4, 'regress_bh_nobody', 'heavy', NULL, '{insert,update,delete,merge}');
-- (a superuser is exempt: not for the wait for the worker's load)
SET bulkhead.exempt_superuser = off;
SELECT bh_wait($$(SELECT workload FROM bulkhead_classify('SELECT count(*) FROM generate_series(1, 10000000)')) = 'heavy'$$);
RESET bulkhead.exempt_superuser;

-- (jit's default is off from 19 on: the session's own value, to cap)
SET jit = on;
-- A costly plan that runs at once (planned at 10 million rows, returns
-- one): the statements that run below are costly to the planner only
CREATE FUNCTION lane_many() RETURNS SETOF int LANGUAGE plpgsql ROWS 10000000
AS $$BEGIN RETURN NEXT 1; END$$;
CREATE TABLE lane_t (id int);
ALTER TABLE lane_t OWNER TO regress_bh_lane;
GRANT CREATE ON SCHEMA public TO regress_bh_lane;
SET ROLE regress_bh_lane;

-- bulkhead_classify(query) plans, does not run
SELECT * FROM bulkhead_classify('SELECT 1');
SELECT * FROM bulkhead_classify('SELECT count(*) FROM generate_series(1, 10000000)');
SELECT * FROM bulkhead_classify('CREATE INDEX ON lane_t (id)');
SELECT * FROM bulkhead_classify('INSERT INTO lane_t VALUES (1)');
SELECT * FROM bulkhead_classify('SELECT * FROM lane_t WHERE id = $1');
-- DECLARE and COPY (query) TO match as utilities, as they run (the rules see
-- them before their query is planned), with their query's memory request
-- worked out with the caps of the lane they take
SELECT * FROM bulkhead_classify('DECLARE c CURSOR FOR SELECT 1');
SELECT * FROM bulkhead_classify('DECLARE c CURSOR FOR SELECT count(*) FROM generate_series(1, 10000000)');
SELECT * FROM bulkhead_classify('DECLARE c SCROLL CURSOR WITH HOLD FOR SELECT count(*) FROM generate_series(1, 10000000)');
SELECT * FROM bulkhead_classify('COPY (SELECT 1) TO STDOUT');
SELECT * FROM bulkhead_classify('COPY (SELECT count(*) FROM generate_series(1, 10000000)) TO STDOUT');
SELECT * FROM bulkhead_classify('COPY (INSERT INTO lane_t VALUES (1) RETURNING id) TO STDOUT');
SELECT * FROM bulkhead_classify('COPY lane_t TO STDOUT');
-- EXPLAIN matches nothing; EXPLAIN ANALYZE what it runs
SELECT * FROM bulkhead_classify('EXPLAIN SELECT count(*) FROM generate_series(1, 10000000)');
SELECT * FROM bulkhead_classify('EXPLAIN (ANALYZE) SELECT count(*) FROM generate_series(1, 10000000)');
SELECT * FROM bulkhead_classify('EXPLAIN (ANALYZE false) SELECT count(*) FROM generate_series(1, 10000000)');
SELECT * FROM bulkhead_classify('EXPLAIN (ANALYZE off) SELECT count(*) FROM generate_series(1, 10000000)');
SELECT * FROM bulkhead_classify('EXPLAIN (ANALYZE 0) SELECT count(*) FROM generate_series(1, 10000000)');
SELECT * FROM bulkhead_classify('EXPLAIN (ANALYZE maybe) SELECT 1');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM lane_t;	-- nothing was inserted
-- a statement that takes no permit: no workload, source none
SELECT * FROM bulkhead_classify('BEGIN');
SELECT * FROM bulkhead_classify('SET work_mem = ''1MB''');
SELECT * FROM bulkhead_classify('SHOW work_mem');
-- bad input (NULL: a row of NULLs, as bulkhead_classify(pid) answers)
SELECT * FROM bulkhead_classify(NULL::text);
SELECT * FROM bulkhead_classify('SELECT 1; SELECT 2');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM bulkhead_classify('SELEKT 1');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM bulkhead_classify('SELECT * FROM no_such_table');
\echo :LAST_ERROR_SQLSTATE
-- planning it needs the privileges running it would
RESET ROLE;
CREATE TABLE lane_private (id int);
SET ROLE regress_bh_lane;
SELECT * FROM bulkhead_classify('SELECT * FROM lane_private');
\echo :LAST_ERROR_SQLSTATE

-- What this session holds, and the caps in force in a statement
CREATE FUNCTION pg_temp.held() RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(workload || '/' || scope ||
                               coalesce(' from ' || moved_from, ''), ', '
                               ORDER BY workload), 'nothing')
      FROM bulkhead_activity WHERE pid = pg_backend_pid()
$$;

-- a cheap statement takes web, uncapped
BEGIN;
SELECT pg_temp.held(), current_setting('work_mem') AS work_mem;
COMMIT;
-- a costly one takes heavy, and runs capped: work_mem, no parallel workers, no jit
BEGIN;
SELECT count(*), pg_temp.held(), current_setting('work_mem') AS work_mem,
       current_setting('max_parallel_workers_per_gather') AS per_gather,
       current_setting('jit') AS jit
  FROM lane_many();
-- the caps apply to every statement while the permit is held ...
SELECT current_setting('work_mem') AS work_mem;
SHOW work_mem;
-- ... a SET may lower a cap for later statements, never raise one
SET LOCAL work_mem = '512kB';
SELECT current_setting('work_mem') AS work_mem;
SET LOCAL work_mem = '1GB';
SELECT current_setting('work_mem') AS work_mem;
COMMIT;
-- ... and the session's own values are back once it is released
SELECT current_setting('work_mem') AS work_mem, current_setting('jit') AS jit,
       current_setting('max_parallel_workers_per_gather') AS per_gather;

-- a later costly statement moves the transaction's permit: web -> heavy
RESET ROLE;
SELECT bulkhead_stats_reset('web'), bulkhead_stats_reset('heavy');
SET ROLE regress_bh_lane;
BEGIN;
SELECT pg_temp.held();
SELECT count(*), pg_temp.held() FROM lane_many();
-- a cheap statement after it leaves it in heavy: bulkhead_classify(query)
-- answers for the transaction as it stands (source transaction), a costly
-- one by its rule
SELECT pg_temp.held();
SELECT * FROM bulkhead_classify('SELECT 1');
SELECT * FROM bulkhead_classify('SELECT count(*) FROM generate_series(1, 10000000)');
COMMIT;
RESET ROLE;
SELECT workload, acquired, released, moved_out, moved_in, running
  FROM bulkhead_stats WHERE workload IN ('web', 'heavy') ORDER BY 1;
SET ROLE regress_bh_lane;
-- outside the block: a new transaction's first statement, by the session rule
SELECT * FROM bulkhead_classify('SELECT 1');
-- the block's first statement is the call itself: its permit, web, stays
BEGIN;
SELECT * FROM bulkhead_classify('SELECT 1');
SELECT pg_temp.held();
COMMIT;
-- a utility moves it to maint, whose caps apply to the utility
BEGIN;
SELECT pg_temp.held();
SHOW maintenance_work_mem;
CREATE INDEX lane_t_id ON lane_t (id);
SELECT pg_temp.held(), current_setting('maintenance_work_mem') AS mwm,
       current_setting('hash_mem_multiplier') AS hmm,
       current_setting('temp_file_limit') AS tfl;
COMMIT;
-- EXPLAIN without ANALYZE moves nothing
BEGIN;
SELECT pg_temp.held();
EXPLAIN (COSTS OFF) SELECT count(*) FROM generate_series(1, 10000000);
SELECT pg_temp.held();
COMMIT;
-- a statement rule whose role does not match this session sends nothing
BEGIN;
INSERT INTO lane_t VALUES (1);
SELECT pg_temp.held();
ROLLBACK;

-- two permits with caps: the smaller of each wins
RESET ROLE;
UPDATE bulkhead_workload SET settings = '{work_mem=2MB,jit=on}' WHERE name = 'web';
SELECT bh_wait($$(SELECT settings IS NOT NULL FROM bulkhead_stats WHERE workload = 'web')$$);
SET ROLE regress_bh_lane;
BEGIN;
SELECT current_setting('work_mem') AS work_mem, current_setting('jit') AS jit;
SELECT bulkhead_acquire_xact('maint');
SELECT pg_temp.held(), current_setting('work_mem') AS work_mem,
       current_setting('hash_mem_multiplier') AS hmm;
COMMIT;

-- a statement that fails leaves the session's values as they were
BEGIN;
SELECT count(*) FROM lane_many() g WHERE 1 / (g - g) = 0;
ROLLBACK;
RESET ROLE;
SHOW work_mem;
SHOW jit;

SELECT workload, running, queued FROM bulkhead_stats
 WHERE workload IN ('web', 'heavy', 'maint') ORDER BY 1;
DROP TABLE lane_t, lane_private;
DROP FUNCTION lane_many();
REVOKE CREATE ON SCHEMA public FROM regress_bh_lane;
DROP FUNCTION pg_temp.held();
DELETE FROM bulkhead_rule;
DELETE FROM bulkhead_workload WHERE name IN ('web', 'heavy', 'maint');
DROP ROLE regress_bh_lane;

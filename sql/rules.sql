--
-- rules: bulkhead_rule routes sessions to workloads by role, database,
-- application_name and client address; bulkhead_classify() tells a session
-- what its next transaction takes and why.
--
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('web', 5, 0, '0'), ('jobs', 5, 0, '0'), ('reports', 5, 0, '0'),
       ('other', 5, 0, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 4$$);
CREATE ROLE regress_rule_app;
CREATE ROLE regress_rule_group;
CREATE ROLE regress_rule_member IN ROLE regress_rule_group;
-- what this session holds (read as the superuser, who takes no permit)
CREATE VIEW rule_held AS
    SELECT workload, scope FROM bulkhead_activity
     WHERE pid = pg_backend_pid() ORDER BY workload;
GRANT SELECT ON rule_held TO PUBLIC;

--
-- 1. The table: constraints, privileges, where and how many
--
SELECT conname, contype, pg_get_constraintdef(oid)
  FROM pg_constraint
 WHERE conrelid = 'bulkhead_rule'::regclass AND contype <> 'n'
 ORDER BY conname;
SELECT extconfig::regclass[] FROM pg_extension WHERE extname = 'bulkhead';

INSERT INTO bulkhead_rule (position, workload) VALUES (NULL, 'web');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload) VALUES (1, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload) VALUES (1, 'nonesuch');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, role, workload) VALUES (1, '', 'web');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, database, workload)
VALUES (1, repeat('d', 64), 'web');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, application_name, workload)
VALUES (1, repeat('é', 32), 'web');            -- 64 bytes
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, application_name, workload)
VALUES (1, 'web\', 'web');                     -- ends in a lone escape
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, application_name, workload)
VALUES (1, 'web\\\', 'web');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, client_addr, workload)
VALUES (1, 'not an address', 'web');
\echo :LAST_ERROR_SQLSTATE
-- accepted: an escaped backslash, names of exactly 63 bytes
INSERT INTO bulkhead_rule (position, application_name, workload)
VALUES (1, 'web\\', 'web'),
       (2, repeat('r', 63), 'web');
INSERT INTO bulkhead_rule (position, workload) VALUES (1, 'jobs');
\echo :LAST_ERROR_SQLSTATE
DELETE FROM bulkhead_rule;

-- no more rows than bulkhead.max_rules (10 in this test instance), with
-- the same SQLSTATE as bulkhead.max_workloads (53400)
SHOW bulkhead.max_rules;
SET bulkhead.max_rules = 20;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload)
SELECT i, 'other' FROM generate_series(1, 11) i;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload)
SELECT i, 'other' FROM generate_series(1, 10) i;
INSERT INTO bulkhead_rule (position, workload) VALUES (11, 'other');
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_rule SET position = position + 100;
SELECT count(*) FROM bulkhead_rule;
DELETE FROM bulkhead_rule;

-- the owner (the superuser who created the extension) only, as the
-- workload table
SELECT relacl FROM pg_class WHERE oid = 'bulkhead_rule'::regclass;
SELECT p, has_table_privilege('regress_rule_app', 'bulkhead_rule', p)
  FROM unnest('{SELECT,INSERT,UPDATE,DELETE,TRUNCATE}'::text[]) p;
SET ROLE regress_rule_app;
SELECT * FROM bulkhead_rule;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, workload) VALUES (1, 'web');
\echo :LAST_ERROR_SQLSTATE
DELETE FROM bulkhead_rule;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE bulkhead_rule DISABLE TRIGGER bulkhead_rule_notify;
\echo :LAST_ERROR_SQLSTATE
-- another session's classification: superusers only
SELECT * FROM bulkhead_classify(pg_backend_pid());
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- changes are refused outside bulkhead.database
CREATE DATABASE bulkhead_rules_other;
\c bulkhead_rules_other
CREATE EXTENSION bulkhead;
INSERT INTO bulkhead_rule (position, workload) VALUES (1, 'web');
\echo :LAST_ERROR_SQLSTATE
\c contrib_regression
DROP DATABASE bulkhead_rules_other;

--
-- 2. Classification by application_name: LIKE, with % and _ and escapes,
--    case-sensitive (the C collation)
--
INSERT INTO bulkhead_rule (position, application_name, workload)
VALUES (10, 'web%', 'web'),
       (20, 'job\_%', 'jobs'),
       (30, 'report_', 'reports'),
       (40, '100\%', 'other');
SET ROLE regress_rule_app;
SET application_name = 'web-frontend';
SELECT bh_wait($$(SELECT source FROM bulkhead_classify()) = 'rule'$$);
SELECT * FROM bulkhead_classify();
-- a gated transaction: a permit of the rule's workload, scope auto
SELECT * FROM rule_held;
SET application_name = 'web';
SELECT * FROM bulkhead_classify();
SET application_name = 'job_runner';
SELECT * FROM bulkhead_classify();
SET application_name = 'jobXrunner';           -- \_ is a literal _
SELECT * FROM bulkhead_classify();
SELECT * FROM rule_held;                        -- no rule: not gated
SET application_name = 'report1';               -- _ is one character
SELECT * FROM bulkhead_classify();
SET application_name = 'report12';
SELECT * FROM bulkhead_classify();
SET application_name = '100%';
SELECT * FROM bulkhead_classify();
SET application_name = '1000';
SELECT * FROM bulkhead_classify();
SET application_name = 'WEB-frontend';          -- case matters
SELECT * FROM bulkhead_classify();
SET application_name = '';
SELECT * FROM bulkhead_classify();
RESET ROLE;

--
-- 3. Order of evaluation, NULL as a wildcard, role membership, database,
--    client address
--
-- a rule on role only, before the application rules: members of
-- regress_rule_group (directly or not) go to jobs whatever their program;
-- and a catch-all, last (one statement: loaded together)
INSERT INTO bulkhead_rule (position, role, workload)
VALUES (5, 'regress_rule_group', 'jobs'), (1000, NULL, 'other');
SET application_name = 'web-frontend';
SET ROLE regress_rule_member;
SELECT bh_wait($$(SELECT rule_position FROM bulkhead_classify()) = 5$$);
SELECT * FROM bulkhead_classify();
SET ROLE regress_rule_app;                      -- not a member
SELECT * FROM bulkhead_classify();
SET application_name = 'psql';                  -- nothing but the catch-all
SELECT * FROM bulkhead_classify();
RESET ROLE;
-- the role rule moves after the web rule: the first match in position wins
UPDATE bulkhead_rule SET position = 15 WHERE position = 5;
SET application_name = 'web-frontend';
SET ROLE regress_rule_member;
SELECT bh_wait($$(SELECT rule_position FROM bulkhead_classify()) = 10$$);
SELECT * FROM bulkhead_classify();
SET application_name = 'psql';
SELECT * FROM bulkhead_classify();
RESET ROLE;
-- a rule naming a role that does not exist matches no one
UPDATE bulkhead_rule SET role = 'regress_rule_nonesuch' WHERE position = 15;
SET ROLE regress_rule_member;
SELECT bh_wait($$(SELECT rule_position FROM bulkhead_classify()) = 1000$$);
SELECT * FROM bulkhead_classify();
RESET ROLE;
-- database: this one, and another
INSERT INTO bulkhead_rule (position, database, workload)
VALUES (1, 'regress_nonesuch', 'web'), (2, 'contrib_regression', 'reports');
SET ROLE regress_rule_app;
SELECT bh_wait($$(SELECT rule_position FROM bulkhead_classify()) = 2$$);
SELECT * FROM bulkhead_classify();
RESET ROLE;
DELETE FROM bulkhead_rule WHERE position IN (1, 2);
-- client address: this session comes through a Unix socket and has none,
-- so it matches no rule with a client_addr, even the widest networks
-- (test/t/090_rules.pl matches networks over TCP)
SELECT inet_client_addr();
-- (with a rule on application_name after them, to see when they are loaded)
INSERT INTO bulkhead_rule (position, client_addr, workload)
VALUES (1, '0.0.0.0/0', 'web'), (2, '::/0', 'web'),
       (3, '127.0.0.0/8', 'reports');
INSERT INTO bulkhead_rule (position, application_name, workload)
VALUES (5, 'marker', 'reports');
SET ROLE regress_rule_app;
SET application_name = 'marker';
SELECT bh_wait($$(SELECT rule_position FROM bulkhead_classify()) = 5$$);
SELECT * FROM bulkhead_classify();
SET application_name = 'psql';
SELECT * FROM bulkhead_classify();
RESET ROLE;
-- the value kept is a network: what the operator wrote is shown back
SELECT position, client_addr, masklen(client_addr) FROM bulkhead_rule
 WHERE client_addr IS NOT NULL ORDER BY position;
DELETE FROM bulkhead_rule WHERE position BETWEEN 1 AND 5;
-- every criterion of a row must match: right database, wrong program
INSERT INTO bulkhead_rule (position, database, application_name, workload)
VALUES (4, 'contrib_regression', 'batch%', 'jobs');
SET ROLE regress_rule_app;
SET application_name = 'batch-7';
SELECT bh_wait($$(SELECT rule_position FROM bulkhead_classify()) = 4$$);
SELECT * FROM bulkhead_classify();
SET application_name = 'web-frontend';
SELECT * FROM bulkhead_classify();
RESET ROLE;
DELETE FROM bulkhead_rule WHERE position BETWEEN 1 AND 4;

--
-- 4. bulkhead.workload wins; the superuser exemption; another backend
--
SET application_name = 'web-frontend';
SET bulkhead.workload = 'reports';
SET ROLE regress_rule_app;
SELECT * FROM bulkhead_classify();
SELECT * FROM rule_held;
RESET ROLE;
RESET bulkhead.workload;
-- a superuser is exempt while bulkhead.exempt_superuser is on
SELECT bh_wait($$(SELECT source FROM bulkhead_classify()) = 'superuser'$$);
SELECT * FROM bulkhead_classify();
SELECT * FROM rule_held;
SET bulkhead.exempt_superuser = off;
SELECT * FROM bulkhead_classify();
SELECT * FROM rule_held;
RESET bulkhead.exempt_superuser;
-- what a backend published, seen by a superuser
SELECT * FROM bulkhead_classify(pg_backend_pid());
SELECT * FROM bulkhead_classify(0);             -- no such backend
SELECT * FROM bulkhead_classify(NULL);

--
-- 5. Reclassification only when something matched on changes: steady
--    state evaluates nothing.  A membership revoked from a running session
--    applies at its next reclassification only, so what the session is
--    classified as tells whether it evaluated the rules again.
--    (bulkhead_rule_evaluations() counts the evaluations of every backend:
--    other sessions can only make it grow, so only its growth is asserted.)
--
CREATE ROLE regress_rule_steady;
GRANT regress_rule_steady TO regress_rule_app, regress_rule_member;
INSERT INTO bulkhead_rule (position, role, workload)
VALUES (8, 'regress_rule_steady', 'jobs');
SET ROLE regress_rule_app;
SET application_name = 'web-steady';
SELECT bh_wait($$(SELECT rule_position FROM bulkhead_classify()) = 8$$);
SELECT * FROM bulkhead_classify();
SELECT bulkhead_rule_evaluations() AS before \gset
RESET ROLE;
REVOKE regress_rule_steady FROM regress_rule_app;
SET ROLE regress_rule_app;
-- steady state: the same user, program and rules: still the member's rule
SELECT 1;
BEGIN;
SELECT 2;
COMMIT;
SELECT * FROM bulkhead_classify();
SELECT * FROM rule_held;
SET application_name = 'web-steady';           -- the same value
SELECT * FROM bulkhead_classify();
-- another program: evaluated again, the revoke applies
SET application_name = 'web-changed';
SELECT * FROM bulkhead_classify();
SELECT bulkhead_rule_evaluations() - :before >= 1 AS evaluated;
-- another user: evaluated for that user (still a member)
SET ROLE regress_rule_member;
SELECT * FROM bulkhead_classify();
SELECT bulkhead_rule_evaluations() - :before >= 2 AS evaluated;
RESET ROLE;
DELETE FROM bulkhead_rule WHERE position = 8;
DROP ROLE regress_rule_steady;

--
-- 6. The foreign key: a workload that a rule names cannot be deleted;
--    renaming it renames it in the rules
--
DELETE FROM bulkhead_workload WHERE name = 'jobs';
\echo :LAST_ERROR_SQLSTATE
TRUNCATE bulkhead_workload;
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET name = 'batch' WHERE name = 'jobs';
SELECT position, workload FROM bulkhead_rule ORDER BY position;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE workload = 'batch') = 1$$);
SET ROLE regress_rule_app;
SET application_name = 'job_42';
SELECT bh_wait($$(SELECT workload FROM bulkhead_classify()) = 'batch'$$);
SELECT * FROM bulkhead_classify();
SELECT * FROM rule_held;
RESET ROLE;
-- once no rule names it, it can go
DELETE FROM bulkhead_rule WHERE workload = 'batch';
DELETE FROM bulkhead_workload WHERE name = 'batch';

-- clean up
RESET application_name;
DELETE FROM bulkhead_rule;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);
SET ROLE regress_rule_app;
SELECT bh_wait($$(SELECT source FROM bulkhead_classify()) = 'none'$$);
RESET ROLE;
DROP VIEW rule_held;
DROP ROLE regress_rule_app, regress_rule_member, regress_rule_group;

--
-- bad_input: every function against bad and borderline arguments, and every
-- column of bulkhead_workload against its constraints.  Each failure shows
-- its SQLSTATE.  Nothing crashes, nothing hangs (waits are bounded by a
-- statement_timeout where a timeout is huge), and at the end nothing is
-- held, queued or left behind.
--
-- A second session (dblink) holds the permits that make waits happen.
CREATE EXTENSION dblink;
SELECT dblink_connect('other',
       format('dbname=%s port=%s host=%s', current_database(),
              current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)));

-- 'w' and 'W' differ only in case: two workloads.  The longest names are 63
-- bytes, in ASCII and in 3-byte characters.  'unbounded' has the largest
-- queue there is.
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout) VALUES
    ('w', 1, 0, '0'),
    ('W', 1, 0, '0'),
    (repeat('n', 63), 1, 0, '0'),
    (repeat('€', 21), 1, 0, '0'),
    ('busy', 1, 5, '100 years'),
    ('unbounded', 1, 2147483647, '0');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 6$$);
SELECT workload, octet_length(workload) AS bytes, max_running, max_queued
  FROM bulkhead_stats ORDER BY workload COLLATE "C";

--
-- 1. Names, for every function that takes one
--
-- NULL: 22004
SELECT bulkhead_acquire(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire(NULL, '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire(NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire_xact(NULL, '1s');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_stats_reset(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire(NULL::text, NULL::interval);
\echo :LAST_ERROR_SQLSTATE

-- empty: 22023
SELECT bulkhead_acquire('');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact('');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire_xact('');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release('');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_stats_reset('');
\echo :LAST_ERROR_SQLSTATE

-- 64 bytes, ASCII and multibyte (32 two-byte characters): 22023
SELECT bulkhead_acquire(repeat('n', 64));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact(repeat('é', 32));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire(repeat('n', 64));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire_xact(repeat('é', 32));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release(repeat('n', 64));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release(repeat('é', 32));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_stats_reset(repeat('n', 64));
\echo :LAST_ERROR_SQLSTATE
-- a long name is not cut to a shorter one that exists
SELECT bulkhead_try_acquire(repeat('n', 63) || 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire(repeat('n', 1000));
\echo :LAST_ERROR_SQLSTATE

-- 63 bytes, ASCII and multibyte: valid names, for every function
SELECT bulkhead_acquire(repeat('n', 63));
SELECT bulkhead_try_acquire(repeat('€', 21));
SELECT workload, state, scope FROM bulkhead_activity ORDER BY workload COLLATE "C";
SELECT bulkhead_release(repeat('n', 63));
SELECT bulkhead_release(repeat('€', 21));
BEGIN;
SELECT bulkhead_acquire_xact(repeat('n', 63));
SELECT bulkhead_try_acquire_xact(repeat('€', 21));
SELECT count(*) FROM bulkhead_activity WHERE scope = 'transaction';
COMMIT;
SELECT bulkhead_stats_reset(repeat('n', 63));
SELECT bulkhead_stats_reset(repeat('€', 21));
-- 21 characters are not 63 bytes of ASCII, nor is 63 bytes cut at 21
SELECT bulkhead_try_acquire(repeat('n', 21));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire(repeat('€', 20));
\echo :LAST_ERROR_SQLSTATE

-- names differing only in case are different workloads
SELECT bulkhead_acquire('w');
SELECT bulkhead_acquire('W');
SELECT workload, state FROM bulkhead_activity ORDER BY workload COLLATE "C";
SELECT bulkhead_release('W');
SELECT workload, state FROM bulkhead_activity;
SELECT bulkhead_release('W');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release('w');
SELECT bulkhead_try_acquire('BUSY');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_stats_reset('Busy');
\echo :LAST_ERROR_SQLSTATE

-- names that look like something else are just names: no formatting, no
-- trimming, no quoting
SELECT bulkhead_acquire('%s%d%n');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire(' w');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('w ');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('"w"');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire(E'w\n');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_release('%s%d%n');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_stats_reset('%s%d%n');
\echo :LAST_ERROR_SQLSTATE

-- arguments of the wrong type (tersely: PostgreSQL 19 words the hint of
-- a function that does not exist differently; the SQLSTATE is the point)
\set VERBOSITY terse
SELECT bulkhead_acquire(1);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('w', 5);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('w', 'soon');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('w', '1s', 'k', '2s');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
-- tenants: a key of more than 63 bytes, a key with max_running_per_key or
-- max_queued_per_key out of range
SELECT bulkhead_acquire('w', '1s', repeat('k', 64));
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire_xact('w', '1s', repeat('€', 22));
\echo :LAST_ERROR_SQLSTATE
SET bulkhead.key = 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk';
\echo :LAST_ERROR_SQLSTATE
SHOW bulkhead.key;
UPDATE bulkhead_workload SET max_running_per_key = 0 WHERE name = 'w';
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET max_queued_per_key = -1 WHERE name = 'w';
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT bulkhead_release_all('w');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
-- the trigger function is for the trigger only
SELECT bulkhead_workload_changed();
\echo :LAST_ERROR_SQLSTATE

--
-- 2. Timeouts
--
-- negative, also when made of parts or of months (a month counts 30 days):
-- 22023 for every acquire function, checked before anything else
SELECT bulkhead_acquire('w', '-1 microsecond');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('w', '-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact('w', '1 day -25 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('w', '-1 mon');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire_xact('w', '1 mon -31 days');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('w', '-100 years');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('nonesuch', '-1s');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM bulkhead_activity;

-- zero, tiny, huge and month-based timeouts are valid; a free permit is
-- granted at once whatever the timeout
SELECT bulkhead_acquire('w', '0');
SELECT bulkhead_release('w');
SELECT bulkhead_acquire('w', '1 microsecond');
SELECT bulkhead_release('w');
SELECT bulkhead_acquire('w', '1 mon -29 days');
SELECT bulkhead_release('w');
SELECT bulkhead_try_acquire('w', '100 years');
SELECT bulkhead_release('w');
SELECT bulkhead_try_acquire('w', '178000000 years');
SELECT bulkhead_release('w');
SELECT bulkhead_try_acquire('w', '-178000000 years 2 mons');
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT bulkhead_acquire_xact('w', '1 mon');
SELECT bulkhead_try_acquire_xact('W', '100 years');
COMMIT;

-- with the permits taken by the other session: admission first (full is
-- 53B01 at once, whatever the timeout), then zero and tiny waits time out
-- (53B02), and huge waits really wait (here until the statement_timeout,
-- 57014)
SELECT * FROM dblink('other', $$SELECT bulkhead_acquire('w'), bulkhead_acquire('busy')$$)
    AS t(a text, b text);
SELECT bulkhead_acquire('w', '178000000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('w', '178000000 years');
SELECT bulkhead_acquire('busy', '0');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('busy', '1 microsecond');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact('busy', '10 ms');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('busy', '1 microsecond');
SELECT bulkhead_try_acquire_xact('busy', '10 ms');
SET statement_timeout = '500ms';    -- long enough for every acquire to queue first, under valgrind too
SELECT bulkhead_acquire('busy');                         -- queue_timeout 100 years
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('busy', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('busy', '178000000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('busy', '1 mon');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire_xact('busy', '100 years');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
SELECT workload, running, queued, rejected_full, timed_out, cancelled
  FROM bulkhead_stats WHERE workload IN ('w', 'busy') ORDER BY workload;
SELECT * FROM dblink('other', $$SELECT bulkhead_release_all()$$) AS t(n int);

-- a queue of 2147483647 beside a permit: max_running + max_queued does not
-- overflow, the caller is admitted
SELECT * FROM dblink('other', $$SELECT bulkhead_acquire('unbounded')$$) AS t(a text);
SELECT bulkhead_acquire('unbounded', '1 microsecond');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('unbounded');
SELECT running, queued, rejected_full, timed_out FROM bulkhead_stats WHERE workload = 'unbounded';
SELECT * FROM dblink('other', $$SELECT bulkhead_release_all()$$) AS t(n int);
SELECT bulkhead_try_acquire('unbounded');
SELECT bulkhead_release('unbounded');

--
-- 3. The table: every column against its constraints
--
-- name
INSERT INTO bulkhead_workload (name, max_running) VALUES (NULL, 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('', 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES (repeat('n', 64), 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES (repeat('é', 32), 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('w', 1);
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET name = '' WHERE name = 'w';
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET name = 'W' WHERE name = 'w';
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET name = repeat('€', 22) WHERE name = 'w';
\echo :LAST_ERROR_SQLSTATE
-- max_running (0 is allowed: it pauses the workload, see adaptive.sql)
INSERT INTO bulkhead_workload (name, max_running) VALUES ('x', NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name) VALUES ('x');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('x', -2147483648);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('x', -1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('x', 2147483648);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running) VALUES ('x', 'many');
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET max_running = -1 WHERE name = 'w';
\echo :LAST_ERROR_SQLSTATE
-- max_queued
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('x', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('x', 1, -1);
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET max_queued = -2147483648 WHERE name = 'w';
\echo :LAST_ERROR_SQLSTATE
-- queue_timeout
INSERT INTO bulkhead_workload (name, max_running, queue_timeout) VALUES ('x', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, queue_timeout) VALUES ('x', 1, '-1 microsecond');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, queue_timeout) VALUES ('x', 1, '-1 mon');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, queue_timeout) VALUES ('x', 1, '1 mon -31 days');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, queue_timeout) VALUES ('x', 1, 'later');
\echo :LAST_ERROR_SQLSTATE
-- statement_timeout, lock_timeout, idle_timeout
INSERT INTO bulkhead_workload (name, max_running, statement_timeout) VALUES ('x', 1, '-1 microsecond');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, lock_timeout) VALUES ('x', 1, '-1 mon');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, idle_timeout) VALUES ('x', 1, '1 mon -31 days');
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET idle_timeout = '-1s' WHERE name = 'w';
\echo :LAST_ERROR_SQLSTATE
-- roles: NULL (anyone) or 1 to 16 names, no NULL element, one dimension
INSERT INTO bulkhead_workload (name, max_running, roles) VALUES ('x', 1, '{}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, roles) VALUES ('x', 1, '{NULL}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, roles) VALUES ('x', 1, '{{a,b},{c,d}}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, roles)
SELECT 'x', 1, array_agg('r' || i) FROM generate_series(1, 17) i;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, roles) VALUES ('x', 1, 'r1');
\echo :LAST_ERROR_SQLSTATE
-- mode
INSERT INTO bulkhead_workload (name, max_running, mode) VALUES ('x', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, mode) VALUES ('x', 1, 'Enforce');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, mode) VALUES ('x', 1, 'shadow ');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, mode) VALUES ('x', 1, '');
\echo :LAST_ERROR_SQLSTATE
-- max_bypass (1.2): NULL (strict FIFO) or a positive interval
INSERT INTO bulkhead_workload (name, max_running, max_bypass) VALUES ('x', 1, '0');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_bypass) VALUES ('x', 1, '-1ms');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, max_bypass) VALUES ('x', 1, 'soon');
\echo :LAST_ERROR_SQLSTATE
-- no column of that name
INSERT INTO bulkhead_workload (name, max_running, max_waiting) VALUES ('x', 1, 1);
\echo :LAST_ERROR_SQLSTATE

-- nothing of it reached the table or shared memory
SELECT count(*) FROM bulkhead_workload WHERE name NOT IN ('w', 'W', 'busy', 'unbounded')
   AND octet_length(name) <> 63;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 6$$);
SELECT workload, max_running, max_queued FROM bulkhead_stats
 WHERE workload IN ('w', 'W') ORDER BY workload COLLATE "C";

-- borderline values that are valid, and how they are applied
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
                               statement_timeout, lock_timeout, idle_timeout)
VALUES ('edge', 2147483647, 0, '178000000 years', '100 years', '0.5 ms', '0');
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('round', 1.5, 0);
INSERT INTO bulkhead_workload (name, max_running, roles)
VALUES ('roles16', 1, array_fill('regress_bh_nonesuch'::text, ARRAY[16]));
SELECT name, max_running, cardinality(roles) FROM bulkhead_workload
 WHERE name IN ('round', 'roles16') ORDER BY name;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 9$$);
SELECT workload, max_running, max_queued FROM bulkhead_stats
 WHERE workload IN ('edge', 'round', 'roles16') ORDER BY workload;
-- a 100-year statement_timeout guard is the largest setting there is; a
-- 0.5 ms lock_timeout guard rounds up to 1 ms; an idle_timeout of 0 guards
-- nothing
SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SELECT bulkhead_acquire('edge');
SHOW statement_timeout;
SHOW lock_timeout;
SHOW idle_in_transaction_session_timeout;
SELECT bulkhead_release('edge');
SHOW statement_timeout;
SHOW lock_timeout;
RESET statement_timeout;
RESET lock_timeout;
RESET idle_in_transaction_session_timeout;

--
-- 4. Nothing is left held or queued, nothing leaks
--
SELECT bulkhead_release_all();
SELECT count(*) FROM bulkhead_activity;
SELECT sum(running) AS running, sum(queued) AS queued,
       sum(acquired) = sum(released) AS all_returned
  FROM bulkhead_stats;
SELECT dblink_disconnect('other');
DROP EXTENSION dblink;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

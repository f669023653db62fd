--
-- adaptive: the columns of the adaptive limit (adaptive, min_running),
-- bulkhead_stats.current_limit (the limit in force), and the pause
-- (max_running = 0)
--
-- The worker loads a committed change asynchronously: each step below
-- waits for it (bh_wait, from setup) on a figure of bulkhead_stats that the
-- change moves, often max_queued used as a marker, before it reads
-- current_limit.  No caller ever waits for a permit of an adaptive workload
-- here, so the worker never moves its limit by itself: what current_limit
-- shows is what a load of the table put in force.
--
SELECT count(*) FROM bulkhead_workload;

--
-- 1. Defaults and constraints
--
INSERT INTO bulkhead_workload (name, max_running) VALUES ('d', 3);
SELECT name, max_running, adaptive, min_running FROM bulkhead_workload;
DELETE FROM bulkhead_workload;

-- max_running: 0 (a pause) or more
INSERT INTO bulkhead_workload (name, max_running) VALUES ('x', -1);
\echo :LAST_ERROR_SQLSTATE
-- min_running: at least 1, at most max_running, never NULL
INSERT INTO bulkhead_workload (name, max_running, min_running) VALUES ('x', 4, 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, min_running) VALUES ('x', 4, -1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, min_running) VALUES ('x', 2, 3);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, min_running, adaptive) VALUES ('x', 2, 3, true);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, min_running) VALUES ('x', 4, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, min_running) VALUES ('x', 4, 'few');
\echo :LAST_ERROR_SQLSTATE
-- adaptive: a boolean, never NULL
INSERT INTO bulkhead_workload (name, max_running, adaptive) VALUES ('x', 4, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, adaptive) VALUES ('x', 4, 'sometimes');
\echo :LAST_ERROR_SQLSTATE
-- a paused workload (max_running = 0) takes any min_running >= 1, not 0
INSERT INTO bulkhead_workload (name, max_running, min_running) VALUES ('x', 0, 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_workload (name, max_running, min_running, adaptive)
VALUES ('p1', 0, 1, false), ('p5', 0, 5, true), ('pmax', 0, 2147483647, true);
-- min_running = max_running is allowed
INSERT INTO bulkhead_workload (name, max_running, min_running, adaptive)
VALUES ('eq', 3, 3, true);
SELECT name, max_running, adaptive, min_running FROM bulkhead_workload ORDER BY name;
-- an UPDATE is held to the same rules: out of a pause only to max_running
-- >= min_running, and min_running never above max_running
UPDATE bulkhead_workload SET max_running = 4 WHERE name = 'p5';
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET max_running = 5 WHERE name = 'p5';
UPDATE bulkhead_workload SET min_running = 4 WHERE name = 'eq';
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET max_running = 2 WHERE name = 'eq';
\echo :LAST_ERROR_SQLSTATE
UPDATE bulkhead_workload SET min_running = 0 WHERE name = 'p1';
\echo :LAST_ERROR_SQLSTATE
SELECT name, max_running, adaptive, min_running FROM bulkhead_workload ORDER BY name;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 4$$);
SELECT workload, max_running, current_limit FROM bulkhead_stats ORDER BY workload;
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

--
-- 2. Not adaptive: current_limit is max_running, and follows its UPDATEs
--
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('fixed', 3, 0);
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'fixed')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'fixed';
UPDATE bulkhead_workload SET max_running = 5 WHERE name = 'fixed';
SELECT bh_wait($$(SELECT max_running = 5 FROM bulkhead_stats WHERE workload = 'fixed')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'fixed';
UPDATE bulkhead_workload SET max_running = 1 WHERE name = 'fixed';
SELECT bh_wait($$(SELECT max_running = 1 FROM bulkhead_stats WHERE workload = 'fixed')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'fixed';
-- min_running changes nothing for a workload that is not adaptive
UPDATE bulkhead_workload SET max_running = 6, min_running = 4 WHERE name = 'fixed';
SELECT bh_wait($$(SELECT max_running = 6 FROM bulkhead_stats WHERE workload = 'fixed')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'fixed';

--
-- 3. The pause: max_running = 0 grants nothing
--
UPDATE bulkhead_workload SET max_running = 0, min_running = 1 WHERE name = 'fixed';
SELECT bh_wait($$(SELECT max_running = 0 FROM bulkhead_stats WHERE workload = 'fixed')$$);
SELECT bulkhead_stats_reset('fixed');
SELECT max_running, max_queued, current_limit, running, queued
  FROM bulkhead_stats WHERE workload = 'fixed';
-- max_queued = 0: no room in the queue either, so every caller is rejected
SELECT bulkhead_try_acquire('fixed');
SELECT bulkhead_try_acquire('fixed', '10ms');
SELECT bulkhead_acquire('fixed');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('fixed', '1s');
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT bulkhead_acquire_xact('fixed');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT bulkhead_try_acquire_xact('fixed');
COMMIT;
SELECT count(*) FROM bulkhead_activity;
SELECT running, queued, acquired, rejected_full, timed_out, current_limit
  FROM bulkhead_stats WHERE workload = 'fixed';
-- with a queue, callers are admitted to it and wait: nothing is granted
-- however long they wait (a zero wait times out at once, 53B02)
UPDATE bulkhead_workload SET max_queued = 1, queue_timeout = '0' WHERE name = 'fixed';
SELECT bh_wait($$(SELECT max_queued = 1 FROM bulkhead_stats WHERE workload = 'fixed')$$);
SELECT bulkhead_stats_reset('fixed');
SELECT bulkhead_acquire('fixed');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_acquire('fixed', '100ms');
\echo :LAST_ERROR_SQLSTATE
SELECT bulkhead_try_acquire('fixed', '50ms');
SELECT running, queued, acquired, rejected_full, timed_out, current_limit
  FROM bulkhead_stats WHERE workload = 'fixed';
-- raising max_running ends the pause
UPDATE bulkhead_workload SET max_running = 1 WHERE name = 'fixed';
SELECT bh_wait($$(SELECT max_running = 1 FROM bulkhead_stats WHERE workload = 'fixed')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'fixed';
SELECT bulkhead_try_acquire('fixed');
SELECT bulkhead_release('fixed');
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

--
-- 4. Adaptive, at rest (no caller waits, so the worker keeps the limit)
--
-- A workload that becomes adaptive starts at twice the server's CPUs,
-- within [min_running, max_running]; with max_running = 2 (or with
-- min_running = max_running) that is the bound, whatever the CPU count.
INSERT INTO bulkhead_workload (name, max_running, min_running, adaptive, max_queued)
VALUES ('adapt', 2, 1, true, 0);
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
-- a light load (one holder, nobody waits) and some decisions of the worker
-- (one every 200 ms) later, the limit is where it was
SELECT bulkhead_acquire('adapt');
SELECT pg_sleep(0.6);
SELECT bulkhead_release('adapt');
SELECT max_running, current_limit, current_limit BETWEEN 1 AND max_running AS in_bounds
  FROM bulkhead_stats WHERE workload = 'adapt';
-- an UPDATE keeps the limit, moved into the new bounds [min_running,
-- max_running]: a lower max_running lowers it ...
UPDATE bulkhead_workload SET max_running = 1 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_running = 1 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
-- ... a higher one does not raise it ...
UPDATE bulkhead_workload SET max_running = 6 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_running = 6 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
-- ... a higher min_running raises it to min_running, a lower one keeps it
UPDATE bulkhead_workload SET min_running = 5 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT current_limit <> 1 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
UPDATE bulkhead_workload SET min_running = 1, max_queued = 1 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_queued = 1 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
-- adaptive off: the limit is max_running again
UPDATE bulkhead_workload SET adaptive = false, max_queued = 2 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_queued = 2 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
-- adaptive on again: it starts afresh (here at max_running = 2, not at the
-- 5 it had, nor at the 3 it had while it was off)
UPDATE bulkhead_workload SET max_running = 3, max_queued = 3 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_queued = 3 FROM bulkhead_stats WHERE workload = 'adapt')$$);
UPDATE bulkhead_workload SET max_running = 2, adaptive = true, max_queued = 4 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_queued = 4 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
UPDATE bulkhead_workload SET max_running = 8, max_queued = 0 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_queued = 0 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
-- an adaptive workload can be paused: the limit is 0, whatever min_running
UPDATE bulkhead_workload SET max_running = 0, min_running = 3 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_running = 0 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
SELECT bulkhead_try_acquire('adapt');
SELECT bulkhead_acquire('adapt');
\echo :LAST_ERROR_SQLSTATE
-- out of the pause, it starts afresh (here at min_running = max_running =
-- 3, not at the 2 it had)
UPDATE bulkhead_workload SET max_running = 3 WHERE name = 'adapt';
SELECT bh_wait($$(SELECT max_running = 3 FROM bulkhead_stats WHERE workload = 'adapt')$$);
SELECT max_running, current_limit FROM bulkhead_stats WHERE workload = 'adapt';
SELECT bulkhead_try_acquire('adapt');
SELECT bulkhead_release('adapt');

-- clean up
DELETE FROM bulkhead_workload;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats) = 0$$);

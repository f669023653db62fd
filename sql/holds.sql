--
-- holds: the constraints of runaway holders (max_hold, on_max_hold,
-- move_to); what the worker does is tested in test/t/180_max_hold.pl
--
INSERT INTO bulkhead_workload (name, max_running) VALUES ('slow', 1), ('pool', 2);
INSERT INTO bulkhead_workload (name, max_running, parent) VALUES ('pool_a', 1, 'pool');
-- a valid one of each action
INSERT INTO bulkhead_workload (name, max_running, max_hold, on_max_hold, move_to) VALUES
    ('h_log', 1, '1 min', 'log', NULL),
    ('h_cancel', 1, '30s', 'cancel', NULL),
    ('h_terminate', 1, '1h', 'terminate', NULL),
    ('h_move', 1, '10s', 'move', 'slow');
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'h\_%') = 4$$);
SELECT workload, over_hold, moved_out, moved_in FROM bulkhead_stats
 WHERE workload LIKE 'h\_%' OR workload = 'slow' ORDER BY workload;
-- on_max_hold defaults to log; max_hold to none
INSERT INTO bulkhead_workload (name, max_running) VALUES ('h_default', 1);
SELECT max_hold, on_max_hold, move_to FROM bulkhead_workload WHERE name = 'h_default';
-- max_hold must be positive
UPDATE bulkhead_workload SET max_hold = '0' WHERE name = 'h_log';
UPDATE bulkhead_workload SET max_hold = '-1s' WHERE name = 'h_log';
-- an unknown action
UPDATE bulkhead_workload SET on_max_hold = 'kill' WHERE name = 'h_log';
-- move needs move_to, and move_to needs move
UPDATE bulkhead_workload SET on_max_hold = 'move' WHERE name = 'h_log';
UPDATE bulkhead_workload SET move_to = 'slow' WHERE name = 'h_cancel';
-- not to itself, not to an unknown workload, not to a budget
UPDATE bulkhead_workload SET move_to = 'h_move' WHERE name = 'h_move';
UPDATE bulkhead_workload SET move_to = 'nosuch' WHERE name = 'h_move';
UPDATE bulkhead_workload SET move_to = 'pool' WHERE name = 'h_move';
-- a move_to target cannot become a budget
INSERT INTO bulkhead_workload (name, max_running, parent) VALUES ('slow_a', 1, 'slow');
-- nor be deleted while named
DELETE FROM bulkhead_workload WHERE name = 'slow';
-- a rename follows to move_to
UPDATE bulkhead_workload SET name = 'slower' WHERE name = 'slow';
SELECT name, move_to FROM bulkhead_workload WHERE move_to IS NOT NULL;
DELETE FROM bulkhead_workload WHERE name LIKE 'h\_%' OR name = 'pool_a';
DELETE FROM bulkhead_workload WHERE name IN ('slower', 'pool');
SELECT bh_wait($$NOT EXISTS (SELECT FROM bulkhead_stats)$$);

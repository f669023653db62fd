--
-- budgets: shared budgets (parent, reserved, weight), their constraints and
-- the admission rule at every level, seen from one session
--
-- shop (3 permits) lends to checkout (2 reserved), reports and batch: the
-- shared part is 3 - 2 = 1.
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('shop', 3, 0);
INSERT INTO bulkhead_workload (name, max_running, max_queued, parent, reserved, weight) VALUES
    ('checkout', 3, 0, 'shop', 2, 300),
    ('reports', 3, 0, 'shop', 0, 100),
    ('batch', 3, 0, 'shop', 0, 50);
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE parent = 'shop') = 3$$);

SELECT workload, max_running, running, queued, parent, reserved, weight, borrowed
  FROM bulkhead_stats WHERE workload IN ('shop', 'checkout', 'reports', 'batch')
 ORDER BY workload;

-- a budget gives no permits of its own
SELECT bulkhead_acquire('shop');
SELECT bulkhead_try_acquire('shop');

-- reports borrows the one shared permit
SELECT bulkhead_try_acquire('reports');
-- the shared part is taken: batch gets nothing, though two of shop's
-- permits are free (checkout's reservation is never lent, even idle)
SELECT bulkhead_try_acquire('batch');
SELECT workload, running, borrowed FROM bulkhead_stats
 WHERE workload IN ('shop', 'checkout', 'reports', 'batch') ORDER BY workload;
-- checkout reaches its reservation at once
BEGIN;
SELECT bulkhead_acquire_xact('checkout', '0');
SELECT workload, running, borrowed FROM bulkhead_stats
 WHERE workload IN ('shop', 'checkout') ORDER BY workload;
COMMIT;
SELECT bulkhead_release('reports');
-- with the shared part free again, batch borrows it
SELECT bulkhead_try_acquire('batch');
SELECT workload, running, borrowed FROM bulkhead_stats
 WHERE workload IN ('shop', 'batch') ORDER BY workload;
SELECT bulkhead_release('batch');

-- the budget's limit bounds the subtree: lowered to 2, with checkout's
-- reservation of 2 the shared part is empty
UPDATE bulkhead_workload SET max_running = 2 WHERE name = 'shop';
SELECT bh_wait($$(SELECT current_limit FROM bulkhead_stats WHERE workload = 'shop') = 2$$);
SELECT bulkhead_try_acquire('reports');
-- a smaller reservation lends the rest
UPDATE bulkhead_workload SET reserved = 1 WHERE name = 'checkout';
SELECT bh_wait($$(SELECT reserved FROM bulkhead_stats WHERE workload = 'checkout') = 1$$);
SELECT bulkhead_try_acquire('reports');
SELECT bulkhead_release('reports');

-- the constraints
-- the children's reservations exceed the budget's max_running
UPDATE bulkhead_workload SET reserved = 2 WHERE name IN ('reports', 'batch');
-- lowering the budget below its children's reservations
UPDATE bulkhead_workload SET max_running = 0 WHERE name = 'shop';
-- a cycle, and a workload its own parent
UPDATE bulkhead_workload SET parent = 'reports' WHERE name = 'shop';
UPDATE bulkhead_workload SET parent = 'batch' WHERE name = 'batch';
-- five levels
INSERT INTO bulkhead_workload (name, max_running, parent) VALUES
    ('l2', 1, 'reports'), ('l3', 1, 'l2'), ('l4', 1, 'l3');
INSERT INTO bulkhead_workload (name, max_running, parent) VALUES ('l5', 1, 'l4');
DELETE FROM bulkhead_workload WHERE name IN ('l4', 'l3', 'l2');
-- weight out of range, reserved over its own max_running or negative
UPDATE bulkhead_workload SET weight = 0 WHERE name = 'batch';
UPDATE bulkhead_workload SET weight = 10001 WHERE name = 'batch';
UPDATE bulkhead_workload SET reserved = 4 WHERE name = 'batch';
UPDATE bulkhead_workload SET reserved = -1 WHERE name = 'batch';
-- an unknown parent
UPDATE bulkhead_workload SET parent = 'nosuch' WHERE name = 'batch';
-- a budget with children cannot be deleted
DELETE FROM bulkhead_workload WHERE name = 'shop';
-- a rename follows to the children
UPDATE bulkhead_workload SET name = 'store' WHERE name = 'shop';
SELECT name, parent FROM bulkhead_workload WHERE parent IS NOT NULL ORDER BY name;
SELECT bh_wait($$(SELECT count(*) FROM bulkhead_stats WHERE parent = 'store') = 3$$);

-- a budget named by bulkhead.workload fails at the first transaction (of a
-- role that is not exempt), with the hint
CREATE ROLE bh_budget_app;
SET bulkhead.workload = 'store';
SET ROLE bh_budget_app;
SELECT 1;
RESET ROLE;
RESET bulkhead.workload;
DROP ROLE bh_budget_app;

-- out of the tree: reports becomes a root again, store's shared part grows
UPDATE bulkhead_workload SET parent = NULL WHERE name = 'reports';
SELECT bh_wait($$(SELECT parent IS NULL FROM bulkhead_stats WHERE workload = 'reports')$$);
SELECT bulkhead_try_acquire('reports');
SELECT bulkhead_try_acquire('batch');
SELECT workload, running, borrowed, parent FROM bulkhead_stats
 WHERE workload IN ('store', 'reports', 'batch') ORDER BY workload;
SELECT bulkhead_release_all();

DELETE FROM bulkhead_workload WHERE parent = 'store';
DELETE FROM bulkhead_workload WHERE name IN ('store', 'reports');
SELECT bh_wait($$NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload IN ('store', 'checkout', 'reports', 'batch'))$$);

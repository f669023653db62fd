/* bulkhead--1.1--1.2.sql: update an installed bulkhead 1.1 to 1.2 */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.2'" to load this file. \quit

-- The trigger functions of the configuration tables are no one's to call:
-- a role that attached one to a table of its own could make every commit
-- of that table wake the worker for a reload (the C functions now also
-- refuse to run on any table but the extension's own).
REVOKE ALL ON FUNCTION @extschema@.bulkhead_workload_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.bulkhead_rule_changed() FROM PUBLIC;

-- Shared budgets (issue 21): three columns appended to the table, as a
-- fresh 1.2 install has them (existing rows are roots, reserving nothing,
-- of weight 100).
ALTER TABLE @extschema@.bulkhead_workload
    ADD COLUMN parent text
        CONSTRAINT bulkhead_workload_parent_fkey
        REFERENCES @extschema@.bulkhead_workload (name)
        ON UPDATE CASCADE,
    ADD COLUMN reserved integer NOT NULL DEFAULT 0,
    ADD COLUMN weight integer NOT NULL DEFAULT 100
        CONSTRAINT bulkhead_workload_weight_range
        CHECK (weight BETWEEN 1 AND 10000),
    ADD CONSTRAINT bulkhead_workload_reserved_valid
        CHECK (reserved >= 0 AND (max_running = 0 OR reserved <= max_running));

-- The rules of the trees of budgets that a row alone cannot check: no
-- cycle of parents, at most 4 levels, and the reservations of a budget's
-- children within its max_running.  Checked after each statement that
-- inserts or updates rows (a DELETE cannot break them: a parent with
-- children cannot be deleted).  SECURITY DEFINER: a role allowed to change
-- some columns need not read the whole table to have the rules checked;
-- it takes no argument and only reads the extension's own table.
CREATE FUNCTION @extschema@.bulkhead_workload_check_budgets()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        WITH RECURSIVE up(name, ancestor, depth, path) AS (
            SELECT w.name, w.parent, 1, ARRAY[w.name]
              FROM @extschema@.bulkhead_workload w
            UNION ALL
            SELECT up.name, p.parent, up.depth + 1, up.path || p.name
              FROM up JOIN @extschema@.bulkhead_workload p ON p.name = up.ancestor
             WHERE NOT p.name = ANY (up.path) AND up.depth <= 4
        )
        SELECT up.name, up.ancestor = ANY (up.path) AS cycle,
               up.path || up.ancestor AS path
          FROM up
         WHERE up.ancestor = ANY (up.path) OR up.depth > 4
         ORDER BY up.ancestor = ANY (up.path) DESC, up.ancestor = up.name DESC, up.name
         LIMIT 1
    LOOP
        IF r.cycle THEN
            RAISE EXCEPTION 'parents of workload "%" form a cycle', r.name
                USING ERRCODE = 'check_violation',
                      DETAIL = format('Its path up: %s.', array_to_string(r.path, ' -> ')),
                      HINT = 'A budget cannot draw from its own subtree.';
        END IF;
        RAISE EXCEPTION 'workload "%" is more than 4 levels deep', r.name
            USING ERRCODE = 'check_violation',
                  DETAIL = format('Its path up: %s.', array_to_string(r.path, ' -> ')),
                  HINT = 'A tree of budgets has at most 4 levels.';
    END LOOP;

    FOR r IN
        SELECT p.name, p.max_running, sum(c.reserved) AS total,
               string_agg(format('"%s" (%s)', c.name, c.reserved), ', ' ORDER BY c.name) AS children
          FROM @extschema@.bulkhead_workload p
          JOIN @extschema@.bulkhead_workload c ON c.parent = p.name
         GROUP BY p.name, p.max_running
        HAVING sum(c.reserved) > p.max_running
         ORDER BY p.name
         LIMIT 1
    LOOP
        RAISE EXCEPTION 'reservations under budget "%" exceed its max_running', r.name
            USING ERRCODE = 'check_violation',
                  DETAIL = format('Its children''s reservations add up to %s: %s; its max_running is %s.',
                                  r.total, r.children, r.max_running),
                  HINT = 'Lower the children''s reserved, or raise the budget''s max_running, in one statement.';
    END LOOP;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION @extschema@.bulkhead_workload_check_budgets() FROM PUBLIC;

CREATE TRIGGER bulkhead_workload_budgets
    AFTER INSERT OR UPDATE ON @extschema@.bulkhead_workload
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_workload_check_budgets();

-- bulkhead_stats gains four last columns (parent, reserved, weight,
-- borrowed): the view and the function are made again, with the view's
-- grant, as 1.0 -> 1.1 did.
DROP VIEW @extschema@.bulkhead_stats;
DROP FUNCTION @extschema@.bulkhead_stats();

CREATE FUNCTION @extschema@.bulkhead_stats(
    OUT workload text,
    OUT mode text,
    OUT max_running integer,
    OUT max_queued integer,
    OUT running integer,
    OUT queued integer,
    OUT acquired bigint,
    OUT rejected_full bigint,
    OUT timed_out bigint,
    OUT cancelled bigint,
    OUT released bigint,
    OUT shadow_queued bigint,
    OUT shadow_rejected bigint,
    OUT peak_running integer,
    OUT peak_queued integer,
    OUT wait_time_total_ms double precision,
    OUT wait_time_max_ms double precision,
    OUT wait_p50_ms double precision,
    OUT wait_p95_ms double precision,
    OUT wait_p99_ms double precision,
    OUT hold_time_total_ms double precision,
    OUT hold_p50_ms double precision,
    OUT hold_p99_ms double precision,
    OUT stats_reset timestamptz,
    OUT deadlocks bigint,
    OUT current_limit integer,
    OUT parent text,
    OUT reserved integer,
    OUT weight integer,
    OUT borrowed integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_stats AS
    SELECT * FROM @extschema@.bulkhead_stats();

GRANT SELECT ON @extschema@.bulkhead_stats TO PUBLIC;

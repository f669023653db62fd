/* bulkhead--1.4--1.5.sql: update an installed bulkhead 1.4 to 1.5 */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.5'" to load this file. \quit

-- 1.5 (issue 48): importance within a queue, and a queued lock holder
-- served first.
--
-- A rule sets the importance of the waits of the transactions and
-- statements it classifies (NULL: the session's bulkhead.importance).  The
-- check raises 22023 for a value that is not low, normal or high.
CREATE FUNCTION @extschema@.bulkhead_check_importance(importance text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_check_importance'
LANGUAGE C STABLE PARALLEL SAFE;

ALTER TABLE @extschema@.bulkhead_rule
    ADD COLUMN importance text
        CONSTRAINT bulkhead_rule_importance_valid
        CHECK (@extschema@.bulkhead_check_importance(importance));

-- bulkhead_stats, bulkhead_activity and bulkhead_history gain their last
-- columns from functions of their own, as in 1.4: the views are replaced,
-- not dropped, so that the privileges an operator set on them (and views
-- of theirs on them) stay.
--
-- Per workload since stats_reset: the waits served ahead of their queue as
-- lock holders (boosts), and of those, the ones served over the limit
-- (boosts_borrowed: a borrowed permit, or memory at its floors).
CREATE FUNCTION @extschema@.bulkhead_priority_stats(
    OUT workload text,
    OUT boosts bigint,
    OUT boosts_borrowed bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_priority_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE VIEW @extschema@.bulkhead_stats AS
    SELECT s.*, l.settings,
           m.max_memory, m.memory_granted, m.memory_waiting, m.memory_waits,
           m.memory_shrunk, m.memory_wait_p99_ms,
           p.boosts, p.boosts_borrowed
      FROM @extschema@.bulkhead_stats() s
      LEFT JOIN @extschema@.bulkhead_lane_settings() l ON l.workload = s.workload
      LEFT JOIN @extschema@.bulkhead_memory_stats() m ON m.workload = s.workload
      LEFT JOIN @extschema@.bulkhead_priority_stats() p ON p.workload = s.workload;

-- Per permit held or awaited: its importance (a waiter's as aging has
-- raised it by now; a holder's as its wait carried it), whether it was
-- served (or is being served) ahead of its queue as a lock holder, and
-- whether it holds a permit borrowed over the limit
CREATE FUNCTION @extschema@.bulkhead_priority_activity(
    OUT pid integer,
    OUT workload text,
    OUT importance text,
    OUT boosted boolean,
    OUT borrowed boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_priority_activity'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE VIEW @extschema@.bulkhead_activity AS
    SELECT a.pid, a.workload,
           CASE WHEN m.waiting THEN 'waiting for memory' ELSE a.state END AS state,
           a.scope, a.since, a.wait_ms, a.moved_from, a.key,
           m.memory_requested, m.memory_granted,
           p.importance, p.boosted, p.borrowed
      FROM @extschema@.bulkhead_activity() a
      LEFT JOIN @extschema@.bulkhead_memory_activity() m
             ON m.pid = a.pid AND m.workload = a.workload AND a.state = 'running'
      LEFT JOIN @extschema@.bulkhead_priority_activity() p
             ON p.pid = a.pid AND p.workload = a.workload;

-- Per row of bulkhead_history: the boosts, as its other counts are
-- (summed per workload and interval: a workload deleted and made again in
-- an interval has two rows there)
CREATE FUNCTION @extschema@.bulkhead_history_boosts(
    OUT workload text,
    OUT interval_start timestamptz,
    OUT boosts bigint,
    OUT boosts_borrowed bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_history_boosts'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE VIEW @extschema@.bulkhead_history AS
    SELECT h.*, b.boosts, b.boosts_borrowed
      FROM @extschema@.bulkhead_history() h
      LEFT JOIN (SELECT workload, interval_start, sum(boosts)::bigint AS boosts,
                        sum(boosts_borrowed)::bigint AS boosts_borrowed
                   FROM @extschema@.bulkhead_history_boosts()
                  GROUP BY workload, interval_start) b
             ON b.workload = h.workload AND b.interval_start = h.interval_start
     ORDER BY h.interval_start, h.workload;

-- Issue 47: bulkhead_classify(query) gains memory_source, where its
-- memory_requested comes from: 'estimate', 'feedback' or 'limit'.
DROP FUNCTION @extschema@.bulkhead_classify(text);
CREATE FUNCTION @extschema@.bulkhead_classify(
    query text,
    OUT workload text,
    OUT source text,
    OUT rule_position integer,
    OUT memory_requested bigint,
    OUT memory_source text)
RETURNS record
AS 'MODULE_PATHNAME', 'bulkhead_classify_query'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- bulkhead_statements: per role (userid) and database (dbid) that ran the
-- statement too, appended; a role sees the queryid and the memory figures
-- of its own roles' rows only (all of them with pg_read_all_stats), NULL
-- in the others, as pg_stat_statements hides another role's queryid.  The
-- view is replaced (its privileges stay), then 1.4's function, which it
-- no longer uses, is dropped.
CREATE FUNCTION @extschema@.bulkhead_statements_by_role(
    OUT queryid bigint,
    OUT workload text,
    OUT calls bigint,
    OUT waits bigint,
    OUT wait_time_total_ms double precision,
    OUT wait_time_max_ms double precision,
    OUT rejected bigint,
    OUT timed_out bigint,
    OUT moved_in bigint,
    OUT max_memory_requested bigint,
    OUT shrunk bigint,
    OUT userid oid,
    OUT dbid oid)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_statements_by_role'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE VIEW @extschema@.bulkhead_statements AS
    SELECT * FROM @extschema@.bulkhead_statements_by_role();

DROP FUNCTION @extschema@.bulkhead_statements();

-- Issue 47: the functions bulkhead_stats and bulkhead_activity join are
-- planned for 100 rows (a workload or a backend each), not a function's
-- default 1000, so that reading the views asks for (almost) no memory: a
-- memory node requests what the plan's estimates say it uses.
ALTER FUNCTION @extschema@.bulkhead_stats() ROWS 100;
ALTER FUNCTION @extschema@.bulkhead_lane_settings() ROWS 100;
ALTER FUNCTION @extschema@.bulkhead_memory_stats() ROWS 100;
ALTER FUNCTION @extschema@.bulkhead_priority_stats() ROWS 100;
ALTER FUNCTION @extschema@.bulkhead_activity() ROWS 100;
ALTER FUNCTION @extschema@.bulkhead_memory_activity() ROWS 100;
ALTER FUNCTION @extschema@.bulkhead_priority_activity() ROWS 100;

-- 1.5 (issue 47): grant feedback.  bulkhead_statements gains, from a
-- function of its own joined by (queryid, workload), what the statement's
-- last run used (peak_used, bytes: its memory nodes and the executor's
-- memory beyond them), the runs in which a memory node spilled (spills),
-- and what its next run requests (memory_request, bytes) and from where
-- (memory_source: estimate, feedback or limit).  As pg_stat_statements, a
-- role sees these for the statements it ran (a member of
-- pg_read_all_stats, all); the view's other rows have them NULL.
CREATE FUNCTION @extschema@.bulkhead_statement_memory(
    OUT queryid bigint,
    OUT workload text,
    OUT peak_used bigint,
    OUT spills bigint,
    OUT memory_request bigint,
    OUT memory_source text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_statement_memory'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_statement_memory_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_statement_memory_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.bulkhead_statement_memory_reset() FROM PUBLIC;

CREATE OR REPLACE VIEW @extschema@.bulkhead_statements AS
    SELECT s.*, f.peak_used, f.spills, f.memory_request, f.memory_source
      FROM @extschema@.bulkhead_statements_by_role() s
      LEFT JOIN @extschema@.bulkhead_statement_memory() f
             ON f.queryid = s.queryid AND f.workload = s.workload;

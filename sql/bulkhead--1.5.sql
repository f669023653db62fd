/* bulkhead--1.5.sql: the SQL interface of bulkhead 1.5 (full install) */

\echo Use "CREATE EXTENSION bulkhead" to load this file. \quit

-- 1.3: the check of a workload's settings (lanes that cap them): raises
-- 22023 for a name a lane cannot cap or a value the setting refuses
-- (PostgreSQL's own message as detail); NULL passes.
CREATE FUNCTION @extschema@.bulkhead_check_settings(settings text[], workload text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_check_settings'
LANGUAGE C STABLE PARALLEL SAFE;

-- 1.4: the check of a workload's max_memory: raises 22023 for a value a
-- memory setting would refuse ('700MB', '2GB' and a number of kB are
-- taken), or one below 64 kB; NULL passes.
CREATE FUNCTION @extschema@.bulkhead_check_memory(max_memory text, workload text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_check_memory'
LANGUAGE C STABLE PARALLEL SAFE;

-- 1.5: a rule's importance, low, normal or high (22023 otherwise)
CREATE FUNCTION @extschema@.bulkhead_check_importance(importance text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_check_importance'
LANGUAGE C STABLE PARALLEL SAFE;

-- Workload definitions: the table is the configuration API.  The background
-- worker reads it in the database named by bulkhead.database; a committed
-- change reaches shared memory within a second.
CREATE TABLE @extschema@.bulkhead_workload (
    name              text     PRIMARY KEY
                      CONSTRAINT bulkhead_workload_name_length
                      CHECK (octet_length(name) BETWEEN 1 AND 63),
    max_running       integer  NOT NULL
                      -- 0 pauses the workload: nothing is granted, callers queue
                      CONSTRAINT bulkhead_workload_max_running_nonnegative
                      CHECK (max_running >= 0),
    max_queued        integer  NOT NULL DEFAULT 0
                      CONSTRAINT bulkhead_workload_max_queued_nonnegative
                      CHECK (max_queued >= 0),
    queue_timeout     interval NOT NULL DEFAULT '5s'
                      CONSTRAINT bulkhead_workload_queue_timeout_nonnegative
                      CHECK (queue_timeout >= '0'),
    statement_timeout interval
                      CONSTRAINT bulkhead_workload_statement_timeout_nonnegative
                      CHECK (statement_timeout >= '0'),
    lock_timeout      interval
                      CONSTRAINT bulkhead_workload_lock_timeout_nonnegative
                      CHECK (lock_timeout >= '0'),
    idle_timeout      interval
                      CONSTRAINT bulkhead_workload_idle_timeout_nonnegative
                      CHECK (idle_timeout >= '0'),
    roles             text[]
                      CONSTRAINT bulkhead_workload_roles_valid
                      CHECK (roles IS NULL OR
                             CASE WHEN array_ndims(roles) = 1
                                  THEN cardinality(roles) BETWEEN 1 AND 16 AND
                                       array_position(roles, NULL) IS NULL
                                  ELSE false END),
    mode              text     NOT NULL DEFAULT 'enforce'
                      CONSTRAINT bulkhead_workload_mode_valid
                      CHECK (mode IN ('enforce', 'shadow')),
    -- 1.1, last (an update adds them at the end): the worker sets the limit
    -- in force between min_running and max_running
    adaptive          boolean  NOT NULL DEFAULT false,
    min_running       integer  NOT NULL DEFAULT 1,
    -- min_running applies only to a workload that is not paused
    CONSTRAINT bulkhead_workload_min_running_valid
        CHECK (min_running >= 1 AND (max_running = 0 OR min_running <= max_running)),
    -- 1.2, last (an update adds them at the end): shared budgets.  A
    -- workload with children is a budget: its limit bounds its subtree.
    parent            text
                      CONSTRAINT bulkhead_workload_parent_fkey
                      REFERENCES @extschema@.bulkhead_workload (name)
                      ON UPDATE CASCADE,
    -- permits of the parent kept for this subtree alone, never lent
    reserved          integer  NOT NULL DEFAULT 0,
    -- share of the parent's unreserved permits when siblings compete
    weight            integer  NOT NULL DEFAULT 100
                      CONSTRAINT bulkhead_workload_weight_range
                      CHECK (weight BETWEEN 1 AND 10000),
    -- a paused workload (max_running 0) keeps its reservation, idle
    CONSTRAINT bulkhead_workload_reserved_valid
        CHECK (reserved >= 0 AND (max_running = 0 OR reserved <= max_running)),
    -- 1.2: runaway holders.  A permit held longer than max_hold is logged,
    -- its statement cancelled, its backend terminated, or it is moved (its
    -- work goes on, counted in move_to).
    max_hold          interval
                      CONSTRAINT bulkhead_workload_max_hold_positive
                      CHECK (max_hold > '0'),
    on_max_hold       text     NOT NULL DEFAULT 'log'
                      CONSTRAINT bulkhead_workload_on_max_hold_valid
                      CHECK (on_max_hold IN ('log', 'cancel', 'terminate', 'move')),
    move_to           text
                      CONSTRAINT bulkhead_workload_move_to_fkey
                      REFERENCES @extschema@.bulkhead_workload (name)
                      ON UPDATE CASCADE,
    -- move_to is what 'move' needs, and only 'move'; never the workload itself
    CONSTRAINT bulkhead_workload_move_to_valid
        CHECK ((on_max_hold = 'move') = (move_to IS NOT NULL) AND move_to <> name),
    -- 1.2: the warm hand-off.  NULL: waiters are served in arrival order.
    -- Set: the newest waiter is served first (its process ran last, warm in
    -- the caches), but a waiter that has waited max_bypass is passed over
    -- no more (those are served oldest first).
    max_bypass        interval
                      CONSTRAINT bulkhead_workload_max_bypass_positive
                      CHECK (max_bypass > '0'),
    -- 1.2: tenants.  Callers that name a key (the acquire functions' key,
    -- the setting bulkhead.key) are served key by key, the least served
    -- first; NULL: no cap on one key's permits or on its waiting callers.
    max_running_per_key integer
                      CONSTRAINT bulkhead_workload_max_running_per_key_positive
                      CHECK (max_running_per_key >= 1),
    max_queued_per_key integer
                      CONSTRAINT bulkhead_workload_max_queued_per_key_not_negative
                      CHECK (max_queued_per_key >= 0),
    -- 1.3: lanes.  'name=value' entries (as pg_db_role_setting.setconfig)
    -- for the settings that bound one statement's resources, capped for
    -- every statement run while a permit of the workload is held.
    settings          text[]
                      CONSTRAINT bulkhead_workload_settings_valid
                      CHECK (@extschema@.bulkhead_check_settings(settings, name)),
    -- 1.4: memory grants.  The memory the workload's running statements
    -- (a budget: its subtree's) may be granted at once, with units as a
    -- memory setting takes them; NULL: no limit.  A statement waits for
    -- its grant up to memory_timeout (NULL: queue_timeout), then runs with
    -- less (work_mem lowered), never an error.
    max_memory        text
                      CONSTRAINT bulkhead_workload_max_memory_valid
                      CHECK (@extschema@.bulkhead_check_memory(max_memory, name)),
    memory_timeout    interval
                      CONSTRAINT bulkhead_workload_memory_timeout_nonnegative
                      CHECK (memory_timeout >= '0')
);

COMMENT ON TABLE @extschema@.bulkhead_workload IS
    'bulkhead workloads: execution permits (max_running) and admission queue (max_queued) per name';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.bulkhead_workload', '');

-- Refuses changes outside bulkhead.database and beyond bulkhead.max_workloads,
-- and (1.2) changes that break the rules of the trees of budgets across
-- rows (no cycle of parents, at most 4 levels, the reservations of a
-- budget's children within its max_running, no move_to naming a budget);
-- tells the worker to reload when the transaction commits.
CREATE FUNCTION @extschema@.bulkhead_workload_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'bulkhead_workload_changed'
LANGUAGE C;

-- A trigger function runs with the privileges of whoever fires it: no one
-- but the extension's own tables has a use for it (the C function also
-- refuses to run on any other table).
REVOKE ALL ON FUNCTION @extschema@.bulkhead_workload_changed() FROM PUBLIC;

CREATE TRIGGER bulkhead_workload_check
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.bulkhead_workload
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_workload_changed();

CREATE TRIGGER bulkhead_workload_notify
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.bulkhead_workload
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_workload_changed();

-- Permits

-- timeout NULL: the workload's queue_timeout (the try_ forms: never wait).
-- key (1.2): a tenant, a customer; callers of one key are served in
-- arrival order, keys in turn, the least served first.  A NULL or empty key
-- is no key.  Every argument after the workload has a default, so that any
-- of them may be given by name: bulkhead_acquire('w', key => 'c').
CREATE FUNCTION @extschema@.bulkhead_acquire(workload text,
    timeout interval DEFAULT NULL, key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_acquire_xact(workload text,
    timeout interval DEFAULT NULL, key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_try_acquire(workload text,
    timeout interval DEFAULT '0', key text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_try_acquire_xact(workload text,
    timeout interval DEFAULT '0', key text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'bulkhead_try_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_release(workload text)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'bulkhead_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Monitoring

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
    OUT borrowed integer,
    OUT over_hold bigint,
    OUT moved_out bigint,
    OUT moved_in bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- 1.3: each workload's lane settings, which the view adds to its last
-- column (bulkhead_stats() keeps the columns of 1.2, so that an update
-- replaces the view, keeping its privileges, rather than dropping it)
CREATE FUNCTION @extschema@.bulkhead_lane_settings(
    OUT workload text,
    OUT settings text[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_lane_settings'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- 1.4: each workload's memory grants, which the view adds to its last
-- columns: max_memory as written, the bytes granted to its running
-- statements now (a budget: its subtree's), the statements waiting now,
-- and since stats_reset the statements that waited, that ran with less
-- than they requested, and the 99th percentile of the waits
CREATE FUNCTION @extschema@.bulkhead_memory_stats(
    OUT workload text,
    OUT max_memory text,
    OUT memory_granted bigint,
    OUT memory_waiting integer,
    OUT memory_waits bigint,
    OUT memory_shrunk bigint,
    OUT memory_wait_p99_ms double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_memory_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- 1.5: per workload since stats_reset: the waits served ahead of their
-- queue as lock holders (boosts), and of those, the ones served over the
-- limit (boosts_borrowed: a borrowed permit, or memory at its floors).
CREATE FUNCTION @extschema@.bulkhead_priority_stats(
    OUT workload text,
    OUT boosts bigint,
    OUT boosts_borrowed bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_priority_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_stats AS
    SELECT s.*, l.settings,
           m.max_memory, m.memory_granted, m.memory_waiting, m.memory_waits,
           m.memory_shrunk, m.memory_wait_p99_ms,
           p.boosts, p.boosts_borrowed
      FROM @extschema@.bulkhead_stats() s
      LEFT JOIN @extschema@.bulkhead_lane_settings() l ON l.workload = s.workload
      LEFT JOIN @extschema@.bulkhead_memory_stats() m ON m.workload = s.workload
      LEFT JOIN @extschema@.bulkhead_priority_stats() p ON p.workload = s.workload;

CREATE FUNCTION @extschema@.bulkhead_activity(
    OUT pid integer,
    OUT workload text,
    OUT state text,
    OUT scope text,
    OUT since timestamptz,
    OUT wait_ms double precision,
    OUT moved_from text,
    OUT key text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_activity'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- 1.4: each backend's memory grant: the workload its statements are
-- charged to (NULL: none, the server's limit only), what they requested
-- and were granted (bytes), and whether one waits for its grant
CREATE FUNCTION @extschema@.bulkhead_memory_activity(
    OUT pid integer,
    OUT workload text,
    OUT memory_requested bigint,
    OUT memory_granted bigint,
    OUT waiting boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_memory_activity'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- 1.5: per permit held or awaited: its importance (a waiter's as aging has
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

-- The row of the permit a backend's statements are charged to shows their
-- memory, and the state 'waiting for memory' while one waits for it
-- (1.5: and the permit's importance and boost)
CREATE VIEW @extschema@.bulkhead_activity AS
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

-- 1.4: the server's memory grants (bulkhead.max_memory), one row
CREATE FUNCTION @extschema@.bulkhead_memory(
    OUT max_memory text,
    OUT memory_granted bigint,
    OUT memory_waiting integer,
    OUT memory_waits bigint,
    OUT memory_shrunk bigint,
    OUT memory_wait_p99_ms double precision,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'bulkhead_memory'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_memory AS
    SELECT * FROM @extschema@.bulkhead_memory();

-- 1.2: the keys in use (holding or waiting), per workload.  Keys name
-- tenants: readable by pg_read_all_stats, as other sessions' queries are.
CREATE FUNCTION @extschema@.bulkhead_keys(
    OUT workload text,
    OUT key text,
    OUT running integer,
    OUT queued integer,
    OUT oldest_wait_ms double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_keys'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW @extschema@.bulkhead_keys AS
    SELECT * FROM @extschema@.bulkhead_keys();

REVOKE ALL ON FUNCTION @extschema@.bulkhead_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.bulkhead_keys() TO pg_read_all_stats;
GRANT SELECT ON @extschema@.bulkhead_keys TO pg_read_all_stats;

-- For a backend queued for a permit, the pids holding that workload's
-- permits; empty for any other backend.  With pg_blocking_pids, the whole
-- wait graph that deadlock detection searches.
CREATE FUNCTION @extschema@.bulkhead_blocking_pids(pid integer)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'bulkhead_blocking_pids'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.bulkhead_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_stats_reset_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.bulkhead_stats_reset(workload text)
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Cumulative statistics are reset by the workloads' administrators only.
REVOKE ALL ON FUNCTION @extschema@.bulkhead_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.bulkhead_stats_reset(text) FROM PUBLIC;

GRANT SELECT ON @extschema@.bulkhead_stats TO PUBLIC;
GRANT SELECT ON @extschema@.bulkhead_activity TO PUBLIC;
GRANT SELECT ON @extschema@.bulkhead_memory TO PUBLIC;

-- Classification rules: the first row in position order that matches a
-- session names the workload its transactions take, as bulkhead.workload
-- does (which wins over them).  NULL matches anything.
CREATE TABLE @extschema@.bulkhead_rule (
    position          integer  PRIMARY KEY,
    role              text
                      CONSTRAINT bulkhead_rule_role_length
                      CHECK (octet_length(role) BETWEEN 1 AND 63),
    database          text
                      CONSTRAINT bulkhead_rule_database_length
                      CHECK (octet_length(database) BETWEEN 1 AND 63),
    application_name  text
                      CONSTRAINT bulkhead_rule_application_name_length
                      CHECK (octet_length(application_name) BETWEEN 1 AND 63)
                      -- a LIKE pattern, escape character \ (chr(92)): it
                      -- cannot end in an escape that escapes nothing
                      CONSTRAINT bulkhead_rule_application_name_pattern
                      CHECK ((length(application_name) -
                              length(rtrim(application_name, chr(92)))) % 2 = 0),
    client_addr       inet,
    workload          text     NOT NULL
                      CONSTRAINT bulkhead_rule_workload_length
                      CHECK (octet_length(workload) BETWEEN 1 AND 63)
                      CONSTRAINT bulkhead_rule_workload_fkey
                      REFERENCES @extschema@.bulkhead_workload (name)
                      ON UPDATE CASCADE,
    -- 1.3: statement rules.  A rule with min_cost or command chooses the
    -- lane of a statement by its planned cost (the top plan node's
    -- total_cost) and its kind, among the sessions the columns above
    -- match; statement rules are matched before the session rules.
    min_cost          double precision
                      CONSTRAINT bulkhead_rule_min_cost_valid
                      CHECK (min_cost >= 0 AND min_cost <> 'NaN'),
    command           text[]
                      CONSTRAINT bulkhead_rule_command_valid
                      CHECK (command IS NULL OR
                             CASE WHEN array_ndims(command) = 1
                                  THEN cardinality(command) >= 1 AND
                                       array_position(command, NULL) IS NULL AND
                                       command <@ '{select,insert,update,delete,merge,utility}'::text[]
                                  ELSE false END),
    -- 1.5: the importance of the waits of the transactions and statements
    -- the rule classifies (NULL: the session's bulkhead.importance)
    importance        text
                      CONSTRAINT bulkhead_rule_importance_valid
                      CHECK (@extschema@.bulkhead_check_importance(importance))
);

COMMENT ON TABLE @extschema@.bulkhead_rule IS
    'bulkhead classification rules: sessions matched by role, database, application_name and client_addr take the permits of workload';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.bulkhead_rule', '');

-- Refuses changes outside bulkhead.database and beyond bulkhead.max_rules,
-- and tells the worker to reload when the transaction commits.
CREATE FUNCTION @extschema@.bulkhead_rule_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'bulkhead_rule_changed'
LANGUAGE C;

REVOKE ALL ON FUNCTION @extschema@.bulkhead_rule_changed() FROM PUBLIC;

CREATE TRIGGER bulkhead_rule_check
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.bulkhead_rule
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_rule_changed();

CREATE TRIGGER bulkhead_rule_notify
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.bulkhead_rule
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.bulkhead_rule_changed();

-- The workload the calling session's next transaction takes, and why:
-- source 'setting' (bulkhead.workload), 'rule' (rule_position), 'superuser'
-- (bulkhead.exempt_superuser) or 'none'.
CREATE FUNCTION @extschema@.bulkhead_classify(
    OUT workload text,
    OUT source text,
    OUT rule_position integer)
RETURNS record
AS 'MODULE_PATHNAME', 'bulkhead_classify'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- 1.3: the workload the calling session's next statement would run in if
-- it were query, and why (inside a transaction block that holds its
-- automatic permit, a query no statement rule matches stays there: source
-- 'transaction'), and (1.4) the memory it would request (bytes): the
-- query is planned, not run; (1.5) where that request comes from:
-- 'estimate' (the plan's estimates), 'feedback' (what earlier runs of the
-- query in that workload used), 'limit' (the most its nodes may use).
-- STRICT, as bulkhead_classify(pid): bulkhead_classify(NULL), which may
-- mean either, answers a row of NULLs.
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

-- The same for any backend, as it published it (superusers only).
CREATE FUNCTION @extschema@.bulkhead_classify(
    pid integer,
    OUT workload text,
    OUT source text,
    OUT rule_position integer)
RETURNS record
AS 'MODULE_PATHNAME', 'bulkhead_classify_pid'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- How many times any backend matched its session against the rules.
CREATE FUNCTION @extschema@.bulkhead_rule_evaluations()
RETURNS bigint
AS 'MODULE_PATHNAME', 'bulkhead_rule_evaluations'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- 1.4 (issue 42): what admission did.
--
-- bulkhead_history: a row per workload per interval (bulkhead.history_interval),
-- the last bulkhead.history_length intervals, oldest first: what happened
-- during the interval (counts), the p99 of the waits and holds that ended in
-- it, and the highest counts and memory granted it saw.
CREATE FUNCTION @extschema@.bulkhead_history(
    OUT workload text,
    OUT interval_start timestamptz,
    OUT interval_end timestamptz,
    OUT acquired bigint,
    OUT released bigint,
    OUT rejected_full bigint,
    OUT timed_out bigint,
    OUT cancelled bigint,
    OUT moved_in bigint,
    OUT moved_out bigint,
    OUT wait_p99_ms double precision,
    OUT hold_p99_ms double precision,
    OUT peak_running integer,
    OUT peak_queued integer,
    OUT peak_memory_granted bigint,
    OUT memory_waits bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'bulkhead_history'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- 1.5: per row of bulkhead_history: the boosts, as its other counts are
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

CREATE VIEW @extschema@.bulkhead_history AS
    SELECT h.*, b.boosts, b.boosts_borrowed
      FROM @extschema@.bulkhead_history() h
      LEFT JOIN (SELECT workload, interval_start, sum(boosts)::bigint AS boosts,
                        sum(boosts_borrowed)::bigint AS boosts_borrowed
                   FROM @extschema@.bulkhead_history_boosts()
                  GROUP BY workload, interval_start) b
             ON b.workload = h.workload AND b.interval_start = h.interval_start
     ORDER BY h.interval_start, h.workload;

-- bulkhead_statements: what admission did per (queryid, workload), while
-- bulkhead.track_statements is on; join pg_stat_statements on queryid for
-- the text.  1.5: per role (userid) and database (dbid) that ran the
-- statement too, appended; a role sees the queryid and the memory figures
-- of its own roles' rows only (all of them with pg_read_all_stats), NULL
-- in the others, as pg_stat_statements hides another role's queryid.
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

CREATE VIEW @extschema@.bulkhead_statements AS
    SELECT * FROM @extschema@.bulkhead_statements_by_role();

CREATE FUNCTION @extschema@.bulkhead_statements_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'bulkhead_statements_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- as bulkhead_stats: any role may read, superusers (and whom they grant it) reset
GRANT SELECT ON @extschema@.bulkhead_history TO PUBLIC;
GRANT SELECT ON @extschema@.bulkhead_statements TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.bulkhead_statements_reset() FROM PUBLIC;

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

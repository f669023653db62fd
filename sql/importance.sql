--
-- importance (1.5): who may set bulkhead.importance, bulkhead.aging_interval
-- (reload only), a rule's importance column, and the columns the views
-- gained (TAP 560 tests a connection's options and a waiter's aging)
--

-- the settings and their defaults
SHOW bulkhead.importance;
SHOW bulkhead.aging_interval;
-- aging is set for the server (postgresql.conf, ALTER SYSTEM), by reload
SET bulkhead.aging_interval = '1s';
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY sqlstate
ALTER SYSTEM SET bulkhead.aging_interval = 0;
\set VERBOSITY default
SET bulkhead.importance = urgent;
\echo :LAST_ERROR_SQLSTATE

-- a superuser sets any importance
SET bulkhead.importance = high;
SHOW bulkhead.importance;
RESET bulkhead.importance;

-- a plain role lowers its own, never raises it above what RESET gives it
CREATE ROLE regress_imp_plain LOGIN;
SET ROLE regress_imp_plain;
SET bulkhead.importance = low;
SHOW bulkhead.importance;
SET bulkhead.importance = normal;
SHOW bulkhead.importance;
SET bulkhead.importance = high;
\echo :LAST_ERROR_SQLSTATE
SHOW bulkhead.importance;
BEGIN;
SET LOCAL bulkhead.importance = high;
ROLLBACK;
SET bulkhead.importance = low;
RESET bulkhead.importance;
SHOW bulkhead.importance;
-- nor for itself in the catalogs, nor in a function's SET clause
ALTER ROLE regress_imp_plain SET bulkhead.importance = high;
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION pg_temp.imp_high() RETURNS text LANGUAGE sql
    SET bulkhead.importance = high AS $$SELECT current_setting('bulkhead.importance')$$;
\echo :LAST_ERROR_SQLSTATE
-- lowering its own stored value is allowed
ALTER ROLE regress_imp_plain SET bulkhead.importance = low;
-- but not removing it (the next session would start at normal), nor
-- storing more than low anywhere, as RESET ALL, per database, or DEFAULT
ALTER ROLE regress_imp_plain RESET bulkhead.importance;
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE regress_imp_plain RESET ALL;
\echo :LAST_ERROR_SQLSTATE
SELECT current_database() AS imp_db \gset
ALTER ROLE regress_imp_plain IN DATABASE :"imp_db" SET bulkhead.importance = normal;
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE regress_imp_plain SET bulkhead.importance TO DEFAULT;
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE regress_imp_plain IN DATABASE :"imp_db" SET bulkhead.importance = low;
ALTER ROLE regress_imp_plain IN DATABASE :"imp_db" RESET ALL;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
ALTER ROLE regress_imp_plain IN DATABASE :"imp_db" RESET ALL;
SELECT setconfig FROM pg_db_role_setting
 WHERE setrole = 'regress_imp_plain'::regrole;

-- a superuser's ALTER ROLE gives the role high at its next session; the
-- role may then go down and back up to it
SELECT current_user AS imp_superuser \gset
ALTER ROLE regress_imp_plain SET bulkhead.importance = high;
\c - regress_imp_plain
SHOW bulkhead.importance;
SET bulkhead.importance = low;
SET bulkhead.importance = normal;
SET bulkhead.importance = high;
SHOW bulkhead.importance;
RESET bulkhead.importance;
SHOW bulkhead.importance;
\c - :imp_superuser
ALTER ROLE regress_imp_plain RESET bulkhead.importance;

-- bulkhead_rule.importance: low, normal, high, or NULL (the session's)
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'bulkhead_rule'::regclass AND attnum > 0
   AND NOT attisdropped
 ORDER BY attnum;
INSERT INTO bulkhead_workload (name, max_running) VALUES ('imp_lane', 2);
INSERT INTO bulkhead_rule (position, role, workload, importance)
    VALUES (1, 'regress_imp_plain', 'imp_lane', 'urgent');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, role, workload, importance)
    VALUES (1, 'regress_imp_plain', 'imp_lane', '');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulkhead_rule (position, role, workload, importance)
    VALUES (1, 'regress_imp_plain', 'imp_lane', 'high'),
           (2, 'regress_imp_plain', 'imp_lane', NULL);
INSERT INTO bulkhead_rule (position, min_cost, workload, importance)
    VALUES (3, 1000000, 'imp_lane', 'low');
-- (case does not matter, as for the setting)
UPDATE bulkhead_rule SET importance = 'HIGH' WHERE position = 1;
UPDATE bulkhead_rule SET importance = 'highest' WHERE position = 1;
\echo :LAST_ERROR_SQLSTATE
SELECT position, importance FROM bulkhead_rule ORDER BY position;
SELECT bh_wait($$EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'imp_lane')$$);

-- the views' new columns
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'bulkhead_activity'::regclass
   AND attname IN ('importance', 'boosted', 'borrowed')
 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'bulkhead_stats'::regclass
   AND attname IN ('boosts', 'boosts_borrowed')
 ORDER BY attnum;
-- (the last columns, in this order)
SELECT array_agg(attname ORDER BY attnum DESC)
  FROM (SELECT attname, attnum FROM pg_attribute
         WHERE attrelid = 'bulkhead_activity'::regclass AND attnum > 0
         ORDER BY attnum DESC LIMIT 3) a;
SELECT array_agg(attname ORDER BY attnum DESC)
  FROM (SELECT attname, attnum FROM pg_attribute
         WHERE attrelid = 'bulkhead_stats'::regclass AND attnum > 0
         ORDER BY attnum DESC LIMIT 2) a;
-- a holder that waited for nothing: normal, neither boosted nor borrowing
SELECT bulkhead_acquire('imp_lane');
SELECT workload, state, importance, boosted, borrowed
  FROM bulkhead_activity WHERE pid = pg_backend_pid();
SELECT bulkhead_release('imp_lane');
SELECT workload, boosts, boosts_borrowed FROM bulkhead_stats
 WHERE workload = 'imp_lane';

-- clean up
DELETE FROM bulkhead_rule;
DELETE FROM bulkhead_workload WHERE name = 'imp_lane';
SELECT bh_wait($$NOT EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'imp_lane')$$);
DROP ROLE regress_imp_plain;

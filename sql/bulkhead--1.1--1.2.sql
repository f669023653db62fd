/* bulkhead--1.1--1.2.sql: update an installed bulkhead 1.1 to 1.2 */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.2'" to load this file. \quit

-- The trigger functions of the configuration tables are no one's to call:
-- a role that attached one to a table of its own could make every commit
-- of that table wake the worker for a reload (the C functions now also
-- refuse to run on any table but the extension's own).
REVOKE ALL ON FUNCTION @extschema@.bulkhead_workload_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.bulkhead_rule_changed() FROM PUBLIC;

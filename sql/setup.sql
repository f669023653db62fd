--
-- setup: install the extension and the helpers the other regress files use
--
CREATE EXTENSION bulkhead;

-- Poll a condition on shared memory: the worker applies committed changes of
-- bulkhead_workload asynchronously (within a second; the first load may wait
-- for the worker to connect to the freshly created test database).
CREATE FUNCTION bh_wait(cond text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    ok boolean;
BEGIN
    FOR i IN 1..600 LOOP
        EXECUTE 'SELECT (' || cond || ')' INTO ok;
        IF ok THEN
            RETURN 'ready';
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN 'timed out waiting for: ' || cond;
END
$$;

-- The functions and views of version 1.0
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args,
       p.provolatile, p.proparallel, p.proisstrict
  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'bulkhead'
 ORDER BY 1, 2;

SELECT c.relname, c.relkind
  FROM pg_class c JOIN pg_depend d ON d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'bulkhead'
 ORDER BY 1;

-- the table is dumped by pg_dump as configuration
SELECT extconfig::regclass[] FROM pg_extension WHERE extname = 'bulkhead';

-- GUCs
SHOW bulkhead.database;
SHOW bulkhead.max_workloads;
SHOW bulkhead.max_permits_per_backend;
SET bulkhead.max_workloads = 5;
\echo :LAST_ERROR_SQLSTATE
SET bulkhead.no_such_setting = 1;
\echo :LAST_ERROR_SQLSTATE

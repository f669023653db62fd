\set n random(1, 1000)
BEGIN;
SELECT bulkhead_acquire_xact('pgb_xact', '30s');
SELECT pg_sleep(0.002), :n;
END;

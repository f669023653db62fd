-- test/bench/pair_ns.sql: pair_ns(form, n) runs n acquire/release pairs of
-- one form in a PL/pgSQL loop and returns the nanoseconds per pair; the
-- procedure xact_pair_ns does the same for transaction-scoped pairs, each
-- ended by a COMMIT in the loop.  pair_sql(form, n) is the statement that
-- runs a form, whichever of the two it is.  The keyed forms (tenants, 1.2)
-- name the key 'k'.
CREATE FUNCTION pair_ns(form text, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    b boolean;
BEGIN
    t0 := clock_timestamp();
    IF form = 'empty loop' THEN
        FOR i IN 1..n LOOP
            b := true;
        END LOOP;
    ELSIF form = 'advisory, PERFORM' THEN
        FOR i IN 1..n LOOP
            PERFORM pg_advisory_lock(1);
            PERFORM pg_advisory_unlock(1);
        END LOOP;
    ELSIF form = 'bulkhead session, PERFORM' THEN
        FOR i IN 1..n LOOP
            PERFORM bulkhead_acquire('bench');
            PERFORM bulkhead_release('bench');
        END LOOP;
    ELSIF form = 'bulkhead session keyed, PERFORM' THEN
        FOR i IN 1..n LOOP
            PERFORM bulkhead_acquire('bench', NULL, 'k');
            PERFORM bulkhead_release('bench');
        END LOOP;
    ELSIF form = 'advisory try, expression' THEN
        FOR i IN 1..n LOOP
            b := pg_try_advisory_lock(1);
            b := pg_advisory_unlock(1);
        END LOOP;
    ELSIF form = 'bulkhead try, expression' THEN
        FOR i IN 1..n LOOP
            b := bulkhead_try_acquire('bench');
            b := bulkhead_release('bench') IS NULL;
        END LOOP;
    ELSIF form = 'bulkhead try keyed, expression' THEN
        FOR i IN 1..n LOOP
            b := bulkhead_try_acquire('bench', '0', 'k');
            b := bulkhead_release('bench') IS NULL;
        END LOOP;
    ELSE
        RAISE EXCEPTION 'unknown form %', form;
    END IF;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e9 / n;
END
$$;

CREATE PROCEDURE xact_pair_ns(form text, n int, INOUT ns float8) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    b boolean;
BEGIN
    IF form = 'empty loop, COMMIT' THEN
        FOR i IN 1..n LOOP
            b := true;
            COMMIT;
        END LOOP;
    ELSIF form = 'advisory xact, PERFORM + COMMIT' THEN
        FOR i IN 1..n LOOP
            PERFORM pg_advisory_xact_lock(1);
            COMMIT;
        END LOOP;
    ELSIF form = 'bulkhead xact, PERFORM + COMMIT' THEN
        FOR i IN 1..n LOOP
            PERFORM bulkhead_acquire_xact('bench');
            COMMIT;
        END LOOP;
    ELSIF form = 'bulkhead xact keyed, PERFORM + COMMIT' THEN
        FOR i IN 1..n LOOP
            PERFORM bulkhead_acquire_xact('bench', NULL, 'k');
            COMMIT;
        END LOOP;
    ELSIF form = 'advisory try xact, expression + COMMIT' THEN
        FOR i IN 1..n LOOP
            b := pg_try_advisory_xact_lock(1);
            COMMIT;
        END LOOP;
    ELSIF form = 'bulkhead try xact, expression + COMMIT' THEN
        FOR i IN 1..n LOOP
            b := bulkhead_try_acquire_xact('bench');
            COMMIT;
        END LOOP;
    ELSIF form = 'bulkhead try xact keyed, expression + COMMIT' THEN
        FOR i IN 1..n LOOP
            b := bulkhead_try_acquire_xact('bench', '0', 'k');
            COMMIT;
        END LOOP;
    ELSE
        RAISE EXCEPTION 'unknown form %', form;
    END IF;
    ns := extract(epoch FROM clock_timestamp() - t0) * 1e9 / n;
END
$$;

CREATE FUNCTION pair_sql(form text, n int) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN form LIKE '%COMMIT'
                THEN format('CALL xact_pair_ns(%L, %s, NULL)', form, n)
                ELSE format('SELECT pair_ns(%L, %s)', form, n) END
$$;

-- test/bench/pair_ns.sql: pair_ns(form, n) runs n acquire/release pairs of
-- one form in a PL/pgSQL loop and returns the nanoseconds per pair.
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
    ELSE
        RAISE EXCEPTION 'unknown form %', form;
    END IF;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e9 / n;
END
$$;


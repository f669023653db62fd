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


-- CPU time of this backend in ns (user + system, from /proc/self/stat; the
-- clock ticks at 100 Hz, so time a run of a second or more)
CREATE FUNCTION backend_cpu_ns() RETURNS float8 LANGUAGE sql AS $$
    SELECT (f[14]::float8 + f[15]::float8) * 1e7
      FROM regexp_split_to_array(split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ') AS s(f0),
           LATERAL (SELECT ARRAY['', ''] || f0) AS t(f)
$$;

-- pair_ns measured in CPU time of the backend rather than wall time: less
-- sensitive to what else runs on the machine
CREATE FUNCTION pair_cpu_ns(form text, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    c0 float8 := backend_cpu_ns();
BEGIN
    PERFORM pair_ns(form, n);
    RETURN (backend_cpu_ns() - c0) / n;
END
$$;

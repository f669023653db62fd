-- test/bench/diy_semaphore.sql: the do-it-yourself semaphore that
-- applications build today from advisory locks, as the benchmarks' baseline.
-- diy_acquire(key, slots, timeout) polls slots 1..slots with
-- pg_try_advisory_lock(key, slot), sleeps 1 ms between rounds, and returns
-- the slot it got (the caller unlocks it), or raises after the timeout.
-- With xact => true it takes transaction-level locks, released at commit.
-- Nothing orders the waiters: whoever polls first after a release wins.
CREATE FUNCTION diy_acquire(key int, slots int, timeout interval, xact boolean DEFAULT false)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + timeout;
    got boolean;
BEGIN
    LOOP
        FOR s IN 1..slots LOOP
            got := CASE WHEN xact THEN pg_try_advisory_xact_lock(key, s)
                        ELSE pg_try_advisory_lock(key, s) END;
            IF got THEN
                RETURN s;
            END IF;
        END LOOP;
        IF clock_timestamp() > deadline THEN
            RAISE EXCEPTION 'no semaphore slot within %', timeout;
        END IF;
        PERFORM pg_sleep(0.001);
    END LOOP;
END
$$;

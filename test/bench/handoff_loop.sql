-- test/bench/handoff_loop.sql: a workload of one permit and a loop that
-- takes it and gives it back until cancelled (then it returns what it holds
-- and the number of rounds).  Run by many backends at once, every grant is
-- a hand-off from a release to the head of the queue.
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('handoff', 1, 1000, '1h');

CREATE FUNCTION handoff_loop() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint := 0;
BEGIN
    BEGIN
        LOOP
            PERFORM bulkhead_acquire('handoff');
            PERFORM bulkhead_release('handoff');
            n := n + 1;
        END LOOP;
    EXCEPTION WHEN query_canceled THEN
        PERFORM bulkhead_release_all();
    END;
    RETURN n;
END
$$;

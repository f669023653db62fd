\set n random(1, 1000)
SELECT pg_sleep(0.002), :n;

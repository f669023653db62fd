"""sample.py DSN WORKLOAD STOPFILE: watch the server while a load runs.

Connected straight to the server (not through the proxy), every 2 ms until
STOPFILE exists (or 60 s at most), read bulkhead_stats.running and .queued,
the running rows of bulkhead_activity, and the number of other client
backends (the proxy's server connections); print the maxima as one line
"samples=N running=N activity=N queued=N backends=N".
"""

import os
import sys
import time

import psycopg

QUERY = """
SELECT (SELECT running FROM bulkhead_stats WHERE workload = %(w)s),
       (SELECT queued FROM bulkhead_stats WHERE workload = %(w)s),
       (SELECT count(*) FROM bulkhead_activity
         WHERE workload = %(w)s AND state = 'running'),
       (SELECT count(*) FROM pg_stat_activity
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid())
"""


def main():
    dsn, workload, stopfile = sys.argv[1:4]
    seen = {"samples": 0, "running": 0, "activity": 0, "queued": 0, "backends": 0}
    deadline = time.monotonic() + 60
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not os.path.exists(stopfile) and time.monotonic() < deadline:
            running, queued, activity, backends = conn.execute(
                QUERY, {"w": workload}, prepare=True).fetchone()
            seen["samples"] += 1
            seen["running"] = max(seen["running"], running or 0)
            seen["queued"] = max(seen["queued"], queued or 0)
            seen["activity"] = max(seen["activity"], activity)
            seen["backends"] = max(seen["backends"], backends)
            time.sleep(0.002)
    print(" ".join(f"{k}={v}" for k, v in seen.items()), flush=True)


if __name__ == "__main__":
    main()

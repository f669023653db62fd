#!/usr/bin/env bash
# test/bench/deadlock_check.sh: what one deadlock search costs, with HOLDERS
# backends holding a workload's permits and WAITERS queued for it.  Each
# waiter tests every deadlock_timeout (100 ms here) whether it must search
# the wait graph (src/deadlock/deadlock.c, "When the search runs"; the search is src/deadlock/waitgraph.c); each search logs,
# at DEBUG1, how many backends it read, how many lock waits it asked
# pg_blocking_pids about, and how long it took; this script collects those
# lines.  Two shapes: holders idle in their transactions (the cheap test
# sees a holder that can move: no waiter searches, the row shows 0), and
# holders each waiting for a row lock that one more backend holds (each
# holder costs a pg_blocking_pids call; the waiters share a few searches).
# No cycle: no check fails.  What the checks cost the rest of the cluster:
# test/bench/deadlock_load.sh.
#
#   bash test/bench/deadlock_check.sh [HOLDERS [WAITERS [SECONDS]]]
#                                      (as root; default 50 100 5)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

HOLDERS=${1:-50}
WAITERS=${2:-100}
SECS=${3:-5}
bench_quick && SECS=1

bench_prepare

cluster() {    # a fresh cluster for each shape
    bench_cluster_stop
    bench_cluster_start "max_connections = $((HOLDERS + WAITERS + 20))" "log_line_prefix = '%m [%p] '"
    bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
                   VALUES ('dlc', $HOLDERS, $WAITERS, '10min')" >/dev/null
    bench_psql -c "CREATE TABLE dlc_rows (id int PRIMARY KEY); INSERT INTO dlc_rows VALUES (1)" >/dev/null
    bench_wait_loaded dlc
}

# (psql runs as root, connecting as postgres: 150 runuser sessions at once
# can stall in PAM)
psql_bg() {    # psql_bg SQL: a client in the background, its pid in $pids
    "$BH_BINDIR/psql" -X -q -h "$BENCH_DIR" -p "$BENCH_PORT" -U postgres \
        -d postgres -c "$1" >/dev/null 2>>"$BENCH_DIR/clients.err" &
    pids+=("$!")
}

wait_for() {    # wait_for SQL: until it returns t (60 s at most)
    for _ in $(seq 600); do
        [ "$(bench_psql -tAc "$1")" = t ] && return 0
        sleep 0.1
    done
    tail -n 5 "$BENCH_DIR/clients.err" >&2
    bench_psql -c "SELECT running, queued FROM bulkhead_stats WHERE workload = 'dlc'" \
        -c "SELECT count(*), state, wait_event_type, wait_event, left(query, 50) FROM pg_stat_activity
            WHERE backend_type = 'client backend' GROUP BY 2, 3, 4, 5" >&2
    bh_die "timed out waiting for: $1"
}

shape() {    # shape idle|lock: one run, prints a row of the table
    local kind=$1 hold lines
    cluster
    pids=()
    if [ "$kind" = lock ]; then
        psql_bg "BEGIN; SELECT 1 FROM dlc_rows FOR UPDATE; SELECT pg_sleep($((SECS + 30)))"
        hold="SELECT 1 FROM dlc_rows FOR UPDATE"
    else
        hold="SELECT pg_sleep($((SECS + 30)))"
    fi
    for _ in $(seq "$HOLDERS"); do
        psql_bg "BEGIN; SELECT bulkhead_acquire_xact('dlc'); $hold"
    done
    wait_for "SELECT running = $HOLDERS FROM bulkhead_stats WHERE workload = 'dlc'"
    [ "$kind" = idle ] || wait_for "SELECT count(*) = $HOLDERS FROM pg_locks WHERE NOT granted"
    local from
    from=$(wc -l <"$BENCH_DIR/server.log")
    for _ in $(seq "$WAITERS"); do
        psql_bg "SET deadlock_timeout = '100ms'; SET log_min_messages = debug1; SELECT bulkhead_acquire_xact('dlc')"
    done
    wait_for "SELECT queued = $WAITERS FROM bulkhead_stats WHERE workload = 'dlc'"
    sleep "$SECS"
    lines=$(tail -n +"$from" "$BENCH_DIR/server.log" | sed -n 's/.*bulkhead deadlock check: \([0-9]*\) backends read, \([0-9]*\) lock waits asked about, \([0-9]*\) us.*/\1 \2 \3/p')
    bench_cluster_stop
    wait "${pids[@]}" 2>/dev/null || true
    local n read asked med p99 mean
    n=$(echo "$lines" | grep -c . || true)
    if [ "$n" -eq 0 ]; then echo "| $kind | 0 | | | | | |"; return; fi
    read=$(echo "$lines" | awk '{ s += $1 } END { printf "%.0f", s / NR }')
    asked=$(echo "$lines" | awk '{ s += $2 } END { printf "%.0f", s / NR }')
    mean=$(echo "$lines" | awk '{ s += $3 } END { printf "%.0f", s / NR }')
    med=$(echo "$lines" | awk '{ print $3 }' | sort -n | sed -n "$(((n + 1) / 2))p")
    p99=$(echo "$lines" | awk '{ print $3 }' | sort -n | sed -n "$(((n * 99 + 99) / 100))p")
    echo "| $kind | $n | $read | $asked | $med | $p99 | $mean |"
}

bench_header "Cost of one deadlock check ($HOLDERS holders, $WAITERS queued, ${SECS} s each)"
echo "Command: \`bash test/bench/deadlock_check.sh $HOLDERS $WAITERS $SECS\`. A search runs only when a waiter's cheap test fails, and searches twice only when the first pass finds a deadlock (never here)."
echo
echo "| holders | searches | backends read per check | pg_blocking_pids calls per check | median µs | p99 µs | mean µs |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in ${SHAPES:-idle lock}; do shape "$s"; done

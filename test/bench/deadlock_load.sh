#!/usr/bin/env bash
# test/bench/deadlock_load.sh: what permit waiters' deadlock checks cost the
# rest of the cluster.  An unrelated `pgbench -S` (scale 1, CLIENTS clients)
# runs alone, then beside WAITERS backends queued for a workload whose
# HOLDERS holders each wait for a row lock that one more session, outside
# the queue, holds (idle in its transaction).  Nothing in that wait graph
# ever changes and it has no cycle, so a waiter's check can only find
# nothing; before, each waiter searched it (pg_blocking_pids for each holder)
# every deadlock_timeout.  Runs with deadlock_timeout at 1 s (the default)
# and at 100 ms; alone and beside alternate, ROUNDS times, SECONDS each.
#
#   bash test/bench/deadlock_load.sh [SECONDS [ROUNDS [HOLDERS [WAITERS]]]]
#                                     (as root; default 15 3 50 500)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then SECS=${1:-1}; ROUNDS=${2:-1}; else SECS=${1:-15}; ROUNDS=${2:-3}; fi
HOLDERS=${3:-50}
WAITERS=${4:-500}
CLIENTS=4
if bench_quick; then HOLDERS=5 WAITERS=20; fi

bench_prepare

# (psql runs as root, connecting as postgres: hundreds of runuser sessions
# at once can stall in PAM)
psql_bg() {    # psql_bg SQL: a client of the queue, in the background
    PGAPPNAME=dl_queue "$BH_BINDIR/psql" -X -q -h "$BENCH_DIR" -p "$BENCH_PORT" -U postgres \
        -d postgres -c "$1" >/dev/null 2>>"$BENCH_DIR/clients.err" &
}

wait_for() {    # wait_for SQL: until it returns t (120 s at most)
    for _ in $(seq 1200); do
        [ "$(bench_psql -tAc "$1")" = t ] && return 0
        sleep 0.1
    done
    tail -n 5 "$BENCH_DIR/clients.err" >&2
    bh_die "timed out waiting for: $1"
}

queue_up() {    # queue_up queue|control: the holders, the row lock's owner and the waiters
    local acquire="SELECT bulkhead_acquire_xact('dl');" wait="SELECT bulkhead_acquire_xact('dl')"
    # control: the same backends in the same states, without the permits:
    # holders blocked on the row lock, and sessions asleep in a query
    [ "$1" = control ] && acquire="" wait="SELECT pg_sleep(3600)"
    psql_bg "BEGIN; SELECT 1 FROM dl_rows FOR UPDATE; SELECT pg_sleep(3600)"
    wait_for "SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
              WHERE a.application_name = 'dl_queue' AND l.locktype = 'transactionid' AND l.granted
                AND a.query LIKE '%pg_sleep%'"
    for _ in $(seq "$HOLDERS"); do
        psql_bg "BEGIN; $acquire SELECT 1 FROM dl_rows FOR UPDATE"
    done
    [ "$1" = queue ] && wait_for "SELECT running = $HOLDERS FROM bulkhead_stats WHERE workload = 'dl'"
    wait_for "SELECT count(*) = $HOLDERS FROM pg_locks WHERE NOT granted"
    for _ in $(seq "$WAITERS"); do
        psql_bg "$wait"
    done
    if [ "$1" = queue ]; then
        wait_for "SELECT queued = $WAITERS FROM bulkhead_stats WHERE workload = 'dl'"
    else
        wait_for "SELECT count(*) = $((WAITERS + 1)) FROM pg_stat_activity
                  WHERE application_name = 'dl_queue' AND wait_event = 'PgSleep'"
    fi
    # every waiter past its first deadlock_timeout
    sleep 3
}

queue_down() {
    bench_psql -c "SET client_min_messages = error" \
               -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                   WHERE application_name = 'dl_queue'" >/dev/null
    wait_for "SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'dl_queue'"
    wait_for "SELECT running = 0 AND queued = 0 FROM bulkhead_stats WHERE workload = 'dl'"
    wait
}

queue_ticks() {    # CPU time (clock ticks) the queue's backends used so far
    local pids
    pids=$(bench_psql -tAc "SELECT pid FROM pg_stat_activity WHERE application_name = 'dl_queue'")
    # shellcheck disable=SC2086  # one file per pid
    (cd /proc && cat $(printf '%s/stat ' $pids) 2>/dev/null) |
        awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}

# run alone|control|beside: one pgbench run; beside the queue (or the
# control backends), also appends to $BENCH_DIR/<series> "SEARCHES
# CPU_SHARE": the searches logged during the run and the share of one CPU
# that those backends used meanwhile
run() {
    local out from t0 ticks0 elapsed
    if [ "$1" = alone ]; then
        bench_pgbench -S -M prepared -c "$CLIENTS" -j 1 -T "$SECS"
        return
    fi
    if [ "$1" = beside ]; then queue_up queue; else queue_up control; fi
    from=$(wc -l <"$BENCH_DIR/server.log")
    ticks0=$(queue_ticks)
    t0=$(bh_now_us)
    out=$(bench_pgbench -S -M prepared -c "$CLIENTS" -j 1 -T "$SECS")
    elapsed=$(($(bh_now_us) - t0))
    echo "$(tail -n +"$from" "$BENCH_DIR/server.log" | grep -c 'bulkhead deadlock check: ' || true)" \
         "$(awk -v t="$(($(queue_ticks) - ticks0))" -v hz="$(getconf CLK_TCK)" -v us="$elapsed" \
                'BEGIN { printf "%.3f", t / hz / (us / 1e6) }')" >>"$BENCH_DIR/$1"
    queue_down
    echo "$out"
}

bench_header "Deadlock checks beside a pgbench -S ($WAITERS queued, $HOLDERS holders waiting for a row lock)"
echo "Command: \`bash test/bench/deadlock_load.sh $SECS $ROUNDS $HOLDERS $WAITERS\`; pgbench -S -M prepared -c $CLIENTS -j 1 -T $SECS, scale 1,"
echo "alone; beside $WAITERS backends queued for a workload of $HOLDERS permits whose holders each wait for a row lock"
echo "held by one more session (outside the queue, idle in its transaction); and beside the same backends without the queue"
echo "(the control: the $HOLDERS blocked on the row lock without permits, the $WAITERS asleep in pg_sleep), which is what the"
echo "target compares with: the cost of the queue itself, not of $((HOLDERS + WAITERS + 1)) more connections. Median of $ROUNDS alternating rounds." \
     "Clock source: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)."
targets=()
for dt in 1s 100ms; do
    bench_cluster_stop
    bench_cluster_start "max_connections = $((HOLDERS + WAITERS + CLIENTS + 30))" "deadlock_timeout = '$dt'" \
                        "log_line_prefix = '%m [%p] '" "log_min_messages = debug1"
    bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
                   VALUES ('dl', $HOLDERS, $WAITERS, '60min')" >/dev/null
    bench_psql -c "CREATE TABLE dl_rows (id int PRIMARY KEY); INSERT INTO dl_rows VALUES (1)" >/dev/null
    bench_wait_loaded dl
    runuser -u postgres -- "$BH_BINDIR/pgbench" -i -q -s 1 -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >/dev/null 2>&1 ||
        bh_die "pgbench -i failed"
    [ "$dt" = 1s ] && { echo; bench_settings | sed "s/deadlock_timeout = '1s'/deadlock_timeout = 1s, then 100ms/"; echo; \
        echo "| deadlock_timeout | series | TPS | p99 ms | TPS runs | searches per s | CPU used by the queue (share of one CPU) |"; \
        echo "|---|---|---:|---:|---|---:|---:|"; }
    : >"$BENCH_DIR/beside"
    : >"$BENCH_DIR/control"
    bench_alternate "$ROUNDS" run alone control beside
    searches=$(awk -v s="$SECS" '{ printf "%.1f\n", $1 / s }' "$BENCH_DIR/beside" | bench_median)
    cpu=$(awk '{ print $2 }' "$BENCH_DIR/beside" | bench_median)
    ccpu=$(awk '{ print $2 }' "$BENCH_DIR/control" | bench_median)
    echo "| $dt | alone | ${TPS[alone]} | ${P99[alone]} | ${RUNS_TPS[alone]} | | |"
    echo "| $dt | beside the same backends, no queue (control) | ${TPS[control]} | ${P99[control]} | ${RUNS_TPS[control]} | | $ccpu |"
    echo "| $dt | beside the queue | ${TPS[beside]} | ${P99[beside]} | ${RUNS_TPS[beside]} | $searches | $cpu |"
    ratio=$(bench_ratio "${TPS[beside]}" "${TPS[control]}")
    alone_ratio=$(bench_ratio "${TPS[beside]}" "${TPS[alone]}")
    bench_at_least "$ratio" 0.95 && met=0 || met=1
    targets+=("$(bench_target "deadlock_timeout $dt: pgbench -S beside $WAITERS queued backends and $HOLDERS lock-blocked holders runs at $ratio x its TPS beside the same backends without the queue (≥ 0.95; $alone_ratio x alone)" "$met")")
    bench_progress "deadlock_timeout $dt: ratio $ratio ($alone_ratio x alone); per run: $(tr '\n' ';' <"$BENCH_DIR/beside") (searches, CPU share)"
done
bench_cluster_stop
echo
for t in "${targets[@]}"; do echo "$t"; done

#!/usr/bin/env bash
# test/bench/wakeups.sh: what one hand-off costs the kernel.  N backends
# (5, 50) loop on a lock of one holder, so that every round is a hand-off
# from a release to a sleeping waiter: bulkhead's permit (B = 1, FIFO: the
# release sets the head waiter's latch) beside PostgreSQL's own
# heavyweight lock (pg_advisory_lock, whose waiters sleep in ProcSleep on
# their latch too).  Each loop also takes nextval of one sequence per
# round, the same in both, to count the rounds.  Over WINDOW seconds,
# `perf stat` counts on the server's CPU the system calls (all, and those
# of the latch: kill, epoll_wait, read; futex: the LWLocks' semaphores) and
# the context switches; the table gives them per round.
#
#   bash test/bench/wakeups.sh [WINDOW [ROUNDS]]   (as root; default 5 2)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

WINDOW=${1:-5}
ROUNDS=${2:-2}
SIZES=(5 50)
KINDS=(bulkhead advisory)
EVENTS=(raw_syscalls:sys_enter syscalls:sys_enter_kill syscalls:sys_enter_epoll_wait
        syscalls:sys_enter_read syscalls:sys_enter_futex context-switches)

# the server's CPU, or every CPU when the server is not pinned (cluster.sh)
PERF_CPUS=(-a)
[ ${#BENCH_SERVER_CPU[@]} -eq 0 ] || PERF_CPUS=(-C 0)
BH_PACKAGES+=(linux-perf)
bench_prepare
bench_cluster_start "max_connections = 80"
bench_psql <<'SQL'
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('wake', 1, 1000, '1h');
CREATE SEQUENCE rounds;
CREATE FUNCTION wake_loop(kind text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOOP
        IF kind = 'bulkhead' THEN
            PERFORM bulkhead_acquire('wake');
            PERFORM nextval('rounds');
            PERFORM bulkhead_release('wake');
        ELSE
            PERFORM pg_advisory_lock(42);
            PERFORM nextval('rounds');
            PERFORM pg_advisory_unlock(42);
        END IF;
    END LOOP;
EXCEPTION WHEN query_canceled THEN
    PERFORM bulkhead_release_all();
    PERFORM pg_advisory_unlock_all();
END
$$;
SQL
bench_wait_loaded wake

# run KIND/N: "ROUNDS_PER_S EVENT_PER_ROUND..." over one window
run() {
    local kind=${1%/*} n=${1#*/} pgb script i r0 r1 t0 t1
    script=$(printf '\\set x 1\nSELECT wake_loop(%s);\n' "'$kind'" | bench_pgbench_script "wake-$kind")
    "${BENCH_CLIENT_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/pgbench" -n -h "$BENCH_DIR" -p "$BENCH_PORT" \
        -c "$n" -j 2 -t 1 -f "$script" postgres >"$BENCH_DIR/wake.log" 2>&1 &
    pgb=$!
    for i in $(seq 300); do
        [ "$(bench_psql -tAc "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT wake_loop%'")" -eq "$n" ] && break
        sleep 0.1
    done
    [ "$i" -lt 300 ] || bh_die "the $n loops did not start"
    sleep 1
    r0=$(bench_psql -tAc "SELECT last_value FROM rounds") t0=$(bh_now_us)
    perf stat -x, "${PERF_CPUS[@]}" -o "$BENCH_DIR/perf.csv" \
        -e "$(IFS=,; echo "${EVENTS[*]}")" -- sleep "$WINDOW" >/dev/null 2>&1 ||
        bh_die "perf stat failed"
    r1=$(bench_psql -tAc "SELECT last_value FROM rounds") t1=$(bh_now_us)
    bench_psql -tAc "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'SELECT wake_loop%'" >/dev/null
    wait "$pgb" || { tail -n 5 "$BENCH_DIR/wake.log" >&2; bh_die "pgbench of the $n loops failed"; }
    awk -F, -v n="$((r1 - r0))" -v us="$((t1 - t0))" '
        NF > 3 && $1 ~ /^[0-9]+$/ { c[++k] = $1 }
        END { printf "%.0f", n / (us / 1e6); for (i = 1; i <= k; i++) printf " %.2f", c[i] / n; print "" }' "$BENCH_DIR/perf.csv"
}

declare -A runs
for ((r = 1; r <= ROUNDS; r++)); do
    for k in "${KINDS[@]}"; do
        for n in "${SIZES[@]}"; do
            out=$(run "$k/$n")
            bench_progress "round $r/$ROUNDS, $k, $n backends: $out"
            runs[$k/$n]+="$out"$'\n'
        done
    done
done

# the median of the rounds, column by column
median_row() {
    local col cols
    cols=$(head -n 1 <<<"$1" | awk '{ print NF }')
    for ((col = 1; col <= cols; col++)); do
        printf ' %s |' "$(awk -v c="$col" 'NF { print $c }' <<<"$1" | bench_median)"
    done
}

bench_header "Wake-ups: what one hand-off costs the kernel, bulkhead's permit beside PostgreSQL's advisory lock (${WINDOW} s windows, median of $ROUNDS rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/wakeups.sh $WINDOW $ROUNDS\`. N backends loop on a lock of one holder, each round taking it, \`nextval\` of one sequence (to count the rounds) and giving it back:" \
     "bulkhead: \`bulkhead_acquire\`/\`bulkhead_release\` of a workload of B = 1 (FIFO); advisory: \`pg_advisory_lock(42)\`/\`pg_advisory_unlock(42)\` (PostgreSQL's lock manager; its waiters sleep on their latch in ProcSleep)." \
     "Per round, counted by \`perf stat\` on the server's CPU over the window: system calls (all; kill, epoll_wait and read: a latch set by another process and waited for; futex: LWLock waits) and context switches."
echo
echo "| lock | backends | rounds/s | syscalls | kill | epoll_wait | read | futex | context switches |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for k in "${KINDS[@]}"; do
    for n in "${SIZES[@]}"; do echo "| $k | $n |$(median_row "${runs[$k/$n]}")"; done
done
echo

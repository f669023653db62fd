#!/usr/bin/env bash
# test/bench/profile.sh (scenarios 3 and 4, explained): where the CPU goes.
# Each run is one pgbench run under a system-wide `perf record -e cpu-clock`
# (a software clock: this kind of virtual machine has no hardware counters),
# and the samples are turned into CPU microseconds per transaction, by
# process and by code: the server's own code, the kernel on its behalf,
# bulkhead.so, pgbench, and the idle loop.
#   overload:  tpcb-like at scale 1, ungated at 2 clients (the peak), through
#              bulkhead.workload with B = PERMITS at 128 clients, and ungated
#              at 128 clients;
#   contended: the three statements of contended.sh (SELECT 1 as the work),
#              ungated at 64 clients, and bulkhead (B = 4) at 4 clients (no
#              queue) and at 64 clients;
#   hand-off:  the loops of handoff.sh with 5 and with 500 backends queued
#              on one permit (per grant rather than per transaction);
#   PgBouncer: tpcb-like at 128 clients through PgBouncer (transaction
#              pooling, a pool of 2), ungated behind it.
# Each row also counts the context switches per transaction (the whole
# machine's, from /proc/stat, over the sampled seconds).
#
#   bash test/bench/profile.sh [PERMITS [SECONDS]]   (as root; default 2 10)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=pgbouncer.sh
. "$here/pgbouncer.sh"

PERMITS=${1:-2}
if bench_quick; then SECS=${2:-1}; else SECS=${2:-10}; fi
# the clients of the overload rows; the smoke run's 32 connect well within
# its short run (128 would take it again, longer: see profile())
if bench_quick; then MANY=32; else MANY=128; fi
HZ=999

BH_PACKAGES+=(linux-perf pgbouncer)
bench_prepare
bench_cluster_start "max_connections = 520"
bench_tpcb_setup 1 "$PERMITS"
bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
               VALUES ('w', 4, 1000, '60s')"
bench_psql <"$here/handoff_loop.sql"
bench_wait_loaded w
bench_wait_loaded handoff
handoff_script=$(printf '\\set x 1\nSELECT handoff_loop();\n' | bench_pgbench_script handoff)
ungated3=$(printf '\\set x 1\nSELECT 1;\nSELECT 1;\nSELECT 1;\n' | bench_pgbench_script ungated3)
bulkhead3=$(printf "\\\\set x 1\nSELECT bulkhead_acquire('w');\nSELECT 1;\nSELECT bulkhead_release('w');\n" |
    bench_pgbench_script bulkhead3)

# perf_row LABEL RATE_SHOWN RATE PERF_DATA SWITCHES: one table row.  The
# samples, by process name and shared object, become CPU microseconds per
# transaction: each category's share of the samples times the CPUs is CPU
# seconds per second, divided by RATE (transactions per second over the
# sampling window, which holds perf's own start and stop besides the
# sampled seconds).  SWITCHES: the machine's context switches per second
# over that window.
perf_row() {
    perf report -i "$4" --no-children --sort comm,dso -g none -q -n 2>/dev/null |
        awk -v rate="$3" -v ncpu="$(nproc)" -v label="$1" -v shown="$2" -v cs="$5" '
            { n = $2; comm = $3; dso = $4; total += n
              if (comm == "swapper") idle += n
              else if (comm == "pgbench") client += n
              else if (comm == "pgbouncer") pooler += n
              else if (comm == "postgres" && dso == "bulkhead.so") bh += n
              else if (comm == "postgres" && dso == "[kernel.kallsyms]") kern += n
              else if (comm == "postgres") user += n
              else other += n }
            function us(n) { return sprintf("%.0f", n / total * ncpu * 1e6 / rate) }
            END { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f |\n", label, shown,
                         us(user), us(kern), us(bh), us(pooler), us(client), us(idle), us(other),
                         cs / rate }'
    rm -f "$4"
}

# sample SECONDS: perf record over the whole machine; sets t0 and t1 (the
# window) and cs (context switches per second in it)
sample() {
    local c0 c1
    c0=$(bench_switches)
    t0=$EPOCHREALTIME
    perf record -q -a -e cpu-clock -F "$HZ" -o "$BENCH_DIR/perf.data" -- sleep "$1" >/dev/null 2>&1
    t1=$EPOCHREALTIME
    c1=$(bench_switches)
    cs=$(awk -v n="$((c1 - c0))" -v a="$t0" -v b="$t1" 'BEGIN { print n / (b - a) }')
}

# profile LABEL PGBENCH_ARGS...: one row for a pgbench run of SECS + 3
# seconds; perf samples SECS of them, from half a second after the last of
# its connections is made, and pgbench's per-transaction log tells how many
# ended meanwhile.  With -h and -p in PGBENCH_ARGS (PgBouncer's address),
# pgbench's connections are counted at that port instead of in the server.  pgbench's -T clock runs while it connects (see
# bench_run_length in measure.sh): if connecting leaves too little of the run
# for the samples (a slow machine), the run is made again, longer by twice
# the time connecting took.
profile() {
    local label=$1 data="$BENCH_DIR/perf.data" logs="$BENCH_DIR/profile-log" pgb t0 t1 tx cs
    local clients=1 prev arg secs=$((SECS + 3)) start conn i port='' connected
    shift
    for arg in "$@"; do
        case ${prev:-} in -c) clients=$arg ;; -p) port=$arg ;; esac
        prev=$arg
    done
    while :; do
        bench_tpcb_reset
        rm -rf "$logs" && mkdir "$logs" && chown postgres "$logs"
        start=$EPOCHREALTIME
        (cd "$logs" && "${BENCH_CLIENT_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/pgbench" -n \
            -h "$BENCH_DIR" -p "$BENCH_PORT" -j 2 -T "$secs" -l --log-prefix="$logs/lat" "$@" postgres \
            >"$logs/out" 2>&1) &
        pgb=$!
        for i in $(seq 1200); do
            if [ -n "$port" ]; then
                connected=$(ss -Htn state established "dport = :$port" | wc -l)
            else
                connected=$(bench_psql -tAc "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")
            fi
            [ "$connected" -ge "$clients" ] && break
            kill -0 "$pgb" 2>/dev/null || break
            sleep 0.1
        done
        conn=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
        # the samples need 0.5 s, SECS, and about 1 s for perf to start and stop
        if awk -v c="$conn" -v s="$SECS" -v t="$secs" 'BEGIN { exit !(c + 0.5 + s + 1 <= t) }'; then
            break
        fi
        wait "$pgb" || true
        [ "$i" -lt 1200 ] || bh_die "pgbench did not connect its $clients clients in 120 s: $*"
        secs=$(awk -v c="$conn" -v t="$secs" 'BEGIN { printf "%d", t + 2 * c + 1 }')
        bench_progress "connecting $clients clients took $conn s of the run: again, with -T $secs"
    done
    sleep 0.5
    sample "$SECS"
    wait "$pgb" || { tail -n 5 "$logs/out" >&2; bh_die "pgbench failed: $*"; }
    # log columns 5 and 6: when the transaction ended, in s and us
    tx=$(cat "$logs"/lat.* | awk -v a="$t0" -v b="$t1" '{ t = $5 + $6 / 1e6 } t >= a && t < b { n++ } END { print n + 0 }')
    [ "$tx" -gt 0 ] || bh_die "no transaction ended under perf: $*"
    perf_row "$label" "$(awk '/^tps = / { printf "%.0f", $3 }' "$logs/out")" \
        "$(awk -v n="$tx" -v a="$t0" -v b="$t1" 'BEGIN { print n / (b - a) }')" "$data" "$cs"
}

# profile_handoff N: one table row for N backends in a hand-off loop on one
# permit (the loop of handoff.sh); per grant instead of per transaction
profile_handoff() {
    local n=$1 data="$BENCH_DIR/perf.data" pgb a0 a1 i t0 t1 cs
    "${BENCH_CLIENT_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/pgbench" -n -h "$BENCH_DIR" -p "$BENCH_PORT" \
        -c "$n" -j 2 -t 1 -f "$handoff_script" postgres >"$BENCH_DIR/handoff.out" 2>&1 &
    pgb=$!
    for i in $(seq 600); do
        [ "$(bench_psql -tAc "SELECT count(*) FROM bulkhead_activity WHERE workload = 'handoff'")" -ge $((n - 3)) ] && break
        sleep 0.1
    done
    a0=$(bench_psql -tAc "SELECT acquired FROM bulkhead_stats WHERE workload = 'handoff'")
    sample "$SECS"
    a1=$(bench_psql -tAc "SELECT acquired FROM bulkhead_stats WHERE workload = 'handoff'")
    bench_psql -tAc "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'SELECT handoff_loop%'" >/dev/null
    wait "$pgb" || { tail -n 5 "$BENCH_DIR/handoff.out" >&2; bh_die "hand-off loops failed"; }
    perf_row "hand-off: $n backends queued on B=1 (per grant)" \
        "$(awk -v n="$((a1 - a0))" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')" \
        "$(awk -v n="$((a1 - a0))" -v a="$t0" -v b="$t1" 'BEGIN { print n / (b - a) }')" "$data" "$cs"
}

bench_header "Where the CPU goes (perf, ${SECS} s per run)"
bench_settings
echo
echo "Command: \`bash test/bench/profile.sh $PERMITS $SECS\`: \`perf record -a -e cpu-clock -F $HZ\` for $SECS s in the middle of each pgbench run (-j 2), once its connections are made; the samples, divided by the transactions committed meanwhile, are CPU microseconds per transaction; the machine's context switches (/proc/stat) over the same seconds, per transaction."
echo
echo "| run | TPS (grants/s for the hand-off) | server code µs/tx | kernel for the server µs/tx | bulkhead.so µs/tx | PgBouncer µs/tx | pgbench µs/tx | idle µs/tx | other µs/tx | context switches /tx |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
# full CMD...: CMD, except in the smoke run, which keeps one row of each kind
full() { bench_quick || "$@"; }
full profile "overload: ungated, 2 clients" -M simple -c 2 -b tpcb-like
profile "overload: bulkhead.workload B=$PERMITS, $MANY clients" -M simple -c "$MANY" -U gated -b tpcb-like
full profile "overload: ungated, $MANY clients" -M simple -c "$MANY" -b tpcb-like
if ! bench_quick; then
    bench_pgbouncer_start 2
    profile "overload: PgBouncer (pool 2), $MANY clients" -M simple -c "$MANY" -h 127.0.0.1 -p "$PGB_PORT" -b tpcb-like
    bench_pgbouncer_stop
fi
full profile "contended: ungated SELECT 1 ×3, 64 clients" -M prepared -c 64 -f "$ungated3"
full profile "contended: bulkhead B=4, 4 clients (no queue)" -M prepared -c 4 -f "$bulkhead3"
profile "contended: bulkhead B=4, 64 clients" -M prepared -c 64 -f "$bulkhead3"
profile_handoff 5
full profile_handoff 500
echo
echo "(Server code: the postgres binary and the libraries it calls, bulkhead.so apart. Idle: the CPUs had nothing to run.)"

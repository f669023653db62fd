#!/usr/bin/env bash
# test/bench/deploy.sh: what to deploy in front of many clients.  pgbench's
# built-in write transaction (tpcb-like, scale 1, -M simple) at 128 and at
# 512 clients, each way:
#   ungated     straight to the server (and at 2 clients: the peak)
#   pgb2        PgBouncer (transaction pooling) with a hand-tuned pool of 2,
#               nothing behind it
#   bulkhead    straight to the server as the role "gated", whose
#               bulkhead.workload is 'tpcb' (transparent admission, B = PERMITS)
#   pgbN+bh     PgBouncer with a pool of N (16, 32, 64) in front of the same
#               role: the pooler bounds the connections, bulkhead the work
# The server and PgBouncer run on CPU 0, pgbench on CPU 1 (cluster.sh).
# The series alternate, SECONDS each, ROUNDS rounds; figures are medians.
# Each run also counts the machine's context switches per transaction.
#
#   bash test/bench/deploy.sh [PERMITS [SECONDS [ROUNDS]]]   (as root;
#   defaults 3, 15, 2)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=pgbouncer.sh
. "$here/pgbouncer.sh"

PERMITS=${1:-3}
SECS=${2:-15}
ROUNDS=${3:-2}
CLIENTS=(128 512)
POOLS=(16 32 64)
if bench_quick; then SECS=1; ROUNDS=1; CLIENTS=(16); POOLS=(4); fi
SERIES=(ungated pgb2 bulkhead)
for p in "${POOLS[@]}"; do SERIES+=("pgb$p+bh"); done

BH_PACKAGES+=(pgbouncer)
bench_prepare
bench_cluster_start "max_connections = 600"
bench_tpcb_setup 1 "$PERMITS"
bench_psql -c "SELECT bulkhead_stats_reset('tpcb')" >/dev/null

# the commits counted in the database (pgbench's transactions, and a few
# of ours)
commits() { bench_psql -tAc "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'"; }

# bench_alternate calls run in a subshell: the switches go to a file
SWITCH_LOG=$BENCH_DIR/switches
: >"$SWITCH_LOG"
run() {    # run SERIES/CLIENTS: one pgbench run; prints "TPS P99_MS FAILED"
    local series=${1%/*} clients=${1#*/} c0 c1 x0 x1 out pool
    local -a args=(-M simple -c "$clients" -j 2 -T "$SECS" -b tpcb-like)
    bench_tpcb_reset
    case $series in
        pgb*)
            pool=${series#pgb}
            pool=${pool%+bh}
            bench_pgbouncer_start "$pool"
            args+=(-h 127.0.0.1 -p "$PGB_PORT")
            ;;
    esac
    case $series in *bh | bulkhead) args+=(-U gated) ;; esac
    c0=$(bench_switches) x0=$(commits)
    out=$(bench_pgbench "${args[@]}") || { bench_pgbouncer_stop; exit 1; }
    bench_pgbouncer_stop
    c1=$(bench_switches)
    sleep 0.5    # the backends that ended report their commits
    x1=$(commits)
    # over the whole run (connections made and closed included)
    echo "$1 $(awk -v n="$((c1 - c0))" -v x="$((x1 - x0))" 'BEGIN { if (x > 0) printf "%.1f", n / x; else print "nan" }')" >>"$SWITCH_LOG"
    echo "$out"
}

keys=("ungated/2")
for c in "${CLIENTS[@]}"; do keys+=("${SERIES[@]/%//$c}"); done
bench_alternate "$ROUNDS" run "${keys[@]}"
stats=$(bench_psql -tAc "SELECT format('%s acquired, %s released, %s rejected, %s timed out, peak_running %s, peak_queued %s', acquired, released, rejected_full, timed_out, peak_running, peak_queued) FROM bulkhead_stats WHERE workload = 'tpcb'")

bench_header "Deploying in front of many clients: tpcb-like at scale 1 (pgbench -M simple, ${SECS} s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Machine: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)."
echo
echo "Command: \`bash test/bench/deploy.sh $PERMITS $SECS $ROUNDS\`. PgBouncer $(/usr/sbin/pgbouncer --version | head -n 1 | awk '{ print $2 }'), transaction pooling, on CPU 0 beside the server."
echo "Series: ungated (\`-b tpcb-like\`); pgb2 (PgBouncer, pool 2, ungated behind it); bulkhead (\`-b tpcb-like\` as a role with \`bulkhead.workload = 'tpcb'\`, B = $PERMITS);" \
     "pgbN+bh (PgBouncer with a pool of N, the same role behind it). Context switches: the whole machine's over the run (connecting included), per transaction committed (\`pg_stat_database.xact_commit\`)."
echo
echo "| clients | series | TPS | runs | p99 ms | context switches /tx | failed |"
echo "|---:|---|---:|---|---:|---:|---|"
for k in "${keys[@]}"; do
    cs=$(awk -v k="$k" '$1 == k { print $2 }' "$SWITCH_LOG" | bench_median)
    echo "| ${k#*/} | ${k%/*} | ${TPS[$k]} | ${RUNS_TPS[$k]} | ${P99[$k]} | $cs | ${FAILED[$k]} |"
done
echo
echo "bulkhead_stats of the workload over these runs: $stats."
echo
peak=${TPS[ungated/2]}
failed=0
for k in "${keys[@]}"; do failed=$((failed + FAILED[$k])); done
for c in "${CLIENTS[@]}"; do
    best='' best_tps=0
    for s in "${SERIES[@]}"; do
        if [ "${TPS[$s/$c]}" -gt "$best_tps" ]; then best=$s best_tps=${TPS[$s/$c]}; fi
    done
    line="- $c clients: the best is $best ($best_tps TPS, $(bench_ratio "$best_tps" "$peak")× the ungated peak at 2 clients);"
    for s in "${SERIES[@]}"; do
        [ "$s" = pgb2 ] && continue
        line+=" $s $(bench_ratio "${TPS[$s/$c]}" "${TPS[pgb2/$c]}")×,"
    done
    echo "${line%,} PgBouncer pool 2's TPS."
done
echo
bench_target "no failed transaction ($failed failed)" "$([ "$failed" = 0 ] && echo 0 || echo 1)"

#!/usr/bin/env bash
# test/bench/deploy.sh: what to deploy in front of many clients.  pgbench's
# built-in write transaction (tpcb-like, scale 1, -M simple) at 128 and at
# 512 clients, each way:
#   ungated     straight to the server (and at 2 clients: the peak)
#   pgb2        PgBouncer (transaction pooling) with a hand-tuned pool of 2,
#               nothing behind it
#   bulkhead    straight to the server as the role "gated", whose
#               bulkhead.workload is 'tpcb' (transparent admission, B = PERMITS)
#   warm        the same with the warm hand-off (the workload's max_bypass =
#               WARM: the newest waiter first, none passed over for longer)
#   pgbN+bh     PgBouncer with a pool of N (16, 32, 64) in front of the same
#               role: the pooler bounds the connections, bulkhead the work
#   pgb32+warm  PgBouncer with a pool of 32 in front, the warm hand-off behind
# The server and PgBouncer run on CPU 0, pgbench on CPU 1 (cluster.sh).
# The series alternate, SECONDS each, ROUNDS rounds; figures are medians.
# Each run also counts the machine's context switches per transaction, and
# what the clients got: the longest latency, the fewest transactions a
# client ended (the fairness of the hand-off).  Each run lasts WARMUP +
# SECONDS, and its figures count the transactions of the last SECONDS only
# (BENCH_STEADY, measure.sh): 512 fresh connections take pgbench about 6 s
# to open here, and their backends as long again to warm up (catalog
# caches, the first classification), which a run of 15 s would count as
# the setup's throughput.
#
#   bash test/bench/deploy.sh [PERMITS [SECONDS [ROUNDS [WARM [WARMUP]]]]]
#   (as root; defaults 3, 15, 2, 1s, 15)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=pgbouncer.sh
. "$here/pgbouncer.sh"

PERMITS=${1:-3}
SECS=${2:-15}
ROUNDS=${3:-2}
WARM=${4:-1s}
WARMUP=${5:-15}
CLIENTS=(128 512)
POOLS=(16 32 64)
WARM_POOL=32
if bench_quick; then SECS=1; ROUNDS=1; CLIENTS=(16); POOLS=(4); WARM_POOL=4; fi
SERIES=(ungated pgb2 bulkhead warm)
for p in "${POOLS[@]}"; do SERIES+=("pgb$p+bh"); done
SERIES+=("pgb$WARM_POOL+warm")

BH_PACKAGES+=(pgbouncer)
bench_prepare
bench_cluster_start "max_connections = 600"
bench_tpcb_setup 1 "$PERMITS"
bench_psql -c "SELECT bulkhead_stats_reset('tpcb')" >/dev/null

# the commits counted in the database (pgbench's transactions, and a few
# of ours)
commits() { bench_psql -tAc "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'"; }

# bench_alternate calls run in a subshell: the switches and what the
# clients got go to a file, a line per run: KEY SWITCHES/TX MAX_MS MIN NONE
RUN_LOG=$BENCH_DIR/runs
: >"$RUN_LOG"
run() {    # run SERIES/CLIENTS: one pgbench run; prints "TPS P99_MS FAILED"
    local series=${1%/*} clients=${1#*/} c0 c1 x0 x1 out pool
    local -a args=(-M simple -c "$clients" -j 2 -T "$((WARMUP + SECS))" -b tpcb-like)
    bench_tpcb_reset
    case $series in
        pgb*)
            pool=${series#pgb}
            pool=${pool%+*}
            bench_pgbouncer_start "$pool"
            args+=(-h 127.0.0.1 -p "$PGB_PORT")
            ;;
    esac
    case $series in
        *warm) bench_set_column tpcb max_bypass "'$WARM'"; args+=(-U gated) ;;
        *bh | bulkhead) bench_set_column tpcb max_bypass NULL; args+=(-U gated) ;;
    esac
    rm -f "$BENCH_DIR/clients"
    c0=$(bench_switches) x0=$(commits)
    out=$(BENCH_STEADY=$SECS BENCH_CLIENT_STATS=$BENCH_DIR/clients bench_pgbench "${args[@]}") || { bench_pgbouncer_stop; exit 1; }
    bench_pgbouncer_stop
    c1=$(bench_switches)
    sleep 0.5    # the backends that ended report their commits
    x1=$(commits)
    # over the whole run (connections made and closed included)
    echo "$1 $(awk -v n="$((c1 - c0))" -v x="$((x1 - x0))" 'BEGIN { if (x > 0) printf "%.1f", n / x; else print "nan" }') $(cat "$BENCH_DIR/clients")" >>"$RUN_LOG"
    echo "$out"
}

keys=("ungated/2")
for c in "${CLIENTS[@]}"; do keys+=("${SERIES[@]/%//$c}"); done
bench_alternate "$ROUNDS" run "${keys[@]}"
stats=$(bench_psql -tAc "SELECT format('%s acquired, %s released, %s rejected, %s timed out, peak_running %s, peak_queued %s', acquired, released, rejected_full, timed_out, peak_running, peak_queued) FROM bulkhead_stats WHERE workload = 'tpcb'")

bench_header "Deploying in front of many clients: tpcb-like at scale 1 (pgbench -M simple, the last ${SECS} s of $((WARMUP + SECS)) s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/deploy.sh $PERMITS $SECS $ROUNDS $WARM $WARMUP\`. TPS, p99, longest latency and fewest transactions count the transactions that ended in the last $SECS s of each run, after $WARMUP s for connecting and warming up. PgBouncer $(/usr/sbin/pgbouncer --version | head -n 1 | awk '{ print $2 }'), transaction pooling, on CPU 0 beside the server."
echo "Series: ungated (\`-b tpcb-like\`); pgb2 (PgBouncer, pool 2, ungated behind it); bulkhead (\`-b tpcb-like\` as a role with \`bulkhead.workload = 'tpcb'\`, B = $PERMITS, strict FIFO);" \
     "warm (the same with \`max_bypass = '$WARM'\`: the newest waiter first); pgbN+bh (PgBouncer with a pool of N, the same role behind it); pgb$WARM_POOL+warm (PgBouncer, pool $WARM_POOL, the warm hand-off behind it)." \
     "Context switches: the whole machine's over the run (connecting included), per transaction committed (\`pg_stat_database.xact_commit\`)." \
     "Longest latency and fewest transactions of a client: over the clients of each run (medians over the rounds); a client that ended no transaction counts 0."
echo
echo "| clients | series | TPS | runs | p99 ms | longest ms | fewest tx of a client | context switches /tx | failed |"
echo "|---:|---|---:|---|---:|---:|---:|---:|---|"
for k in "${keys[@]}"; do
    cs=$(awk -v k="$k" '$1 == k { print $2 }' "$RUN_LOG" | bench_median)
    mx=$(awk -v k="$k" '$1 == k { print $3 }' "$RUN_LOG" | bench_median)
    mn=$(awk -v k="$k" '$1 == k { print $4 }' "$RUN_LOG" | bench_median)
    echo "| ${k#*/} | ${k%/*} | ${TPS[$k]} | ${RUNS_TPS[$k]} | ${P99[$k]} | $mx | $mn | $cs | ${FAILED[$k]} |"
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
        if bench_at_least "${TPS[$s/$c]}" "$best_tps"; then best=$s best_tps=${TPS[$s/$c]}; fi
    done
    line="- $c clients: the best is $best ($best_tps TPS, $(bench_ratio "$best_tps" "$peak")× the ungated peak at 2 clients);"
    for s in "${SERIES[@]}"; do
        [ "$s" = pgb2 ] && continue
        line+=" $s $(bench_ratio "${TPS[$s/$c]}" "${TPS[pgb2/$c]}")×,"
    done
    echo "${line%,} PgBouncer pool 2's TPS."
done
echo
for c in "${CLIENTS[@]}"; do
    r=$(bench_ratio "${TPS[bulkhead/$c]}" "${TPS[pgb2/$c]}"); bench_at_least "$r" 0.8 && met=0 || met=1
    bench_target "$c clients: bulkhead alone (FIFO) ≥ 0.8× PgBouncer pool 2 (${r}×)" "$met"
    r=$(bench_ratio "${TPS[warm/$c]}" "${TPS[pgb2/$c]}"); bench_at_least "$r" 0.8 && met=0 || met=1
    bench_target "$c clients: bulkhead alone, warm hand-off ($WARM) ≥ 0.8× PgBouncer pool 2 (${r}×)" "$met"
    if [ -n "${TPS[pgb32+bh/$c]:-}" ]; then
        r=$(bench_ratio "${TPS[pgb32+bh/$c]}" "${TPS[pgb2/$c]}"); bench_at_least "$r" 0.95 && met=0 || met=1
        bench_target "$c clients: PgBouncer (pool 32) + bulkhead ≥ 0.95× PgBouncer pool 2 (${r}×)" "$met"
    fi
done
bench_target "no failed transaction ($failed failed)" "$([ "$failed" = 0 ] && echo 0 || echo 1)"

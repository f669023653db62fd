#!/usr/bin/env bash
# test/bench/stats_cost.sh: what the latency statistics (wait and hold
# timing, totals, histograms) add to an acquire/release pair.  It builds the
# extension twice, as shipped and with -DBULKHEAD_NO_LATENCY_STATS, and runs
# the pair loops of pair_ns.sql against each in turn (A B A B ..., the
# server restarted on each swap of bulkhead.so), medians of ROUNDS runs.
# At the end the shipped build is installed again.
#
#   bash test/bench/stats_cost.sh [PAIRS [ROUNDS]]     (as root; default 200000 5)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PAIRS=${1:-200000}
ROUNDS=${2:-5}

bench_prepare
bench_build_without_stats

bench_cluster_start
bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('bench', 1000, 0)"
bench_psql <"$here/pair_ns.sql"

forms=("bulkhead session, PERFORM" "bulkhead try, expression")
variants=(with without)
declare -A runs
for ((r = 1; r <= ROUNDS; r++)); do
    for v in "${variants[@]}"; do
        bench_use_build "$v"
        bench_cluster_restart
        bench_wait_loaded bench
        for f in "${forms[@]}"; do
            runs[$v/$f]+="$(bench_psql -tAc "SELECT round(pair_ns('$f', $PAIRS)::numeric, 1)") "
        done
    done
done

echo "## Latency statistics cost: $PAIRS pairs per run, median of $ROUNDS alternating rounds"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $("$BH_BINDIR/postgres" --version)"
echo
echo "| form | with statistics (ns/pair) | without latency statistics (ns/pair) | overhead |"
echo "|---|---:|---:|---:|"
for f in "${forms[@]}"; do
    a=$(bench_median <<<"${runs[with/$f]}")
    b=$(bench_median <<<"${runs[without/$f]}")
    echo "| $f | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.1f%%", (a / b - 1) * 100 }') |"
done
echo
for v in "${variants[@]}"; do
    for f in "${forms[@]}"; do echo "runs $v / $f: ${runs[$v/$f]}"; done
done

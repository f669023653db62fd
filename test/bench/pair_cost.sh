#!/usr/bin/env bash
# test/bench/pair_cost.sh: what one acquire/release pair costs, measured in a
# PL/pgSQL loop inside one backend, beside the same loop of advisory locks.
# The forms alternate (A B A B ...) and each figure is the median of ROUNDS
# runs, so that the machine's drift hits every form alike.
#
#   bash test/bench/pair_cost.sh [PAIRS [ROUNDS]]     (as root; default 200000 5)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib.sh
. "$top/scripts/lib.sh"
# shellcheck source=cluster.sh
. "$here/cluster.sh"

PAIRS=${1:-200000}
ROUNDS=${2:-5}

bench_prepare

bench_cluster_start
bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('bench', 1000, 0)"
bench_psql <"$here/pair_ns.sql"
bench_wait_loaded bench

forms=("empty loop" "advisory, PERFORM" "bulkhead session, PERFORM"
       "advisory try, expression" "bulkhead try, expression")
declare -A runs
for ((r = 1; r <= ROUNDS; r++)); do
    for f in "${forms[@]}"; do
        runs[$f]+="$(bench_psql -tAc "SELECT round(pair_ns('$f', $PAIRS)::numeric, 1)") "
    done
done

declare -A med
for f in "${forms[@]}"; do
    med[$f]=$(tr ' ' '\n' <<<"${runs[$f]}" | grep . | bench_median)
done
check=$(bench_psql -tAc "SELECT running || ' running, ' || acquired || ' acquired, ' || released || ' released' FROM bulkhead_stats WHERE workload = 'bench'")

echo "## Pair cost: $PAIRS pairs in one PL/pgSQL loop, median of $ROUNDS alternating rounds"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $("$BH_BINDIR/postgres" --version)"
echo
echo "| form | ns per pair (median) | runs |"
echo "|---|---:|---|"
for f in "${forms[@]}"; do
    echo "| $f | ${med[$f]} | ${runs[$f]}|"
done
echo
awk -v a="${med[advisory, PERFORM]}" -v b="${med[bulkhead session, PERFORM]}" \
    -v c="${med[advisory try, expression]}" -v d="${med[bulkhead try, expression]}" \
    'BEGIN { printf "ratio bulkhead/advisory: PERFORM form %.2fx, expression form %.2fx\n", b / a, d / c }'
echo "bulkhead_stats after the run: $check"

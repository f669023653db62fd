#!/usr/bin/env bash
# test/bench/instructions.sh: instructions per acquire/release pair, counted
# by valgrind's callgrind in the backend that runs the PL/pgSQL loop of
# pair_ns.sql.  Unlike time, the count repeats exactly from run to run and
# does not care what else the machine does.  Each form's count is the loop's
# (PAIRS iterations, collected inside plpgsql_call_handler) less the empty
# loop's, divided by PAIRS.  It counts the extension as shipped and as built
# with -DBULKHEAD_NO_LATENCY_STATS, to show what the latency statistics cost.
#
#   bash test/bench/instructions.sh [PAIRS]      (as root; default 20000)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib.sh
. "$top/scripts/lib.sh"
# shellcheck source=cluster.sh
. "$here/cluster.sh"

PAIRS=${1:-20000}

BH_PACKAGES+=(valgrind)
bench_prepare
bench_build_without_stats

forms=("empty loop" "advisory, PERFORM" "bulkhead session, PERFORM"
       "advisory try, expression" "bulkhead try, expression")
declare -A count
for v in with without; do
    bench_use_build "$v"
    BENCH_UNDER="valgrind --tool=callgrind --trace-children=yes --collect-atstart=no \
--toggle-collect=plpgsql_call_handler --callgrind-out-file=callgrind.%p" \
        bench_cluster_start
    bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('bench', 1000, 0)"
    bench_psql <"$here/pair_ns.sql"
    bench_wait_loaded bench
    for f in "${forms[@]}"; do
        # a fresh backend per form: its callgrind file holds that loop only
        pid=$(bench_psql -tAc "SELECT pg_backend_pid() FROM (SELECT pair_ns('$f', $PAIRS)) AS run")
        file="$BENCH_DIR/callgrind.$pid"
        for _ in $(seq 100); do grep -q '^totals:' "$file" 2>/dev/null && break; sleep 0.1; done
        count[$v/$f]=$(awk '/^totals:/ { print $2 }' "$file")
    done
    bench_cluster_stop
done

per_pair() {    # per_pair VARIANT FORM: instructions per pair, less the loop
    awk -v t="${count[$1/$2]}" -v e="${count[$1/empty loop]}" -v n="$PAIRS" \
        'BEGIN { printf "%.0f", (t - e) / n }'
}
echo "## Instructions per pair (callgrind, $PAIRS pairs in one PL/pgSQL loop, less the empty loop)"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $("$BH_BINDIR/postgres" --version), valgrind $(valgrind --version)"
echo
echo "| form | instructions per pair | without latency statistics | statistics add |"
echo "|---|---:|---:|---:|"
for f in "${forms[@]:1}"; do
    a=$(per_pair with "$f")
    b=$(per_pair without "$f")
    echo "| $f | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.1f%%", (a / b - 1) * 100 }') |"
done
echo
awk -v a="$(per_pair with 'advisory, PERFORM')" -v b="$(per_pair with 'bulkhead session, PERFORM')" \
    -v c="$(per_pair with 'advisory try, expression')" -v d="$(per_pair with 'bulkhead try, expression')" \
    'BEGIN { printf "ratio bulkhead/advisory in instructions: PERFORM form %.2fx, expression form %.2fx\n", b / a, d / c }'

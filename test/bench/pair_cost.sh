#!/usr/bin/env bash
# test/bench/pair_cost.sh (scenario 1, time): what one acquire/release pair
# costs, measured in a PL/pgSQL loop inside one backend, beside the same loop
# of advisory locks.  Session pairs in both loop forms (PERFORM, and an
# expression assigned to a variable); transaction pairs in the same two
# forms, each ended by a COMMIT in a procedure's loop.  The forms alternate
# (A B A B ...) and each figure is the median of ROUNDS runs, so that the
# machine's drift hits every form alike.  instructions.sh counts the same
# loops in instructions.
#
#   bash test/bench/pair_cost.sh [PAIRS [ROUNDS]]     (as root; default 200000 5)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then PAIRS=${1:-2000}; ROUNDS=${2:-1}; else PAIRS=${1:-200000}; ROUNDS=${2:-5}; fi

bench_prepare
bench_cluster_start
bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('bench', 1000, 0)"
bench_psql <"$here/pair_ns.sql"
bench_wait_loaded bench

# pairs of forms to compare: advisory, then bulkhead
forms=("advisory, PERFORM" "bulkhead session, PERFORM"
       "advisory try, expression" "bulkhead try, expression"
       "advisory xact, PERFORM + COMMIT" "bulkhead xact, PERFORM + COMMIT"
       "advisory try xact, expression + COMMIT" "bulkhead try xact, expression + COMMIT")
baselines=("empty loop" "empty loop, COMMIT")
declare -A runs
for ((r = 1; r <= ROUNDS; r++)); do
    bench_progress "round $r of $ROUNDS"
    for f in "${baselines[@]}" "${forms[@]}"; do
        sql=$(bench_psql -tAc "SELECT pair_sql('$f', $PAIRS)")
        runs[$f]+="$(bench_psql -tAc "$sql" | awk '{ printf "%.1f", $1 }') "
    done
done
check=$(bench_psql -tAc "SELECT running || ' running, ' || acquired || ' acquired, ' || released || ' released' FROM bulkhead_stats WHERE workload = 'bench'")

declare -A med
for f in "${baselines[@]}" "${forms[@]}"; do med[$f]=$(bench_median <<<"${runs[$f]}"); done

bench_header "Pair cost: $PAIRS pairs in one PL/pgSQL loop, median of $ROUNDS alternating rounds"
bench_settings
echo
echo "Command: \`bash test/bench/pair_cost.sh $PAIRS $ROUNDS\`; the loops are in \`test/bench/pair_ns.sql\`."
echo
echo "| loop form | advisory lock, ns per pair | bulkhead, ns per pair | bulkhead / advisory |"
echo "|---|---:|---:|---:|"
for ((i = 0; i < ${#forms[@]}; i += 2)); do
    a=${forms[i]} b=${forms[i + 1]}
    echo "| ${b#bulkhead } | ${med[$a]} | ${med[$b]} | $(bench_ratio "${med[$b]}" "${med[$a]}") |"
done
echo
echo "The loop alone costs ${med[empty loop]} ns per iteration, and ${med[empty loop, COMMIT]} ns with a COMMIT."
echo "Runs, in order: $(for f in "${forms[@]}"; do printf '%s: %s; ' "$f" "${runs[$f]% }"; done | sed 's/; $//')."
echo "bulkhead_stats after the runs: $check."
echo
for ((i = 0; i < ${#forms[@]}; i += 2)); do
    a=${forms[i]} b=${forms[i + 1]}
    bench_at_least "${med[$a]}" "${med[$b]}" && met=0 || met=1
    bench_target "pair cost ≤ 1.0× advisory, ${b#bulkhead } ($(bench_ratio "${med[$b]}" "${med[$a]}")×)" $met
done

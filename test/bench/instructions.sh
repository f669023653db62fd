#!/usr/bin/env bash
# test/bench/instructions.sh (scenario 1, instructions): instructions per
# acquire/release pair, counted by valgrind's callgrind in the backend that
# runs the loops of pair_ns.sql.  Unlike time, the count repeats exactly from
# run to run and does not care what else the machine does.  Each form's count
# is the loop's (PAIRS iterations, collected inside plpgsql_call_handler) less
# its empty loop's, divided by PAIRS.  It counts the extension as shipped and
# as built with -DBULKHEAD_NO_LATENCY_STATS, to show what the latency
# statistics cost.  The bulkhead forms are counted again with the workload
# as a leaf under a budget (shared budgets, 1.2), against the same workload
# as a root, and with a key named (tenants, 1.2: the key 'k', the only one in
# use, so that each pair creates its key and frees it) against no key.
#
#   bash test/bench/instructions.sh [PAIRS]      (as root; default 20000)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# the smoke run skips the second build, to stay short
if bench_quick; then PAIRS=${1:-200} BUILDS=(with); else PAIRS=${1:-20000} BUILDS=(with without); fi

BH_PACKAGES+=(valgrind)
bench_prepare
if ! bench_quick; then bench_build_without_stats; fi

# pairs of forms to compare (advisory, then bulkhead), and the empty loop
# each form's count is taken net of
forms=("advisory, PERFORM" "bulkhead session, PERFORM"
       "advisory try, expression" "bulkhead try, expression"
       "advisory xact, PERFORM + COMMIT" "bulkhead xact, PERFORM + COMMIT"
       "advisory try xact, expression + COMMIT" "bulkhead try xact, expression + COMMIT")
empty_of() { case $1 in *COMMIT) echo "empty loop, COMMIT" ;; *) echo "empty loop" ;; esac; }
# the keyed forms, each beside the unkeyed form it is compared with
keyed_forms=("bulkhead session, PERFORM" "bulkhead session keyed, PERFORM"
             "bulkhead try, expression" "bulkhead try keyed, expression"
             "bulkhead xact, PERFORM + COMMIT" "bulkhead xact keyed, PERFORM + COMMIT"
             "bulkhead try xact, expression + COMMIT" "bulkhead try xact keyed, expression + COMMIT")

# loop_count FORM: the instructions of one loop of FORM, PAIRS iterations,
# in a fresh backend (its callgrind file holds that loop only)
loop_count() {
    local sql pid file
    sql=$(bench_psql -tAc "SELECT pair_sql('$1', $PAIRS)")
    pid=$(bench_psql -tA -c "$sql" -c "SELECT pg_backend_pid()" | tail -n 1)
    file="$BENCH_DIR/callgrind.$pid"
    for _ in $(seq 100); do grep -q '^totals:' "$file" 2>/dev/null && break; sleep 0.1; done
    awk '/^totals:/ { print $2 }' "$file"
}

declare -A count
for v in "${BUILDS[@]}"; do
    bench_progress "callgrind, build $v latency statistics"
    bench_use_build "$v"
    BENCH_UNDER="valgrind --tool=callgrind --trace-children=yes --collect-atstart=no \
--toggle-collect=plpgsql_call_handler --callgrind-out-file=callgrind.%p" \
        bench_cluster_start
    bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('bench', 1000, 0)"
    bench_psql <"$here/pair_ns.sql"
    bench_wait_loaded bench
    for f in "empty loop" "empty loop, COMMIT" "${forms[@]}"; do
        # a fresh backend per form: its callgrind file holds that loop only
        sql=$(bench_psql -tAc "SELECT pair_sql('$f', $PAIRS)")
        pid=$(bench_psql -tA -c "$sql" -c "SELECT pg_backend_pid()" | tail -n 1)
        file="$BENCH_DIR/callgrind.$pid"
        for _ in $(seq 100); do grep -q '^totals:' "$file" 2>/dev/null && break; sleep 0.1; done
        count[$v/$f]=$(awk '/^totals:/ { print $2 }' "$file")
    done
    if [ "$v" = with ]; then
        # the keyed forms, the workload still a root
        for ((i = 1; i < ${#keyed_forms[@]}; i += 2)); do
            count[with/${keyed_forms[i]}]=$(loop_count "${keyed_forms[i]}")
        done
        # the same loops, the workload now a leaf under a budget
        bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('bench_root', 1000, 0)" \
                   -c "UPDATE bulkhead_workload SET parent = 'bench_root', reserved = 1 WHERE name = 'bench'"
        for _ in $(seq 200); do
            [ "$(bench_psql -tAc "SELECT parent FROM bulkhead_stats WHERE workload = 'bench'")" = bench_root ] && break
            sleep 0.05
        done
        for f in "${forms[@]}"; do
            case $f in bulkhead*) ;; *) continue ;; esac
            sql=$(bench_psql -tAc "SELECT pair_sql('$f', $PAIRS)")
            pid=$(bench_psql -tA -c "$sql" -c "SELECT pg_backend_pid()" | tail -n 1)
            file="$BENCH_DIR/callgrind.$pid"
            for _ in $(seq 100); do grep -q '^totals:' "$file" 2>/dev/null && break; sleep 0.1; done
            count[leaf/$f]=$(awk '/^totals:/ { print $2 }' "$file")
        done
    fi
    bench_cluster_stop
done
bench_use_build with

per_pair() {    # per_pair VARIANT FORM: instructions per pair, net of its empty loop
    awk -v t="${count[$1/$2]}" -v e="${count[with/$(empty_of "$2")]}" -v n="$PAIRS" \
        'BEGIN { printf "%.0f", (t - e) / n }'
}
bench_header "Instructions per pair (callgrind, $PAIRS pairs in one PL/pgSQL loop, net of the empty loop)"
echo "Command: \`bash test/bench/instructions.sh $PAIRS\`; $(valgrind --version)."
echo
echo "| loop form | advisory lock | bulkhead | bulkhead / advisory | bulkhead without latency statistics | statistics add |"
echo "|---|---:|---:|---:|---:|---:|"
for ((i = 0; i < ${#forms[@]}; i += 2)); do
    a=${forms[i]} b=${forms[i + 1]}
    ia=$(per_pair with "$a") ib=$(per_pair with "$b") ibn=$(bench_quick && echo "$ib" || per_pair without "$b")
    echo "| ${b#bulkhead } | $ia | $ib | $(bench_ratio "$ib" "$ia") | $ibn |" \
         "$(awk -v a="$ib" -v b="$ibn" 'BEGIN { printf "%+.0f", a - b }') |"
done
echo
loop_cost() { awk -v e="${count[with/$1]}" -v n="$PAIRS" 'BEGIN { printf "%.0f", e / n }'; }
echo "The empty loops cost $(loop_cost 'empty loop') instructions per iteration, and $(loop_cost 'empty loop, COMMIT') with a COMMIT."
echo
echo "A leaf under a budget (parent with max_running 1000, reserved 1) against the same workload as a root:"
echo
echo "| loop form | root | leaf under a budget | leaf / root |"
echo "|---|---:|---:|---:|"
for ((i = 1; i < ${#forms[@]}; i += 2)); do
    b=${forms[i]}
    ir=$(per_pair with "$b") il=$(per_pair leaf "$b")
    echo "| ${b#bulkhead } | $ir | $il | $(bench_ratio "$il" "$ir") |"
done
echo
echo "Tenants: the same workload with a key named (\`bulkhead_acquire('bench', NULL, 'k')\`, \`bulkhead_try_acquire('bench', '0', 'k')\` and their _xact forms; the only key in use, created and freed by every pair) against no key:"
echo
echo "| loop form | no key | key 'k' | keyed / unkeyed |"
echo "|---|---:|---:|---:|"
worst=0
for ((i = 0; i < ${#keyed_forms[@]}; i += 2)); do
    a=${keyed_forms[i]} b=${keyed_forms[i + 1]}
    ia=$(per_pair with "$a") ib=$(per_pair with "$b") r=$(bench_ratio "$ib" "$ia")
    bench_at_least "$worst" "$r" || worst=$r
    echo "| ${a#bulkhead } | $ia | $ib | $r |"
done
echo
bench_at_least 1.3 "$worst" && met=0 || met=1
bench_target "a keyed pair costs ≤ 1.3× an unkeyed one (at most ${worst}×)" "$met"

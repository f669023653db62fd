#!/usr/bin/env bash
# test/bench/contended.sh (scenario 3): 64 clients contend for B = 4 permits
# (queue large enough for all), each running three statements: take a
# permit, do the work, give it back.  Against the do-it-yourself semaphore
# of diy_semaphore.sql (4 advisory-lock slots, polled with a 1 ms sleep)
# and against the same three statements ungated (SELECT 1 in place of the
# acquire and the release).  Two kinds of work: SELECT 1, and
# SELECT pg_sleep(0.001).  The series alternate, SECONDS each, and each
# figure is the median of ROUNDS runs.
#
#   bash test/bench/contended.sh [SECONDS [ROUNDS]]   (as root; default 10 3)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then SECS=${1:-1}; ROUNDS=${2:-1}; else SECS=${1:-10}; ROUNDS=${2:-3}; fi
CLIENTS=64
PERMITS=4

bench_prepare
bench_cluster_start "max_connections = 100"
bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
               VALUES ('w', $PERMITS, 1000, '60s')"
bench_psql <"$here/diy_semaphore.sql"
bench_wait_loaded w

declare -A script
for work in "SELECT 1" "SELECT pg_sleep(0.001)"; do
    tag=${work//[^a-z0-9]/}
    script[ungated/$work]=$(printf '\\set x 1\nSELECT 1;\n%s;\nSELECT 1;\n' "$work" |
        bench_pgbench_script "ungated-$tag")
    script[diy/$work]=$(printf '\\set x 1\nSELECT diy_acquire(1, %d, %s) AS slot \\gset\n%s;\nSELECT pg_advisory_unlock(1, :slot);\n' \
        "$PERMITS" "'5s'" "$work" | bench_pgbench_script "diy-$tag")
    script[bulkhead/$work]=$(printf "\\\\set x 1\nSELECT bulkhead_acquire('w');\n%s;\nSELECT bulkhead_release('w');\n" "$work" |
        bench_pgbench_script "bulkhead-$tag")
done

run() { bench_pgbench -M prepared -c "$CLIENTS" -j 2 -T "$SECS" -f "${script[$1]}"; }

bench_header "Contended: $CLIENTS clients, B = $PERMITS (${SECS} s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/contended.sh $SECS $ROUNDS\`; pgbench -M prepared -c $CLIENTS -j 2. Each transaction is three statements:"
echo "ungated \`SELECT 1; work; SELECT 1\`; DIY semaphore \`SELECT diy_acquire(1, $PERMITS, '5s') \\gset; work; SELECT pg_advisory_unlock(1, :slot)\` (\`test/bench/diy_semaphore.sql\`);"
echo "bulkhead \`SELECT bulkhead_acquire('w'); work; SELECT bulkhead_release('w')\` with max_running = $PERMITS, max_queued = 1000."
echo
echo "| work | series | TPS | p99 ms | failed | TPS runs | p99 runs |"
echo "|---|---|---:|---:|---:|---|---|"
targets=()
notes=()
for work in "SELECT 1" "SELECT pg_sleep(0.001)"; do
    bench_psql -tAc "SELECT bulkhead_stats_reset('w')" >/dev/null
    bench_alternate "$ROUNDS" run "ungated/$work" "diy/$work" "bulkhead/$work"
    for s in ungated diy bulkhead; do
        k=$s/$work
        echo "| \`$work\` | $s | ${TPS[$k]} | ${P99[$k]} | ${FAILED[$k]} | ${RUNS_TPS[$k]} | ${RUNS_P99[$k]} |"
    done
    # Little's law: B permits each held for the mean hold time bound the TPS
    notes+=("$(bench_psql -tAc "SELECT format('\`%s\`: %s acquired, %s released, peak_running %s, peak_queued %s; mean hold %s ms, so B / mean hold = %s TPS at most.',
                   '$work', acquired, released, peak_running, peak_queued, round((hold_time_total_ms / released)::numeric, 3),
                   round($PERMITS * 1000 / (hold_time_total_ms / released))) FROM bulkhead_stats WHERE workload = 'w'")")
    u=ungated/$work d=diy/$work b=bulkhead/$work
    r_u=$(bench_ratio "${TPS[$b]}" "${TPS[$u]}") r_d=$(bench_ratio "${TPS[$b]}" "${TPS[$d]}")
    bench_at_least "$r_u" 0.9 && met=0 || met=1
    targets+=("$(bench_target "\`$work\`: ≥ 0.9× ungated TPS (${r_u}×)" $met)")
    bench_at_least "$r_d" 4 && met=0 || met=1
    targets+=("$(bench_target "\`$work\`: ≥ 4× the DIY semaphore's TPS (${r_d}×)" $met)")
    { bench_at_least "${P99[$u]}" "${P99[$b]}" && bench_at_least "${P99[$d]}" "${P99[$b]}"; } && met=0 || met=1
    targets+=("$(bench_target "\`$work\`: p99 lower than both (bulkhead ${P99[$b]} ms, ungated ${P99[$u]} ms, DIY ${P99[$d]} ms)" $met)")
done
echo
echo "bulkhead_stats of the bulkhead series:"
echo
printf -- '- %s\n' "${notes[@]}"
echo
printf '%s\n' "${targets[@]}"

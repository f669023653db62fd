#!/usr/bin/env bash
# test/bench/handoff.sh (scenario 5): does a hand-off cost more when more
# backends queue?  N backends (5, 50, 500) each loop on
#   PERFORM bulkhead_acquire('handoff'); PERFORM bulkhead_release('handoff');
# in PL/pgSQL against one permit (B = 1), so all but the holder and the one
# or two on their way back to the queue wait in it, and every grant is a
# hand-off from a release to the head waiter.  Once all N are in, the grants
# are counted over WINDOW seconds; then the loops are cancelled (each one
# catches the cancel and releases what it holds).  Each queue length runs
# twice: in arrival order (fifo), and with the warm hand-off (warm: the
# workload's max_bypass = '1s', the newest waiter first).  The runs
# alternate over ROUNDS rounds; the figure is the median.
#
#   bash test/bench/handoff.sh [WINDOW [ROUNDS]]   (as root; default 5 3)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then WINDOW=${1:-1}; ROUNDS=${2:-1}; SIZES=(5 50); else WINDOW=${1:-5}; ROUNDS=${2:-3}; SIZES=(5 50 500); fi

bench_prepare
bench_cluster_start "max_connections = 520"
bench_psql <"$here/handoff_loop.sql"
bench_wait_loaded handoff
loop_script=$(printf '\\set x 1\nSELECT handoff_loop();\n' | bench_pgbench_script handoff)

# run ORDER/N: grants per second with N backends in the loop
run() {
    # the order: fifo (max_bypass NULL) or warm (1 s)
    if [ "${1%/*}" = fifo ]; then bench_set_column handoff max_bypass NULL; else bench_set_column handoff max_bypass "'1s'"; fi
    bench_handoff_rate "$loop_script" "${1#*/}" "$WINDOW"
}

ORDERS=(fifo warm)
declare -A runs
for ((r = 1; r <= ROUNDS; r++)); do
    for o in "${ORDERS[@]}"; do
        for n in "${SIZES[@]}"; do
            g=$(run "$o/$n")
            bench_progress "round $r/$ROUNDS, $o, $n backends: $g grants/s"
            runs[$o/$n]+="$g "
        done
    done
done
declare -A med
for o in "${ORDERS[@]}"; do
    for n in "${SIZES[@]}"; do med[$o/$n]=$(bench_median <<<"${runs[$o/$n]}"); done
done
final=$(bench_psql -tAc "SELECT format('%s acquired, %s released, %s running, %s queued, peak_queued %s', acquired, released, running, queued, peak_queued) FROM bulkhead_stats WHERE workload = 'handoff'")

bench_header "Hand-off scaling: grants per second with one permit and N backends in its queue (${WINDOW} s windows, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/handoff.sh $WINDOW $ROUNDS\`. Each backend loops on \`PERFORM bulkhead_acquire('handoff'); PERFORM bulkhead_release('handoff');\` (B = 1)." \
     "fifo: arrival order (max_bypass NULL); warm: \`max_bypass = '1s'\` (the newest waiter first, none passed over for more than 1 s)."
echo
echo "| backends in the loop | order | grants per second (median) | vs ${SIZES[0]} (same order) | runs |"
echo "|---:|---|---:|---:|---|"
for o in "${ORDERS[@]}"; do
    for n in "${SIZES[@]}"; do
        echo "| $n | $o | ${med[$o/$n]} | $(bench_ratio "${med[$o/$n]}" "${med[$o/${SIZES[0]}]}") | ${runs[$o/$n]% } |"
    done
done
echo
echo "bulkhead_stats after the runs: $final."
echo
last=${SIZES[-1]}
for o in "${ORDERS[@]}"; do
    ratio=$(bench_ratio "${med[$o/$last]}" "${med[$o/${SIZES[0]}]}")
    bench_at_least "$ratio" 0.7 && met=0 || met=1
    bench_target "$o: $last waiters ≥ 0.7× the hand-off throughput of ${SIZES[0]} (${ratio}×)" "$met"
done

#!/usr/bin/env bash
# test/bench/round_trip.sh (scenario 2): what a transaction permit costs a
# client that pays a round trip for it.  pgbench -M prepared runs
#   BEGIN; SELECT bulkhead_acquire_xact('w'); SELECT 1; COMMIT;
# against the same transaction with SELECT 1 in place of the acquire, at 1
# and 8 clients; the workload is never full (B = 1000).  The two alternate,
# SECONDS each, and each figure is the median of ROUNDS runs.
#
#   bash test/bench/round_trip.sh [SECONDS [ROUNDS]]   (as root; default 10 5)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then SECS=${1:-1}; ROUNDS=${2:-1}; else SECS=${1:-10}; ROUNDS=${2:-5}; fi

bench_prepare
bench_cluster_start
bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('w', 1000, 0)"
bench_wait_loaded w

ungated=$(bench_pgbench_script ungated <<'EOF2'
\set x 1
BEGIN;
SELECT 1;
SELECT 1;
COMMIT;
EOF2
)
gated=$(bench_pgbench_script gated <<'EOF2'
\set x 1
BEGIN;
SELECT bulkhead_acquire_xact('w');
SELECT 1;
COMMIT;
EOF2
)

run() {    # run KEY (form/clients)
    local file=$ungated clients=${1#*/}
    [ "${1%/*}" = bulkhead ] && file=$gated
    bench_pgbench -M prepared -c "$clients" -j "$((clients < 2 ? 1 : 2))" -T "$SECS" -f "$file"
}

bench_header "Round trip: a transaction permit against an ungated statement (pgbench -M prepared, ${SECS} s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/round_trip.sh $SECS $ROUNDS\`. Ungated: \`BEGIN; SELECT 1; SELECT 1; COMMIT;\`; bulkhead: \`BEGIN; SELECT bulkhead_acquire_xact('w'); SELECT 1; COMMIT;\` (B = 1000, never full)."
echo
echo "| clients | ungated TPS | bulkhead TPS | bulkhead / ungated | ungated p99 ms | bulkhead p99 ms | failed | runs (ungated; bulkhead) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---|"
targets=()
for clients in 1 8; do
    bench_alternate "$ROUNDS" run "ungated/$clients" "bulkhead/$clients"
    u=ungated/$clients b=bulkhead/$clients
    ratio=$(bench_ratio "${TPS[$b]}" "${TPS[$u]}")
    echo "| $clients | ${TPS[$u]} | ${TPS[$b]} | $ratio | ${P99[$u]} | ${P99[$b]} | $((FAILED[$u] + FAILED[$b])) | ${RUNS_TPS[$u]}; ${RUNS_TPS[$b]} |"
    bench_at_least "$ratio" 0.90 && met=0 || met=1
    targets+=("$(bench_target "round trip ≥ 0.90× ungated at $clients clients (${ratio}×)" $met)")
done
check=$(bench_psql -tAc "SELECT acquired || ' acquired, ' || released || ' released, ' || running || ' running' FROM bulkhead_stats WHERE workload = 'w'")
echo
echo "bulkhead_stats after the runs: $check."
echo
printf '%s\n' "${targets[@]}"

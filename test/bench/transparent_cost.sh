#!/usr/bin/env bash
# test/bench/transparent_cost.sh: what automatic admission (bulkhead.workload)
# costs a one-statement read-only transaction: pgbench -S (built-in
# select-only script), 8 clients, as a role whose transactions take a permit
# of a workload large enough never to queue, beside the same run as a role
# without the setting.  The two alternate (A B A B ...), each SECONDS long;
# the figure is the median TPS of ROUNDS runs each.
#
#   bash test/bench/transparent_cost.sh [SECONDS [ROUNDS]]   (as root; default 10 5)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SECONDS_PER_RUN=${1:-10}
ROUNDS=${2:-5}
CLIENTS=8

bench_prepare

bench_cluster_start "max_connections = 50"
bench_psql <<'SQL'
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('wide', 1000, 0);
CREATE ROLE gated LOGIN;
ALTER ROLE gated SET bulkhead.workload = 'wide';
CREATE ROLE ungated LOGIN;
SQL
bench_wait_loaded wide
runuser -u postgres -- "$BH_BINDIR/pgbench" -i -q -s 1 -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >/dev/null 2>&1
bench_psql -c "GRANT SELECT ON pgbench_accounts, pgbench_branches TO gated, ungated"

run() {    # run ROLE: TPS of one pgbench -S run
    runuser -u postgres -- "$BH_BINDIR/pgbench" -n -S -M prepared -c "$CLIENTS" -j 2 \
        -T "$SECONDS_PER_RUN" -U "$1" -h "$BENCH_DIR" -p "$BENCH_PORT" postgres 2>/dev/null |
        awk '/^tps = / { printf "%.0f", $3 }'
}
declare -A runs
for ((r = 1; r <= ROUNDS; r++)); do
    for role in ungated gated; do
        runs[$role]+="$(run "$role") "
    done
done
check=$(bench_psql -tAc "SELECT acquired || ' permits granted, ' || running || ' running, peak ' || peak_running FROM bulkhead_stats WHERE workload = 'wide'")

a=$(bench_median <<<"${runs[ungated]}")
b=$(bench_median <<<"${runs[gated]}")
echo "## Automatic admission cost: pgbench -S -M prepared, $CLIENTS clients, ${SECONDS_PER_RUN} s runs, median of $ROUNDS alternating rounds"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $("$BH_BINDIR/postgres" --version)"
echo
echo "| role | TPS (median) | runs |"
echo "|---|---:|---|"
echo "| without bulkhead.workload | $a | ${runs[ungated]}|"
echo "| with bulkhead.workload (a permit per transaction) | $b | ${runs[gated]}|"
echo
awk -v a="$a" -v b="$b" 'BEGIN { printf "gated / ungated: %.3f (%+.1f%%)\n", b / a, (b / a - 1) * 100 }'
echo "bulkhead_stats of the workload: $check"

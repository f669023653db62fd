#!/usr/bin/env bash
# test/bench/memory.sh (scenario 6): the shared memory bulkhead takes per
# workload slot and per backend slot, read from pg_shmem_allocations.  The
# cluster starts at the defaults, then again with 64 more workload slots,
# then again with 100 more connections; the differences, divided by what was
# added, are the costs per slot.
#
#   bash test/bench/memory.sh      (as root)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bench_prepare
bench_cluster_start

# sample: the bulkhead allocation, all allocations, and the settings
sample() {
    bench_psql -tAc "SELECT (SELECT allocated_size FROM pg_shmem_allocations WHERE name = 'bulkhead'),
                            (SELECT sum(allocated_size) FROM pg_shmem_allocations),
                            current_setting('bulkhead.max_workloads'),
                            current_setting('max_connections'),
                            current_setting('bulkhead.max_permits_per_backend')"
}
IFS='|' read -r base_own base_all workloads connections permits <<<"$(sample)"
bench_psql -c "ALTER SYSTEM SET bulkhead.max_workloads = $((workloads + 64))"
bench_cluster_restart
IFS='|' read -r slots_own slots_all _ _ _ <<<"$(sample)"
bench_psql -c "ALTER SYSTEM RESET bulkhead.max_workloads" -c "ALTER SYSTEM SET max_connections = $((connections + 100))"
bench_cluster_restart
IFS='|' read -r conns_own _ _ _ _ <<<"$(sample)"

per_slot=$(((slots_own - base_own) / 64))
per_slot_all=$(((slots_all - base_all) / 64))
per_backend=$(((conns_own - base_own) / 100))

bench_header "Shared memory (pg_shmem_allocations)"
echo "Command: \`bash test/bench/memory.sh\`. Defaults: bulkhead.max_workloads = $workloads, max_connections = $connections, bulkhead.max_permits_per_backend = $permits."
echo
echo "| | bytes |"
echo "|---|---:|"
echo "| the \`bulkhead\` allocation at the defaults | $base_own |"
echo "| per workload slot (the \`bulkhead\` allocation) | $per_slot |"
echo "| per workload slot, with its LWLock (all allocations) | $per_slot_all |"
echo "| per backend slot ($permits permit entries) | $per_backend |"
echo
bench_target "≤ 8 KiB per workload slot ($per_slot_all B with its lock)" "$([ "$per_slot_all" -le 8192 ] && echo 0 || echo 1)"
bench_target "≤ 256 B per backend slot ($per_backend B)" "$([ "$per_backend" -le 256 ] && echo 0 || echo 1)"

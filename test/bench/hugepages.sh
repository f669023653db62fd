#!/usr/bin/env bash
# test/bench/hugepages.sh: what many backends cost with the server's shared
# memory in huge pages (huge_pages = on, 2 MB pages) against 4 kB pages
# (huge_pages = off; `try`, the default, falls back to 4 kB pages on a
# machine that reserves none, as Debian's does).  The profiles of issue 25
# put the kernel's time, when hundreds of backends take turns, in work on
# page tables (native_set_pte) and in the kernel's page scanner (kdamond):
# with 4 kB pages each backend maps the shared memory it touches page by
# page, and a scanner that checks whether a page was used walks every
# backend's mapping of it; with 2 MB pages there are 512 times fewer.
#
# One cluster, restarted between the two settings, which alternate inside
# every round; under each:
#   handoff/5, handoff/500  grants per second of one permit with N backends
#                           looping on it (as handoff.sh, FIFO)
#   bulkhead/128            tpcb-like (scale 1, -M simple), 128 clients,
#                           through bulkhead.workload (B = 3)
#   pgb2/128                the same through PgBouncer (transaction pooling,
#                           a pool of 2), ungated
# The huge pages are reserved (vm.nr_hugepages: as many as the server says
# it needs) for each start with huge_pages = on, and the pool given back
# once the server has mapped them (cluster.sh, bench_server_start): other
# servers on the machine, which take huge pages whenever some are free
# (huge_pages = try), neither take this one's nor get any.  Which pages
# the server maps is read from its own mappings, not from the machine's
# count, which other servers' pages would change.
#
#   bash test/bench/hugepages.sh [SECS [ROUNDS]]   (as root; default 10 3)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=pgbouncer.sh
. "$here/pgbouncer.sh"

if bench_quick; then SECS=${1:-2}; ROUNDS=${2:-1}; SIZES=(5 50); CLIENTS=8; WINDOW=1
else SECS=${1:-10}; ROUNDS=${2:-3}; SIZES=(5 500); CLIENTS=128; WINDOW=5; fi
PERMITS=3

BH_PACKAGES+=(pgbouncer)
bench_prepare
BENCH_HUGE_PAGES=off bench_cluster_start "max_connections = 600" "huge_pages = off"
need=$(bench_psql -tAc "SHOW shared_memory_size_in_huge_pages")

bench_tpcb_setup 1 "$PERMITS"
bench_psql <"$here/handoff_loop.sql"
bench_wait_loaded handoff
loop_script=$(printf '\\set x 1\nSELECT handoff_loop();\n' | bench_pgbench_script handoff)

# the server's memory in huge pages (kB): the size of the postmaster's
# mappings in 2 MB pages (hugetlb), whether touched yet or not
server_huge_kb() {
    awk '/^Size:/ { size = $2 } /^KernelPageSize:/ && $2 == 2048 { kb += size } END { print kb + 0 }' \
        "/proc/$BENCH_PID/smaps"
}

# use_pages off|on: the server restarted with that setting; with it on, all
# of its shared memory is in 2 MB pages, with it off none is
use_pages() {
    bench_psql -c "ALTER SYSTEM SET huge_pages = '$1'" >/dev/null
    BENCH_HUGE_PAGES=$1 bench_cluster_restart
    bench_wait_loaded handoff
    if [ "$1" = on ]; then
        [ "$(server_huge_kb)" -ge $((need * 2048)) ] ||
            bh_die "huge_pages = on, but the server has $(server_huge_kb) kB in huge pages, not $need pages"
    else
        [ "$(server_huge_kb)" -eq 0 ] || bh_die "huge_pages = off, but the server has $(server_huge_kb) kB in huge pages"
    fi
}

# run SERIES: one figure (grants per second for handoff/N, "TPS P99_MS
# FAILED" for the pgbench series)
run() {
    local series=${1%/*} n=${1#*/}
    local -a args=(-M simple -c "$n" -j 2 -T "$SECS" -b tpcb-like)
    case $series in
        handoff) bench_handoff_rate "$loop_script" "$n" "$WINDOW"; return ;;
        bulkhead) args+=(-U gated) ;;
        pgb2) bench_pgbouncer_start 2; args+=(-h 127.0.0.1 -p "$PGB_PORT") ;;
    esac
    bench_tpcb_reset
    bench_pgbench "${args[@]}" || { bench_pgbouncer_stop; exit 1; }
    bench_pgbouncer_stop
}

SERIES=()
for n in "${SIZES[@]}"; do SERIES+=("handoff/$n"); done
SERIES+=("bulkhead/$CLIENTS" "pgb2/$CLIENTS")
declare -A runs p99s failed
for ((r = 1; r <= ROUNDS; r++)); do
    for hp in off on; do
        use_pages "$hp"
        for s in "${SERIES[@]}"; do
            out=$(run "$s")
            read -r v p f <<<"$out"
            bench_progress "round $r/$ROUNDS, huge_pages $hp, $s: $v"
            runs[$hp/$s]+="$v "
            [ -z "$p" ] || p99s[$hp/$s]+="$p "
            failed[$hp/$s]=$((${failed[$hp/$s]:-0} + ${f:-0}))
        done
    done
done
declare -A med
for k in "${!runs[@]}"; do med[$k]=$(bench_median <<<"${runs[$k]}"); done

bench_header "Huge pages: many backends with the shared memory in 2 MB pages against 4 kB pages ($SECS s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/hugepages.sh $SECS $ROUNDS\`. One cluster, restarted between \`huge_pages = off\` and \`on\` (ALTER SYSTEM), which alternate inside every round; the $need huge pages of 2 MB it maps with \`on\` are reserved (\`vm.nr_hugepages\`) for each such start." \
     "handoff/N: grants per second of one permit with N backends looping on it (FIFO, ${WINDOW} s windows, as handoff.sh); bulkhead/$CLIENTS: tpcb-like at scale 1, $CLIENTS clients, through \`bulkhead.workload\` (B = $PERMITS); pgb2/$CLIENTS: the same through PgBouncer, a pool of 2, ungated."
damon=$(for d in /sys/kernel/mm/damon/admin/kdamonds/*/; do
            if [ ! -r "$d/state" ] || [ "$(cat "$d/state")" != on ]; then continue; fi
            printf '%s ' "$(cat "$d"contexts/0/operations 2>/dev/null)/$(cat "$d"contexts/0/schemes/0/action 2>/dev/null || echo none)"
        done)
echo "The kernel's DAMON page scanner (kdamond): ${damon:+running (operations/action: ${damon% })}${damon:-not running}."
echo
echo "| series | huge_pages = off | runs | p99 ms | huge_pages = on | runs | p99 ms | on / off |"
echo "|---|---:|---|---:|---:|---|---:|---:|"
for s in "${SERIES[@]}"; do
    p_off=- p_on=-
    [ -z "${p99s[off/$s]:-}" ] || p_off=$(bench_median <<<"${p99s[off/$s]}")
    [ -z "${p99s[on/$s]:-}" ] || p_on=$(bench_median <<<"${p99s[on/$s]}")
    echo "| $s | ${med[off/$s]} | ${runs[off/$s]% } | $p_off | ${med[on/$s]} | ${runs[on/$s]% } | $p_on | $(bench_ratio "${med[on/$s]}" "${med[off/$s]}") |"
done
echo
big=${SIZES[-1]} small=${SIZES[0]}
for hp in off on; do
    echo "- huge_pages = $hp: hand-off with $big queued $(bench_ratio "${med[$hp/handoff/$big]}" "${med[$hp/handoff/$small]}")× the rate with $small;" \
         "bulkhead at $CLIENTS clients $(bench_ratio "${med[$hp/bulkhead/$CLIENTS]}" "${med[$hp/pgb2/$CLIENTS]}")× PgBouncer pool 2."
done
for hp in off on; do
    r=$(bench_ratio "${med[$hp/bulkhead/$CLIENTS]}" "${med[$hp/pgb2/$CLIENTS]}")
    met=0; bench_at_least "$r" 0.8 || met=1
    bench_target "huge_pages = $hp, $CLIENTS clients: bulkhead alone ≥ 0.8× PgBouncer pool 2 (${r}×)" "$met"
done
total_failed=0
for k in "${!failed[@]}"; do total_failed=$((total_failed + failed[$k])); done
bench_target "no failed transaction ($total_failed failed)" "$([ "$total_failed" -eq 0 ]; echo $?)"
echo

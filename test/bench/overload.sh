#!/usr/bin/env bash
# test/bench/overload.sh (scenario 4): overload protection.  pgbench's
# built-in write transaction (-M simple) at 1 to 256 clients, five ways:
#   ungated     straight to the server
#   DIY         BEGIN; SELECT diy_acquire(1, B, '5s', xact => true); ...  (advisory
#               locks polled every 1 ms, see diy_semaphore.sql)
#   PgBouncer   through Debian's PgBouncer, transaction pooling, pool size P
#   bulkhead    BEGIN; SELECT bulkhead_acquire_xact('tpcb'); ...
#   workload    the unchanged built-in script, as a role whose
#               bulkhead.workload is 'tpcb' (transparent admission)
# B (the workload's max_running, also the DIY semaphore's slots) and P are
# each chosen first as the best of a few at 128 clients.  At each client
# count the five alternate, SECONDS each, ROUNDS rounds; figures are medians.
#
#   bash test/bench/overload.sh [VARIANT [SECONDS [ROUNDS]]]   (as root)
# VARIANT: scale1 (tpcb-like at scale 1, the default), scale10 (tpcb-like
# at scale 10) or simple-update (pgbench -N at scale 1: no branch and teller
# updates).  Defaults: 10 s runs, 3 rounds for scale1, 1 for the others.
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=pgbouncer.sh
. "$here/pgbouncer.sh"

VARIANT=${1:-scale1}
case $VARIANT in
    scale1)        SCALE=1;  BUILTIN=tpcb-like;     ROUNDS=${3:-3}
                   CLIENTS=(1 2 4 8 16 32 64 128 256); B_CHOICES=(1 2 3 4) ;;
    scale10)       SCALE=10; BUILTIN=tpcb-like;     ROUNDS=${3:-1}
                   CLIENTS=(2 8 32 128 256);           B_CHOICES=(2 4 8) ;;
    simple-update) SCALE=1;  BUILTIN=simple-update; ROUNDS=${3:-1}
                   CLIENTS=(2 8 32 128 256);           B_CHOICES=(2 4 8) ;;
    *) bh_die "unknown variant $VARIANT (scale1, scale10 or simple-update)" ;;
esac
SECS=${2:-10}
SELECT_SECS=5
SELECT_CLIENTS=128
POOL_CHOICES=(2 4)
if bench_quick; then
    SECS=1; SELECT_SECS=1; ROUNDS=1; SELECT_CLIENTS=16
    CLIENTS=(2 16); B_CHOICES=(1 2); POOL_CHOICES=(2)
fi
SERIES=(ungated diy pgbouncer bulkhead workload)

BH_PACKAGES+=(pgbouncer)
bench_prepare
bench_cluster_start "max_connections = 300"
bench_tpcb_setup "$SCALE" "${B_CHOICES[0]}"
bench_psql <"$here/diy_semaphore.sql"

# the built-in script with one more statement after BEGIN
gated_script() {    # gated_script NAME STATEMENT
    {
        echo "\\set aid random(1, $((100000 * SCALE)))"
        echo "\\set bid random(1, $SCALE)"
        echo "\\set tid random(1, $((10 * SCALE)))"
        echo "\\set delta random(-5000, 5000)"
        echo "BEGIN;"
        echo "$2"
        echo "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;"
        echo "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"
        if [ "$BUILTIN" = tpcb-like ]; then
            echo "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;"
            echo "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;"
        fi
        echo "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);"
        echo "END;"
    } | bench_pgbench_script "$1"
}
bulkhead_file=$(gated_script bulkhead "SELECT bulkhead_acquire_xact('tpcb');")

set_permits() {    # the workload's B, and the DIY semaphore's slots
    B=$1
    diy_file=$(gated_script diy "SELECT diy_acquire(1, $B, '5s', xact => true);")
    bench_psql -c "UPDATE bulkhead_workload SET max_running = $B WHERE name = 'tpcb'"
    for _ in $(seq 200); do
        [ "$(bench_psql -tAc "SELECT max_running FROM bulkhead_stats WHERE workload = 'tpcb'")" = "$B" ] && return
        sleep 0.05
    done
    bh_die "max_running = $B was not loaded"
}

run() {    # run SERIES/CLIENTS [SECONDS]
    local series=${1%/*} clients=${1#*/} secs=${2:-$SECS}
    local args=(-M simple -c "$clients" -j "$((clients < 2 ? 1 : 2))" -T "$secs")
    bench_tpcb_reset    # every run starts from the same tables
    case $series in
        ungated)   bench_pgbench "${args[@]}" -b "$BUILTIN" ;;
        diy)       bench_pgbench "${args[@]}" -f "$diy_file" ;;
        pgbouncer) bench_pgbench "${args[@]}" -h 127.0.0.1 -p "$PGB_PORT" -b "$BUILTIN" ;;
        bulkhead)  bench_pgbench "${args[@]}" -f "$bulkhead_file" ;;
        workload)  bench_pgbench "${args[@]}" -U gated -b "$BUILTIN" ;;
    esac
}

# choose B and the pool size at SELECT_CLIENTS clients
declare -A choice_tps
best_b= best_tps=-1
for b in "${B_CHOICES[@]}"; do
    set_permits "$b"
    read -r tps _ <<<"$(run "bulkhead/$SELECT_CLIENTS" "$SELECT_SECS")"
    bench_progress "B = $b: $tps TPS at $SELECT_CLIENTS clients"
    choice_tps[B=$b]=$tps
    if [ "$tps" -gt "$best_tps" ]; then best_b=$b best_tps=$tps; fi
done
set_permits "$best_b"
if [ -n "$BENCH_OUT" ]; then echo "$best_b" >"$BENCH_OUT/overload-$VARIANT.permits"; fi
best_pool= best_tps=-1
for p in "${POOL_CHOICES[@]}"; do
    bench_pgbouncer_start "$p"
    read -r tps _ <<<"$(run "pgbouncer/$SELECT_CLIENTS" "$SELECT_SECS")"
    bench_pgbouncer_stop
    bench_progress "PgBouncer pool $p: $tps TPS at $SELECT_CLIENTS clients"
    choice_tps[pool=$p]=$tps
    if [ "$tps" -gt "$best_tps" ]; then best_pool=$p best_tps=$tps; fi
done
bench_pgbouncer_start "$best_pool"
bench_psql -c "SELECT bulkhead_stats_reset('tpcb')" >/dev/null

data=
if [ -n "$BENCH_OUT" ]; then
    data=$BENCH_OUT/overload-$VARIANT.dat
    echo "# clients ${SERIES[*]/%/ TPS p99_ms}" >"$data"
fi
rows=()
for c in "${CLIENTS[@]}"; do
    keys=("${SERIES[@]/%//$c}")
    bench_alternate "$ROUNDS" run "${keys[@]}"
    row="| $c |" line="$c" fails=
    for s in "${SERIES[@]}"; do
        row+=" ${TPS[$s/$c]} | ${P99[$s/$c]} |"
        line+=" ${TPS[$s/$c]} ${P99[$s/$c]}"
        fails+="${FAILED[$s/$c]}/"
    done
    rows+=("$row ${fails%/} |")
    if [ -n "$data" ]; then echo "$line" >>"$data"; fi
done
stats=$(bench_psql -tAc "SELECT format('%s acquired, %s released, %s rejected, %s timed out, %s cancelled, peak_running %s, peak_queued %s', acquired, released, rejected_full, timed_out, cancelled, peak_running, peak_queued) FROM bulkhead_stats WHERE workload = 'tpcb'")

label=$([ "$BUILTIN" = tpcb-like ] && echo "tpcb-like" || echo "simple-update (-N)")
bench_header "Overload: $label at scale $SCALE (pgbench -M simple, ${SECS} s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/overload.sh $VARIANT $SECS $ROUNDS\`."
echo "Chosen at $SELECT_CLIENTS clients ($SELECT_SECS s each): B = **$best_b** (the bulkhead workload's max_running and the DIY semaphore's slots;" \
     "$(for b in "${B_CHOICES[@]}"; do printf 'B=%s: %s TPS, ' "$b" "${choice_tps[B=$b]}"; done | sed 's/, $//'))," \
     "PgBouncer default_pool_size = **$best_pool** ($(for p in "${POOL_CHOICES[@]}"; do printf 'pool %s: %s TPS, ' "$p" "${choice_tps[pool=$p]}"; done | sed 's/, $//'))."
echo "Series: ungated (\`-b $BUILTIN\`); DIY semaphore (\`SELECT diy_acquire(1, $best_b, '5s', xact => true)\` after BEGIN); PgBouncer $(/usr/sbin/pgbouncer --version | head -n 1 | awk '{ print $2 }') (transaction pooling);" \
     "bulkhead (\`SELECT bulkhead_acquire_xact('tpcb')\` after BEGIN); bulkhead.workload (\`-b $BUILTIN\` as a role with \`bulkhead.workload = 'tpcb'\`)."
echo
echo "| clients | ungated TPS | p99 ms | DIY TPS | p99 ms | PgBouncer TPS | p99 ms | bulkhead TPS | p99 ms | bulkhead.workload TPS | p99 ms | failed (u/D/P/b/w) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo
echo "bulkhead_stats of the workload over these runs: $stats."
echo

# the ungated peak, and the ratios at the high client counts
peak_c=${CLIENTS[0]}
for c in "${CLIENTS[@]}"; do
    if [ "${TPS[ungated/$c]}" -gt "${TPS[ungated/$peak_c]}" ]; then peak_c=$c; fi
done
peak=${TPS[ungated/$peak_c]}
echo "Ungated peak: $peak TPS at $peak_c clients."
echo
high=("${CLIENTS[@]: -2}")
for c in "${high[@]}"; do
    for s in bulkhead workload; do
        echo "- $c clients, $s: $(bench_ratio "${TPS[$s/$c]}" "$peak")× the ungated peak," \
             "$(bench_ratio "${TPS[$s/$c]}" "${TPS[pgbouncer/$c]}")× PgBouncer's TPS," \
             "p99 $(bench_ratio "${P99[$s/$c]}" "${P99[ungated/$c]}")× ungated's."
    done
done
echo
[ "$VARIANT" = scale1 ] || exit 0
failed_bh=0
for c in "${CLIENTS[@]}"; do failed_bh=$((failed_bh + FAILED[bulkhead/$c] + FAILED[workload/$c])); done
for c in "${high[@]}"; do
    r=$(bench_ratio "${TPS[bulkhead/$c]}" "$peak"); bench_at_least "$r" 0.8 && met=0 || met=1
    bench_target "$c clients: bulkhead_acquire_xact ≥ 0.8× the ungated peak (${r}×)" $met
    r=$(bench_ratio "${TPS[workload/$c]}" "$peak"); bench_at_least "$r" 0.9 && met=0 || met=1
    bench_target "$c clients: bulkhead.workload ≥ 0.9× the ungated peak (${r}×)" $met
    for s in bulkhead workload; do
        r=$(bench_ratio "${TPS[$s/$c]}" "${TPS[pgbouncer/$c]}"); bench_at_least "$r" 2 && met=0 || met=1
        bench_target "$c clients: $s ≥ 2× PgBouncer's TPS (${r}×)" $met
    done
done
c=${high[0]}
for s in bulkhead workload; do
    r=$(bench_ratio "${P99[$s/$c]}" "${P99[ungated/$c]}"); bench_at_least 0.2 "$r" && met=0 || met=1
    bench_target "$c clients: $s p99 ≤ 0.2× ungated's (${P99[$s/$c]} ms against ${P99[ungated/$c]} ms, ${r}×)" $met
done
bench_target "no failed transaction through bulkhead ($failed_bh failed)" "$([ "$failed_bh" = 0 ] && echo 0 || echo 1)"

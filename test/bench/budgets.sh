#!/usr/bin/env bash
# test/bench/budgets.sh: shared budgets.  Two workloads on one server:
#   checkout   pgbench's tpcb-like (-M simple) at 16 clients, role "checkout"
#              (bulkhead.workload = 'checkout': transparent admission)
#   reports    a slow read, SELECT pg_sleep(0.05), count(*) FROM
#              pgbench_accounts, at 64 clients, role "reports"
#              (bulkhead.workload = 'reports')
# First a sweep of checkout alone under a fixed limit (1, 2, 3, 4, 6, 8)
# gives the server's best concurrency C (at least 2).  Then, alternating,
# ROUNDS rounds of SECONDS each, the series:
#   ungated         both, no gate (the roles without bulkhead.workload)
#   siloed          both, fixed limits: checkout R, reports C - R
#   budget          both, one budget "shop" (max_running C): checkout
#                   reserved R (most of C), weight 300; reports reserved
#                   0, weight 100; each may run up to C
#   weights         both, the same budget without reservations (weights
#                   300 and 100 only)
#   strong          both, the budget with checkout reserved R and the
#                   extreme weights 10000 and 1: reports borrow the shared
#                   part only when checkout leaves it free
#   checkout alone  the budget, reports idle
#   beside one      the budget, and one ungated reports client: what one
#                   report at a time costs checkout whatever the gate
#                   (its snapshot holds back pruning of the rows checkout
#                   updates, and it takes CPU)
#   beside a queue  the budget, and every reports client queued: reports
#                   leave the budget for a limit of 1 whose permit a
#                   sleeping session holds for the run (what a queue of
#                   waiting backends costs checkout; none of them runs)
#   reports, checkout idle: with the budget, and with weights only
#   reports shared  reports alone under a fixed limit of C - R (the shared
#                   part of the budget, all that they may borrow)
#   reports whole   reports alone under a fixed limit of C (the whole
#                   budget to themselves)
# where R = ceil(3C/4), at most C - 1.  Each figure is the median of the
# rounds; ratios and targets are computed here.
#
#   bash test/bench/budgets.sh [SECONDS [ROUNDS]]   (as root; default 15 2,
#                                                   about 7 minutes)
#   BENCH_QUICK=1 bash test/bench/budgets.sh        smoke run (figures meaningless)
#   BUDGETS_SERIES="ungated siloed" bash test/bench/budgets.sh   some series only
#
# The server runs on CPU 0 and both pgbench processes on CPU 1 (cluster.sh).
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then SECS=${1:-1}; ROUNDS=${2:-1}; else SECS=${1:-15}; ROUNDS=${2:-2}; fi
case $SECS$ROUNDS in *[!0-9]*|'') bh_die "usage: bash test/bench/budgets.sh [SECONDS [ROUNDS]]" ;; esac
CHECKOUT_CLIENTS=16
REPORTS_CLIENTS=64
SWEEP=(1 2 3 4 6 8)
SWEEP_SECS=6
# a smoke run: fewer reports clients and transactions (each holds its permit
# 55 ms: 128 of them through one permit would take 7 s a series)
REPORTS_QUICK_XACTS=$BENCH_QUICK_XACTS
if bench_quick; then SWEEP=(2 4); SWEEP_SECS=1; REPORTS_CLIENTS=16; REPORTS_QUICK_XACTS=32; fi
ALL_SERIES=(ungated siloed budget weights strong checkout_alone checkout_beside_one checkout_beside_queue
            reports_idle_budget reports_idle_weights reports_shared reports_whole)
# (the smoke run leaves out the series that only add comparisons)
QUICK_SERIES=(siloed budget strong checkout_alone reports_idle_budget reports_shared reports_whole)
if bench_quick; then DEFAULT_SERIES=("${QUICK_SERIES[@]}"); else DEFAULT_SERIES=("${ALL_SERIES[@]}"); fi
read -r -a SERIES <<<"${BUDGETS_SERIES:-${DEFAULT_SERIES[*]}}"
for s in "${SERIES[@]}"; do
    printf '%s\n' "${ALL_SERIES[@]}" | grep -qxF "$s" || bh_die "unknown series $s (${ALL_SERIES[*]})"
done
has() { printf '%s\n' "${SERIES[@]}" | grep -qxF "$1"; }

load_start=$(awk '{ print $1, $2, $3 }' /proc/loadavg)
bench_prepare
bench_cluster_start "max_connections = 120"
bench_progress "pgbench -i -s 1"
runuser -u postgres -- "$BH_BINDIR/pgbench" -i -q -s 1 -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >/dev/null 2>&1 ||
    bh_die "pgbench -i failed"
has_budgets=$(bench_psql -tAc "SELECT count(*) FROM pg_attribute
    WHERE attrelid = 'bulkhead_workload'::regclass AND attname IN ('parent', 'reserved', 'weight')")
bench_psql <<'SQL'
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('checkout', 1, 1000, '60s'), ('reports', 1, 1000, '60s');
CREATE ROLE checkout LOGIN;
CREATE ROLE reports LOGIN;
GRANT ALL ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO checkout;
GRANT SELECT ON pgbench_accounts TO reports;
SQL
if [ "$has_budgets" = 3 ]; then
    bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
                   VALUES ('shop', 1, 0, '60s')"
else
    for s in "${SERIES[@]}"; do
        case $s in ungated|siloed|reports_shared|reports_whole) ;;
            *) bh_die "bulkhead_workload has no parent/reserved/weight (shared budgets): run only BUDGETS_SERIES=\"ungated siloed reports_shared reports_whole\"" ;;
        esac
    done
fi
bench_wait_loaded checkout
bench_wait_loaded reports
reports_file=$(printf '\\set x 1\nSELECT pg_sleep(0.05), count(*) FROM pgbench_accounts;\n' |
    bench_pgbench_script reports)

# gate ROLE on|off: the role's transactions take permits of its workload
gate() {
    if [ "$2" = on ]; then
        bench_psql -c "ALTER ROLE $1 SET bulkhead.workload = '$1'" >/dev/null
    else
        bench_psql -c "ALTER ROLE $1 RESET bulkhead.workload" >/dev/null
    fi
}

# shape NAME PARENT MAX_RUNNING RESERVED WEIGHT: one workload's row, and
# wait until bulkhead_stats shows it.  The callers detach the children
# first and size the budget before they attach them, so that every
# statement keeps the sum of the reservations within the budget's limit.
shape() {
    local name=$1 parent=$2 max=$3 reserved=$4 weight=$5 want got lit=NULL
    if [ "$has_budgets" = 3 ]; then
        [ -z "$parent" ] || lit="'$parent'"
        bench_psql -c "UPDATE bulkhead_workload SET parent = $lit,
                       max_running = $max, reserved = $reserved, weight = $weight WHERE name = '$name'" >/dev/null
        want="${parent}|$max|$reserved|$weight"
        for _ in $(seq 200); do
            got=$(bench_psql -tAc "SELECT concat_ws('|', coalesce(parent, ''), max_running, reserved, weight)
                                   FROM bulkhead_stats WHERE workload = '$name'")
            [ "$got" = "$want" ] && return 0
            sleep 0.05
        done
    else
        bench_psql -c "UPDATE bulkhead_workload SET max_running = $max WHERE name = '$name'" >/dev/null
        want=$max
        for _ in $(seq 200); do
            got=$(bench_psql -tAc "SELECT max_running FROM bulkhead_stats WHERE workload = '$name'")
            [ "$got" = "$want" ] && return 0
            sleep 0.05
        done
    fi
    bh_die "workload $name: bulkhead_stats shows $got, not $want"
}

# configure SERIES: the rows and the roles' gates for that series
configure() {
    case $1 in
        ungated)
            gate checkout off; gate reports off ;;
        siloed)
            gate checkout on; gate reports on
            shape checkout "" "$R" 0 100; shape reports "" "$((C - R))" 0 100 ;;
        checkout_alone|checkout_beside_one|checkout_beside_queue|budget|reports_idle_budget|weights|reports_idle_weights|strong)
            gate checkout on
            if [ "$1" = checkout_beside_one ]; then gate reports off; else gate reports on; fi
            local rc=$R wc=300 wr=100
            case $1 in weights|reports_idle_weights) rc=0 ;; strong) wc=10000 wr=1 ;; esac
            shape checkout "" "$C" 0 "$wc"; shape reports "" "$C" 0 "$wr"
            shape shop "" "$C" 0 100
            shape checkout shop "$C" "$rc" "$wc"
            if [ "$1" = checkout_beside_queue ]; then shape reports "" 1 0 100; else shape reports shop "$C" 0 "$wr"; fi ;;
        reports_shared)
            gate checkout on; gate reports on
            shape checkout "" "$C" 0 100; shape reports "" "$((C - R))" 0 100 ;;
        reports_whole)
            gate checkout on; gate reports on
            shape checkout "" "$C" 0 100; shape reports "" "$C" 0 100 ;;
        sweep/*)
            gate checkout on; gate reports on
            shape checkout "" "${1#sweep/}" 0 100 ;;
    esac
}

# run SERIES [SECONDS]: configure, then checkout and reports at once (or
# the one the series runs); prints "CO_TPS CO_P99 CO_FAILED RP_TPS RP_P99 RP_FAILED"
# with "-" for the one that did not run
run() {
    local series=$1 secs=${2:-$SECS} co=1 rp=1 out_co out_rp pid_co="" pid_rp=""
    local rclients=$REPORTS_CLIENTS
    [ "$series" != checkout_beside_one ] || rclients=1
    case $series in
        checkout_alone|sweep/*) rp=0 ;;
        reports_*) co=0 ;;
    esac
    configure "$series"
    bench_tpcb_reset
    local pid_park=""
    if [ "$series" = checkout_beside_queue ]; then
        # the one permit of reports, held for the run by a session of its own
        bench_psql -c "SELECT bulkhead_acquire('reports')" -c "SELECT pg_sleep($((secs + 3)))" >/dev/null &
        pid_park=$!
        for _ in $(seq 200); do
            [ "$(bench_psql -tAc "SELECT running FROM bulkhead_stats WHERE workload = 'reports'")" = 1 ] && break
            sleep 0.05
        done
    fi
    out_co=$(mktemp -p "$BENCH_DIR") out_rp=$(mktemp -p "$BENCH_DIR")
    # reports first, and checkout once their clients are connected (2 s
    # more for reports, so that they run as long as checkout does): the
    # figures are those of the two sharing the server, not of a storm of
    # connections (64 connections made at once cost checkout's p99 as much
    # as 64 queued reports: results.md)
    if [ $rp = 1 ]; then
        BENCH_QUICK_XACTS=$REPORTS_QUICK_XACTS \
            bench_pgbench -M simple -U reports -c "$rclients" -j "$((rclients < 2 ? 1 : 2))" -T "$((secs + 2))" -f "$reports_file" >"$out_rp" &
        pid_rp=$!
        if [ $co = 1 ]; then
            for _ in $(seq 200); do
                [ "$(bench_psql -tAc "SELECT count(*) FROM pg_stat_activity WHERE usename = 'reports'")" -ge "$rclients" ] && break
                sleep 0.05
            done
        fi
    else
        echo "- - -" >"$out_rp"
    fi
    if [ $co = 1 ]; then
        bench_pgbench -M simple -U checkout -c "$CHECKOUT_CLIENTS" -j 2 -T "$secs" -b tpcb-like >"$out_co" &
        pid_co=$!
    else
        echo "- - -" >"$out_co"
    fi
    if [ -n "$pid_co" ]; then wait "$pid_co" || bh_die "$series: the checkout pgbench failed"; fi
    if [ -n "$pid_rp" ]; then wait "$pid_rp" || bh_die "$series: the reports pgbench failed"; fi
    if [ -n "$pid_park" ]; then wait "$pid_park" || bh_die "$series: the session holding reports' permit failed"; fi
    echo "$(cat "$out_co") $(cat "$out_rp")"
    rm -f "$out_co" "$out_rp"
}

# 1. the best concurrency C of checkout alone
declare -A sweep_tps
best=0 best_tps=-1
for b in "${SWEEP[@]}"; do
    read -r tps _ <<<"$(run "sweep/$b" "$SWEEP_SECS")"
    sweep_tps[$b]=$tps
    bench_progress "checkout alone, fixed limit $b: $tps TPS"
    if [ "$tps" -gt "$best_tps" ]; then best=$b best_tps=$tps; fi
done
C=$((best < 2 ? 2 : best))
R=$(((3 * C + 3) / 4))
[ "$R" -le $((C - 1)) ] || R=$((C - 1))
bench_progress "best concurrency $best (C = $C), checkout's reservation R = $R"

# 2. the series, alternating
declare -A CO_TPS CO_P99 RP_TPS RP_P99 FAILS
for s in "${SERIES[@]}"; do CO_TPS[$s]="" CO_P99[$s]="" RP_TPS[$s]="" RP_P99[$s]="" FAILS[$s]=0; done
for ((r = 1; r <= ROUNDS; r++)); do
    for s in "${SERIES[@]}"; do
        read -r ct cp cf rt rp rf <<<"$(run "$s")"
        bench_progress "round $r/$ROUNDS, $s: checkout $ct TPS p99 $cp ms, reports $rt TPS p99 $rp ms"
        CO_TPS[$s]+="$ct " CO_P99[$s]+="$cp " RP_TPS[$s]+="$rt " RP_P99[$s]+="$rp "
        [ "$cf" = - ] || FAILS[$s]=$((FAILS[$s] + cf))
        [ "$rf" = - ] || FAILS[$s]=$((FAILS[$s] + rf))
    done
done
med() { if [[ $1 == -* ]]; then echo -; else bench_median <<<"$1"; fi; }
declare -A total
for s in "${SERIES[@]}"; do
    CO_TPS[$s]=$(med "${CO_TPS[$s]}") CO_P99[$s]=$(med "${CO_P99[$s]}")
    RP_TPS[$s]=$(med "${RP_TPS[$s]}") RP_P99[$s]=$(med "${RP_P99[$s]}")
    total[$s]=$(awk -v a="${CO_TPS[$s]}" -v b="${RP_TPS[$s]}" 'BEGIN { printf "%.0f", (a == "-" ? 0 : a) + (b == "-" ? 0 : b) }')
done
stats=
if [ "$has_budgets" = 3 ]; then
    stats=$(bench_psql -tAc "SELECT string_agg(format('%s: acquired %s, peak_running %s, peak_queued %s', workload, acquired, peak_running, peak_queued), '; ' ORDER BY workload)
                             FROM bulkhead_stats WHERE workload IN ('checkout', 'reports', 'shop')")
fi
load_end=$(awk '{ print $1, $2, $3 }' /proc/loadavg)

# 3. the report
describe() {
    case $1 in
        ungated) echo "ungated (no bulkhead.workload)" ;;
        siloed) echo "siloed: checkout limit $R, reports limit $((C - R))" ;;
        budget) echo "budget shop $C: checkout reserved $R weight 300, reports reserved 0 weight 100" ;;
        weights) echo "budget shop $C, weights only: checkout reserved 0 weight 300, reports reserved 0 weight 100" ;;
        strong) echo "budget shop $C: checkout reserved $R weight 10000, reports reserved 0 weight 1" ;;
        checkout_alone) echo "checkout alone, budget (reports idle)" ;;
        checkout_beside_one) echo "checkout, budget, beside one ungated reports client" ;;
        checkout_beside_queue) echo "checkout, budget, beside $REPORTS_CLIENTS reports clients all queued (reports limit 1, its permit held)" ;;
        reports_idle_budget) echo "reports alone, budget (checkout idle)" ;;
        reports_idle_weights) echo "reports alone, weights only (checkout idle)" ;;
        reports_shared) echo "reports alone, limit $((C - R)) (the budget's shared part)" ;;
        reports_whole) echo "reports alone, limit $C (the whole budget)" ;;
    esac
}
bench_header "Shared budgets: checkout (tpcb-like, $CHECKOUT_CLIENTS clients) beside reports ($REPORTS_CLIENTS clients) ($SECS s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/budgets.sh $SECS $ROUNDS\`. Clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown);" \
     "load average (1, 5, 15 min) $load_start at the start, $load_end at the end" \
     "(the machine is shared: a load well above 2 at the start means other work ran beside the benchmark)."
echo "checkout: \`pgbench -M simple -b tpcb-like -c $CHECKOUT_CLIENTS -j 2\` (scale 1) as a role with \`bulkhead.workload = 'checkout'\`;" \
     "reports: \`SELECT pg_sleep(0.05), count(*) FROM pgbench_accounts\`, \`-c $REPORTS_CLIENTS -j 2\`, as a role with \`bulkhead.workload = 'reports'\`;" \
     "both at once, both pgbench processes on CPU 1. Queues of 1000, queue_timeout 60 s: nothing is refused."
echo "Best concurrency, checkout alone under a fixed limit ($SWEEP_SECS s each):" \
     "$(for b in "${SWEEP[@]}"; do printf '%s: %s TPS, ' "$b" "${sweep_tps[$b]}"; done | sed 's/, $//');" \
     "so C = **$C**, and checkout's reservation R = **$R**."
echo
echo "| series | checkout TPS | checkout p99 ms | reports TPS | reports p99 ms | total TPS | failed |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in "${SERIES[@]}"; do
    echo "| $(describe "$s") | ${CO_TPS[$s]} | ${CO_P99[$s]} | ${RP_TPS[$s]} | ${RP_P99[$s]} | ${total[$s]} | ${FAILS[$s]} |"
done
echo
[ -z "$stats" ] || { echo "bulkhead_stats over all the runs: $stats."; echo; }
# the target is the budget set to protect checkout (its reservation and a
# dominant weight); the weights 300 and 100 are shown beside it
if has strong && has checkout_alone; then
    r=$(bench_ratio "${CO_P99[strong]}" "${CO_P99[checkout_alone]}")
    bench_at_least 1.25 "$r" && met=0 || met=1
    bench_target "with the budget set to protect checkout (reserved $R, weight 10000 against 1), checkout's p99 ≤ 1.25× checkout alone (${CO_P99[strong]} ms against ${CO_P99[checkout_alone]} ms, ${r}×; reports ${RP_TPS[strong]} TPS)" "$met"
fi
if has budget && has checkout_alone; then
    r=$(bench_ratio "${CO_P99[budget]}" "${CO_P99[checkout_alone]}")
    echo "- weights 300 and 100 with checkout's reservation: checkout's p99 ${r}× checkout alone's (${CO_P99[budget]} ms against ${CO_P99[checkout_alone]} ms): each grant of the shared part to reports holds it 55 ms, and nothing is preempted"
fi
if has checkout_beside_one && has checkout_alone; then
    r=$(bench_ratio "${CO_P99[checkout_beside_one]}" "${CO_P99[checkout_alone]}")
    echo "- beside one ungated report at a time, checkout's p99 is ${r}× alone's (${CO_P99[checkout_beside_one]} ms against ${CO_P99[checkout_alone]} ms): the cost of running reports at all, whatever the gate"
fi
if has checkout_beside_queue && has checkout_alone; then
    r=$(bench_ratio "${CO_P99[checkout_beside_queue]}" "${CO_P99[checkout_alone]}")
    echo "- beside $REPORTS_CLIENTS queued reports (none running), checkout's p99 is ${r}× alone's (${CO_P99[checkout_beside_queue]} ms against ${CO_P99[checkout_alone]} ms): the cost of a queue of waiting backends (a queued statement holds no snapshot: doc/workloads.md, Transparent admission)"
fi
if has budget && has siloed; then
    r=$(bench_ratio "${CO_P99[budget]}" "${CO_P99[siloed]}")
    echo "- with the budget, checkout's p99 is ${r}× the siloed setup's (${CO_P99[budget]} ms against ${CO_P99[siloed]} ms)"
fi
if has weights && has checkout_alone; then
    r=$(bench_ratio "${CO_P99[weights]}" "${CO_P99[checkout_alone]}")
    echo "- weights only: checkout's p99 ${r}× checkout alone's (${CO_P99[weights]} ms against ${CO_P99[checkout_alone]} ms)"
fi
if has reports_idle_budget && has reports_shared; then
    r=$(bench_ratio "${RP_TPS[reports_idle_budget]}" "${RP_TPS[reports_shared]}")
    bench_at_least "$r" 0.9 && met=0 || met=1
    bench_target "borrowing: with checkout idle, reports under the budget ≥ 0.9× reports alone with the budget's whole shared part, a fixed limit of $((C - R)) (${RP_TPS[reports_idle_budget]} TPS against ${RP_TPS[reports_shared]}, ${r}×)" "$met"
fi
if has reports_idle_budget && has reports_whole; then
    r=$(bench_ratio "${RP_TPS[reports_idle_budget]}" "${RP_TPS[reports_whole]}")
    echo "- with checkout idle, reports under the budget reach ${r}× their throughput with the whole budget to themselves (${RP_TPS[reports_idle_budget]} TPS against ${RP_TPS[reports_whole]}): checkout's reservation of $R is never lent (DESIGN.md), so reports may hold $((C - R)) of $C; a target of 0.9× here would need a reservation of at most a tenth of the budget"
fi
if has reports_idle_weights && has reports_whole; then
    r=$(bench_ratio "${RP_TPS[reports_idle_weights]}" "${RP_TPS[reports_whole]}")
    echo "- weights only, checkout idle: reports ${r}× their throughput with the whole budget (${RP_TPS[reports_idle_weights]} TPS against ${RP_TPS[reports_whole]}; they may hold all $C)"
fi
for s in budget strong; do
    has "$s" && has siloed || continue
    r=$(bench_ratio "${total[$s]}" "${total[siloed]}")
    bench_at_least "$r" 1 && met=0 || met=1
    bench_target "with the budget ($(describe "$s")), total throughput (checkout + reports TPS) ≥ the siloed setup's (${total[$s]} against ${total[siloed]}, ${r}×)" "$met"
done
failed=0
for s in "${SERIES[@]}"; do [ "$s" = ungated ] || failed=$((failed + FAILS[$s])); done
bench_target "no failed transaction through bulkhead ($failed failed)" "$([ "$failed" = 0 ] && echo 0 || echo 1)"

#!/usr/bin/env bash
# test/bench/priorities.sh: priorities (1.5, issue 48 item 4), three parts.
#
# 1. Inversion.  Lanes: the role "app" runs in workload "all" (B = 100),
#    and any statement planned at MIN_COST or more goes to the lane
#    "costly" (B = 1).  A role "rep" holds costly's permit most of the time
#    (REPORTERS clients, each a report of REPORT_S seconds, back to back).
#    Movers (MOVERS clients, as app): BEGIN; UPDATE one of HOT rows;
#    a costly count(*) over pgbench_accounts (it moves the transaction into
#    costly and waits there, the row lock held); COMMIT.  Updaters
#    (UPDATERS clients, as app): UPDATE one of the same HOT rows.  An
#    updater that meets a mover's row waits for costly's queue too: a
#    priority inversion.  Series, alternating, ROUNDS rounds of SECONDS:
#      boost     bulkhead.boost_lock_holders = on (the default): a mover
#                that holds a row an updater waits for is served ahead of
#                costly's queue, and over its limit at deadlock_timeout
#      no_boost  off: the mover waits its turn (1.4's behaviour)
#    Figure: the updaters' p99 (over all their transactions of all rounds),
#    boost against no_boost, and what the inversion costs at most with the
#    boost: deadlock_timeout plus the mover's own statement.
# 2. Importance.  One workload "shop" of B = 2 (transparent admission),
#    overloaded by CLIENTS clients as "hi" and as many as "lo", each a
#    transaction of a short sleep (SLEEP_MS).  Series:
#      fifo      both roles normal importance: one queue in arrival order
#      prio      hi high, lo low (ALTER ROLE ... SET bulkhead.importance),
#                bulkhead.aging_interval = AGING_MS
#    Figures: hi's p99 in prio against the p99 of all in fifo (target: the
#    high clients are served first, a ratio well under 1), and lo's longest
#    wait in prio against its bound by aging: a low waiter is high after
#    two intervals, and then waits only for the high waiters that arrived
#    before it.
# 3. Cost (callgrind).  Instructions per acquire/release pair (the loops of
#    pair_ns.sql, as instructions.sh counts them) with this build and with
#    the library of the commit before the priorities (BENCH_BASE_REF, by
#    default the parent of the commit that added src/workload/importance.c),
#    each in a fresh cluster with the extension at 1.4 (the base library
#    has no 1.5 functions): a workload that uses neither importance nor
#    lock holders.  Target: at most +0.5%.
#
#   bash test/bench/priorities.sh [SECONDS [ROUNDS]]   (as root; default 15 3)
#   BENCH_QUICK=1 bash test/bench/priorities.sh         smoke run
#
# The server runs on CPU 0 and every pgbench on CPU 1 (cluster.sh).
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then SECS=${1:-1}; ROUNDS=${2:-1}; PAIRS=200; else SECS=${1:-15}; ROUNDS=${2:-3}; PAIRS=20000; fi
case $SECS$ROUNDS in *[!0-9]*|'') bh_die "usage: bash test/bench/priorities.sh [SECONDS [ROUNDS]]" ;; esac
REPORTERS=1 REPORT_S=0.5 MOVERS=2 UPDATERS=8 HOT=4
DEADLOCK_MS=200
CLIENTS=16 SLEEP_MS=2 AGING_MS=1000

BH_PACKAGES+=(valgrind)
bench_prepare
# the latency logs outlive each part's cluster (removed at the end)
LAT=$(bh_mktemp_dir bulkhead-prio-lat)

# the library of the commit before the priorities (part 3)
base_ref() {
    local c
    if [ -n "${BENCH_BASE_REF:-}" ]; then
        git -C "$top" rev-parse --verify -q "$BENCH_BASE_REF^{commit}"
        return
    fi
    c=$(git -C "$top" log --format=%H --diff-filter=A -- src/workload/importance.c 2>/dev/null | tail -n 1)
    [ -n "$c" ] && git -C "$top" rev-parse --verify -q "$c^"
}
BASE=$(base_ref || true)
if [ -n "$BASE" ] && [ ! -f "$BENCH_BUILDS/base/bulkhead.so" ]; then
    bench_progress "building the library before the priorities, $(git -C "$top" rev-parse --short "$BASE")"
    mkdir -p "$BENCH_BUILDS/base"
    git -C "$top" archive "$BASE" | tar -x -C "$BENCH_BUILDS/base"
    make -s -C "$BENCH_BUILDS/base" PG_CONFIG="$BH_PG_CONFIG" >/dev/null 2>&1 ||
        bh_die "the base library did not build"
fi

#---- 1. inversion ----
bench_cluster_start "max_connections = 60" "deadlock_timeout = '${DEADLOCK_MS}ms'" \
    "checkpoint_timeout = '1h'" "max_wal_size = '16GB'" "autovacuum = off"
bench_progress "pgbench -i -s 1"
runuser -u postgres -- "$BH_BINDIR/pgbench" -i -q -s 1 -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >/dev/null 2>&1 ||
    bh_die "pgbench -i failed"
bench_psql <<SQL
ANALYZE;
CREATE ROLE app LOGIN;
CREATE ROLE rep LOGIN;
GRANT ALL ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO app, rep;
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('all', 100, 1000, '60s'), ('costly', 1, 1000, '60s');
INSERT INTO bulkhead_rule (position, role, workload) VALUES (10, 'app', 'all'), (11, 'rep', 'costly');
SQL
# a lane for what costs at least half a scan of pgbench_accounts
SCAN_SQL="SELECT count(*) FROM pgbench_accounts WHERE abalance > -1000000000"
scan_cost=$(bench_psql -tAc "EXPLAIN (FORMAT JSON) $SCAN_SQL" | grep -o '"Total Cost": [0-9.]*' | head -n 1 | awk '{ print $3 }')
[ -n "$scan_cost" ] || bh_die "no plan cost for the scan"
MIN_COST=$(awk -v c="$scan_cost" 'BEGIN { printf "%.0f", c / 2 }')
bench_psql -c "INSERT INTO bulkhead_rule (position, min_cost, workload) VALUES (1, $MIN_COST, 'costly')" >/dev/null
bench_wait_loaded all
bench_wait_loaded costly

report_script=$(bench_pgbench_script report <<SQL
\set r 1
SELECT pg_sleep($REPORT_S);
SQL
)
mover_script=$(bench_pgbench_script mover <<SQL
\set aid random(1, $HOT)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
$SCAN_SQL;
COMMIT;
SQL
)
updater_script=$(bench_pgbench_script updater <<SQL
\set aid random(1, $HOT)
UPDATE pgbench_accounts SET abalance = abalance - 1 WHERE aid = :aid;
SQL
)

# inversion SERIES: one run; prints "UPDATER_TPS UPDATER_P99 MOVER_TPS FAILED BOOSTS"
inversion() {
    local series=$1 on=on pr pm pu b0 b1 out_u out_m
    [ "$series" = boost ] || on=off
    bench_psql -c "ALTER SYSTEM SET bulkhead.boost_lock_holders = $on" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 0.2
    bench_tpcb_reset
    b0=$(bench_psql -tAc "SELECT coalesce(sum(boosts), 0) FROM bulkhead_stats" 2>/dev/null || echo 0)
    BENCH_QUICK_XACTS=8 bench_pgbench -U rep -c "$REPORTERS" -T "$((SECS + 2))" -f "$report_script" >"$BENCH_DIR/report.out" &
    pr=$!
    sleep 0.3
    BENCH_QUICK_XACTS=16 bench_pgbench -U app -c "$MOVERS" -T "$SECS" -f "$mover_script" >"$BENCH_DIR/mover.out" &
    pm=$!
    BENCH_LATENCY_FILE="$LAT/lat-$series" BENCH_QUICK_XACTS=64 \
        bench_pgbench -U app -c "$UPDATERS" -j 2 -T "$SECS" -f "$updater_script" >"$BENCH_DIR/updater.out" &
    pu=$!
    wait "$pu" || bh_die "$series: the updaters' pgbench failed"
    wait "$pm" || bh_die "$series: the movers' pgbench failed"
    wait "$pr" || bh_die "$series: the reporters' pgbench failed"
    b1=$(bench_psql -tAc "SELECT coalesce(sum(boosts), 0) FROM bulkhead_stats" 2>/dev/null || echo 0)
    read -r ut up uf <"$BENCH_DIR/updater.out"
    read -r mt _ mf <"$BENCH_DIR/mover.out"
    echo "$ut $up $mt $((uf + mf)) $((b1 - b0))"
}

declare -A UTPS UP99 MTPS FAILS BOOSTS
for s in boost no_boost; do UTPS[$s]= UP99[$s]= MTPS[$s]= FAILS[$s]=0 BOOSTS[$s]=0; : >"$LAT/lat-$s"; done
for ((r = 1; r <= ROUNDS; r++)); do
    for s in boost no_boost; do
        bench_progress "inversion, $s, round $r of $ROUNDS"
        read -r ut up mt f b < <(inversion "$s")
        UTPS[$s]+="$ut " UP99[$s]+="$up " MTPS[$s]+="$mt "
        FAILS[$s]=$((FAILS[$s] + f)) BOOSTS[$s]=$((BOOSTS[$s] + b))
    done
done
settings1=$(bench_settings)
at_rest=$(bench_psql -tAc "SELECT coalesce(sum(running + queued), 0) FROM bulkhead_stats")
bench_cluster_stop

#---- 2. importance ----
bench_cluster_start "max_connections = $((2 * CLIENTS + 20))" "bulkhead.aging_interval = '${AGING_MS}ms'" \
    "checkpoint_timeout = '1h'" "autovacuum = off"
bench_psql <<SQL
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout) VALUES ('shop', 2, 1000, '60s');
CREATE ROLE hi LOGIN;
CREATE ROLE lo LOGIN;
ALTER ROLE hi SET bulkhead.workload = 'shop';
ALTER ROLE lo SET bulkhead.workload = 'shop';
SQL
bench_wait_loaded shop
work_script=$(bench_pgbench_script work <<SQL
\set r 1
SELECT pg_sleep($SLEEP_MS / 1000.0);
SQL
)

# importance SERIES: one run, hi and lo at once; prints
# "HI_TPS HI_P99 LO_TPS LO_P99 LO_MAX_MS FAILED"
importance() {
    local series=$1 ph pl hi lo
    if [ "$series" = prio ]; then hi=high lo=low; else hi=normal lo=normal; fi
    bench_psql -c "ALTER ROLE hi SET bulkhead.importance = $hi" -c "ALTER ROLE lo SET bulkhead.importance = $lo" >/dev/null
    : >"$LAT/lo-max"
    BENCH_LATENCY_FILE="$LAT/ilat-$series-hi" \
        bench_pgbench -U hi -c "$CLIENTS" -j 2 -T "$SECS" -f "$work_script" >"$BENCH_DIR/hi.out" &
    ph=$!
    BENCH_LATENCY_FILE="$LAT/ilat-$series-lo" BENCH_CLIENT_STATS="$LAT/lo-max" \
        bench_pgbench -U lo -c "$CLIENTS" -j 2 -T "$SECS" -f "$work_script" >"$BENCH_DIR/lo.out" &
    pl=$!
    wait "$ph" || bh_die "$series: the high clients' pgbench failed"
    wait "$pl" || bh_die "$series: the low clients' pgbench failed"
    read -r ht hp hf <"$BENCH_DIR/hi.out"
    read -r lt lp lf <"$BENCH_DIR/lo.out"
    echo "$ht $hp $lt $lp $(awk '{ print $1 }' "$LAT/lo-max") $((hf + lf))"
}

declare -A HTPS LTPS LMAX IFAILS
for s in fifo prio; do
    HTPS[$s]= LTPS[$s]= LMAX[$s]=0 IFAILS[$s]=0
    : >"$LAT/ilat-$s-hi"; : >"$LAT/ilat-$s-lo"
done
for ((r = 1; r <= ROUNDS; r++)); do
    for s in fifo prio; do
        bench_progress "importance, $s, round $r of $ROUNDS"
        read -r ht hp lt lp lm f < <(importance "$s")
        HTPS[$s]+="$ht " LTPS[$s]+="$lt " IFAILS[$s]=$((IFAILS[$s] + f))
        bench_at_least "${LMAX[$s]}" "$lm" || LMAX[$s]=$lm
    done
done
settings2=$(bench_settings)
bench_cluster_stop

#---- 3. cost ----
declare -A count
forms=("bulkhead session, PERFORM" "bulkhead xact, PERFORM + COMMIT")
builds=(with)
[ -z "$BASE" ] || bench_quick || builds+=(base)
for v in "${builds[@]}"; do
    bench_progress "callgrind, build $v"
    bench_use_build "$v"
    # the extension at 1.4 in both (the base library has no 1.5 functions)
    BENCH_EXTENSION_VERSION=1.4 \
    BENCH_UNDER="valgrind --tool=callgrind --trace-children=yes --collect-atstart=no \
--toggle-collect=plpgsql_call_handler --callgrind-out-file=callgrind.%p" \
        bench_cluster_start
    bench_psql -c "INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('bench', 1000, 0)" >/dev/null
    bench_psql <"$here/pair_ns.sql" >/dev/null
    bench_wait_loaded bench
    for f in "empty loop" "empty loop, COMMIT" "${forms[@]}"; do
        sql=$(bench_psql -tAc "SELECT pair_sql('$f', $PAIRS)")
        pid=$(bench_psql -tA -c "$sql" -c "SELECT pg_backend_pid()" | tail -n 1)
        file="$BENCH_DIR/callgrind.$pid"
        for _ in $(seq 100); do grep -q '^totals:' "$file" 2>/dev/null && break; sleep 0.1; done
        count[$v/$f]=$(awk '/^totals:/ { print $2 }' "$file")
    done
    bench_cluster_stop
done
bench_use_build with
per_pair() {    # per_pair BUILD FORM: instructions per pair, net of its empty loop
    local e="empty loop"
    case $2 in *COMMIT) e="empty loop, COMMIT" ;; esac
    awk -v t="${count[$1/$2]}" -v e="${count[$1/$e]}" -v n="$PAIRS" 'BEGIN { printf "%.0f", (t - e) / n }'
}

#---- the report ----
p99_of() { bench_p99 <"$LAT/$1"; }
max_of() { sort -n "$LAT/$1" | tail -n 1 | awk '{ printf "%.1f", $1 / 1000 }'; }
bench_header "Priorities: a queued lock holder served first, importance within a queue (1.5)"
echo "Command: \`bash test/bench/priorities.sh $SECS $ROUNDS\`; $ROUNDS rounds of $SECS s per series, alternating."
echo
echo "**Inversion.** Lane costly (B = 1) held by $REPORTERS report client(s) of ${REPORT_S} s each, back to back;" \
     "$MOVERS mover client(s): BEGIN; UPDATE one of $HOT rows; a scan planned at $scan_cost (the lane takes $MIN_COST or more); COMMIT;" \
     "$UPDATERS updater clients: UPDATE one of the same $HOT rows. deadlock_timeout = ${DEADLOCK_MS}ms. $settings1"
echo
echo "| series | updaters' TPS (median) | updaters' p99 ms (pooled) | updaters' longest ms | movers' TPS (median) | boosts | failed |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in boost no_boost; do
    echo "| $s | $(bench_median <<<"${UTPS[$s]}") | $(p99_of "lat-$s") | $(max_of "lat-$s") | $(bench_median <<<"${MTPS[$s]}") | ${BOOSTS[$s]} | ${FAILS[$s]} |"
done
echo
pb=$(p99_of lat-boost) pn=$(p99_of lat-no_boost)
ratio=$(bench_ratio "$pb" "$pn")
echo "Updaters' p99 with the boost / without it: **$ratio**. Permits held or awaited at rest: $at_rest."
bench_at_least 1 "$ratio" && [ "${FAILS[boost]}" = 0 ] && met=0 || met=1
bench_quick && met=0
bench_target "the updaters' p99 with the boost is below their p99 without it (${ratio}x), no failed transaction" "$met"
echo
echo "**Importance.** Workload shop (B = 2), $CLIENTS clients as hi and $CLIENTS as lo, each a transaction of pg_sleep(${SLEEP_MS} ms);" \
     "fifo: both normal; prio: hi high, lo low; bulkhead.aging_interval = ${AGING_MS}ms. $settings2"
echo
echo "| series | hi TPS (median) | hi p99 ms | lo TPS (median) | lo p99 ms | lo longest ms | failed |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in fifo prio; do
    echo "| $s | $(bench_median <<<"${HTPS[$s]}") | $(p99_of "ilat-$s-hi") | $(bench_median <<<"${LTPS[$s]}") | $(p99_of "ilat-$s-lo") | ${LMAX[$s]} | ${IFAILS[$s]} |"
done
echo
fifo_all=$(cat "$LAT/ilat-fifo-hi" "$LAT/ilat-fifo-lo" | bench_p99)
hr=$(bench_ratio "$(p99_of ilat-prio-hi)" "$fifo_all")
bound=$(awk -v a="$AGING_MS" 'BEGIN { printf "%.0f", 3 * a }')
echo "High's p99 in prio / everyone's p99 in fifo: **$hr**. Low's longest wait in prio: ${LMAX[prio]} ms; by aging a low waiter is high after $((2 * AGING_MS)) ms, then waits for the high waiters ahead of it: bound taken as 3 intervals, $bound ms."
bench_at_least 1 "$hr" && met=0 || met=1
bench_quick && met=0
bench_target "high importance's p99 below FIFO's (${hr}x)" "$met"
bench_at_least "$bound" "${LMAX[prio]}" && met=0 || met=1
bench_quick && met=0
bench_target "low importance's longest wait within its aging bound (${LMAX[prio]} ms ≤ $bound ms)" "$met"
echo
echo "**Cost** (callgrind, instructions per pair, $PAIRS pairs in one PL/pgSQL loop, net of the empty loop; a workload without importance or lock holders):"
echo
if [ "${#builds[@]}" -gt 1 ]; then
    echo "| loop form | before the priorities ($(git -C "$top" rev-parse --short "$BASE")) | 1.5 | 1.5 / before |"
    echo "|---|---:|---:|---:|"
    worst=0
    for f in "${forms[@]}"; do
        a=$(per_pair base "$f") b=$(per_pair with "$f")
        r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", b / a }')
        bench_at_least "$worst" "$r" || worst=$r
        echo "| ${f#bulkhead } | $a | $b | $r |"
    done
    echo
    bench_at_least 1.005 "$worst" && met=0 || met=1
    bench_target "a pair that uses neither importance nor lock holders costs at most +0.5% (worst ${worst}x)" "$met"
else
    for f in "${forms[@]}"; do echo "- ${f#bulkhead }: $(per_pair with "$f") instructions"; done
    echo
    echo "(the base build is not measured in a smoke run)"
fi
rm -rf "$LAT"

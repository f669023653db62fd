#!/usr/bin/env bash
# test/bench/statements_cost.sh: what bulkhead.track_statements (1.4,
# issue 42) costs a statement, counted by valgrind's callgrind in the
# backend that runs the transactions, as lanes_cost.sh counts the lanes.
#
# A plain role "gated" runs N transactions in one psql session (one backend:
# each statement a simple-protocol query), with bulkhead.workload = 'wide'
# (B = 1000, never full): "simple", one SELECT by primary key per
# transaction, and "multi", BEGIN; a SELECT by primary key; another; an
# INSERT; COMMIT.  Query identifiers come from compute_query_id = on, in
# both configurations, and pg_stat_statements is not loaded: the difference
# is bulkhead's alone.  A backend's count (its whole life) is taken for N1
# and for N2 transactions in two fresh sessions; (count(N2) - count(N1)) /
# (N2 - N1) is one transaction's.  Each count is taken REPS times, each in a
# fresh cluster, and shown as the median with half its range.
#
#   off  bulkhead.track_statements = off for the role
#   on   bulkhead.track_statements = on (ALTER ROLE gated SET ...)
#
# With tracking on, a statement that starts holding the permit counts a
# call: simple has 1 per transaction, multi 4 (the two SELECTs, the INSERT
# and the COMMIT; BEGIN comes before the permit).  The extra instructions
# per counted statement, and in time: instructions times the machine's
# nanoseconds per instruction (the gated backend's user CPU time per simple
# transaction in a native run, pgbench -c 1 for SECONDS, over callgrind's
# count of it: an upper bound, since the CPU time includes what callgrind
# cannot count).  Target: under 1 us per statement.
#
#   bash test/bench/statements_cost.sh [N1 N2 [SECONDS [REPS]]]
#                                      (as root; default 400 2000 5 3)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then
    N1=${1:-5} N2=${2:-15} SECS=${3:-1} REPS=${4:-1}
else
    N1=${1:-400} N2=${2:-2000} SECS=${3:-5} REPS=${4:-3}
fi
ROWS=10000
bench_quick && ROWS=1000

BH_PACKAGES+=(valgrind)
bench_prepare

setup_sql() {
    cat <<SQL
CREATE TABLE sc_accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, filler char(84));
INSERT INTO sc_accounts SELECT g, 1, 0, '' FROM generate_series(1, $ROWS) g;
CREATE TABLE sc_tellers (tid int PRIMARY KEY, bid int NOT NULL, tbalance int NOT NULL, filler char(84));
INSERT INTO sc_tellers SELECT g, 1, 0, '' FROM generate_series(1, 10) g;
CREATE TABLE sc_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
VACUUM ANALYZE sc_accounts, sc_tellers, sc_history;
CREATE ROLE gated LOGIN;
GRANT ALL ON sc_accounts, sc_tellers, sc_history TO gated;
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('wide', 1000, 0);
ALTER ROLE gated SET bulkhead.workload = 'wide';
SQL
}

# workload_sql simple|multi N: N transactions, then the backend's pid
workload_sql() {
    local i aid tid
    echo '\o /dev/null'
    for ((i = 1; i <= $2; i++)); do
        aid=$(((i * 7919) % ROWS + 1)) tid=$((i % 10 + 1))
        if [ "$1" = simple ]; then
            echo "SELECT abalance FROM sc_accounts WHERE aid = $aid;"
        else
            echo "BEGIN;"
            echo "SELECT abalance FROM sc_accounts WHERE aid = $aid;"
            echo "SELECT tbalance FROM sc_tellers WHERE tid = $tid;"
            echo "INSERT INTO sc_history (tid, bid, aid, delta, mtime) VALUES ($tid, 1, $aid, 1, CURRENT_TIMESTAMP);"
            echo "COMMIT;"
        fi
    done
    echo '\o'
    echo 'SELECT pg_backend_pid();'
}
# statements per transaction counted as calls with tracking on
counted_statements() { if [ "$1" = simple ]; then echo 1; else echo 4; fi; }

session_count() {    # session_count WORKLOAD N: one backend's instructions
    local sql=$BENCH_DIR/$1-$2.sql pid file
    [ -f "$sql" ] || { workload_sql "$1" "$2" >"$sql"; chown postgres "$sql"; }
    pid=$(bench_psql -U gated -tA -f "$sql" | tail -n 1)
    file="$BENCH_DIR/callgrind.$pid"
    for _ in $(seq 300); do grep -q '^totals:' "$file" 2>/dev/null && break; sleep 0.1; done
    grep -q '^totals:' "$file" || bh_die "no callgrind count for backend $pid"
    awk '/^totals:/ { print $2 }' "$file"
}

per_xact() {    # per_xact WORKLOAD: one transaction's instructions
    local c1 c2
    c1=$(session_count "$1" "$N1")
    c2=$(session_count "$1" "$N2")
    awk -v a="$c1" -v b="$c2" -v n1="$N1" -v n2="$N2" 'BEGIN { printf "%.0f", (b - a) / (n2 - n1) }'
}

configure() {    # configure off|on
    bench_psql -c "ALTER ROLE gated SET bulkhead.track_statements = $1" >/dev/null
}

CALLGRIND="valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=callgrind.%p"
CONF=("autovacuum = off" "checkpoint_timeout = '1h'" "compute_query_id = on")
declare -A counts count spread
WORKLOADS=(simple multi)
bench_quick && WORKLOADS=(simple)
for ((r = 1; r <= REPS; r++)); do
    BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}"
    setup_sql | bench_psql >/dev/null
    bench_wait_loaded wide
    for c in off on; do
        bench_progress "callgrind: track_statements = $c ($r of $REPS)"
        configure "$c"
        for w in "${WORKLOADS[@]}"; do counts[$c/$w]+="$(per_xact "$w") "; done
    done
    entries=$(bench_psql -tAc "SELECT count(*) || ' entries, ' || sum(calls) || ' calls' FROM bulkhead_statements")
    bench_cluster_stop
done
for k in "${!counts[@]}"; do
    count[$k]=$(bench_median <<<"${counts[$k]}")
    spread[$k]=$(tr ' ' '\n' <<<"${counts[$k]}" | grep . | sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print hi - lo }')
done

# natively: nanoseconds per instruction (tracking off)
bench_progress "native: the gated backend's CPU time per transaction"
bench_cluster_start "${CONF[@]}"
setup_sql | bench_psql >/dev/null
bench_wait_loaded wide
configure off
script=$(bench_pgbench_script statements-simple <<SQL
\set aid random(1, $ROWS)
SELECT abalance FROM sc_accounts WHERE aid = :aid;
SQL
)
sample() {    # user CPU of backend $1 (clock ticks) and the workload's grants
    echo "$(sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 }') $(bench_psql -tAc "SELECT acquired FROM bulkhead_stats WHERE workload = 'wide'")"
}
runuser -u postgres -- env PGAPPNAME=statements-cost "${BENCH_CLIENT_CPU[@]}" "$BH_BINDIR/pgbench" -n -M simple \
    -c 1 -T $((SECS + 1)) -f "$script" -U gated -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >"$BENCH_DIR/cpu.log" 2>&1 &
pgb=$!
pid=
for _ in $(seq 200); do
    pid=$(bench_psql -tAc "SELECT pid FROM pg_stat_activity WHERE application_name = 'statements-cost' AND backend_type = 'client backend'")
    [ -n "$pid" ] && break
    sleep 0.05
done
[ -n "$pid" ] || bh_die "the pgbench backend did not show"
sleep 0.5
read -r u0 a0 <<<"$(sample "$pid")"
sleep "$(awk -v s="$SECS" 'BEGIN { print s - 0.5 }')"
read -r u1 a1 <<<"$(sample "$pid")"
wait "$pgb" || { tail -n 5 "$BENCH_DIR/cpu.log" >&2; bh_die "pgbench failed"; }
cpu_ns=$(awk -v u="$((u1 - u0))" -v a="$((a1 - a0))" -v t="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", u * 1e9 / t / a }')
ns_per_instr=$(awk -v c="$cpu_ns" -v i="${count[off/simple]}" 'BEGIN { printf "%.4f", c / i }')
bench_cluster_stop

delta() { awk -v a="${count[on/$1]}" -v b="${count[off/$1]}" -v s="$(counted_statements "$1")" 'BEGIN { printf "%+.0f", (a - b) / s }'; }
us() { awk -v d="$1" -v n="$ns_per_instr" 'BEGIN { printf "%.3f", d * n / 1000 }'; }

bench_header "bulkhead_statements (1.4): what bulkhead.track_statements costs a statement (callgrind, N = $N1 and $N2 transactions in one backend, differenced)"
echo "CPU: $(lscpu | awk -F': *' '/^Model name/ { print $2; exit }'); clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown); $(valgrind --version)."
echo
bench_settings
echo
echo "Command: \`bash test/bench/statements_cost.sh $N1 $N2 $SECS $REPS\`. A plain role with \`bulkhead.workload = 'wide'\` (B = 1000, never full) runs N transactions in one psql session, \`compute_query_id = on\` and no pg_stat_statements (query identifiers by the core, in both configurations); \`ALTER ROLE gated SET bulkhead.track_statements\` off, then on. simple: \`SELECT abalance FROM sc_accounts WHERE aid = \$1\` ($ROWS rows), 1 call counted per transaction; multi: \`BEGIN\`, that SELECT, \`SELECT tbalance FROM sc_tellers WHERE tid = \$2\`, \`INSERT INTO sc_history ...\`, \`COMMIT\`, 4 calls counted (BEGIN comes before the permit). Each count is the median of $REPS, each in a fresh cluster; ± is half its range. Time: instructions × $ns_per_instr ns per instruction, the gated backend's user CPU time per simple transaction in a native run ($cpu_ns ns) over callgrind's count of it (${count[off/simple]}): an upper bound."
echo
echo "| transaction | tracking off | tracking on | extra per counted statement | µs |"
echo "|---|---:|---:|---:|---:|"
worst=0
for w in "${WORKLOADS[@]}"; do
    d=$(delta "$w")
    u=$(us "$d")
    bench_at_least "$worst" "$u" || worst=$u
    echo "| $w | ${count[off/$w]} ± $((spread[off/$w] / 2)) | ${count[on/$w]} ± $((spread[on/$w] / 2)) | $d | $u |"
done
echo
bench_at_least 1 "$worst" && met=0 || met=1
bench_target "bulkhead.track_statements = on adds under 1 µs per statement (at most $worst µs, callgrind count × ns per instruction)" "$met"
echo
echo "bulkhead_statements after the last cluster's runs: $entries."

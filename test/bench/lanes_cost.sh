#!/usr/bin/env bash
# test/bench/lanes_cost.sh: what statement rules and lanes' settings (1.3)
# cost a statement of transparent admission (issue 37 item 4), counted by
# valgrind's callgrind in the backend that runs the transactions.
#
# A plain role "gated" runs N transactions in one psql session (one backend:
# each statement a simple-protocol query), with bulkhead.workload = 'wide'
# (B = 1000, never full): "simple", one SELECT by primary key per
# transaction (pgbench -S's), and "multi", BEGIN; a SELECT by primary key;
# another; an INSERT; COMMIT (three statements that meet the gate).  A
# backend's count (its whole life: --collect-atstart=yes) is taken for N1
# and for N2 transactions in two fresh sessions; (count(N2) - count(N1)) /
# (N2 - N1) is one transaction's, without the session's start and its
# first statements (catalog caches).  The cluster runs with autovacuum off
# and no checkpoint in the hour, so that each series of sessions finds the
# same pages, in every build.  The count still moves by a hundred or two
# instructions from one repetition to the next (work that depends on time:
# statistics flushed, histogram buckets of the hold times), and more from
# one cluster to the next: each count is taken REPS times, each time in a
# fresh cluster of each build in turn, and shown as the median with half
# its range.
#
# 1. Without statement rules, 1.3 against 1.2: the same counts with 1.2's
#    library (built from BENCH_BASE_REF, default the commit before this
#    history's default_version became 1.3; the extension at version 1.2),
#    and without the extension preloaded (what bulkhead adds).  Target: the
#    1.3 transaction within +1% of 1.2's.
# 2. With 1.3, ten statement rules, none matching the statements (command
#    and min_cost rules of other kinds and far higher costs), and the same
#    with the tenth matching (min_cost 0, the same workload: no move); the
#    extra instructions per statement that meets the gate, and in time:
#    instructions times the machine's nanoseconds per instruction (the
#    gated backend's user CPU time per simple transaction in a native run,
#    pgbench -c 1 for SECONDS, over callgrind's count of it: an upper bound,
#    since the CPU time includes what callgrind cannot count).  Target:
#    under 1 us.  Then the same workload with settings (work_mem=1MB,
#    jit=off, max_parallel_workers_per_gather=0: three caps, each below the
#    session's value, so each is set: a GUC nesting level per phase and a
#    set_config per cap), without rules and with the ten (the tenth
#    matching: the statement is planned, then planned again under the
#    caps): no target, the figure.  And the ten rules (the tenth matching)
#    while another workload, not this session's, caps settings: while any
#    workload caps settings the planner uses, a statement that statement
#    rules match has its query copied before planning, in case its lane's
#    caps call for planning it again.
# 3. A timed cross-check, side by side: pgbench -M simple -c 1 of the simple
#    transaction, the configurations alternating (ROUNDS rounds of SECONDS),
#    server on CPU 0 and pgbench on CPU 1; times move with the machine's
#    load, instruction counts do not.
#
# test/bench/run runs it; its smoke run (--quick) counts 1.3 without rules
# and with the ten (the last matching), simple only, a few transactions.
#
#   bash test/bench/lanes_cost.sh [N1 N2 [SECONDS [ROUNDS [REPS]]]]
#                                  (as root; default 400 2000 5 5 3)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# the smoke run (about 20 s): 1.3 only, simple only, no rules and the ten
# (the last matching), no timed cross-check
if bench_quick; then
    N1=${1:-5} N2=${2:-15} SECS=${3:-1} ROUNDS=${4:-1} REPS=${5:-1}
else
    N1=${1:-400} N2=${2:-2000} SECS=${3:-5} ROUNDS=${4:-5} REPS=${5:-3}
fi
ROWS=10000
bench_quick && ROWS=1000

BH_PACKAGES+=(valgrind)
bench_prepare

# 1.2: the library of the last commit before default_version became 1.3
base_ref() {
    local c
    if [ -n "${BENCH_BASE_REF:-}" ]; then
        git -C "$top" rev-parse --verify -q "$BENCH_BASE_REF^{commit}"
        return
    fi
    c=$(git -C "$top" log --format=%H -G"default_version = '1\.3'" -- bulkhead.control 2>/dev/null | tail -n 1)
    [ -n "$c" ] && git -C "$top" rev-parse --verify -q "$c^"
}
BASE=
if ! bench_quick; then
    BASE=$(base_ref || true)
    if [ -n "$BASE" ] && [ ! -f "$BENCH_BUILDS/v12/bulkhead.so" ]; then
        bench_progress "building 1.2's library from $(git -C "$top" rev-parse --short "$BASE")"
        mkdir -p "$BENCH_BUILDS/v12"
        git -C "$top" archive "$BASE" | tar -x -C "$BENCH_BUILDS/v12"
        grep -q "default_version = '1.2'" "$BENCH_BUILDS/v12/bulkhead.control" ||
            bh_die "$BASE is not a 1.2 tree (bulkhead.control)"
        make -s -C "$BENCH_BUILDS/v12" PG_CONFIG="$BH_PG_CONFIG" >/dev/null 2>&1 ||
            bh_die "1.2's library did not build"
    fi
fi

# the tables (small: loaded under valgrind), the roles, the workloads
setup_sql() {
    cat <<SQL
CREATE TABLE lc_accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, filler char(84));
INSERT INTO lc_accounts SELECT g, 1, 0, '' FROM generate_series(1, $ROWS) g;
CREATE TABLE lc_tellers (tid int PRIMARY KEY, bid int NOT NULL, tbalance int NOT NULL, filler char(84));
INSERT INTO lc_tellers SELECT g, 1, 0, '' FROM generate_series(1, 10) g;
CREATE TABLE lc_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
VACUUM ANALYZE lc_accounts, lc_tellers, lc_history;
CREATE ROLE gated LOGIN;
GRANT ALL ON lc_accounts, lc_tellers, lc_history TO gated;
SQL
    if [ "$1" = ext ]; then
        cat <<SQL
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('wide', 1000, 0), ('other', 1000, 0);
ALTER ROLE gated SET bulkhead.workload = 'wide';
SQL
    fi
}

# workload_sql simple|multi N: N transactions, then the backend's pid
workload_sql() {
    local i aid tid
    echo '\o /dev/null'
    for ((i = 1; i <= $2; i++)); do
        aid=$(((i * 7919) % ROWS + 1)) tid=$((i % 10 + 1))
        if [ "$1" = simple ]; then
            echo "SELECT abalance FROM lc_accounts WHERE aid = $aid;"
        else
            echo "BEGIN;"
            echo "SELECT abalance FROM lc_accounts WHERE aid = $aid;"
            echo "SELECT tbalance FROM lc_tellers WHERE tid = $tid;"
            echo "INSERT INTO lc_history (tid, bid, aid, delta, mtime) VALUES ($tid, 1, $aid, 1, CURRENT_TIMESTAMP);"
            echo "COMMIT;"
        fi
    done
    echo '\o'
    echo 'SELECT pg_backend_pid();'
}
# statements per transaction that meet the gate
gated_statements() { if [ "$1" = simple ]; then echo 1; else echo 3; fi; }

# session_count WORKLOAD N: the instructions of one backend (its whole life)
# running N transactions of WORKLOAD as gated
session_count() {
    local sql=$BENCH_DIR/$1-$2.sql pid file
    [ -f "$sql" ] || { workload_sql "$1" "$2" >"$sql"; chown postgres "$sql"; }
    pid=$(bench_psql -U gated -tA -f "$sql" | tail -n 1)
    file="$BENCH_DIR/callgrind.$pid"
    for _ in $(seq 300); do grep -q '^totals:' "$file" 2>/dev/null && break; sleep 0.1; done
    grep -q '^totals:' "$file" || bh_die "no callgrind count for backend $pid"
    awk '/^totals:/ { print $2 }' "$file"
}

# per_xact WORKLOAD: one transaction's instructions, (count(N2) - count(N1)) / (N2 - N1)
per_xact() {
    local c1 c2
    c1=$(session_count "$1" "$N1")
    c2=$(session_count "$1" "$N2")
    awk -v a="$c1" -v b="$c2" -v n1="$N1" -v n2="$N2" 'BEGIN { printf "%.0f", (b - a) / (n2 - n1) }'
}

# psql as gated: a query's single value
gated_value() { bench_psql -U gated -tAc "$1"; }

# configure NAME: the statement rules and the workload's settings of a
# configuration, once the worker has loaded them (checked by what
# bulkhead_classify(query) and bulkhead_stats say)
NONE_MATCHING="(1, 'other', 1e9, NULL), (2, 'other', NULL, '{merge}'), (3, 'other', 1e9, '{select}'),
 (4, 'other', NULL, '{delete}'), (5, 'other', 1e9, NULL), (6, 'other', NULL, '{update}'),
 (7, 'other', 1e9, '{insert}'), (8, 'other', NULL, '{utility}'), (9, 'other', 1e9, NULL)"
SETTINGS="'{work_mem=1MB,jit=off,max_parallel_workers_per_gather=0}'"
configure() {
    local rules=none settings=NULL other=NULL check i
    case $1 in
        R0) ;;
        R10n) rules="$NONE_MATCHING, (10, 'other', NULL, '{delete,merge}')" ;;
        R10m) rules="$NONE_MATCHING, (10, 'wide', 0, NULL)" ;;
        R10mO) rules="$NONE_MATCHING, (10, 'wide', 0, NULL)" other=$SETTINGS ;;
        S3) settings=$SETTINGS ;;
        S3R10m) rules="$NONE_MATCHING, (10, 'wide', 0, NULL)" settings=$SETTINGS ;;
        *) bh_die "unknown configuration $1" ;;
    esac
    bench_psql -c "DELETE FROM bulkhead_rule" >/dev/null
    [ "$rules" = none ] ||
        bench_psql -c "INSERT INTO bulkhead_rule (position, workload, min_cost, command) VALUES $rules" >/dev/null
    bench_psql -c "UPDATE bulkhead_workload SET settings = $settings WHERE name = 'wide'" \
               -c "UPDATE bulkhead_workload SET settings = $other WHERE name = 'other'" >/dev/null
    case $1 in
        R0|S3) check="SELECT source = 'setting' FROM bulkhead_classify('DELETE FROM lc_history')" ;;
        R10n) check="SELECT (SELECT rule_position = 4 FROM bulkhead_classify('DELETE FROM lc_history'))
                     AND (SELECT source = 'setting' FROM bulkhead_classify('SELECT 1'))" ;;
        *) check="SELECT rule_position = 10 FROM bulkhead_classify('SELECT 1')" ;;
    esac
    check="SELECT ($check) AND (SELECT settings IS $([ "$settings" = NULL ] || echo NOT) NULL
                                 FROM bulkhead_stats WHERE workload = 'wide')
                       AND (SELECT settings IS $([ "$other" = NULL ] || echo NOT) NULL
                                 FROM bulkhead_stats WHERE workload = 'other')"
    for i in $(seq 400); do
        [ "$(gated_value "$check")" = t ] && return 0
        sleep 0.05
    done
    bh_die "configuration $1 was not loaded"
}

CALLGRIND="valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=callgrind.%p"
CONF=("autovacuum = off" "checkpoint_timeout = '1h'")
declare -A counts count spread
if bench_quick; then WORKLOADS=(simple) CONFIGS=(R0 R10m); else WORKLOADS=(simple multi) CONFIGS=(R0 R10n R10m R10mO S3 S3R10m); fi
# measure KEY WORKLOAD: one more count of KEY (a build or configuration)
measure() { counts[$1/$2]+="$(per_xact "$2") "; }

# 1 and 2, REPS times: a fresh cluster for each build in turn (the level of
# a count moves more between clusters than between sessions of one)
for ((r = 1; r <= REPS; r++)); do
    if ! bench_quick; then
        # 1. without the extension, and with 1.2's library
        bench_progress "callgrind: without bulkhead ($r of $REPS)"
        BENCH_PRELOAD=0 BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}"
        setup_sql none | bench_psql >/dev/null
        for w in "${WORKLOADS[@]}"; do measure none "$w"; done
        bench_cluster_stop
        if [ -n "$BASE" ]; then
            bench_progress "callgrind: 1.2 ($(git -C "$top" rev-parse --short "$BASE"), $r of $REPS)"
            bench_use_build v12
            BENCH_EXTENSION_VERSION=1.2 BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}"
            setup_sql ext | bench_psql >/dev/null
            bench_wait_loaded wide
            for w in "${WORKLOADS[@]}"; do measure v12 "$w"; done
            bench_cluster_stop
            bench_use_build with
        fi
    fi
    # 1.3, each configuration
    BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}"
    setup_sql ext | bench_psql >/dev/null
    bench_wait_loaded wide
    bench_wait_loaded other
    for c in "${CONFIGS[@]}"; do
        bench_progress "callgrind: 1.3, $c ($r of $REPS)"
        configure "$c"
        for w in "${WORKLOADS[@]}"; do measure "$c" "$w"; done
    done
    check=$(bench_psql -tAc "SELECT acquired || ' acquired, ' || released || ' released, ' || running || ' running, ' || moved_out || ' moved' FROM bulkhead_stats WHERE workload = 'wide'")
    bench_cluster_stop
done
# the medians, and each series' range
for k in "${!counts[@]}"; do
    count[$k]=$(bench_median <<<"${counts[$k]}")
    spread[$k]=$(tr ' ' '\n' <<<"${counts[$k]}" | grep . | sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print hi - lo }')
done

# 3. natively: nanoseconds per instruction, and the timed cross-check
bench_progress "native: the gated backend's CPU time per transaction"
bench_cluster_start "${CONF[@]}"
setup_sql ext | bench_psql >/dev/null
bench_wait_loaded wide
bench_wait_loaded other
script=$(bench_pgbench_script lanes-simple <<SQL
\set aid random(1, $ROWS)
SELECT abalance FROM lc_accounts WHERE aid = :aid;
SQL
)
# user CPU of the backend (/proc/PID/stat, field 14) and the workload's grants
sample() {
    local utime
    utime=$(sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 }')
    echo "$utime $(bench_psql -tAc "SELECT acquired FROM bulkhead_stats WHERE workload = 'wide'")"
}
configure R0
runuser -u postgres -- env PGAPPNAME=lanes-cost "${BENCH_CLIENT_CPU[@]}" "$BH_BINDIR/pgbench" -n -M simple \
    -c 1 -T $((SECS + 1)) -f "$script" -U gated -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >"$BENCH_DIR/cpu.log" 2>&1 &
pgb=$!
pid=
for _ in $(seq 200); do
    pid=$(bench_psql -tAc "SELECT pid FROM pg_stat_activity WHERE application_name = 'lanes-cost' AND backend_type = 'client backend'")
    [ -n "$pid" ] && break
    sleep 0.05
done
[ -n "$pid" ] || bh_die "the pgbench backend did not show"
sleep 0.5
read -r u0 a0 <<<"$(sample "$pid")"
sleep "$(awk -v s="$SECS" 'BEGIN { print s - 0.5 }')"
read -r u1 a1 <<<"$(sample "$pid")"
wait "$pgb" || { tail -n 5 "$BENCH_DIR/cpu.log" >&2; bh_die "pgbench failed"; }
tck=$(getconf CLK_TCK)
cpu_ns=$(awk -v u="$((u1 - u0))" -v a="$((a1 - a0))" -v t="$tck" 'BEGIN { printf "%.0f", u * 1e9 / t / a }')
ns_per_instr=$(awk -v c="$cpu_ns" -v i="${count[R0/simple]}" 'BEGIN { printf "%.4f", c / i }')

timed_configs=(R0 R10n R10m S3)
run() {    # run CONFIGURATION: one pgbench run of the simple transaction
    configure "$1" >&2
    bench_pgbench -M simple -c 1 -T "$SECS" -f "$script" -U gated
}
bench_quick || bench_alternate "$ROUNDS" run "${timed_configs[@]}"
bench_cluster_stop

# the report
delta() {    # delta CONFIG WORKLOAD: extra instructions per gated statement against R0
    awk -v a="${count[$1/$2]}" -v b="${count[R0/$2]}" -v s="$(gated_statements "$2")" \
        'BEGIN { printf "%+.0f", (a - b) / s }'
}
us() { awk -v d="$1" -v n="$ns_per_instr" 'BEGIN { printf "%.3f", d * n / 1000 }'; }
name_of() {
    case $1 in
        R0) echo "no statement rules" ;;
        R10n) echo "10 statement rules, none matching" ;;
        R10m) echo "10 statement rules, the 10th matching (same workload)" ;;
        R10mO) echo "the same, while another workload caps settings (its query copied for a second planning)" ;;
        S3) echo "lane settings (3 caps), no statement rules" ;;
        S3R10m) echo "lane settings (3 caps) and 10 rules, the 10th matching" ;;
    esac
}

bench_header "Lanes (1.3): statement rules and lanes' settings, instructions per transaction (callgrind, N = $N1 and $N2 transactions in one backend, differenced)"
echo "CPU: $(lscpu | awk -F': *' '/^Model name/ { print $2; exit }'); clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown); $(valgrind --version)."
echo
bench_settings
echo
echo "Command: \`bash test/bench/lanes_cost.sh $N1 $N2 $SECS $ROUNDS $REPS\`. A plain role with \`bulkhead.workload = 'wide'\` (B = 1000, never full) runs N transactions in one psql session; a backend's whole count for N2 transactions less its count for N1, over N2 − N1: one transaction, without the session's start and first statements. simple: \`SELECT abalance FROM lc_accounts WHERE aid = \$1\` ($ROWS rows); multi: \`BEGIN\`, that SELECT, \`SELECT tbalance FROM lc_tellers WHERE tid = \$2\`, \`INSERT INTO lc_history ...\`, \`COMMIT\` (3 statements meet the gate). Each count is the median of $REPS, each in a fresh cluster of each build in turn; ± is half its range (the count moves by a hundred or two instructions between sessions, work that depends on time, and by several hundred between clusters). Callgrind counts do not depend on the machine's load."
echo
if ! bench_quick; then
    echo "### Without statement rules: 1.3 against 1.2"
    echo
    if [ -n "$BASE" ]; then
        echo "1.2: the library built from $(git -C "$top" rev-parse --short "$BASE") (\`git log\`: $(git -C "$top" log -1 --format=%s "$BASE" | cut -c1-80)...), the extension created at version 1.2; 1.3: this tree, at 1.3, \`bulkhead_rule\` empty."
        echo
        echo "| transaction | without bulkhead | 1.2 | 1.3 | 1.3 / 1.2 | bulkhead's part, 1.2 | bulkhead's part, 1.3 | counts (without; 1.2; 1.3) |"
        echo "|---|---:|---:|---:|---:|---:|---:|---|"
        worst=0
        for w in "${WORKLOADS[@]}"; do
            r=$(awk -v a="${count[R0/$w]}" -v b="${count[v12/$w]}" 'BEGIN { printf "%.4f", a / b }')
            bench_at_least "$worst" "$r" || worst=$r
            echo "| $w | ${count[none/$w]} | ${count[v12/$w]} | ${count[R0/$w]} | $r |" \
                 "$(awk -v a="${count[v12/$w]}" -v b="${count[none/$w]}" 'BEGIN { print a - b }') |" \
                 "$(awk -v a="${count[R0/$w]}" -v b="${count[none/$w]}" 'BEGIN { print a - b }') |" \
                 "${counts[none/$w]% }; ${counts[v12/$w]% }; ${counts[R0/$w]% } |"
        done
        echo
        bench_at_least 1.01 "$worst" && met=0 || met=1
        bench_target "without statement rules a transaction costs within +1% of 1.2's (callgrind; at most $(awk -v r="$worst" 'BEGIN { printf "%+.2f%%", (r - 1) * 100 }'))" "$met"
    else
        echo "1.2 not measured: no 1.2 commit found in this tree's history (set BENCH_BASE_REF)."
    fi
    echo
fi
echo "### Per statement, 1.3"
echo
echo "Ten statement rules: nine that match no statement of these transactions (min_cost 1e9, or a command they are not: merge, delete, update, utility), and a tenth that matches none either (\`{delete,merge}\`) or every planned statement (\`min_cost 0\`, workload 'wide', the session's own: no move). Lane settings: \`settings = $SETTINGS\` on 'wide', each cap below the session's value (work_mem 4MB, jit on, 2 workers). Time: instructions × $ns_per_instr ns per instruction, the gated backend's user CPU time per simple transaction in a native run ($cpu_ns ns) over callgrind's count of it (${count[R0/simple]}): an upper bound, since the CPU time also covers what callgrind does not count."
echo
echo "| configuration | simple: instructions per transaction | extra per statement | µs | multi: instructions per transaction | extra per statement | µs |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for c in "${CONFIGS[@]}"; do
    line="| $(name_of "$c") | ${count[$c/simple]} ± $((spread[$c/simple] / 2)) | $(delta "$c" simple) | $(us "$(delta "$c" simple)")"
    if [ "${#WORKLOADS[@]}" -gt 1 ]; then
        line+=" | ${count[$c/multi]} ± $((spread[$c/multi] / 2)) | $(delta "$c" multi) | $(us "$(delta "$c" multi)") |"
    else
        line+=" | – | – | – |"
    fi
    echo "$line"
done
echo
worst=0
for c in R10n R10m; do
    for w in "${WORKLOADS[@]}"; do
        [ -n "${count[$c/$w]:-}" ] || continue
        u=$(us "$(delta "$c" "$w")")
        bench_at_least "$worst" "$u" || worst=$u
    done
done
bench_at_least 1 "$worst" && met=0 || met=1
bench_target "10 statement rules add under 1 µs per statement (at most $worst µs, callgrind count × ns per instruction)" "$met"
echo
echo "bulkhead_stats of 'wide' after the last cluster's callgrind runs of 1.3: $check."
bench_quick && exit 0
echo
echo "### Timed, side by side (pgbench -M simple -c 1, the simple transaction, ${SECS} s runs, median of $ROUNDS alternating rounds)"
echo
echo "Times move with the machine's load (other work shared these two cores); the counts above do not."
echo
echo "| configuration | TPS (median) | µs per transaction | extra µs per statement (median of the rounds' differences) | runs |"
echo "|---|---:|---:|---:|---|"
worst_spread=0
for c in "${timed_configs[@]}"; do
    # each round's difference with the R0 run of the same round, then their median
    paired=$(awk -v a="${RUNS_TPS[$c]}" -v b="${RUNS_TPS[R0]}" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) printf "%.3f ", 1e6 / x[i] - 1e6 / y[i] }' | bench_median)
    sp=$(awk -v a="${RUNS_TPS[$c]}" 'BEGIN { n = split(a, x, " "); lo = hi = x[1]
        for (i = 2; i <= n; i++) { if (x[i] < lo) lo = x[i]; if (x[i] > hi) hi = x[i] }
        printf "%.0f", (hi / lo - 1) * 100 }')
    [ "$sp" -le "$worst_spread" ] || worst_spread=$sp
    echo "| $(name_of "$c") | ${TPS[$c]} | $(awk -v t="${TPS[$c]}" 'BEGIN { printf "%.2f", 1e6 / t }') |" \
         "$(awk -v d="$paired" 'BEGIN { printf "%+.2f", d }') | ${RUNS_TPS[$c]} |"
done
echo
echo "The runs of one configuration spread by up to ${worst_spread}% (fastest over slowest): a difference smaller than that, such as the ten rules' $(awk -v d="${count[R10n/simple]}" -v b="${count[R0/simple]}" -v t="${TPS[R0]}" 'BEGIN { printf "%.2f%%", (d - b) / b * 100 }') of a transaction's instructions, is not resolved by timing here."
echo
echo "Failed transactions in the timed runs: $(for c in "${timed_configs[@]}"; do printf '%s, ' "${FAILED[$c]}"; done | sed 's/, $//')."

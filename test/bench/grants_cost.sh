#!/usr/bin/env bash
# shellcheck disable=SC2059  # printf's formats here are the statements' own
# test/bench/grants_cost.sh: what memory grants (1.4) cost a statement, and
# what a lane's settings cost now that a client's top-level statement sets
# its caps once in a statement frame (issue 41 item 5, the second and third
# bullets), counted by valgrind's callgrind in the backend that runs the
# transactions.
#
# As lanes_cost.sh: a plain role "gated" runs N transactions in one psql
# session (one backend: each statement a simple-protocol query), with
# bulkhead.workload = 'wide' (B = 1000, never full).  Transactions:
#   simple  one SELECT by primary key (pgbench -S's): no memory node;
#   multi   BEGIN; a SELECT by primary key; another; an INSERT; COMMIT
#           (three statements that meet the gate, none with a memory node);
#   sort    SELECT ... WHERE aid BETWEEN $1 AND $1 + 9 ORDER BY abalance:
#           one Sort (10 rows), a request of work_mem (4 MB);
#   hash    SELECT bid, count(*) ... WHERE aid BETWEEN $1 AND $1 + 19
#           GROUP BY bid: one HashAggregate (20 rows), a request of
#           work_mem x hash_mem_multiplier (8 MB).
# A backend's count (its whole life: --collect-atstart=yes) is taken for N1
# and for N2 transactions in two fresh sessions; (count(N2) - count(N1)) /
# (N2 - N1) is one transaction's, without the session's start and its first
# statements.  Autovacuum off, no checkpoint in the hour; each count is taken
# REPS times, each time in a fresh cluster of each build in turn, and shown
# as the median with half its range.
#
# (a) With no max_memory anywhere and bulkhead.max_memory off (-1, its
#     default): 1.4 against 1.3 (the library built from BENCH_BASE_REF,
#     default the last commit whose bulkhead.control says default_version
#     '1.3': the parent of the first that says '1.4'; the extension created
#     at 1.3) and without bulkhead.  Target: within +0.5% of 1.3.
# (b) With max_memory = '1GB' on the session's workload (every request fits
#     at once): the extra instructions per statement against (a)'s 1.4, and
#     in time (instructions x the machine's ns per instruction: the gated
#     backend's user CPU time per simple transaction in a native run,
#     pgbench -c 1 for SECONDS, over callgrind's count of it; an upper
#     bound).  Targets: a statement without a memory node under 1 us (the
#     plan walk finds nothing and no lock is taken); one with memory nodes
#     under 3 us (the walk, a lock round trip at the executor's start and
#     one at its end).  Also (no target) the server's limit alone:
#     bulkhead.max_memory = '1GB', no workload max_memory.
# (c) A lane's settings, lanes_cost.sh's case (work_mem=1MB, jit=off,
#     max_parallel_workers_per_gather=0 on 'wide', each below the session's
#     value), per statement, simple and multi, 1.3 against 1.4 side by side:
#     target under 2 us in 1.4 (1.3 set the caps around every phase: 7.8 us
#     on the Intel machine).  Two of those caps change the plan itself
#     (without parallel workers the planner considers no parallel path,
#     which saves it work), so the same is counted with three caps that no
#     SELECT's planning reads (temp_file_limit=1GB,
#     maintenance_work_mem=1MB, max_parallel_maintenance_workers=0, each
#     below the session's value): what setting caps costs by itself.  And a
#     shrunk statement: max_memory = '1MB' on
#     'wide' cuts the sort's 4 MB request to 1 MB and the hash aggregate's
#     8 MB to 1 MB (work_mem lowered to 1 MB and 512 kB: a cap, applied in
#     the statement's frame as a lane's is), against the same statement
#     granted whole (max_memory '1GB'): the shrinking's own cost; target
#     under 2 us as well (issue 41: "a shrunk statement lowers work_mem the
#     way a lane's cap does").
#
# (d) 1.5 (issue 47 item 5, the callgrind bullet), with compute_query_id =
#     on in every cluster (grant feedback keys on the query id):
#     - no max_memory anywhere: this tree against main before issue 47
#       (the library and SQL of GRANTS_COST_BASE47, default 8381b68,
#       installed with its own extension scripts for its cluster only; the
#       extension at its 1.5).  Target: nothing added (within +0.5%).
#     - feedback: max_memory '1GB' on 'wide' (sort, hash), this tree
#       against the same with bulkhead.feedback_statements = 0 (a cluster of
#       its own: no notes, nothing looked up or noted): what a statement's
#       notes cost, looked up at its start and noted at its end (its nodes'
#       peaks read); target under 1 us.
#     - shrunk, with bulkhead.memory_request = limit for the role (1.5's
#       requests by use of a 10-row sort are 64 kB, which a limit of 1 MB
#       never shrinks): max_memory '1MB' against '1GB', both at limit: the
#       shrinking's own cost; target under 2 us (2.4 us in 1.4).
#     - a grant by use: max_memory '1GB' against none (no target here;
#       (b)'s targets).
#     GRANTS_COST_PARTS (default "abcd") picks the parts: "d" alone counts
#     (d)'s configurations and the native time only.
#
# GRANTS_COST_KEEP=DIR keeps every session's callgrind file there
# (CONFIG-TRANSACTION-N.REP), for callgrind_annotate.
#
# test/bench/run runs it; its smoke run (--quick) counts 1.4 only (no
# max_memory, max_memory, a lane's settings, shrunk), a few transactions.
#
#   bash test/bench/grants_cost.sh [N1 N2 [SECONDS [REPS]]]
#                                  (as root; default 400 2000 5 3)
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
KEEP=${GRANTS_COST_KEEP:-}
PARTS=${GRANTS_COST_PARTS:-abcd}
part() { [[ $PARTS == *$1* ]]; }
BASE47_REF=${GRANTS_COST_BASE47:-8381b68}
[ -z "$KEEP" ] || mkdir -p "$KEEP"

BH_PACKAGES+=(valgrind)
bench_prepare

# 1.3: the library of the last commit whose default_version is 1.3
base_ref() {
    local c
    if [ -n "${BENCH_BASE_REF:-}" ]; then
        git -C "$top" rev-parse --verify -q "$BENCH_BASE_REF^{commit}"
        return
    fi
    c=$(git -C "$top" log --format=%H -G"default_version = '1\.4'" -- bulkhead.control 2>/dev/null | tail -n 1)
    [ -n "$c" ] && git -C "$top" rev-parse --verify -q "$c^"
}
BASE=
if ! bench_quick && part a; then
    BASE=$(base_ref || true)
    if [ -n "$BASE" ] && [ ! -f "$BENCH_BUILDS/v13/bulkhead.so" ]; then
        bench_progress "building 1.3's library from $(git -C "$top" rev-parse --short "$BASE")"
        mkdir -p "$BENCH_BUILDS/v13"
        git -C "$top" archive "$BASE" | tar -x -C "$BENCH_BUILDS/v13"
        grep -q "default_version = '1.3'" "$BENCH_BUILDS/v13/bulkhead.control" ||
            bh_die "$BASE is not a 1.3 tree (bulkhead.control)"
        make -s -C "$BENCH_BUILDS/v13" PG_CONFIG="$BH_PG_CONFIG" >/dev/null 2>&1 ||
            bh_die "1.3's library did not build"
    fi
fi

# main before issue 47: its library and its extension scripts (its 1.5)
BASE47=
if ! bench_quick && part d; then
    BASE47=$(git -C "$top" rev-parse --verify -q "$BASE47_REF^{commit}") ||
        bh_die "no commit $BASE47_REF in this tree's history (GRANTS_COST_BASE47)"
    if [ ! -f "$BENCH_BUILDS/b47/bulkhead.so" ]; then
        bench_progress "building main before issue 47 from $(git -C "$top" rev-parse --short "$BASE47")"
        mkdir -p "$BENCH_BUILDS/b47"
        git -C "$top" archive "$BASE47" | tar -x -C "$BENCH_BUILDS/b47"
        make -s -C "$BENCH_BUILDS/b47" PG_CONFIG="$BH_PG_CONFIG" >/dev/null 2>&1 ||
            bh_die "the library of $BASE47_REF did not build"
    fi
fi
# use_tree BUILD: install BUILD's library and extension scripts (its SQL
# differs from this tree's at the same version); bench_finish puts this
# tree's back (BENCH_REINSTALL)
use_tree() {
    make -s -C "$BENCH_BUILDS/$1" install PG_CONFIG="$BH_PG_CONFIG" >/dev/null 2>&1 ||
        bh_die "could not install the $1 build"
}

# the tables (small: loaded under valgrind), the role, the workloads
setup_sql() {
    cat <<SQL
CREATE TABLE lc_accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, filler char(84));
INSERT INTO lc_accounts SELECT g, g % 10 + 1, (g * 7919) % 1000, '' FROM generate_series(1, $ROWS) g;
CREATE TABLE lc_tellers (tid int PRIMARY KEY, bid int NOT NULL, tbalance int NOT NULL, filler char(84));
INSERT INTO lc_tellers SELECT g, 1, 0, '' FROM generate_series(1, 10) g;
CREATE TABLE lc_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
VACUUM ANALYZE lc_accounts, lc_tellers, lc_history;
CREATE ROLE gated LOGIN;
GRANT ALL ON lc_accounts, lc_tellers, lc_history TO gated;
SQL
    if [ "$1" = ext ]; then
        cat <<SQL
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('wide', 1000, 0);
ALTER ROLE gated SET bulkhead.workload = 'wide';
SQL
    fi
}

# the statements of each transaction, for transaction i
SORT_SQL='SELECT aid, abalance FROM lc_accounts WHERE aid BETWEEN %d AND %d ORDER BY abalance;'
HASH_SQL='SELECT bid, count(*) FROM lc_accounts WHERE aid BETWEEN %d AND %d GROUP BY bid;'
workload_sql() {
    local i aid tid
    echo '\o /dev/null'
    for ((i = 1; i <= $2; i++)); do
        aid=$(((i * 7919) % (ROWS - 20) + 1)) tid=$((i % 10 + 1))
        case $1 in
            simple) echo "SELECT abalance FROM lc_accounts WHERE aid = $aid;" ;;
            multi)
                echo "BEGIN;"
                echo "SELECT abalance FROM lc_accounts WHERE aid = $aid;"
                echo "SELECT tbalance FROM lc_tellers WHERE tid = $tid;"
                echo "INSERT INTO lc_history (tid, bid, aid, delta, mtime) VALUES ($tid, 1, $aid, 1, CURRENT_TIMESTAMP);"
                echo "COMMIT;" ;;
            sort) printf "$SORT_SQL\n" "$aid" $((aid + 9)) ;;
            hash) printf "$HASH_SQL\n" "$aid" $((aid + 19)) ;;
        esac
    done
    echo '\o'
    echo 'SELECT pg_backend_pid();'
}
# statements per transaction that meet the gate
gated_statements() { if [ "$1" = multi ]; then echo 3; else echo 1; fi; }

# session_count KEY WORKLOAD N: the instructions of one backend (its whole
# life) running N transactions of WORKLOAD as gated (KEY names the file kept)
rep=0
session_count() {
    local sql=$BENCH_DIR/$2-$3.sql pid file
    [ -f "$sql" ] || { workload_sql "$2" "$3" >"$sql"; chown postgres "$sql"; }
    pid=$(bench_psql -U gated -tA -f "$sql" | tail -n 1)
    file="$BENCH_DIR/callgrind.$pid"
    for _ in $(seq 300); do grep -q '^totals:' "$file" 2>/dev/null && break; sleep 0.1; done
    grep -q '^totals:' "$file" || bh_die "no callgrind count for backend $pid"
    [ -z "$KEEP" ] || cp "$file" "$KEEP/$1-$2-$3.$rep"
    awk '/^totals:/ { print $2 }' "$file"
}

# per_xact KEY WORKLOAD: one transaction's instructions
per_xact() {
    local c1 c2
    c1=$(session_count "$1" "$2" "$N1")
    c2=$(session_count "$1" "$2" "$N2")
    awk -v a="$c1" -v b="$c2" -v n1="$N1" -v n2="$N2" 'BEGIN { printf "%.0f", (b - a) / (n2 - n1) }'
}

gated_value() { bench_psql -U gated -tAc "$1"; }

# the plans are what the transactions are named for
check_plans() {
    local plan
    plan=$(gated_value "EXPLAIN (COSTS OFF) $(printf "$SORT_SQL" 100 109)")
    grep -q '^ *Sort' <<<"$plan" || bh_die "the sort transaction's plan has no Sort: $plan"
    plan=$(gated_value "EXPLAIN (COSTS OFF) $(printf "$HASH_SQL" 100 119)")
    grep -q 'HashAggregate' <<<"$plan" || bh_die "the hash transaction's plan has no HashAggregate: $plan"
}

# configure BUILD CONFIG: the workload's settings and max_memory, and the
# server's bulkhead.max_memory, once the worker (and for the setting, every
# new backend) has them:
#   R0  no settings, no max_memory anywhere
#   M   max_memory '1GB' on 'wide'
#   G   bulkhead.max_memory = '1GB', no workload max_memory
#   S3  settings (3 caps) on 'wide', no max_memory
#   N3  settings (3 caps no SELECT's planning reads) on 'wide'
#   MC  max_memory '1MB' on 'wide' (the sort's and the hash's requests cut)
SETTINGS="'{work_mem=1MB,jit=off,max_parallel_workers_per_gather=0}'"
SETTINGS_N="'{temp_file_limit=1GB,maintenance_work_mem=1MB,max_parallel_maintenance_workers=0}'"
configure() {
    local settings=NULL maxmem=NULL server=-1 check i req=use
    case $2 in
        R0) ;;
        M) maxmem="'1GB'" ;;
        G) server="'1GB'" ;;
        S3) settings=$SETTINGS ;;
        N3) settings=$SETTINGS_N ;;
        MC) maxmem="'1MB'" ;;
        ML) maxmem="'1GB'" req=limit ;;
        MCL) maxmem="'1MB'" req=limit ;;
        *) bh_die "unknown configuration $2" ;;
    esac
    # this tree's builds: the role's bulkhead.memory_request (1.5)
    if [ "$1" = v14 ] || [ "$1" = v15f0 ]; then
        bench_psql -c "ALTER ROLE gated SET bulkhead.memory_request = '$req'" >/dev/null
        for i in $(seq 200); do
            [ "$(gated_value "SHOW bulkhead.memory_request")" = "$req" ] && break
            sleep 0.05
        done
    fi
    if [ "$1" = v13 ]; then
        bench_psql -c "UPDATE bulkhead_workload SET settings = $settings WHERE name = 'wide'" >/dev/null
        check="SELECT settings IS $([ "$settings" = NULL ] || echo NOT) NULL FROM bulkhead_stats WHERE workload = 'wide'"
    else
        bench_psql -c "UPDATE bulkhead_workload SET settings = $settings, max_memory = $maxmem WHERE name = 'wide'" \
                   -c "ALTER SYSTEM SET bulkhead.max_memory = $server" -c "SELECT pg_reload_conf()" >/dev/null
        check="SELECT (SELECT settings IS $([ "$settings" = NULL ] || echo NOT) NULL
                         AND max_memory IS NOT DISTINCT FROM $maxmem
                         FROM bulkhead_stats WHERE workload = 'wide')
                      AND current_setting('bulkhead.max_memory') = $([ "$server" = -1 ] && echo "'-1'" || echo "$server")
                      AND (SELECT max_memory IS NOT DISTINCT FROM $([ "$server" = -1 ] && echo NULL || echo "$server")
                           FROM bulkhead_memory)"
    fi
    for i in $(seq 400); do
        [ "$(gated_value "$check")" = t ] && return 0
        sleep 0.05
    done
    bh_die "configuration $2 was not loaded ($1)"
}

CALLGRIND="valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=callgrind.%p"
CONF=("autovacuum = off" "checkpoint_timeout = '1h'" "compute_query_id = on")
declare -A counts count spread
# what each build counts, configuration by configuration (CONFIG:WORKLOAD...)
if bench_quick; then
    PLAN14=("R0:simple sort" "M:simple sort" "S3:simple" "MC:sort" "ML:sort" "MCL:sort")
    PLAN15F0=("M:sort")
else
    PLAN14=()
    part a && PLAN14+=("R0:simple multi sort")
    part b && PLAN14+=("R0:simple multi sort hash" "M:simple multi sort hash" "G:simple sort")
    part c && PLAN14+=("R0:simple multi" "S3:simple multi" "N3:simple multi" "M:sort hash" "MC:sort hash")
    part d && PLAN14+=("R0:simple multi sort hash" "M:sort hash" "ML:sort hash" "MCL:sort hash")
    PLAN15F0=("M:sort hash")
fi
PLAN47=("R0:simple multi sort hash")
PLAN13=("R0:simple multi sort" "S3:simple multi" "N3:simple multi")
# measure KEY WORKLOAD: one more count of KEY (build/configuration)
measure() { counts[$1/$2]+="$(per_xact "${1//\//-}" "$2") "; }
# run_plan BUILD PLAN...: each configuration of the plan, its transactions
run_plan() {
    local build=$1 item c w
    local -A seen=()
    shift
    for item in "$@"; do
        c=${item%%:*}
        bench_progress "callgrind: $build, $c ($rep of $REPS)"
        configure "$build" "$c"
        for w in ${item#*:}; do
            # (a configuration the parts share is counted once a round)
            [ -z "${seen[$c/$w]:-}" ] || continue
            seen[$c/$w]=1
            measure "$build/$c" "$w"
        done
    done
}

for ((rep = 1; rep <= REPS; rep++)); do
    if [ -n "$BASE47" ]; then
        use_tree b47
        BENCH_REINSTALL=1
        BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}"
        setup_sql ext | bench_psql >/dev/null
        bench_wait_loaded wide
        run_plan b47 "${PLAN47[@]}"
        bench_cluster_stop
        use_tree with
        BENCH_REINSTALL=
    fi
    if bench_quick || part d; then
        BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}" "bulkhead.feedback_statements = 0"
        setup_sql ext | bench_psql >/dev/null
        bench_wait_loaded wide
        run_plan v15f0 "${PLAN15F0[@]}"
        bench_cluster_stop
    fi
    if ! bench_quick && part a; then
        bench_progress "callgrind: without bulkhead ($rep of $REPS)"
        BENCH_PRELOAD=0 BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}"
        setup_sql none | bench_psql >/dev/null
        for w in simple multi sort; do measure none "$w"; done
        bench_cluster_stop
        if [ -n "$BASE" ]; then
            bench_use_build v13
            BENCH_EXTENSION_VERSION=1.3 BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}"
            setup_sql ext | bench_psql >/dev/null
            bench_wait_loaded wide
            run_plan v13 "${PLAN13[@]}"
            bench_cluster_stop
            bench_use_build with
        fi
    fi
    BENCH_UNDER=$CALLGRIND bench_cluster_start "${CONF[@]}"
    setup_sql ext | bench_psql >/dev/null
    bench_wait_loaded wide
    check_plans
    run_plan v14 "${PLAN14[@]}"
    check=$(bench_psql -tAc "SELECT acquired || ' acquired, ' || released || ' released, ' || running || ' running, '
                                    || memory_shrunk || ' shrunk, ' || memory_waits || ' memory waits, '
                                    || memory_granted || ' bytes granted now'
                             FROM bulkhead_stats WHERE workload = 'wide'")
    bench_cluster_stop
done
for k in "${!counts[@]}"; do
    count[$k]=$(bench_median <<<"${counts[$k]}")
    spread[$k]=$(tr ' ' '\n' <<<"${counts[$k]}" | grep . | sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print hi - lo }')
done

# natively: nanoseconds per instruction (1.4, no max_memory, simple)
bench_progress "native: the gated backend's CPU time per transaction"
bench_cluster_start "${CONF[@]}"
setup_sql ext | bench_psql >/dev/null
bench_wait_loaded wide
script=$(bench_pgbench_script grants-simple <<SQL
\set aid random(1, $ROWS)
SELECT abalance FROM lc_accounts WHERE aid = :aid;
SQL
)
sample() {
    local utime
    utime=$(sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 }')
    echo "$utime $(bench_psql -tAc "SELECT acquired FROM bulkhead_stats WHERE workload = 'wide'")"
}
configure v14 R0
runuser -u postgres -- env PGAPPNAME=grants-cost "${BENCH_CLIENT_CPU[@]}" "$BH_BINDIR/pgbench" -n -M simple \
    -c 1 -T $((3 * SECS + 1)) -f "$script" -U gated -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >"$BENCH_DIR/cpu.log" 2>&1 &
pgb=$!
pid=
for _ in $(seq 200); do
    pid=$(bench_psql -tAc "SELECT pid FROM pg_stat_activity WHERE application_name = 'grants-cost' AND backend_type = 'client backend'")
    [ -n "$pid" ] && break
    sleep 0.05
done
[ -n "$pid" ] || bh_die "the pgbench backend did not show"
# three windows of SECS - 1/3 s, the median: the user CPU time of a
# backend on this virtual machine moves with the load of the others (time
# the hypervisor takes away is counted to the process that was running)
sleep 0.5
tck=$(getconf CLK_TCK)
windows=
read -r u0 a0 <<<"$(sample "$pid")"
for _ in 1 2 3; do
    sleep "$(awk -v s="$SECS" 'BEGIN { print s - 1 / 3 }')"
    read -r u1 a1 <<<"$(sample "$pid")"
    windows+="$(awk -v u="$((u1 - u0))" -v a="$((a1 - a0))" -v t="$tck" 'BEGIN { printf "%.0f", u * 1e9 / t / a }') "
    u0=$u1 a0=$a1
done
wait "$pgb" || { tail -n 5 "$BENCH_DIR/cpu.log" >&2; bh_die "pgbench failed"; }
cpu_ns=$(bench_median <<<"$windows")
ns_per_instr=$(awk -v c="$cpu_ns" -v i="${count[v14/R0/simple]}" 'BEGIN { printf "%.4f", c / i }')
bench_cluster_stop

# the report
# delta KEY BASEKEY WORKLOAD: extra instructions per gated statement
delta() {
    awk -v a="${count[$1/$3]}" -v b="${count[$2/$3]}" -v s="$(gated_statements "$3")" \
        'BEGIN { printf "%+.0f", (a - b) / s }'
}
us() { awk -v d="$1" -v n="$ns_per_instr" 'BEGIN { printf "%.3f", d * n / 1000 }'; }
pm() { echo "${count[$1]} ± $((spread[$1] / 2))"; }
worst_of() {    # worst_of VALUE...: the largest
    local w=-1e9 v
    for v in "$@"; do bench_at_least "$w" "$v" || w=$v; done
    echo "$w"
}
what() {
    case $1 in
        simple) echo "simple (SELECT by primary key, no memory node)" ;;
        multi) echo "multi (3 statements, no memory node)" ;;
        sort) echo "sort (ORDER BY over 10 rows: one Sort, 4 MB requested)" ;;
        hash) echo "hash (GROUP BY over 20 rows: one HashAggregate, 8 MB requested)" ;;
    esac
}

bench_header "Memory grants (1.4, 1.5 in (d)): what a grant, a shrunk statement and a lane's settings cost a statement (callgrind, N = $N1 and $N2 transactions in one backend, differenced)"
echo "CPU: $(lscpu | awk -F': *' '/^Model name/ { print $2; exit }'); clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown); $(valgrind --version)."
echo
bench_settings
echo
# shellcheck disable=SC2016  # the $1 in the statements shown are theirs
echo "Command: \`$([ "$PARTS" = abcd ] || echo "GRANTS_COST_PARTS=$PARTS ")bash test/bench/grants_cost.sh $N1 $N2 $SECS $REPS\`. A plain role with \`bulkhead.workload = 'wide'\` (B = 1000, never full) runs N transactions in one psql session; a backend's whole count for N2 transactions less its count for N1, over N2 − N1: one transaction, without the session's start and first statements. simple: \`SELECT abalance FROM lc_accounts WHERE aid = \$1\` ($ROWS rows); multi: \`BEGIN\`, that SELECT, \`SELECT tbalance FROM lc_tellers WHERE tid = \$2\`, \`INSERT INTO lc_history ...\`, \`COMMIT\` (3 statements meet the gate); sort: \`$(printf "$SORT_SQL" 1 10 | sed 's/1 AND 10/$1 AND $1 + 9/')\`; hash: \`$(printf "$HASH_SQL" 1 20 | sed 's/1 AND 20/$1 AND $1 + 19/')\` (session: work_mem 4MB, hash_mem_multiplier 2). Each count is the median of $REPS, each in a fresh cluster of each build in turn; ± is half its range. Time: instructions × $ns_per_instr ns per instruction, the gated backend's user CPU time per simple transaction in a native run of 1.4 ($cpu_ns ns) over callgrind's count of it (${count[v14/R0/simple]}): an upper bound, since the CPU time also covers what callgrind does not count; the median of three windows (${windows% } ns; the CPU time of a process on this virtual machine grows with the others' load). Callgrind counts do not depend on the machine's load: at this rate 1 µs is $(awk -v n="$ns_per_instr" 'BEGIN { printf "%.0f", 1000 / n }') instructions, at the Intel machine's 0.41 ns of results.md's Lanes (1.3) 2,439."
echo
if ! bench_quick && part a; then
    echo "### (a) No max_memory anywhere, bulkhead.max_memory off: 1.4 against 1.3"
    echo
    if [ -n "$BASE" ]; then
        echo "1.3: the library built from $(git -C "$top" rev-parse --short "$BASE") (\`git log\`: $(git -C "$top" log -1 --format=%s "$BASE" | cut -c1-80)...), the extension created at version 1.3; 1.4: this tree, at 1.4."
        echo
        echo "| transaction | without bulkhead | 1.3 | 1.4 | 1.4 / 1.3 | bulkhead's part, 1.3 | bulkhead's part, 1.4 | counts (without; 1.3; 1.4) |"
        echo "|---|---:|---:|---:|---:|---:|---:|---|"
        ratios=()
        for w in simple multi sort; do
            r=$(awk -v a="${count[v14/R0/$w]}" -v b="${count[v13/R0/$w]}" 'BEGIN { printf "%.4f", a / b }')
            [ "$w" = sort ] || ratios+=("$r")
            echo "| $(what "$w") | ${count[none/$w]} | ${count[v13/R0/$w]} | ${count[v14/R0/$w]} | $r |" \
                 "$(awk -v a="${count[v13/R0/$w]}" -v b="${count[none/$w]}" 'BEGIN { print a - b }') |" \
                 "$(awk -v a="${count[v14/R0/$w]}" -v b="${count[none/$w]}" 'BEGIN { print a - b }') |" \
                 "${counts[none/$w]% }; ${counts[v13/R0/$w]% }; ${counts[v14/R0/$w]% } |"
        done
        echo
        worst=$(worst_of "${ratios[@]}")
        bench_at_least 1.005 "$worst" && met=0 || met=1
        bench_target "with no max_memory anywhere a transaction (simple, multi) costs within +0.5% of 1.3's (callgrind; at most $(awk -v r="$worst" 'BEGIN { printf "%+.2f%%", (r - 1) * 100 }'))" "$met"
    else
        echo "1.3 not measured: no 1.3 commit found in this tree's history (set BENCH_BASE_REF)."
    fi
    echo
fi

if bench_quick || part b; then
echo "### (b) A grant per statement, 1.4"
echo
echo "max_memory = '1GB' on 'wide' (every request fits at once), against the same transaction with no max_memory anywhere$(bench_quick || echo "; and the server's limit alone, \`bulkhead.max_memory = '1GB'\` with no workload max_memory (no target)")."
echo
echo "| transaction | no max_memory | max_memory '1GB' on the workload | extra per statement | µs | bulkhead.max_memory '1GB' only | extra per statement | µs |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
nomem=() withmem=()
for w in simple multi sort hash; do
    [ -n "${count[v14/M/$w]:-}" ] || continue
    d=$(delta v14/M v14/R0 "$w")
    u=$(us "$d")
    case $w in simple|multi) nomem+=("$u") ;; *) withmem+=("$u") ;; esac
    line="| $(what "$w") | $(pm "v14/R0/$w") | $(pm "v14/M/$w") | $d | $u"
    if [ -n "${count[v14/G/$w]:-}" ]; then
        dg=$(delta v14/G v14/R0 "$w")
        line+=" | $(pm "v14/G/$w") | $dg | $(us "$dg") |"
    else
        line+=" | – | – | – |"
    fi
    echo "$line"
done
echo
worst=$(worst_of "${nomem[@]}")
bench_at_least 1 "$worst" && met=0 || met=1
bench_target "a grant adds under 1 µs to a statement without a memory node (at most $worst µs)" "$met"
worst=$(worst_of "${withmem[@]}")
bench_at_least 3 "$worst" && met=0 || met=1
bench_target "a grant adds under 3 µs to a statement with memory nodes (at most $worst µs)" "$met"
echo
fi

if bench_quick || part c; then
echo "### (c) A lane's settings and a shrunk statement, per statement"
echo
echo "Lane settings: \`settings = $SETTINGS\` on 'wide', each cap below the session's value (work_mem 4MB, jit on, 2 workers), so each is set, against the same build without them: what a statement pays, net of what the caps save its planning (with no parallel workers the planner builds no parallel path). And \`settings = $SETTINGS_N\`, three caps below the session's values (unlimited, 64MB, 2) that no SELECT's planning reads: the cost of setting three caps by itself. Shrunk: max_memory = '1MB' on 'wide' cuts the sort's 4 MB request to 1 MB and the hash aggregate's 8 MB to 1 MB (work_mem 1 MB and 512 kB for that statement), against the same statement granted whole (max_memory '1GB'), and against no max_memory."
echo
echo "| build | transaction | no settings | lane settings (3 caps) | extra per statement | µs | 3 caps no SELECT's planning reads | extra per statement | µs |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
lane=()
for b in v13 v14; do
    for w in simple multi; do
        [ -n "${count[$b/S3/$w]:-}" ] || continue
        d=$(delta "$b/S3" "$b/R0" "$w")
        [ "$b" = v13 ] || lane+=("$(us "$d")")
        line="| $([ "$b" = v13 ] && echo 1.3 || echo 1.4) | $w | $(pm "$b/R0/$w") | $(pm "$b/S3/$w") | $d | $(us "$d")"
        if [ -n "${count[$b/N3/$w]:-}" ]; then
            dn=$(delta "$b/N3" "$b/R0" "$w")
            [ "$b" = v13 ] || lane+=("$(us "$dn")")
            line+=" | $(pm "$b/N3/$w") | $dn | $(us "$dn") |"
        else
            line+=" | – | – | – |"
        fi
        echo "$line"
    done
done
echo
echo "| transaction (1.4) | granted whole (max_memory '1GB') | shrunk (max_memory '1MB') | extra per statement: shrinking | µs | extra against no max_memory: grant and shrinking | µs |"
echo "|---|---:|---:|---:|---:|---:|---:|"
shrunk=()
for w in sort hash; do
    [ -n "${count[v14/MC/$w]:-}" ] || continue
    d=$(delta v14/MC v14/M "$w")
    d0=$(delta v14/MC v14/R0 "$w")
    shrunk+=("$(us "$d")")
    echo "| $(what "$w") | $(pm "v14/M/$w") | $(pm "v14/MC/$w") | $d | $(us "$d") | $d0 | $(us "$d0") |"
done
echo
worst=$(worst_of "${lane[@]}")
bench_at_least 2 "$worst" && met=0 || met=1
bench_target "a lane's settings (3 caps, either set) cost under 2 µs per statement (1.4: at most $worst µs)" "$met"
worst=$(worst_of "${shrunk[@]}")
bench_at_least 2 "$worst" && met=0 || met=1
bench_target "a shrunk statement's lowered work_mem costs under 2 µs, as a lane's cap (at most $worst µs over the same statement granted whole)" "$met"
echo
fi

if bench_quick || part d; then
    echo "### (d) 1.5: requests by use, grant feedback, a shrunk statement, no max_memory against main before issue 47"
    echo
    if [ -n "$BASE47" ]; then
        echo "No max_memory anywhere (\`bulkhead.max_memory\` off): this tree against $(git -C "$top" rev-parse --short "$BASE47") (\`git log\`: $(git -C "$top" log -1 --format=%s "$BASE47" | cut -c1-80)...; its library and its own 1.5 scripts, installed for its cluster only)."
        echo
        echo "| transaction | before issue 47 | this tree | this tree / before | counts (before; this tree) |"
        echo "|---|---:|---:|---:|---|"
        ratios=()
        for w in simple multi sort hash; do
            r=$(awk -v a="${count[v14/R0/$w]}" -v b="${count[b47/R0/$w]}" 'BEGIN { printf "%.4f", a / b }')
            ratios+=("$r")
            echo "| $(what "$w") | ${count[b47/R0/$w]} | ${count[v14/R0/$w]} | $r | ${counts[b47/R0/$w]% }; ${counts[v14/R0/$w]% } |"
        done
        echo
        worst=$(worst_of "${ratios[@]}")
        bench_at_least 1.005 "$worst" && met=0 || met=1
        bench_target "1.5 adds nothing to a statement without max_memory: within +0.5% of main before issue 47 (callgrind; at most $(awk -v r="$worst" 'BEGIN { printf "%+.2f%%", (r - 1) * 100 }'))" "$met"
        echo
    fi
    echo "Grant feedback, and a grant by use: max_memory '1GB' on 'wide' (requests by use, the default), against the same with \`bulkhead.feedback_statements = 0\` (a cluster of its own, no notes kept: nothing looked up at the start, no peaks noted at the end), and against no max_memory."
    echo
    echo "| transaction | no max_memory | max_memory '1GB', feedback off | max_memory '1GB', feedback on | feedback, extra per statement | µs | a grant by use (feedback on) over none | µs |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    fb=()
    for w in sort hash; do
        [ -n "${count[v15f0/M/$w]:-}" ] || continue
        d=$(delta v14/M v15f0/M "$w")
        fb+=("$(us "$d")")
        d0=$(delta v14/M v14/R0 "$w")
        echo "| $(what "$w" | sed 's/, [0-9]* MB requested//') | $(pm "v14/R0/$w") | $(pm "v15f0/M/$w") | $(pm "v14/M/$w") | $d | $(us "$d") | $d0 | $(us "$d0") |"
    done
    echo
    worst=$(worst_of "${fb[@]}")
    bench_at_least 1 "$worst" && met=0 || met=1
    bench_target "grant feedback (a statement's notes looked up at its start, its peaks noted at its end) under 1 µs per statement (at most $worst µs)" "$met"
    echo
    echo "A shrunk statement, 1.5: with \`bulkhead.memory_request = limit\` for the role (the sort's request is then 4 MB, the hash aggregate's 8 MB; by use both ask 64 kB, which no limit of 1 MB or more shrinks), max_memory '1MB' against '1GB'."
    echo
    echo "| transaction | granted whole (max_memory '1GB', limit) | shrunk (max_memory '1MB', limit) | extra per statement: shrinking | µs |"
    echo "|---|---:|---:|---:|---:|"
    shrunk=()
    for w in sort hash; do
        [ -n "${count[v14/MCL/$w]:-}" ] || continue
        d=$(delta v14/MCL v14/ML "$w")
        shrunk+=("$(us "$d")")
        echo "| $(what "$w") | $(pm "v14/ML/$w") | $(pm "v14/MCL/$w") | $d | $(us "$d") |"
    done
    echo
    worst=$(worst_of "${shrunk[@]}")
    bench_at_least 2 "$worst" && met=0 || met=1
    bench_target "1.5: a shrunk statement costs under 2 µs over the same statement granted whole (at most $worst µs; 2.4 µs in 1.4)" "$met"
    echo
fi
echo "bulkhead_stats of 'wide' after the last cluster's callgrind runs of 1.4: $check."

#!/usr/bin/env bash
# test/bench/grants_mix.sh: a mix of large sorts and hash aggregates under
# one memory limit, run two ways side by side (issue 41 item 5, the first
# bullet):
#
#   grants      the workload's max_memory is the limit (LIMIT_MB), and the
#               statements run with a work_mem large enough for the largest
#               of them (256MB): each is granted its plan's request (a Sort
#               work_mem, a HashAggregate work_mem x hash_mem_multiplier),
#               waits FIFO while the others hold the limit (memory_timeout
#               60s), and runs in memory;
#   workaround  no max_memory, and the static work_mem that lets every
#               statement fit at once: LIMIT_MB / (CLIENTS x 1 memory node
#               x hash_mem_multiplier 2) = 32MB; the larger statements
#               spill to temporary files.
#
# CLIENTS (8) clients of a plain role sent to the workload 'reports' by
# bulkhead.workload (B = 100: admission never waits) run XACTS statements
# each, every one drawn from four pgbench scripts of equal weight over a
# table of ROWS (3 million) rows (id, g, v), each wanting 64-256 MB of
# work_mem to run in memory:
#   sort_v   SELECT v FROM mix ORDER BY v OFFSET n      (a sort of about 100 MB)
#   sort_gv  SELECT g, v ... ORDER BY g, v OFFSET n      (about 190 MB)
#   hash_v   SELECT v, count(*) ... GROUP BY v OFFSET n  (1,000,003 groups, a
#            hash table of about 130 MB: work_mem 64 MB x hash_mem_multiplier)
#   hash_g   SELECT g, count(*) ... GROUP BY g OFFSET n  (2,000,000 groups,
#            about 260 MB: work_mem 128 MB x 2)
# (OFFSET n: every row is sorted or grouped, none is sent; what each one
# used in memory is measured once, EXPLAIN ANALYZE in the grants' way).  pgbench runs
# with one thread and a fixed --random-seed, so that each run draws the
# same statements (its thread draws them in turn).  The two ways alternate
# in ROUNDS rounds in one cluster; the figures: the total time of a run
# (its statements over it: throughput), the p99 of the statements'
# latencies (pooled over the rounds; with fewer than 100, the longest),
# the ratio grants / workaround, the grants' waits and shrunk statements,
# and the temporary files written.  max_parallel_workers_per_gather = 0
# (the server has one CPU: workers would only share it).  Server on CPU 0,
# pgbench on CPU 1.  Times move with the machine's load: the rounds
# alternate so that both ways meet it alike.
#
# test/bench/run runs it; its smoke run (--quick) runs each way once, on
# 100,000 rows, one statement per client: it only shows that it runs.
#
#   bash test/bench/grants_mix.sh [XACTS [ROUNDS]]   (as root; default 4 3)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then
    XACTS=${1:-1} ROUNDS=${2:-1} ROWS=100000
else
    XACTS=${1:-4} ROUNDS=${2:-3} ROWS=${GRANTS_MIX_ROWS:-3000000}
fi
CLIENTS=8
LIMIT_MB=512
BIG_WORK_MEM=256MB
HASH_MEM_MULTIPLIER=2
# every statement at once: LIMIT / (clients x its memory nodes (1) x hash_mem_multiplier)
SMALL_WORK_MEM=$((LIMIT_MB / (CLIENTS * 1 * HASH_MEM_MULTIPLIER)))MB
SEED=4242

bench_prepare
bench_cluster_start "max_parallel_workers_per_gather = 0" "hash_mem_multiplier = $HASH_MEM_MULTIPLIER" \
    "autovacuum = off" "max_connections = 50"
bench_progress "loading $ROWS rows"
bench_psql <<SQL >/dev/null
CREATE TABLE mix (id int NOT NULL, g int NOT NULL, v int NOT NULL);
INSERT INTO mix SELECT i, (i::int8 * 7919 % 2000000)::int, (i::int8 * 104729 % 1000003)::int
FROM generate_series(1, $ROWS) i;
VACUUM ANALYZE mix;
INSERT INTO bulkhead_workload (name, max_running, max_queued, memory_timeout)
VALUES ('reports', 100, 100, '60s');
CREATE ROLE gated LOGIN;
ALTER ROLE gated SET bulkhead.workload = 'reports';
GRANT SELECT ON mix TO gated;
SQL
bench_wait_loaded reports

declare -A SQLS=(
    [sort_v]="SELECT v FROM mix ORDER BY v OFFSET :n;"
    [sort_gv]="SELECT g, v FROM mix ORDER BY g, v OFFSET :n;"
    [hash_v]="SELECT v, count(*) FROM mix GROUP BY v OFFSET :n;"
    [hash_g]="SELECT g, count(*) FROM mix GROUP BY g OFFSET :n;"
)
KINDS=(sort_v sort_gv hash_v hash_g)
scripts=()
for k in "${KINDS[@]}"; do
    f=$(bench_pgbench_script "$k" <<SQL
\set n $ROWS
${SQLS[$k]}
SQL
)
    scripts+=(-f "$f")
done

gated_value() { bench_psql -U gated -tAc "$1"; }

# configure grants|workaround: the workload's max_memory and the role's
# work_mem, once the worker has the limit (a new session has the work_mem)
configure() {
    local maxmem=NULL wm=$SMALL_WORK_MEM
    [ "$1" = grants ] && maxmem="'${LIMIT_MB}MB'" wm=$BIG_WORK_MEM
    bench_psql -c "UPDATE bulkhead_workload SET max_memory = $maxmem WHERE name = 'reports'" \
               -c "ALTER ROLE gated SET work_mem = '$wm'" >/dev/null
    # (apart: a query of bulkhead_stats has memory nodes of its own, and
    # under the limit with a work_mem of 256MB it runs shrunk, with a lower
    # work_mem; SHOW is a utility, never charged)
    for _ in $(seq 200); do
        [ "$(bench_psql -tAc "SELECT max_memory IS NOT DISTINCT FROM $maxmem FROM bulkhead_stats WHERE workload = 'reports'")" = t ] &&
            [ "$(gated_value "SHOW work_mem")" = "$wm" ] && return 0
        sleep 0.05
    done
    bh_die "configuration $1 was not loaded"
}

# the plans, and what each statement requests, in each way
plans=
for way in grants workaround; do
    configure "$way"
    for k in "${KINDS[@]}"; do
        q=${SQLS[$k]//:n/$ROWS}
        q=${q%;}
        node=$(gated_value "EXPLAIN (COSTS OFF) $q" | grep -o 'HashAggregate\|GroupAggregate\|Sort' | head -n 1)
        req=$(gated_value "SELECT pg_size_pretty(memory_requested) FROM bulkhead_classify('$q')")
        plans+="$way $k $node $req"$'\n'
    done
done
# what each statement uses, and how long it runs, alone, in each way (not
# in a smoke run): the Sort's or the HashAggregate's memory and temporary
# file, and EXPLAIN ANALYZE's execution time (once: a figure of the
# machine's load as well)
declare -A USED
if ! bench_quick; then
    for way in grants workaround; do
        bench_progress "EXPLAIN ANALYZE of each statement, alone, $way"
        configure "$way"
        for k in "${KINDS[@]}"; do
            q=${SQLS[$k]//:n/$ROWS}
            USED[$way/$k]=$(gated_value "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${q%;}" |
                grep -o 'Memory: [0-9]*kB\|Memory Usage: [0-9]*kB\|Disk: [0-9]*kB\|Disk Usage: [0-9]*kB\|Execution Time: [0-9.]* ms' |
                awk '/^Execution/ { t = $3; next }
                     { v = $NF; sub(/kB/, "", v); m = m sep sprintf("%s %.0f MB", $1 ~ /^Disk/ ? "disk" : "memory", v / 1024); sep = ", " }
                     END { printf "%s; %.2f s", m, t / 1000 }')
        done
    done
fi

# the CPU time (ticks, user and system) of the postmaster's children that
# have exited: the backends of the runs (/proc/PID/stat fields 16 and 17)
server_cpu() { sed 's/^.*) //' "/proc/$BENCH_PID/stat" | awk '{ print $14 + $15 }'; }

wm_stats() {    # the workload's memory waits and shrunk, the database's temporary bytes
    bench_psql -tAc "SELECT (SELECT memory_waits || ' ' || memory_shrunk FROM bulkhead_stats WHERE workload = 'reports')
                            || ' ' || (SELECT temp_bytes FROM pg_stat_database WHERE datname = 'postgres')"
}

# run WAY: one pgbench run of the mix (bench_alternate's "TPS P99 FAILED",
# TPS being statements per second with three decimals); appends
# "SECONDS WAITS SHRUNK TEMP_MB CPU_SECONDS" to $BENCH_DIR/WAY.runs (the
# server's CPU time: its backends', user and system), the latencies (us)
# to $BENCH_DIR/WAY.lat and "KIND US" to $BENCH_DIR/WAY.kinds
run() {
    local way=$1 logdir out t0 t1 n secs failed s0 s1 p99
    configure "$way" >&2
    s0=$(wm_stats)
    logdir=$(runuser -u postgres -- mktemp -d -p "$BENCH_DIR" mix.XXXXXX)
    c0=$(server_cpu)
    t0=$(bh_now_us)
    out=$(cd "$logdir" && "${BENCH_CLIENT_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/pgbench" -n \
        -h "$BENCH_DIR" -p "$BENCH_PORT" -U gated -c "$CLIENTS" -j 1 -t "$XACTS" \
        --random-seed="$SEED" -l --log-prefix="$logdir/lat" "${scripts[@]}" postgres 2>&1) || true
    t1=$(bh_now_us)
    grep -q '^tps = ' <<<"$out" || { tail -n 5 <<<"$out" >&2; bh_die "pgbench failed ($way)"; }
    # the backends gone (their CPU time counted in the postmaster's
    # children's, their statistics, temporary bytes, flushed at their exit)
    for _ in $(seq 200); do
        pgrep -P "$BENCH_PID" -f '^postgres: gated ' >/dev/null || break
        sleep 0.05
    done
    sleep 0.2
    c1=$(server_cpu)
    s1=$(wm_stats)
    # column 3: latency (us), 4: the script's number
    n=$(cat "$logdir"/lat.* | awk '$3 ~ /^[0-9]+$/' | wc -l)
    cat "$logdir"/lat.* | awk '$3 ~ /^[0-9]+$/ { print $3 }' >>"$BENCH_DIR/$way.lat"
    cat "$logdir"/lat.* | awk -v k="${KINDS[*]}" '$3 ~ /^[0-9]+$/ { split(k, K, " "); print K[$4 + 1], $3 }' \
        >>"$BENCH_DIR/$way.kinds"
    p99=$(cat "$logdir"/lat.* | awk '$3 ~ /^[0-9]+$/ { print $3 }' | bench_p99)
    rm -rf "$logdir"
    failed=$(awk '/^number of failed transactions: / { print $5 }' <<<"$out")
    failed=$((${failed:-0} + $(grep -c 'aborted in command' <<<"$out" || true) + CLIENTS * XACTS - n))
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
    read -r w0 h0 b0 <<<"$s0"
    read -r w1 h1 b1 <<<"$s1"
    echo "$secs $((w1 - w0)) $((h1 - h0)) $(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.0f", (b - a) / 1048576 }')" \
         "$(awk -v a="$c0" -v b="$c1" -v t="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / t }')" \
        >>"$BENCH_DIR/$way.runs"
    echo "$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.3f", n / s }') $p99 $failed"
}

# warm the caches (the table's pages, the catalogs) once in each way
bench_progress "warming up"
for way in workaround grants; do
    configure "$way"
    gated_value "SELECT count(*) FROM mix" >/dev/null
done
: >"$BENCH_DIR/grants.lat"; : >"$BENCH_DIR/workaround.lat"
bench_alternate "$ROUNDS" run grants workaround
check=$(bench_psql -tAc "SELECT memory_granted || ' bytes granted, ' || memory_waiting || ' waiting, '
                                || acquired || ' acquired, ' || released || ' released'
                         FROM bulkhead_stats WHERE workload = 'reports'")

# the report
col() { awk -v c="$2" '{ print $c }' "$BENCH_DIR/$1.runs" | tr '\n' ' ' | sed 's/ $//'; }
pooled_p99() { bench_p99 <"$BENCH_DIR/$1.lat"; }
kind_mean() {    # kind_mean WAY KIND: mean latency (s) of KIND's statements
    awk -v k="$2" '$1 == k { s += $2; n++ } END { if (n) printf "%.2f (%d)", s / n / 1e6, n; else print "–" }' \
        "$BENCH_DIR/$1.kinds"
}
statements=$((CLIENTS * XACTS))
secs_med() { col "$1" 1 | bench_median; }
ratio=$(bench_ratio "${TPS[grants]}" "${TPS[workaround]}")
paired=$(awk -v a="${RUNS_TPS[grants]}" -v b="${RUNS_TPS[workaround]}" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); for (i = 1; i <= n; i++) printf "%.2f ", x[i] / y[i] }')

bench_header "Memory grants (1.4): a mix of large sorts and hash aggregates under one memory limit ($LIMIT_MB MB), with grants and with the static work_mem workaround ($CLIENTS clients, $statements statements per run, $ROUNDS alternating rounds)"
echo "CPU: $(lscpu | awk -F': *' '/^Model name/ { print $2; exit }'); clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown); load average before the runs' end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
bench_settings
echo
echo "Command: \`bash test/bench/grants_mix.sh $XACTS $ROUNDS\`. A table of $ROWS rows (id, g, v: g = id × 7919 mod 2,000,000, v = id × 104729 mod 1,000,003, in scattered order); $CLIENTS clients of a role sent to the workload 'reports' (max_running 100: admission never waits) by \`bulkhead.workload\`, each running $XACTS statements drawn from four pgbench scripts of equal weight (\`pgbench -n -c $CLIENTS -j 1 -t $XACTS --random-seed=$SEED\`, so every run draws the same $statements statements): \`${SQLS[sort_v]//:n/n}\`, \`${SQLS[sort_gv]//:n/n}\`, \`${SQLS[hash_v]//:n/n}\`, \`${SQLS[hash_g]//:n/n}\` (n = $ROWS: all rows sorted or grouped, none sent). **grants**: \`max_memory = '${LIMIT_MB}MB'\`, \`memory_timeout = '60s'\` on 'reports', \`work_mem = '$BIG_WORK_MEM'\` for the role; **workaround**: no max_memory, \`work_mem = '$SMALL_WORK_MEM'\` ($LIMIT_MB MB / ($CLIENTS clients × 1 memory node × hash_mem_multiplier $HASH_MEM_MULTIPLIER)). The two alternate in every round (grants first) in one cluster; jit as the server's default (on)."
echo
echo "What each statement is planned with, requests (\`bulkhead_classify\`), uses and takes alone (\`EXPLAIN (ANALYZE)\`, one run, before the rounds):"
echo
echo "| statement | grants: node, request | alone: used, execution time | workaround: node, request | alone: used, execution time |"
echo "|---|---|---|---|---|"
for k in "${KINDS[@]}"; do
    echo "| $k | $(awk -v k="$k" '$1 == "grants" && $2 == k { print $3 ", " $4 " " $5 }' <<<"$plans") |" \
         "${USED[grants/$k]:-–} |" \
         "$(awk -v k="$k" '$1 == "workaround" && $2 == k { print $3 ", " $4 " " $5 }' <<<"$plans") |" \
         "${USED[workaround/$k]:-–} |"
done
echo
echo "| way | total time of a run, s (median) | statements per second (median) | p99 latency, s (pooled; per run) | server CPU time per run, s (median) | memory waits per run | shrunk per run | temporary files written per run, MB | runs: total time, s | failed |"
echo "|---|---:|---:|---:|---:|---|---|---|---|---:|"
for way in grants workaround; do
    echo "| $way | $(secs_med "$way") | ${TPS[$way]} |" \
         "$(awk -v p="$(pooled_p99 "$way")" 'BEGIN { printf "%.2f", p / 1000 }') ($(for p in ${RUNS_P99[$way]}; do awk -v p="$p" 'BEGIN { printf "%.2f ", p / 1000 }'; done | sed 's/ $//')) |" \
         "$(col "$way" 5 | bench_median) | $(col "$way" 2) | $(col "$way" 3) | $(col "$way" 4) | $(col "$way" 1) | ${FAILED[$way]} |"
done
echo
echo "Mean latency by statement, s (statements over the rounds):"
echo
echo "| way | sort_v | sort_gv | hash_v | hash_g |"
echo "|---|---:|---:|---:|---:|"
for way in grants workaround; do
    line="| $way"
    for k in "${KINDS[@]}"; do line+=" | $(kind_mean "$way" "$k")"; done
    echo "$line |"
done
echo
echo "Throughput grants / workaround: $ratio (medians; per round: ${paired% }). p99 grants / workaround: $(bench_ratio "$(pooled_p99 grants)" "$(pooled_p99 workaround)") (pooled). Server CPU time per run, grants / workaround: $(bench_ratio "$(col grants 5 | bench_median)" "$(col workaround 5 | bench_median)") (the backends' user and system time, which the machine's other load moves less than the total time: the server's CPU is shared with whatever else the kernel runs there, and a way with fewer statements running at once gets a smaller share of it). 'reports' at the end: $check."
echo
bench_at_least "$ratio" 1.0 && met=0 || met=1
bench_target "grants' throughput at least 1.0× the static work_mem workaround's under one memory limit (${ratio}×)" "$met"

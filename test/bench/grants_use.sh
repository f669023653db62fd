#!/usr/bin/env bash
# shellcheck disable=SC2016  # backquotes in the report are markdown
# test/bench/grants_use.sh: memory grants sized by what statements use
# (1.5, issue 47 item 5, its first four bullets), as ratios in one run, the
# ways compared alternating in rounds in one cluster:
#
#   nolimit     no max_memory: the memory no one bounds (work_mem 256MB)
#   r14         max_memory on the workload, work_mem 256MB, and
#               bulkhead.memory_request = limit for the role: 1.4's
#               requests (every memory node its limit)
#   r15         the same with bulkhead.memory_request = use (the default):
#               1.5's requests by use (the plan's estimates, then grant
#               feedback from what earlier runs used)
#   workaround  no max_memory, the static work_mem that lets every
#               statement fit at once (LIMIT / (clients x 1 node x
#               hash_mem_multiplier 2))
#
# The parts:
#   (B) the reports' requests after three runs: the feedback notes reset,
#       each report run three times alone (r15), then a fourth time: what
#       that run requested (bulkhead_statements' max_memory_requested, the
#       counts reset before it) against what it used (peak_used, and
#       EXPLAIN ANALYZE's figure of the same statement at its limit);
#       bulkhead_classify(query)'s memory_requested and the view's
#       memory_request shown beside it.  Target at most 1.5x.
#   (A) small statements beside reports, issue 47's case: max_memory 600MB,
#       work_mem 256MB, three clients of reports (a hash aggregate over
#       1,000,003 groups and a sort of ROWS integers, drawn in turn) and,
#       beside them in the same workload, one client of small sorts (a
#       1,000-row sort, and its top 10) for SECS seconds; nolimit, r14,
#       r15.  Target: the small sorts' p99 with r15 at most 1.5x nolimit's.
#   (C) 1.4's mix again (grants_mix.sh's four statements, 8 clients,
#       max_memory 512MB): r14, r15, workaround.  Target: r15 at least
#       1.0x the workaround's throughput.
#   (D) a mix where memory matters: hash joins of the mix table with a
#       table of DIM rows (the inner side: 1,000,000 or all DIM rows, one
#       of about 100 MB and one of about 200 MB in memory), which split
#       into batches at the workaround's work_mem; same limit, clients,
#       ways.  No target: the ratio is reported.
#
# The server runs on CPU 0, pgbench (and psql) on CPU 1; times move with
# the machine's load: the rounds alternate so that each way meets it alike.
# max_parallel_workers_per_gather = 0 (one CPU), compute_query_id = on and
# bulkhead.track_statements = on (grant feedback keys on the query id).
#
# GRANTS_USE_PARTS (default ABCD) picks the parts; GRANTS_USE_ROWS, GRANTS_USE_DIM and GRANTS_USE_D_XACTS (statements per
# client in (D), default 2) change the sizes.
#
# test/bench/run runs it; its smoke run (--quick) runs every part once on
# 100,000 rows for a second or two: it only shows that it runs (about 30 s).
#
#   bash test/bench/grants_use.sh [SECS [XACTS [ROUNDS]]]
#                                 (as root; default 12 4 2)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then
    SECS=${1:-2} XACTS=${2:-1} ROUNDS=${3:-1} ROWS=100000 DIM=50000 D_XACTS=1
else
    SECS=${1:-12} XACTS=${2:-4} ROUNDS=${3:-2} ROWS=${GRANTS_USE_ROWS:-3000000} DIM=${GRANTS_USE_DIM:-2000000}
    D_XACTS=${GRANTS_USE_D_XACTS:-2}
fi
PARTS=${GRANTS_USE_PARTS:-ABCD}
part() { [[ $PARTS == *$1* ]]; }
CLIENTS=8
REPORTS=3
LIMIT_MB=512          # (C), (D): grants_mix.sh's
SMALL_LIMIT_MB=600    # (A): issue 47's case
BIG_WORK_MEM=256MB
HASH_MEM_MULTIPLIER=2
SMALL_WORK_MEM=$((LIMIT_MB / (CLIENTS * 1 * HASH_MEM_MULTIPLIER)))MB
SEED=4242

bench_prepare
bench_cluster_start "max_parallel_workers_per_gather = 0" "hash_mem_multiplier = $HASH_MEM_MULTIPLIER" \
    "autovacuum = off" "max_connections = 50" "compute_query_id = on" "bulkhead.track_statements = on"
bench_progress "loading $ROWS + $DIM rows"
bench_psql <<SQL >/dev/null
CREATE TABLE mix (id int NOT NULL, g int NOT NULL, v int NOT NULL);
INSERT INTO mix SELECT i, (i::int8 * 7919 % 2000000)::int, (i::int8 * 104729 % 1000003)::int
FROM generate_series(1, $ROWS) i;
CREATE TABLE dim (id int NOT NULL, pad text NOT NULL);
INSERT INTO dim SELECT i, md5(i::text) || 'x' FROM generate_series(1, $DIM) i;
CREATE TABLE small (id int NOT NULL, v int NOT NULL);
INSERT INTO small SELECT i, (i * 7919) % 1000 FROM generate_series(1, 1000) i;
VACUUM ANALYZE mix, dim, small;
INSERT INTO bulkhead_workload (name, max_running, max_queued, memory_timeout)
VALUES ('reports', 100, 100, '60s');
CREATE ROLE gated LOGIN;
ALTER ROLE gated SET bulkhead.workload = 'reports';
GRANT SELECT ON mix, dim, small TO gated;
SQL
bench_wait_loaded reports

declare -A SQLS=(
    [sort_v]="SELECT v FROM mix ORDER BY v OFFSET :n;"
    [sort_gv]="SELECT g, v FROM mix ORDER BY g, v OFFSET :n;"
    [hash_v]="SELECT v, count(*) FROM mix GROUP BY v OFFSET :n;"
    [hash_g]="SELECT g, count(*) FROM mix GROUP BY g OFFSET :n;"
    [join_v]="SELECT count(*), max(d.pad) FROM mix m JOIN dim d ON d.id = m.v WHERE d.id <= 1000003;"
    [join_g]="SELECT count(*), max(d.pad) FROM mix m JOIN dim d ON d.id = m.g;"
    [small_sort]="SELECT v FROM small ORDER BY v OFFSET 1000;"
    [small_top]="SELECT v FROM small ORDER BY v LIMIT 10;"
)
MIX_C=(sort_v sort_gv hash_v hash_g)
MIX_D=(join_v join_g)
MIX_A=(hash_v sort_v)
MIX_S=(small_sort small_top)
declare -A SCRIPT
for k in "${!SQLS[@]}"; do
    SCRIPT[$k]=$(bench_pgbench_script "$k" <<SQL
\set n $ROWS
${SQLS[$k]}
SQL
)
done
scripts_of() { local k; for k in "$@"; do printf -- '-f\n%s\n' "${SCRIPT[$k]}"; done; }
query_of() { local q=${SQLS[$1]//:n/$ROWS}; echo "${q%;}"; }

gated_value() { bench_psql -U gated -tAc "$1"; }

# configure WAY LIMIT_MB: the workload's max_memory, the role's work_mem and
# bulkhead.memory_request, once the worker has the limit (a new session has
# the role's settings)
configure() {
    local maxmem=NULL wm=$BIG_WORK_MEM req=use
    case $1 in
        nolimit) ;;
        r14) maxmem="'$2MB'" req=limit ;;
        r15) maxmem="'$2MB'" ;;
        workaround) wm=$SMALL_WORK_MEM ;;
        *) bh_die "unknown way $1" ;;
    esac
    bench_psql -c "UPDATE bulkhead_workload SET max_memory = $maxmem WHERE name = 'reports'" \
               -c "ALTER ROLE gated SET work_mem = '$wm'" \
               -c "ALTER ROLE gated SET bulkhead.memory_request = '$req'" >/dev/null
    for _ in $(seq 200); do
        [ "$(bench_psql -tAc "SELECT max_memory IS NOT DISTINCT FROM $maxmem FROM bulkhead_stats WHERE workload = 'reports'")" = t ] &&
            [ "$(gated_value "SELECT current_setting('work_mem') || ' ' || current_setting('bulkhead.memory_request')")" = "$wm $req" ] &&
            return 0
        sleep 0.05
    done
    bh_die "configuration $1 was not loaded"
}

# explain_used QUERY: "MEMORY_KB DISK_KB BATCHES" of EXPLAIN ANALYZE (the
# largest memory figure of its nodes, the largest disk figure, the most
# batches), and the execution time in ms
explain_used() {
    gated_value "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $1" |
        awk '{ for (i = 1; i <= NF; i++) {
                   if ($i ~ /^(Memory|Usage):$/ && $(i + 1) ~ /kB$/) { v = $(i + 1); sub(/kB/, "", v); if (v + 0 > m) m = v + 0 }
                   if ($i == "Disk:" || ($i == "Usage:" && $(i - 1) == "Disk")) { v = $(i + 1); sub(/kB/, "", v); if (v + 0 > d) d = v + 0 }
                   if ($i == "Batches:") { v = $(i + 1); if (v + 0 > b) b = v + 0 }
               } }
             /Execution Time:/ { t = $3 }
             END { printf "%d %d %d %.0f\n", m, d, (b ? b : 1), t }'
}
mb() { awk -v b="$1" 'BEGIN { if (b == "" || b < 0) print "–"; else printf "%.1f", b / 1048576 }'; }

# the CPU time (ticks) of the postmaster's exited children: the backends
server_cpu() { sed 's/^.*) //' "/proc/$BENCH_PID/stat" | awk '{ print $14 + $15 }'; }
wm_stats() {
    bench_psql -tAc "SELECT (SELECT memory_waits || ' ' || memory_shrunk FROM bulkhead_stats WHERE workload = 'reports')
                            || ' ' || (SELECT temp_bytes FROM pg_stat_database WHERE datname = 'postgres')"
}
backends_gone() {
    for _ in $(seq 200); do
        pgrep -P "$BENCH_PID" -f '^postgres: gated ' >/dev/null || break
        sleep 0.05
    done
    sleep 0.2
}
# pgbench_gated ARGS...: pgbench as gated on CPU 1 (in the current directory)
pgbench_gated() {
    "${BENCH_CLIENT_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/pgbench" -n \
        -h "$BENCH_DIR" -p "$BENCH_PORT" -U gated "$@" postgres 2>&1
}
# lat_lines DIR: the latencies (us) and script numbers of DIR's logs
lat_lines() { cat "$1"/lat.* 2>/dev/null | awk '$3 ~ /^[0-9]+$/ { print $3, $4 }'; }

warm() {
    bench_progress "warming up"
    configure nolimit 0
    gated_value "SELECT count(*) FROM mix" >/dev/null
    gated_value "SELECT count(*) FROM dim" >/dev/null
}

# ---------------------------------------------------------------- (B)
partB() {
    local k q
    bench_progress "(B) requests after three runs"
    for k in "${MIX_C[@]}" "${MIX_D[@]}"; do
        q=$(query_of "$k")
        configure r14 "$LIMIT_MB"
        LIMITREQ[$k]=$(gated_value "SELECT memory_requested FROM bulkhead_classify('$q')")
        bench_quick || USEDX[$k]=$(explain_used "$q")
        configure r15 "$LIMIT_MB"
        bench_psql -c "SELECT bulkhead_statement_memory_reset()" -c "SELECT bulkhead_statements_reset()" >/dev/null
        FIRST[$k]=$(gated_value "SELECT memory_requested || ' ' || memory_source FROM bulkhead_classify('$q')")
        for _ in 1 2 3; do gated_value "$q" >/dev/null; done
        NEXT[$k]=$(gated_value "SELECT memory_requested || ' ' || memory_source FROM bulkhead_classify('$q')")
        VIEWREQ[$k]=$(bench_psql -tAc "SELECT memory_request || ' ' || memory_source FROM bulkhead_statements
                                       WHERE workload = 'reports' AND peak_used IS NOT NULL ORDER BY calls DESC LIMIT 1")
        # the fourth run: what it asks (max_memory_requested, the counts reset)
        bench_psql -c "SELECT bulkhead_statements_reset()" >/dev/null
        gated_value "$q" >/dev/null
        FOURTH[$k]=$(bench_psql -tAc "SELECT max_memory_requested FROM bulkhead_statements
                                      WHERE workload = 'reports' AND peak_used IS NOT NULL ORDER BY calls DESC LIMIT 1")
        PEAK[$k]=$(bench_psql -tAc "SELECT peak_used || ' ' || calls || ' ' || coalesce(spills, 0) FROM bulkhead_statements
                                    WHERE workload = 'reports' AND peak_used IS NOT NULL ORDER BY calls DESC LIMIT 1")
    done
}
declare -A LIMITREQ USEDX FIRST NEXT PEAK VIEWREQ FOURTH

# ---------------------------------------------------------------- (A)
# runA WAY: the reports (REPORTS clients) and the small sorts (1 client,
# SECS s) side by side; "TPS P99 FAILED" of the small sorts, and
# "SMALL_RUNS REPORTS_DONE WAITS" appended to A-WAY.runs
runA() {
    local way=$1 logdir rlog out rout n s0 s1 p99 failed rdone
    configure "$way" "$SMALL_LIMIT_MB" >&2
    s0=$(wm_stats)
    logdir=$(runuser -u postgres -- mktemp -d -p "$BENCH_DIR" small.XXXXXX)
    rlog=$BENCH_DIR/reports.out
    # shellcheck disable=SC2046
    (cd "$logdir" && pgbench_gated -c "$REPORTS" -j 1 -T $((SECS + 2)) --random-seed="$SEED" \
        $(scripts_of "${MIX_A[@]}") >"$rlog") &
    local rpid=$!
    sleep 1.5
    # shellcheck disable=SC2046
    out=$(cd "$logdir" && pgbench_gated -c 1 -j 1 -T "$SECS" -l --log-prefix="$logdir/lat" \
        $(scripts_of "${MIX_S[@]}")) || true
    wait "$rpid" || true
    rout=$(cat "$rlog")
    grep -q '^tps = ' <<<"$out" || { tail -n 5 <<<"$out" >&2; bh_die "pgbench (small sorts) failed ($way)"; }
    grep -q '^tps = ' <<<"$rout" || { tail -n 5 <<<"$rout" >&2; bh_die "pgbench (reports) failed ($way)"; }
    backends_gone
    s1=$(wm_stats)
    lat_lines "$logdir" | awk '{ print $1 }' >>"$BENCH_DIR/A-$way.lat"
    n=$(lat_lines "$logdir" | wc -l)
    p99=$(lat_lines "$logdir" | awk '{ print $1 }' | bench_p99)
    rm -rf "$logdir"
    failed=$(awk '/^number of failed transactions: / { print $5 }' <<<"$out")
    rdone=$(awk '/^number of transactions actually processed: / { print $6 }' <<<"$rout")
    rdone=${rdone%%/*}
    read -r w0 _ _ <<<"$s0"
    read -r w1 _ _ <<<"$s1"
    echo "$n ${rdone:-0} $((w1 - w0))" >>"$BENCH_DIR/A-$way.runs"
    echo "$(awk -v n="$n" -v s="$SECS" 'BEGIN { printf "%.1f", n / s }') $p99 ${failed:-0}"
}

# ---------------------------------------------------------------- (C), (D)
# runMix SET:WAY: one run of the mix SET (C or D), CLIENTS clients x XACTS
# statements each, drawn alike in every run; "TPS P99 FAILED" (TPS: statements
# per second, three decimals) and "SECONDS WAITS SHRUNK TEMP_MB CPU_S" appended
# to SET-WAY.runs
runMix() {
    local set=${1%%:*} way=${1#*:} logdir out t0 t1 n secs failed s0 s1 p99 c0 c1 kinds xacts=$XACTS
    if [ "$set" = C ]; then kinds=("${MIX_C[@]}"); else kinds=("${MIX_D[@]}") xacts=$D_XACTS; fi
    configure "$way" "$LIMIT_MB" >&2
    s0=$(wm_stats)
    logdir=$(runuser -u postgres -- mktemp -d -p "$BENCH_DIR" mix.XXXXXX)
    c0=$(server_cpu)
    t0=$(bh_now_us)
    # shellcheck disable=SC2046
    out=$(cd "$logdir" && pgbench_gated -c "$CLIENTS" -j 1 -t "$xacts" --random-seed="$SEED" \
        -l --log-prefix="$logdir/lat" $(scripts_of "${kinds[@]}")) || true
    t1=$(bh_now_us)
    grep -q '^tps = ' <<<"$out" || { tail -n 5 <<<"$out" >&2; bh_die "pgbench failed ($set, $way)"; }
    backends_gone
    c1=$(server_cpu)
    s1=$(wm_stats)
    n=$(lat_lines "$logdir" | wc -l)
    lat_lines "$logdir" | awk '{ print $1 }' >>"$BENCH_DIR/$set-$way.lat"
    p99=$(lat_lines "$logdir" | awk '{ print $1 }' | bench_p99)
    rm -rf "$logdir"
    failed=$(awk '/^number of failed transactions: / { print $5 }' <<<"$out")
    failed=$((${failed:-0} + CLIENTS * xacts - n))
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
    read -r w0 h0 b0 <<<"$s0"
    read -r w1 h1 b1 <<<"$s1"
    echo "$secs $((w1 - w0)) $((h1 - h0)) $(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.0f", (b - a) / 1048576 }')" \
         "$(awk -v a="$c0" -v b="$c1" -v t="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / t }')" \
        >>"$BENCH_DIR/$set-$way.runs"
    echo "$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.3f", n / s }') $p99 $failed"
}

warm
started_at=$(date -u '+%Y-%m-%d %H:%M UTC')
load0=$(cut -d' ' -f1-3 /proc/loadavg)
part B && partB
for w in nolimit r14 r15; do : >"$BENCH_DIR/A-$w.lat"; : >"$BENCH_DIR/A-$w.runs"; done
if part A; then
bench_progress "(A) small sorts beside reports"
declare -A RUNS_TPS RUNS_P99 FAILED TPS P99
bench_alternate "$ROUNDS" runA nolimit r14 r15
declare -A A_TPS A_RUNS_P99 A_FAILED
for w in nolimit r14 r15; do A_TPS[$w]=${TPS[$w]} A_RUNS_P99[$w]=${RUNS_P99[$w]} A_FAILED[$w]=${FAILED[$w]}; done
fi
for s in C D; do for w in r14 r15 workaround; do : >"$BENCH_DIR/$s-$w.lat"; : >"$BENCH_DIR/$s-$w.runs"; done; done
if part C; then
    bench_progress "(C) 1.4's mix"
    bench_alternate "$ROUNDS" runMix C:r14 C:r15 C:workaround
fi
if part D; then
    bench_progress "(D) hash joins"
    bench_alternate "$ROUNDS" runMix D:r14 D:r15 D:workaround
fi
# the joins' batches alone, in each way (not in a smoke run)
declare -A JOINX
if ! bench_quick && part D; then
    for w in r15 workaround; do
        configure "$w" "$LIMIT_MB"
        for k in "${MIX_D[@]}"; do JOINX[$w/$k]=$(explain_used "$(query_of "$k")"); done
    done
fi
check=$(bench_psql -tAc "SELECT memory_granted || ' bytes granted, ' || memory_waiting || ' waiting, '
                                || acquired || ' acquired, ' || released || ' released'
                         FROM bulkhead_stats WHERE workload = 'reports'")
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report
pooled_p99() { bench_p99 <"$BENCH_DIR/$1.lat"; }
col() { awk -v c="$2" '{ print $c }' "$BENCH_DIR/$1.runs" | tr '\n' ' ' | sed 's/ $//'; }
ms_list() { for p in $1; do printf '%s ' "$p"; done | sed 's/ $//'; }
s_list() { for p in $1; do awk -v p="$p" 'BEGIN { printf "%.2f ", p / 1000 }'; done | sed 's/ $//'; }

bench_header "Memory grants by use (1.5): small statements beside reports, the reports' requests after three runs, 1.4's mix again, and hash joins, with 1.4's requests, 1.5's, no limit and the static workaround alternating ($ROUNDS rounds)"
echo "CPU: $(lscpu | awk -F': *' '/^Model name/ { print $2; exit }'); clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown); commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$top" diff --quiet HEAD 2>/dev/null || echo ' with local changes'); started $started_at; load average at the start $load0, at the end $load1."
echo
bench_settings
echo
echo "Command: \`bash test/bench/grants_use.sh $SECS $XACTS $ROUNDS\`. Tables: mix ($ROWS rows: id, g = id × 7919 mod 2,000,000, v = id × 104729 mod 1,000,003), dim ($DIM rows: id, a 33-character pad), small (1,000 rows). One role, sent to the workload 'reports' (max_running 100: admission never waits; memory_timeout 60s) by \`bulkhead.workload\`. The ways: **nolimit** no max_memory, work_mem $BIG_WORK_MEM; **r14** max_memory on 'reports', work_mem $BIG_WORK_MEM, \`bulkhead.memory_request = limit\` for the role (1.4's requests); **r15** the same with \`bulkhead.memory_request = use\` (1.5: the plan's estimates, then grant feedback); **workaround** no max_memory, work_mem $SMALL_WORK_MEM ($LIMIT_MB MB / ($CLIENTS clients × 1 node × hash_mem_multiplier $HASH_MEM_MULTIPLIER))."
echo

if part B; then
echo "### (B) The reports' requests after three runs (r15, max_memory ${LIMIT_MB}MB, each run alone)"
echo
echo "Feedback notes reset (\`bulkhead_statement_memory_reset()\`), the statement run three times, then a fourth time: **its request** is what that fourth run asked (\`bulkhead_statements.max_memory_requested\`, the counts reset before it), against what it used (\`bulkhead_statements.peak_used\`: its nodes' peaks and the executor's memory beyond them, from grant feedback; EXPLAIN ANALYZE's largest memory figure of the same statement run at its limit, r14, is beside it). Also shown: what \`bulkhead_classify(query)\` says a run requests (memory_requested, memory_source) before the first run and after the third, and the view's \`memory_request\` after the third."
echo
echo "| statement | 1.4's request (limit) | classify, before the first run | classify, after three runs | the view's memory_request after three runs | the fourth run's request | peak_used | EXPLAIN ANALYZE at its limit: memory, disk, batches; time | fourth run's request / peak_used | 1.4's / peak_used |"
echo "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"
worstB=0
for k in "${MIX_C[@]}" "${MIX_D[@]}"; do
    read -r first fsrc <<<"${FIRST[$k]}"
    read -r next nsrc <<<"${NEXT[$k]}"
    read -r vreq vsrc <<<"${VIEWREQ[$k]:--1 –}"
    read -r peak _ <<<"${PEAK[$k]:--1 -1}"
    read -r xm xd xb xt <<<"${USEDX[$k]:-0 0 0 0}"
    fourth=${FOURTH[$k]:--1}
    r=$(awk -v a="$fourth" -v b="$peak" 'BEGIN { if (b <= 0 || a < 0) print "–"; else printf "%.2f", a / b }')
    r4=$(awk -v a="${LIMITREQ[$k]}" -v b="$peak" 'BEGIN { if (b <= 0) print "–"; else printf "%.2f", a / b }')
    [ "$r" = – ] || { bench_at_least "$worstB" "$r" || worstB=$r; }
    echo "| $k | $(mb "${LIMITREQ[$k]}") MB | $(mb "$first") MB ($fsrc) | $(mb "$next") MB ($nsrc) | $(mb "$vreq") MB ($vsrc) | $(mb "$fourth") MB | $(mb "$peak") MB |" \
         "$(awk -v m="$xm" -v d="$xd" -v b="$xb" -v t="$xt" 'BEGIN { printf "%.1f MB, %.1f MB, %d; %.2f s", m / 1024, d / 1024, b, t / 1000 }') | $r | $r4 |"
done
echo
echo "(MB: 2^20 bytes. A request counts all of a statement's memory nodes; peak_used the nodes' peaks and what the executor used beyond them.)"
echo
bench_at_least 1.5 "$worstB" && [ "$worstB" != 0 ] && met=0 || met=1
bench_target "the reports' requests after three runs at most 1.5× what they used (at most ${worstB}×)" "$met"
echo

fi
if part A; then
echo "### (A) Small statements beside reports (max_memory ${SMALL_LIMIT_MB}MB, work_mem $BIG_WORK_MEM)"
echo
echo "$REPORTS clients of reports (\`${SQLS[hash_v]//:n/n}\` and \`${SQLS[sort_v]//:n/n}\`, n = $ROWS, drawn in turn: \`pgbench -c $REPORTS -T $((SECS + 2))\`) and, started 1.5 s after them, one client of small sorts (\`${SQLS[small_sort]}\` and \`${SQLS[small_top]}\`, drawn in turn: \`pgbench -c 1 -T $SECS\`); latencies of the small sorts (pgbench's log), p99 pooled over the rounds."
echo
echo "| way | small sorts per second (median) | small sorts' p99, ms (pooled; per run) | small sorts per run | reports done per run | memory waits per run | failed |"
echo "|---|---:|---:|---|---|---|---:|"
for w in nolimit r14 r15; do
    echo "| $w | ${A_TPS[$w]} | $(pooled_p99 "A-$w") ($(ms_list "${A_RUNS_P99[$w]}")) | $(col "A-$w" 1) | $(col "A-$w" 2) | $(col "A-$w" 3) | ${A_FAILED[$w]} |"
done
echo
rA=$(bench_ratio "$(pooled_p99 A-r15)" "$(pooled_p99 A-nolimit)")
rA4=$(bench_ratio "$(pooled_p99 A-r14)" "$(pooled_p99 A-nolimit)")
echo "Small sorts' p99, r15 / nolimit: **${rA}×** (r14 / nolimit: ${rA4}×)."
echo
bench_at_least 1.5 "$rA" && met=0 || met=1
bench_target "small statements beside reports: p99 with 1.5's grants at most 1.5× p99 with no limit (${rA}×; 1.4's requests ${rA4}×)" "$met"
echo

fi
mix_table() {    # mix_table SET
    local s=$1 w
    echo "| way | total time of a run, s (median) | statements per second (median; per run) | p99 latency, s (pooled) | server CPU per run, s (median) | memory waits per run | shrunk per run | temporary files per run, MB | failed |"
    echo "|---|---:|---:|---:|---:|---|---|---|---:|"
    for w in r14 r15 workaround; do
        echo "| $w | $(col "$s-$w" 1 | bench_median) | ${TPS[$s:$w]} (${RUNS_TPS[$s:$w]}) |" \
             "$(awk -v p="$(pooled_p99 "$s-$w")" 'BEGIN { printf "%.2f", p / 1000 }') | $(col "$s-$w" 5 | bench_median) |" \
             "$(col "$s-$w" 2) | $(col "$s-$w" 3) | $(col "$s-$w" 4) | ${FAILED[$s:$w]} |"
    done
    echo
}
if part C; then
echo "### (C) 1.4's mix again (max_memory ${LIMIT_MB}MB, $CLIENTS clients × $XACTS statements per run)"
echo
echo "grants_mix.sh's statements, drawn alike in every run (\`pgbench -c $CLIENTS -j 1 -t $XACTS --random-seed=$SEED\`): $(for k in "${MIX_C[@]}"; do printf '`%s` ' "${SQLS[$k]//:n/n}"; done)."
echo
mix_table C
rC=$(bench_ratio "${TPS[C:r15]}" "${TPS[C:workaround]}")
rC4=$(bench_ratio "${TPS[C:r14]}" "${TPS[C:workaround]}")
echo "Throughput r15 / workaround: **${rC}×**; r14 / workaround: ${rC4}×; r15 / r14: $(bench_ratio "${TPS[C:r15]}" "${TPS[C:r14]}")×. Server CPU per run r15 / workaround: $(bench_ratio "$(col C-r15 5 | bench_median)" "$(col C-workaround 5 | bench_median)")×."
echo
bench_at_least "$rC" 1.0 && met=0 || met=1
bench_target "1.4's mix again: 1.5's grants at least 1.0× the static workaround's throughput (${rC}×; 1.4's requests ${rC4}×)" "$met"
echo

fi
if part D; then
echo "### (D) A mix where memory matters: hash joins (max_memory ${LIMIT_MB}MB, $CLIENTS clients × $D_XACTS statements per run)"
echo
echo "Statements: $(for k in "${MIX_D[@]}"; do printf '`%s` ' "${SQLS[$k]}"; done)(the inner side, dim, hashed). Alone (EXPLAIN ANALYZE, once, after the rounds): the Hash's memory, disk and batches:"
echo
echo "| statement | r15: memory, disk, batches; time | workaround: memory, disk, batches; time |"
echo "|---|---|---|"
for k in "${MIX_D[@]}"; do
    line="| $k"
    for w in r15 workaround; do
        line+=" | $(awk -v s="${JOINX[$w/$k]:-0 0 0 0}" 'BEGIN { split(s, x, " "); printf "%.1f MB, %.1f MB, %d; %.2f s", x[1] / 1024, x[2] / 1024, x[3], x[4] / 1000 }')"
    done
    echo "$line |"
done
echo
mix_table D
rD=$(bench_ratio "${TPS[D:r15]}" "${TPS[D:workaround]}")
rD4=$(bench_ratio "${TPS[D:r14]}" "${TPS[D:workaround]}")
echo "Throughput r15 / workaround: **${rD}×**; r14 / workaround: ${rD4}×; r15 / r14: $(bench_ratio "${TPS[D:r15]}" "${TPS[D:r14]}")× (no target: the ratio is reported). 'reports' at the end: $check."
fi

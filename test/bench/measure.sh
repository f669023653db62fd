# shellcheck shell=bash
# test/bench/measure.sh: what the scenario scripts share to run pgbench and
# report.  Source it after cluster.sh.
#
# BENCH_QUICK=1 (set by `test/bench/run --quick`) shortens every scenario to
# a smoke run: short runs (see bench_run_length), one round, few client
# counts.  The figures are then meaningless; the point is that every script
# still runs through, on any machine.
#
# A scenario prints markdown on stdout (its section of results.md) and its
# progress on stderr.  With BENCH_OUT set to a directory, it also leaves data
# files there for the plots.

BENCH_QUICK=${BENCH_QUICK:-0}
BENCH_OUT=${BENCH_OUT:-}

bench_quick() { [ "$BENCH_QUICK" = 1 ]; }
bench_progress() { printf '    %s\n' "$*" >&2; }

# bench_header TITLE: the section heading and the line saying where it ran
bench_header() {
    echo "## $1"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores," \
         "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
         "(clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown));" \
         "$(free -g | awk '/^Mem:/ { print $2 }') GiB;" \
         "$("$BH_BINDIR/postgres" --version)$(bench_quick && echo '; QUICK SMOKE RUN, figures meaningless')"
    echo
}

# median of the numbers on stdin (one per line or separated by spaces)
bench_median() {
    tr ' ' '\n' | grep . | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_ratio A B: A / B with two decimals
bench_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "inf"; else printf "%.2f", a / b }'; }

# bench_target DESCRIPTION MET: one line of the target checklist
# (MET is the exit status of a test: 0 met, anything else missed)
bench_target() {
    if [ "$2" = 0 ]; then echo "- target met: $1"; else echo "- **target missed**: $1"; fi
}

# bench_at_least A B: exit status 0 if A >= B (numbers with decimals)
bench_at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# pgbench starts the clock of -T before it opens its connections: main()
# arms the alarm, then each thread connects its clients one after the other,
# and the transactions begin once all are connected (so in 15 and in 18).
# When the alarm rings first, no client runs a transaction: pgbench reports
# 0 transactions and prints no "tps =" line.  128 connections to a server
# confined to one slow virtual CPU can take well over a second (and over
# five on a busy one), so a smoke run must not be bounded by seconds.
#
# bench_run_length CLIENTS SECONDS: the pgbench options that bound a run of
# CLIENTS clients: "-T SECONDS"; in a smoke run "-t N" instead, N
# transactions per client (BENCH_QUICK_XACTS, 128, in all, at least one
# each), which pgbench counts only once every connection is made: a slow
# machine takes longer, but never ends a run empty.  (A smoke run's figures
# mean nothing; 128 transactions are enough for a p99 and few enough for a
# machine that runs 50 a second.)
BENCH_QUICK_XACTS=${BENCH_QUICK_XACTS:-128}
bench_run_length() {
    if bench_quick; then
        echo "-t $(((BENCH_QUICK_XACTS + $1 - 1) / $1))"
    else
        echo "-T $2"
    fi
}

# bench_p99: the 99th percentile (ms, one decimal) of the latencies on
# stdin (microseconds, one a line); "nan" if there is none
bench_p99() {
    sort -n | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "nan"; else { i = int(NR * 0.99); if (i < NR * 0.99) i++; printf "%.1f", v[i] / 1000 } }'
}

# bench_pgbench ARGS...: one pgbench run against the cluster, as the postgres
# OS user, with a per-transaction latency log.  Prints
#   TPS P99_MS FAILED
# where FAILED counts failed transactions plus clients that pgbench aborted
# on an error (pgbench 15 aborts a client on any error but a serialization
# failure or deadlock).  The percentile comes from the latency log, never
# from -r: pgbench's per-statement mode under-counts latencies.  Extra
# connection options (-h/-p/-U) may be given to go through a pooler; the
# default is the cluster's socket directory.  "-T SECONDS" (a separate
# argument, after -c) becomes what bench_run_length says.  A run without a
# "tps =" line fails the scenario, saying why.  With BENCH_STEADY=S (not in
# a smoke run), TPS, p99 and the clients' figures count only the
# transactions that ended in the run's last S seconds: what the clients get
# once every connection is made and every backend has warmed up, which with
# hundreds of fresh connections takes many seconds of a run.
bench_pgbench() {
    local logdir out clients=1 arg prev=
    local -a args=()
    for arg in "$@"; do
        case $prev in
            -c) clients=$arg ;;
            -T) unset 'args[-1]'
                # shellcheck disable=SC2207  # "-T 10" or "-t 3": two words
                args+=($(bench_run_length "$clients" "$arg"))
                prev= ; continue ;;
        esac
        args+=("$arg")
        prev=$arg
    done
    logdir=$(runuser -u postgres -- mktemp -d -p "$BENCH_DIR" pgbench.XXXXXX)
    out=$(cd "$logdir" && "${BENCH_CLIENT_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/pgbench" -n \
        -h "$BENCH_DIR" -p "$BENCH_PORT" -l --log-prefix="$logdir/lat" "${args[@]}" postgres 2>&1) || true
    if ! grep -q '^tps = ' <<<"$out"; then
        printf '%s\n' "$out" | tail -n 5 >&2
        rm -rf "$logdir"
        if grep -q '^number of transactions actually processed: 0$' <<<"$out"; then
            bh_die "pgbench ran no transaction (no \"tps =\" line): its -T clock runs while it connects its $clients clients, and connecting took all of it: pgbench ${args[*]}"
        fi
        bh_die "pgbench failed (no \"tps =\" line): pgbench ${args[*]}"
    fi
    local tps failed aborted p99
    tps=$(awk '/^tps = / { printf "%.0f", $3 }' <<<"$out")
    if [ -n "${BENCH_STEADY:-}" ] && ! bench_quick; then
        # columns 5 and 6: when the transaction ended (epoch s, us)
        cat "$logdir"/lat.* | awk -v s="$BENCH_STEADY" '
            { t[NR] = $5 + $6 / 1e6; l[NR] = $0; if (t[NR] > last) last = t[NR] }
            END { for (i = 1; i <= NR; i++) if (t[i] >= last - s) print l[i] }' >"$logdir/steady"
        rm -f "$logdir"/lat.*
        mv "$logdir/steady" "$logdir/lat.steady"
        tps=$(awk -v s="$BENCH_STEADY" '$3 ~ /^[0-9]+$/ { n++ } END { printf "%.0f", n / s }' "$logdir/lat.steady")
    fi
    failed=$(awk '/^number of failed transactions: / { print $5 }' <<<"$out")
    aborted=$(grep -c 'aborted in command' <<<"$out" || true)
    # column 3 is the latency in microseconds ("failed" or "skipped" otherwise)
    p99=$(cat "$logdir"/lat.* | awk '$3 ~ /^[0-9]+$/ { print $3 }' | bench_p99)
    # the latencies themselves (microseconds, one a line), appended to FILE
    # for a caller that pools runs (BENCH_LATENCY_FILE=FILE)
    if [ -n "${BENCH_LATENCY_FILE:-}" ]; then
        cat "$logdir"/lat.* | awk '$3 ~ /^[0-9]+$/ { print $3 }' >>"$BENCH_LATENCY_FILE"
    fi
    # fairness, for a caller that asks (BENCH_CLIENT_STATS=FILE): the
    # longest latency, the fewest transactions a client ended, and how
    # many clients ended none, appended to FILE as "MAX_MS MIN NONE"
    if [ -n "${BENCH_CLIENT_STATS:-}" ]; then
        cat "$logdir"/lat.* | awk -v n="$clients" '
            $3 ~ /^[0-9]+$/ { c[$1]++; if ($3 > mx) mx = $3 }
            END { min = -1; seen = 0
                  for (k in c) { seen++; if (min < 0 || c[k] < min) min = c[k] }
                  if (seen < n || min < 0) min = 0
                  printf "%.1f %d %d\n", mx / 1000, min, n - seen }' >>"$BENCH_CLIENT_STATS"
    fi
    rm -rf "$logdir"
    echo "$tps $p99 $((${failed:-0} + aborted))"
}

# bench_pgbench_script NAME: a file under the cluster directory, readable by
# the postgres user, holding stdin (a custom pgbench script).  Every script
# must start with a \set line: without one, pgbench 15 logs a 0 us latency
# for many transactions.
bench_pgbench_script() {
    local file="$BENCH_DIR/$1.pgbench"
    cat >"$file"
    head -n 1 "$file" | grep -q '^\\set ' || bh_die "pgbench script $1 must start with \\set"
    chown postgres "$file"
    echo "$file"
}

# bench_alternate ROUNDS FUNCTION KEY...: ROUNDS rounds; in each, FUNCTION
# KEY runs once for every KEY in turn (A B C A B C ...) and prints
# "TPS P99_MS FAILED" (bench_pgbench's line).  Fills, per KEY:
#   RUNS_TPS / RUNS_P99   every round's figure, space-separated, in order
#   TPS / P99             the medians over the rounds
#   FAILED                the sum over the rounds
declare -A RUNS_TPS RUNS_P99 TPS P99 FAILED
bench_alternate() {
    local rounds=$1 fn=$2 r key out tps p99 failed
    shift 2
    for key in "$@"; do RUNS_TPS[$key]= RUNS_P99[$key]= FAILED[$key]=0; done
    for ((r = 1; r <= rounds; r++)); do
        for key in "$@"; do
            out=$("$fn" "$key")
            read -r tps p99 failed <<<"$out"
            bench_progress "round $r/$rounds, $key: $tps TPS, p99 $p99 ms, $failed failed"
            RUNS_TPS[$key]+="$tps "
            RUNS_P99[$key]+="$p99 "
            FAILED[$key]=$((FAILED[$key] + failed))
        done
    done
    for key in "$@"; do
        RUNS_TPS[$key]=${RUNS_TPS[$key]% }
        RUNS_P99[$key]=${RUNS_P99[$key]% }
        TPS[$key]=$(bench_median <<<"${RUNS_TPS[$key]}")
        P99[$key]=$(bench_median <<<"${RUNS_P99[$key]}")
    done
}

# bench_switches: the machine's context switches since boot (/proc/stat)
bench_switches() { awk '$1 == "ctxt" { print $2 }' /proc/stat; }

# bench_set_column WORKLOAD COLUMN VALUE: the workload's COLUMN (of
# bulkhead_workload) set to VALUE (an SQL value: NULL, 1, or '1s' with its
# quotes), once the worker has loaded it; max_queued changes with it (1000
# for NULL, 1001 else), so that the load shows in bulkhead_stats
bench_set_column() {
    local q=1000
    [ "$3" = NULL ] || q=1001
    bench_psql -c "UPDATE bulkhead_workload SET $2 = $3, max_queued = $q WHERE name = '$1'" >/dev/null
    for _ in $(seq 200); do
        [ "$(bench_psql -tAc "SELECT max_queued FROM bulkhead_stats WHERE workload = '$1'")" = "$q" ] && return
        sleep 0.05
    done
    bh_die "$2 = $3 of workload $1 was not loaded"
}

# bench_tpcb_setup SCALE PERMITS: pgbench's tables at SCALE; a workload
# 'tpcb' of PERMITS permits (queue of 1000, 60 s timeout, so that nothing
# fails); and a role "gated" whose transactions take its permits
# automatically (bulkhead.workload) and who may run pgbench's scripts
bench_tpcb_setup() {
    bench_progress "pgbench -i -s $1"
    runuser -u postgres -- "$BH_BINDIR/pgbench" -i -q -s "$1" -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >/dev/null 2>&1 ||
        bh_die "pgbench -i failed"
    bench_psql <<SQL
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('tpcb', $2, 1000, '60s');
CREATE ROLE gated LOGIN;
ALTER ROLE gated SET bulkhead.workload = 'tpcb';
GRANT ALL ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO gated;
SQL
    bench_wait_loaded tpcb
}

# bench_tpcb_reset: the tables as pgbench leaves them before a run of its
# own (without -n): history emptied, branches and tellers vacuumed
bench_tpcb_reset() {
    bench_psql -c "VACUUM pgbench_branches, pgbench_tellers" -c "TRUNCATE pgbench_history" >/dev/null
}

# bench_handoff_rate SCRIPT N WINDOW: grants per second of the workload
# 'handoff' (handoff_loop.sql: one permit) with N backends looping on it
# (SCRIPT: a pgbench script that runs handoff_loop(), made with
# bench_pgbench_script), counted over WINDOW seconds once all N are in the
# loop; then the loops are cancelled (each releases what it holds)
bench_handoff_rate() {
    local script=$1 n=$2 window=$3 pgb in sample0 sample1 i
    runuser -u postgres -- "$BH_BINDIR/pgbench" -n -h "$BENCH_DIR" -p "$BENCH_PORT" \
        -c "$n" -j 2 -t 1 -f "$script" postgres >"$BENCH_DIR/handoff-$n.log" 2>&1 &
    pgb=$!
    # all in: every backend holds, waits, or is one of the few between the two
    for i in $(seq 600); do
        in=$(bench_psql -tAc "SELECT count(*) FROM bulkhead_activity WHERE workload = 'handoff'")
        [ "$in" -ge $((n - 3)) ] && [ "$(bench_psql -tAc "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT handoff_loop%'")" -eq "$n" ] && break
        sleep 0.1
    done
    [ "$i" -lt 600 ] || bh_die "the $n backends did not all reach the queue"
    sample0=$(bench_psql -tAc "SELECT acquired, extract(epoch FROM clock_timestamp()) FROM bulkhead_stats WHERE workload = 'handoff'")
    sleep "$window"
    sample1=$(bench_psql -tAc "SELECT acquired, extract(epoch FROM clock_timestamp()) FROM bulkhead_stats WHERE workload = 'handoff'")
    bench_psql -tAc "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'SELECT handoff_loop%'" >/dev/null
    wait "$pgb" || { tail -n 5 "$BENCH_DIR/handoff-$n.log" >&2; bh_die "pgbench of the $n loops failed"; }
    awk -F'|' -v a="$sample0" -v b="$sample1" 'BEGIN { split(a, x, "|"); split(b, y, "|"); printf "%.0f\n", (y[1] - x[1]) / (y[2] - x[2]) }'
}

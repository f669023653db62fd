#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup() and its helpers run from the EXIT trap
# scripts/demo.sh: a narrated tour of bulkhead on a throwaway cluster.
#
#   bash scripts/demo.sh            (or: make demo)      as root, on Debian 12
#
# Installs what is missing (apt-get), builds and installs the extension from a
# copy of this tree, creates a temporary cluster (initdb as the postgres user)
# preloaded with bulkhead, and walks through one workload with a few psql
# sessions: a permit taken, a caller queued and served in turn, a caller
# rejected (53B01), a wait that times out (53B02), a guard that cancels a slow
# statement (57014), the statistics, a shared budget (a reservation kept
# while another workload borrows the rest), tenants, lanes (1.3): a costly
# query from the web role waits in a capped heavy lane while the web lane's
# point lookups keep their latency, and memory grants: four reports that
# may each use 24MB ask what their plans say they use and run at once
# within a workload's 24MB, then, asking their limits (1.4's requests),
# run in turn. The server is stopped and every file
# removed at exit. Exit status 0 when every step behaved as described.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
SRC_DIR=$(dirname -- "$SCRIPT_DIR")
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

bh_require_root
bh_lock_installs

bh_reset_client_env

WORK=
PGPID=
PORT=
CHECKS_FAILED=0
LAST=                       # output of the last statement shown
declare -A S_FD=() S_PID=() S_OFF=() S_SEQ=()

alive() {    # alive PID: running, and not a zombie
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*")"}           # "pid (comm) S ...": the state follows the last ")"
    stat=${stat# }
    [ "${stat%% *}" != Z ]
}

wait_gone() {    # wait_gone PID TENTHS: wait up to TENTHS/10 s for PID to end
    local i
    for ((i = 0; i < $2; i++)); do
        alive "$1" || return 0
        sleep 0.1
    done
    ! alive "$1"
}

cleanup() {
    local name fd pid
    set +e
    # End the psql sessions: EOF on their input makes them quit.
    for name in "${!S_FD[@]}"; do
        fd=${S_FD[$name]}
        exec {fd}>&-
    done
    S_FD=()
    # Stop the server by its pid: fast shutdown, then harder if it lingers.
    if [ -n "$PGPID" ] && alive "$PGPID"; then
        kill -INT "$PGPID"
        if ! wait_gone "$PGPID" 300; then
            kill -QUIT "$PGPID"
            wait_gone "$PGPID" 50 || kill -KILL "$PGPID"
        fi
    fi
    PGPID=
    for name in "${!S_PID[@]}"; do
        pid=${S_PID[$name]}
        wait_gone "$pid" 50 || kill -TERM "$pid"
        wait "$pid" 2>/dev/null
    done
    S_PID=()
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        bh_stop_postmasters_under "$WORK"
        rm -rf -- "$WORK"
    fi
    WORK=
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- narration and checks --------------------------------------------------

AT_BLANK=1    # the last line printed was empty

blank() {    # an empty line, unless there is one already
    [ "$AT_BLANK" = 1 ] || echo
    AT_BLANK=1
}

say() {    # print lines
    printf '%s\n' "$@"
    AT_BLANK=0
}

narrate() {    # one "-- " line per argument, after an empty line
    blank
    say "${@/#/-- }"
}

check_fail() {
    CHECKS_FAILED=$((CHECKS_FAILED + 1))
    say "!! not as described: $*"
}

expect() {    # expect ERE WHAT: the last output must match ERE
    grep -qE -- "$1" <<<"$LAST" || check_fail "$2"
}

expect_no_error() {    # expect_no_error WHAT
    if grep -qE '^(ERROR|FATAL|PANIC):|^psql: error' <<<"$LAST"; then
        check_fail "$1"
    fi
}

# --- one-shot queries (not shown) ------------------------------------------

q() {
    runuser -u postgres -- "$BH_BINDIR/psql" -X -A -t -q -h 127.0.0.1 -p "$PORT" \
        -d postgres -c "$1" 2>/dev/null
}

poll_until() {    # poll_until SQL WHAT SECONDS: until SQL returns true
    local t0 deadline r
    t0=$(bh_now_us)
    deadline=$((t0 + $3 * 1000000))
    while :; do
        r=$(q "$1" || true)
        if [ "$r" = t ]; then
            say "   ($2: after $(bh_fmt_us "$(($(bh_now_us) - t0))"))"
            return 0
        fi
        if [ "$(bh_now_us)" -ge "$deadline" ]; then
            check_fail "$2: not within $3 s"
            return 1
        fi
        sleep 0.1
    done
}

# --- psql sessions that stay connected --------------------------------------
# Each session is a psql reading a FIFO; its output goes to a file. `run`
# shows a statement as "NAME=# statement", sends it, waits for it to finish
# (a \echo marker sent after it shows up) and prints what psql printed.

session_start() {    # session_start NAME
    local name=$1 fifo="$WORK/$1.in" out="$WORK/$1.out" fd
    mkfifo "$fifo"
    : >"$out"
    (exec runuser -u postgres -- stdbuf -oL "$BH_BINDIR/psql" -X -h 127.0.0.1 \
        -p "$PORT" -d postgres -P pager=off <"$fifo" >"$out" 2>&1) &
    S_PID[$name]=$!
    exec {fd}>"$fifo"
    S_FD[$name]=$fd
    S_OFF[$name]=0
    S_SEQ[$name]=0
}

send() {    # send NAME STATEMENT: show it and send it, do not wait
    local name=$1 sql=$2 fd=${S_FD[$1]}
    say "$name=# $sql"
    S_SEQ[$name]=$((S_SEQ[$name] + 1))
    # a psql that is gone must not kill us with SIGPIPE: collect reports it
    (trap '' PIPE; printf '%s\n\\echo __bh_done_%s__\n' "$sql" "${S_SEQ[$name]}" >&"$fd") \
        2>/dev/null || true
}

collect() {    # collect NAME [SECONDS]: wait for the last statement sent, print its output
    local name=$1 secs=${2:-15} out="$WORK/$1.out" marker deadline size
    marker="__bh_done_${S_SEQ[$1]}__"
    deadline=$(($(bh_now_us) + secs * 1000000))
    until grep -qx -- "$marker" "$out"; do
        if ! alive "${S_PID[$name]}" || [ "$(bh_now_us)" -ge "$deadline" ]; then
            LAST=$(tail -c +"$((S_OFF[$name] + 1))" "$out")
            say "$LAST"
            check_fail "session $name did not finish its statement within $secs s"
            return 1
        fi
        sleep 0.05
    done
    size=$(stat -c %s "$out")
    LAST=$(tail -c +"$((S_OFF[$name] + 1))" "$out" | head -c "$((size - S_OFF[$name]))" |
        grep -vx -e "$marker" -e 'LOCATION:  .*' || true)
    S_OFF[$name]=$size
    if [ -n "$LAST" ]; then
        say "$LAST"
        blank
    fi
}

run() {    # run NAME STATEMENT: send, wait, print
    send "$1" "$2"
    collect "$1" || abort_demo
}

abort_demo() {    # a session hangs or is gone: no point in going on
    echo "---- end of the server log ----"
    tail -n 40 "$WORK/run/server.log" 2>/dev/null || true
    bh_die "demo stopped: a session did not answer"
}

# --- setup -------------------------------------------------------------------

echo "bulkhead demo: per-workload execution permits and a bounded FIFO queue,"
echo "kept in the server's shared memory."
echo

bh_install_prereqs

bh_fix_tmpdir
WORK=$(bh_mktemp_dir bulkhead-demo)
mkdir "$WORK/data" "$WORK/run"
chown postgres:postgres "$WORK/data" "$WORK/run"

bh_say "building and installing the extension (from a copy of $SRC_DIR)"
bh_copy_tree "$SRC_DIR" "$WORK/build"
if ! bh_build_install "$WORK/build" >"$WORK/build.log" 2>&1; then
    tail -n 60 "$WORK/build.log"
    bh_die "build failed (above: the end of its output)"
fi

bh_say "creating a throwaway cluster in $WORK/data"
if ! runuser -u postgres -- "$BH_BINDIR/initdb" -D "$WORK/data" -U postgres \
        --auth=trust --no-locale -E UTF8 -N >"$WORK/initdb.log" 2>&1; then
    cat "$WORK/initdb.log"
    bh_die "initdb failed"
fi

port_busy() {    # something listens on 127.0.0.1:PORT
    if command -v ss >/dev/null 2>&1 &&
            [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; then
        return 0
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
PORT=54329
while port_busy "$PORT"; do
    PORT=$((PORT + 1))
    [ "$PORT" -lt 54429 ] || bh_die "no free port in 54329-54428"
done

bh_say "starting postgres on 127.0.0.1:$PORT with shared_preload_libraries=bulkhead, bulkhead.database=postgres"
if ! runuser -u postgres -- "$BH_BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/run/server.log" \
        -w -t 60 -o "-p $PORT -c listen_addresses=127.0.0.1 \
-c unix_socket_directories='$WORK/run' \
-c shared_preload_libraries=bulkhead -c bulkhead.database=postgres" \
        start >"$WORK/pg_ctl.log" 2>&1; then
    cat "$WORK/pg_ctl.log"
    tail -n 30 "$WORK/run/server.log" 2>/dev/null || true
    bh_die "the server did not start"
fi
PGPID=$(head -n 1 "$WORK/data/postmaster.pid")
bh_say "server running (pid $PGPID); it is stopped and removed when the demo ends"

session_start admin
session_start A
session_start B
session_start C
session_start D

# --- the tour ----------------------------------------------------------------

AT_BLANK=0

narrate "1. Install the extension in the database whose bulkhead_workload table" \
        "   the background worker reads (bulkhead.database = postgres)."
run admin "CREATE EXTENSION bulkhead;"
expect '^CREATE EXTENSION' "CREATE EXTENSION succeeds"

narrate "2. A workload is a row. 'reports' gets 1 execution permit and 1 queue slot;" \
        "   a caller waits at most 2 s for a permit by default, and while a permit" \
        "   is held its statements run under a 300 ms statement_timeout."
run admin "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, statement_timeout) VALUES ('reports', 1, 1, '2s', '300ms');"
expect '^INSERT 0 1' "the workload is inserted"

narrate "The background worker copies committed changes into shared memory" \
        "within a second; bulkhead_stats shows what is loaded."
poll_until "SELECT EXISTS (SELECT 1 FROM bulkhead_stats WHERE workload = 'reports')" \
    "'reports' is loaded" 10 || true
run admin "SELECT workload, mode, max_running, max_queued, running, queued FROM bulkhead_stats;"
expect 'reports' "bulkhead_stats lists 'reports'"

narrate "3. Session A takes the only permit and keeps it (a session permit lasts" \
        "   until bulkhead_release or the end of the session). A stays connected, idle."
run A "SELECT bulkhead_acquire('reports');"
expect_no_error "A gets the permit"

narrate "4. Session B asks for the permit, ready to wait up to 10 s (without a" \
        "   timeout argument, the workload's queue_timeout of 2 s would apply)." \
        "   The permit is taken and the queue has room, so B waits in the queue."
send B "SELECT bulkhead_acquire('reports', '10s');"
say "   (B is waiting...)"
poll_until "SELECT EXISTS (SELECT 1 FROM bulkhead_activity a JOIN pg_stat_activity p ON p.pid = a.pid
             WHERE a.workload = 'reports' AND a.state = 'queued' AND p.wait_event_type = 'Extension')" \
    "B is queued" 10 || true

narrate "One row per permit held or awaited:"
run admin "SELECT pid, workload, state, scope, wait_ms FROM bulkhead_activity ORDER BY since;"
expect 'running' "A shows as running"
expect 'queued' "B shows as queued"
narrate "A queued caller sleeps on its latch; pg_stat_activity shows an Extension wait:"
run admin "SELECT a.pid, a.state, p.wait_event_type, p.wait_event, p.query FROM bulkhead_activity a JOIN pg_stat_activity p ON p.pid = a.pid ORDER BY a.since;"
expect 'queued +\| *Extension' "B waits on wait_event_type 'Extension'"

narrate "5. Session C arrives while 1 caller runs and 1 waits: running + queued =" \
        "   max_running + max_queued, so C is rejected at once (SQLSTATE 53B01)," \
        "   whatever timeout it asks for."
run C '\set VERBOSITY verbose'
run C "SELECT bulkhead_acquire('reports', '10s');"
expect '53B01' "C is rejected with 53B01"
narrate "bulkhead_try_acquire answers false instead of raising:"
run C "SELECT bulkhead_try_acquire('reports');"
expect '^ f$' "bulkhead_try_acquire returns false"

narrate "6. A releases. The permit goes straight to the head of the queue, B," \
        "   whose bulkhead_acquire now returns."
run A "SELECT bulkhead_release('reports');"
expect_no_error "A releases its permit"
say "(B's bulkhead_acquire returns:)"
collect B 15 || abort_demo
expect_no_error "B gets the permit A released"
run admin "SELECT pid, workload, state, scope, wait_ms FROM bulkhead_activity ORDER BY since;"
expect 'running' "B now runs"

narrate "7. The permit is held (by B) and the queue is empty: C is admitted to the" \
        "   queue, waits 100 ms, and gives up with SQLSTATE 53B02."
run C "SELECT bulkhead_acquire('reports', '100ms');"
expect '53B02' "C times out with 53B02"

narrate "8. B is done and releases."
run B "SELECT bulkhead_release('reports');"
expect_no_error "B releases its permit"

narrate "9. The guards. A transaction-scoped permit is returned at commit or abort;" \
        "   while it is held, the workload's statement_timeout (300 ms) applies to" \
        "   the statements that follow, so a slow one is cancelled (SQLSTATE 57014)."
run C "BEGIN;"
run C "SELECT bulkhead_acquire_xact('reports');"
expect_no_error "C gets a transaction permit"
run C "SHOW statement_timeout;"
expect '^ 300ms$' "statement_timeout is the workload's 300 ms"
run C "SELECT pg_sleep(1);"
expect '57014' "the slow statement is cancelled with 57014"
expect 'statement timeout' "the cancel names the statement timeout"
run C "ROLLBACK;"
narrate "The abort returned the permit, and the session's own setting is back:"
run C "SHOW statement_timeout;"
expect '^ 0$' "statement_timeout is back to 0"

narrate "10. What bulkhead counted: admissions, rejections for a full queue apart" \
         "    from expired waits, wait and hold times."
poll_until "SELECT running = 0 AND queued = 0 FROM bulkhead_stats WHERE workload = 'reports'" \
    "no permit held or awaited" 5 || true
run admin '\x on'
run admin "SELECT * FROM bulkhead_stats;"
expect 'acquired +\| 3$' "3 permits were granted (A, B, C)"
expect 'rejected_full +\| [1-9]' "the rejection is counted"
expect 'timed_out +\| 1$' "the expired wait is counted"
run admin '\x off'
run admin "SELECT * FROM bulkhead_activity;"
expect '\(0 rows\)' "no permit is left held or awaited"

narrate "11. Shared budgets. 'server' runs best at 4 active transactions: it becomes" \
         "    a budget that 'checkout' and 'analytics' draw from. checkout keeps 2" \
         "    permits reserved (never lent); the other 2 are shared."
run admin "INSERT INTO bulkhead_workload (name, max_running) VALUES ('server', 4);"
run admin "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent, reserved, weight) VALUES ('checkout', 4, 8, '2s', 'server', 2, 300), ('analytics', 4, 8, '2s', 'server', 0, 100);"
expect '^INSERT 0 2' "the two children are inserted"
poll_until "SELECT count(*) = 2 FROM bulkhead_stats WHERE parent = 'server'" \
    "the budget and its children are loaded" 10 || true

narrate "While checkout is idle, analytics borrows the whole shared part: A and B" \
        "run, and C gets nothing although 2 of server's 4 permits are free:" \
        "they are checkout's reservation."
run A "SELECT bulkhead_acquire('analytics');"
expect_no_error "A borrows a shared permit"
run B "SELECT bulkhead_acquire('analytics');"
expect_no_error "B borrows the other shared permit"
run C "SELECT bulkhead_try_acquire('analytics');"
expect '^ f$' "C gets nothing: the reservation is not lent"
run admin "SELECT workload, parent, reserved, running, borrowed FROM bulkhead_stats WHERE workload IN ('server', 'checkout', 'analytics') ORDER BY parent NULLS FIRST, workload;"
expect 'analytics +\| server +\| +0 \| +2 \| +2$' "analytics runs 2, both borrowed"

narrate "checkout comes back: its 2 reserved permits are there at once, while" \
        "analytics keeps the 2 it borrowed (nothing is ever preempted)."
run C "SELECT bulkhead_acquire('checkout', '0');"
expect_no_error "C gets a checkout permit at once"
run admin "SELECT bulkhead_acquire('checkout', '0');"
expect_no_error "a second checkout permit, at once"
run admin "SELECT workload, parent, reserved, running, borrowed FROM bulkhead_stats WHERE workload IN ('server', 'checkout', 'analytics') ORDER BY parent NULLS FIRST, workload;"
expect 'server +\| +\| +0 \| +4 \| +0$' "server runs 4: its whole limit, never more"
expect 'checkout +\| server +\| +2 \| +2 \| +0$' "checkout runs its 2 reserved permits"
for who in A B; do run "$who" "SELECT bulkhead_release('analytics');"; done
run C "SELECT bulkhead_release('checkout');"
run admin "SELECT bulkhead_release('checkout');"

narrate "12. Tenants. 'saas' serves many customers through 1 permit. A caller names" \
        "    its customer as a key; the permit goes to the key least served, in" \
        "    arrival order within a key. A (customer 'noisy') holds the permit and" \
        "    two more of noisy's calls queue; then quiet's one call arrives."
run admin "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout) VALUES ('saas', 1, 10, '10s');"
poll_until "SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 'saas'" \
    "workload saas is loaded" 10 || true
run A "SELECT bulkhead_acquire('saas', NULL, key => 'noisy');"
expect_no_error "A holds the permit for noisy"
send B "SELECT bulkhead_acquire('saas', NULL, key => 'noisy');"
poll_until "SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'saas' AND state = 'queued'" \
    "B waits" 10 || true
send D "SELECT bulkhead_acquire('saas', NULL, key => 'noisy');"
poll_until "SELECT count(*) = 2 FROM bulkhead_activity WHERE workload = 'saas' AND state = 'queued'" \
    "D waits behind B" 10 || true
send C "SELECT bulkhead_acquire('saas', NULL, key => 'quiet');"
poll_until "SELECT count(*) = 3 FROM bulkhead_activity WHERE workload = 'saas' AND state = 'queued'" \
    "C waits, last to arrive" 10 || true
run admin "SELECT workload, key, running, queued FROM bulkhead_keys ORDER BY key;"
expect 'noisy +\| +1 \| +2$' "bulkhead_keys: noisy holds 1 and has 2 waiting"
expect 'quiet +\| +0 \| +1$' "quiet has its 1 call waiting"

narrate "A releases. FIFO would serve B, then D, then C; by key, quiet has been" \
        "served least (noisy held the permit all along): C goes first."
run A "SELECT bulkhead_release('saas');"
collect C || abort_demo
expect_no_error "C, the quiet customer, gets the permit first"
run admin "SELECT key, state FROM bulkhead_activity WHERE workload = 'saas' ORDER BY state DESC, key;"
expect 'quiet +\| running' "the running permit is quiet's"
run C "SELECT bulkhead_release('saas');"
collect B || abort_demo
run B "SELECT bulkhead_release('saas');"
collect D || abort_demo
run D "SELECT bulkhead_release('saas');"
run admin "SELECT count(*) AS keys_in_use FROM bulkhead_keys;"
expect '^ +0$' "idle keys leave shared memory: none is left"

REPORT="SELECT count(*) FROM (SELECT note || g FROM orders, generate_series(1, 4) g ORDER BY 1 OFFSET 0) s"
narrate "13. Lanes (1.3): chosen by what a statement costs. The web application's" \
         "    role takes 'web' (4 permits). A statement it sends that is planned at" \
         "    20000 or more goes to 'heavy' instead (1 permit), where it runs with" \
         "    work_mem capped at 1MB and no parallel workers."
run admin "CREATE ROLE web_app LOGIN; CREATE TABLE orders AS SELECT g AS id, g % 1000 AS customer, md5(g::text) AS note FROM generate_series(1, 200000) g; ALTER TABLE orders ADD PRIMARY KEY (id); ANALYZE orders; GRANT SELECT ON orders TO web_app;"
expect_no_error "the web role and its table are made"
run admin "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, settings) VALUES ('web', 4, 64, '10s', NULL), ('heavy', 1, 8, '60s', '{work_mem=1MB,max_parallel_workers_per_gather=0}');"
run admin "INSERT INTO bulkhead_rule (position, role, workload) VALUES (10, 'web_app', 'web'); INSERT INTO bulkhead_rule (position, min_cost, workload) VALUES (1, 20000, 'heavy');"
expect_no_error "the lanes and their rules are inserted"
poll_until "SET bulkhead.exempt_superuser = off; SELECT workload = 'heavy' FROM bulkhead_classify('$REPORT')" \
    "the lanes and rules are loaded" 10 || true
for who in A B C D; do run "$who" "SET ROLE web_app;"; done
narrate "bulkhead_classify(query) plans a query without running it: a point lookup" \
        "takes web, the report (planned at over 100000: it sorts 800000 rows) takes heavy."
run A "SELECT * FROM bulkhead_classify('SELECT note FROM orders WHERE id = 42');"
expect 'web +\| rule +\| +10' "a point lookup takes web"
run A "SELECT * FROM bulkhead_classify('$REPORT');"
expect 'heavy +\| rule +\| +1' "the report takes heavy"

lookups() {    # lookups WHAT: 3 s of point lookups by web_app, 2 clients; latency shown
    local out
    printf '\\set id random(1, 200000)\nSELECT note FROM orders WHERE id = :id;\n' >"$WORK/lookup.sql"
    chmod 644 "$WORK/lookup.sql"
    out=$(runuser -u postgres -- "$BH_BINDIR/pgbench" -n -h 127.0.0.1 -p "$PORT" -U web_app \
        -c 2 -j 1 -T 3 -f "$WORK/lookup.sql" postgres 2>&1 || true)
    LAST=$(grep -E '^(latency average|number of failed|number of transactions actually)' <<<"$out" || true)
    say "   web point lookups, $1:"
    say "${LAST/#/   }"
    grep -qE '^number of transactions actually processed: [1-9]' <<<"$out" ||
        check_fail "the point lookups ran ($1)"
}
reports() {    # reports: A, B, C and D each send the report, not waiting
    local who
    for who in A B C D; do
        send "$who" "SELECT current_setting('work_mem') AS work_mem, ($REPORT) AS report;"
    done
}
reports_done() {    # collect the four reports
    local who
    for who in A B C D; do collect "$who" 60 || abort_demo; done
}

narrate "First the web lane alone:"
lookups "alone"
narrate "Now A, B, C and D (the web role too) each send the report at once. They" \
        "queue in heavy, one runs at a time, and web keeps its 4 permits for the" \
        "point lookups: none waits for a permit (their latency rises only by what" \
        "the one report running takes of the server's CPUs):"
run admin "SELECT bulkhead_stats_reset();"
reports
poll_until "SELECT running = 1 AND queued = 3 FROM bulkhead_stats WHERE workload = 'heavy'" \
    "one report runs in heavy, three wait there" 10 || true
lookups "while four reports run in heavy"
reports_done
expect '1MB' "the report ran with heavy's work_mem cap"
narrate "The longest wait for a permit: the reports waited in heavy, none of the" \
        "point lookups waited in web."
run admin "SELECT workload, acquired, round(wait_time_max_ms) AS longest_wait_ms, wait_time_max_ms < 50 AS under_50ms FROM bulkhead_stats WHERE workload IN ('web', 'heavy') ORDER BY 1;"
expect 'heavy +\| +4 \|' "the four reports took heavy"
expect 'web +\| +[0-9]+ \| +[0-9]+ \| t$' "no point lookup waited for web"

narrate "Without the statement rule (1.2: a lane by who runs it), the same four" \
        "reports take web's 4 permits, and the point lookups queue behind them:"
run admin "DELETE FROM bulkhead_rule WHERE position = 1;"
poll_until "SET bulkhead.exempt_superuser = off; SELECT workload IS DISTINCT FROM 'heavy' FROM bulkhead_classify('$REPORT')" \
    "the worker dropped the statement rule" 10 || true
run admin "SELECT bulkhead_stats_reset();"
reports
poll_until "SELECT running = 4 FROM bulkhead_stats WHERE workload = 'web'" \
    "the four reports hold web's 4 permits" 10 || true
lookups "while four reports hold web's permits"
reports_done
narrate "Now the point lookups waited for web, behind the reports:"
run admin "SELECT workload, acquired, round(wait_time_max_ms) AS longest_wait_ms, wait_time_max_ms < 50 AS under_50ms FROM bulkhead_stats WHERE workload IN ('web', 'heavy') ORDER BY 1;"
expect 'web +\| +[0-9]+ \| +[0-9]+ \| f$' "point lookups waited behind the reports in web"
for who in A B C D; do run "$who" "RESET ROLE;"; done

MEMREPORT="SELECT s.*, pg_sleep(1) IS NULL AS slept FROM (SELECT customer, sum(length(note)) AS total FROM orders GROUP BY customer ORDER BY 2 DESC LIMIT 1) s"
narrate "14. Memory grants. A statement's sorts and hash tables may each use" \
        "    work_mem; N statements x their nodes x work_mem has no bound, and past" \
        "    the machine's memory the kernel kills a backend and every session is" \
        "    lost. 'bi' may be granted 24MB at once. Its report (a hash aggregate" \
        "    of 1,000 customers and a top-1 sort; no parallel workers here) may use" \
        "    24MB at work_mem 8MB (8MB x hash_mem_multiplier 2, and 8MB), but asks" \
        "    what its plan's estimates say it uses (1.5), and runs held to it:"
run admin "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_memory, memory_timeout) VALUES ('bi', 8, 8, '30s', '24MB', '30s');"
expect_no_error "the workload is inserted"
poll_until "SELECT max_memory = '24MB' FROM bulkhead_stats WHERE workload = 'bi'" \
    "the worker loaded bi" 10 || true
for who in A B C D; do
    run "$who" "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'bi'; SET work_mem = '8MB'; SET max_parallel_workers_per_gather = 0;"
done
run A "SELECT workload, memory_requested, memory_requested < 1048576 AS under_1mb, memory_source FROM bulkhead_classify('$MEMREPORT');"
expect 'bi +\| +[0-9]+ \| t +\| estimate' "the report asks its estimate, under 1MB"
narrate "A, B, C and D send it at once: the four fit in 24MB together, and run" \
        "at once, none waits:"
run admin "SELECT bulkhead_stats_reset();"
for who in A B C D; do send "$who" "$MEMREPORT;"; done
poll_until "SELECT count(*) FILTER (WHERE state = 'running' AND memory_granted > 0) = 4 FROM bulkhead_activity WHERE workload = 'bi'" \
    "the four reports run at once" 10 || true
for who in A B C D; do collect "$who" 60 || abort_demo; done
run admin "SELECT workload, max_memory, memory_granted, memory_waits, memory_shrunk FROM bulkhead_stats WHERE workload = 'bi';"
expect 'bi +\| 24MB +\| +0 \| +0 \| +0' "no report waited, none ran shrunk, nothing is left granted"
narrate "1.4 asked for every node's limit: bulkhead.memory_request = limit (a" \
        "superuser's setting) brings that back. Each report then asks for 24MB;" \
        "one is granted its 24MB and runs, the others wait for the memory, in" \
        "arrival order, holding their permits:"
for who in A B C D; do run "$who" "SET bulkhead.memory_request = 'limit';"; done
run A "SELECT workload, memory_requested, memory_source FROM bulkhead_classify('$MEMREPORT');"
expect 'bi +\| +25165824 \| limit' "the report asks for 24MB"
run admin "SELECT bulkhead_stats_reset();"
for who in A B C D; do send "$who" "$MEMREPORT;"; done
poll_until "SELECT count(*) FILTER (WHERE state = 'running' AND memory_granted = 25165824) = 1 AND count(*) FILTER (WHERE state = 'waiting for memory') = 3 FROM bulkhead_activity WHERE workload = 'bi'" \
    "one report runs with 24MB, three wait for memory" 10 || true
run admin "SELECT state, memory_requested, memory_granted FROM bulkhead_activity WHERE workload = 'bi' ORDER BY state;"
expect 'waiting for memory' "bulkhead_activity shows the waiters"
for who in A B C D; do collect "$who" 60 || abort_demo; done
narrate "Each report ran in turn with its full 24MB: the workload's statements were" \
        "never granted more than 24MB together."
run admin "SELECT workload, max_memory, memory_granted, memory_waits, memory_shrunk, round(memory_wait_p99_ms) AS wait_p99_ms FROM bulkhead_stats WHERE workload = 'bi';"
expect 'bi +\| 24MB +\| +0 \| +3 \| +0' "three reports waited, none ran shrunk, nothing is left granted"
for who in A B C D; do run "$who" "RESET bulkhead.workload; RESET work_mem; RESET max_parallel_workers_per_gather; RESET bulkhead.memory_request; RESET bulkhead.exempt_superuser;"; done
blank
if [ "$CHECKS_FAILED" -eq 0 ]; then
    echo "Demo complete: every step behaved as described."
    exit 0
fi
echo "Demo complete, but $CHECKS_FAILED step(s) did not behave as described (lines marked !!)."
echo "---- end of the server log ----"
tail -n 40 "$WORK/run/server.log" 2>/dev/null || true
exit 1

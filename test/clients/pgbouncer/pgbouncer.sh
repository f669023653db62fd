# shellcheck shell=bash
# test/clients/pgbouncer/pgbouncer.sh: PgBouncer in front of the test
# cluster.  Sourced by test/clients/run.sh, which provides check/pass/fail,
# run_child, WORK, PSQL_DIRECT and the bench_* cluster (BENCH_PORT).
#
# PgBouncer (Debian's) listens on a free loopback port, pool_mode =
# transaction, with three entries for the same server database:
#   postgres      pool_size 6, transaction pooling  (the pgbench run)
#   single        pool_size 1, transaction pooling  (every client gets the
#                 same server connection: the session-permit demonstration)
#   sessionpool   pool_size 1, session pooling      (DISCARD ALL, informational)
# Tests: pgbench with transaction permits, a session permit under
# transaction pooling, transparent admission (bulkhead.workload),
# classification rules on application_name, and tenants (SET LOCAL
# bulkhead.key per transaction).

PGB_DIR=
PGB_PORT=
PGB_PID=
SAMPLER_PID=
PGB_HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)

pgb_start() {
    PGB_DIR=$WORK/pgbouncer
    mkdir -p "$PGB_DIR"
    PGB_PORT=64320
    while [ -n "$(ss -Hltn "sport = :$PGB_PORT" 2>/dev/null)" ]; do
        PGB_PORT=$((PGB_PORT + 1))
    done
    local server="host=127.0.0.1 port=$BENCH_PORT dbname=postgres"
    cat >"$PGB_DIR/pgbouncer.ini" <<EOF
[databases]
postgres = $server pool_size=6
single = $server pool_size=1
sessionpool = $server pool_size=1 pool_mode=session

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir = $PGB_DIR
auth_type = trust
auth_file = $PGB_DIR/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = 6
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 200
server_reset_query = DISCARD ALL
ignore_startup_parameters = extra_float_digits
logfile = $PGB_DIR/pgbouncer.log
EOF
    printf '"%s" ""\n' postgres bh_gated bh_ruled bh_keyed >"$PGB_DIR/userlist.txt"
    chown -R postgres:postgres "$PGB_DIR"
    # in the foreground of its own process (setpriv execs it, so the pid is
    # PgBouncer's own), as postgres: PgBouncer refuses to run as root
    setpriv --reuid=postgres --regid=postgres --init-groups \
        /usr/sbin/pgbouncer "$PGB_DIR/pgbouncer.ini" >>"$PGB_DIR/stdout.log" 2>&1 &
    PGB_PID=$!
    for _ in $(seq 100); do
        pgb_psql postgres -c "SELECT 1" >/dev/null 2>&1 && return 0
        kill -0 "$PGB_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$PGB_DIR/pgbouncer.log" "$PGB_DIR/stdout.log" 2>/dev/null | tail -n 20
    return 1
}

pgb_stop() {
    if [ -n "$SAMPLER_PID" ]; then
        kill "$SAMPLER_PID" 2>/dev/null
        wait "$SAMPLER_PID" 2>/dev/null
        SAMPLER_PID=
    fi
    if [ -n "$PGB_PID" ]; then
        kill -TERM "$PGB_PID" 2>/dev/null    # immediate shutdown
        for _ in $(seq 50); do
            kill -0 "$PGB_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$PGB_PID" 2>/dev/null
        wait "$PGB_PID" 2>/dev/null
        PGB_PID=
    fi
}

# pgb_psql DB ARGS...: psql through PgBouncer
pgb_psql() {
    local db=$1
    shift
    "$BH_BINDIR/psql" -X -q -At -h 127.0.0.1 -p "$PGB_PORT" -U postgres -d "$db" "$@"
}

# the server's view, straight to the server
direct() { "${PSQL_DIRECT[@]}" -At "$@"; }

pgb_define() {    # pgb_define NAME B Q QUEUE_TIMEOUT STATEMENT_TIMEOUT|NULL
    direct -c "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
                   statement_timeout) VALUES ('$1', $2, $3, '$4', $5)" >/dev/null || return 1
    for _ in $(seq 200); do
        [ "$(direct -c "SELECT count(*) FROM bulkhead_stats WHERE workload = '$1'")" = 1 ] && break
        sleep 0.05
    done
    direct -c "SELECT bulkhead_stats_reset('$1')" >/dev/null
}

stat_of() { direct -c "SELECT $2 FROM bulkhead_stats WHERE workload = '$1'"; }

# 1. 30 pgbench clients through a pool of 6 server connections for 10 s, each
# transaction taking a transaction permit of a workload with B=2, Q=100.
pgb_test_pgbench() {
    local w=pgb_xact out=$WORK/pgbench.out stopfile=$WORK/sampler.stop rc
    pgb_define "$w" 2 100 30s NULL || { fail "pgbouncer: define workload $w"; return; }
    rm -f "$stopfile"
    /usr/bin/python3 "$PGB_HERE/sample.py" \
        "host=127.0.0.1 port=$BENCH_PORT dbname=postgres user=postgres" "$w" "$stopfile" \
        >"$WORK/sampler.out" 2>&1 &
    SAMPLER_PID=$!
    sleep 0.3
    echo "    pgbench -c 30 -j 2 -T 10 through PgBouncer (transaction pooling, pool_size 6)"
    run_child timeout -k 10 60 "$BH_BINDIR/pgbench" -n -h 127.0.0.1 -p "$PGB_PORT" -U postgres \
        -c 30 -j 2 -T 10 -f "$PGB_HERE/xact_permit.sql" postgres >"$out" 2>&1
    rc=$?
    touch "$stopfile"
    wait "$SAMPLER_PID"
    SAMPLER_PID=
    sed 's/^/    | /' "$out" | grep -E 'processed|failed|latency average|tps|abort|error|ERROR' || true
    echo "    | sampler: $(cat "$WORK/sampler.out")"

    local processed failed samples running activity queued backends peak peakq acquired
    processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
    read -r samples running queued activity backends < <(
        sed -n 's/^samples=\([0-9]*\) running=\([0-9]*\) activity=\([0-9]*\) queued=\([0-9]*\) backends=\([0-9]*\)$/\1 \2 \4 \3 \5/p' \
            "$WORK/sampler.out")
    peak=$(stat_of "$w" peak_running)
    peakq=$(stat_of "$w" peak_queued)
    acquired=$(stat_of "$w" acquired)
    echo "    | bulkhead_stats: peak_running=$peak peak_queued=$peakq acquired=$acquired"

    check "pgbouncer: pgbench exits 0 and processed transactions ($processed)" \
        test "$rc" -eq 0 -a "${processed:-0}" -gt 100
    check "pgbouncer: no transaction failed (failed=${failed:-?})" test "${failed:-x}" = 0
    check "pgbouncer: sampled running never above 2 (max $running, activity $activity, $samples samples)" \
        test "${samples:-0}" -ge 100 -a "${running:-9}" -le 2 -a "${activity:-9}" -le 2
    check "pgbouncer: peak_running = 2 (exact; limit reached, never passed)" test "$peak" = 2
    check "pgbouncer: at most 6 server connections, at most 4 queued (max $backends, $queued)" \
        test "${backends:-9}" -le 6 -a "${queued:-9}" -le 4
    check "pgbouncer: every processed transaction took one permit ($acquired = $processed)" \
        test "$acquired" = "${processed:-x}"
    check "pgbouncer: running = 0 and queued = 0 at the end" \
        test "$(stat_of "$w" running)/$(stat_of "$w" queued)" = 0/0
}

# 2. A session permit under transaction pooling stays with the server
# connection: the next client to get that connection inherits the permit,
# and its guard.  (Entry "single": one server connection for everyone.)
pgb_test_session_permit() {
    local w=pgb_sess pid_a pid_b out
    pgb_define "$w" 1 0 0 "'1s'" || { fail "pgbouncer: define workload $w"; return; }

    # client A: takes a session permit, then disconnects without releasing
    pid_a=$(pgb_psql single -c "SELECT bulkhead_acquire('$w')" -c "SELECT pg_backend_pid()")
    pid_a=$(echo "$pid_a" | tail -n 1)
    check "session permit: still held after client A disconnected (pid $pid_a)" \
        test "$(direct -c "SELECT pid || ' ' || scope FROM bulkhead_activity WHERE workload = '$w'")" = "$pid_a session"
    check "session permit: the workload is full for everyone else" \
        test "$(direct -c "SELECT bulkhead_try_acquire_xact('$w')")" = f

    # client B: never asked for a permit, but gets A's server connection
    pid_b=$(pgb_psql single -c "SELECT pg_backend_pid()")
    check "session permit: client B is on the same server connection" test "$pid_b" = "$pid_a"
    check "session permit: A's guard (statement_timeout 1s) applies to B" \
        test "$(pgb_psql single -c "SHOW statement_timeout")" = 1s
    out=$(pgb_psql single -c "SELECT pg_sleep(1.5)" 2>&1)
    check "session permit: B's 1.5 s statement is cancelled by A's guard" \
        grep -q "canceling statement due to statement timeout" <<<"$out"
    out=$(pgb_psql single -c "SELECT bulkhead_acquire('$w', '0')" 2>&1)
    check "session permit: B's own acquire fails with 'already held by this session'" \
        grep -q "already held by this session" <<<"$out"
    pgb_psql single -c "SELECT bulkhead_release('$w')" >/dev/null 2>&1
    check "session permit: B could release A's permit; running = 0, guard gone" \
        test "$(stat_of "$w" running)/$(pgb_psql single -c "SHOW statement_timeout")" = 0/0

    # the same through the same connection with transaction scope: nothing stays
    pgb_psql single -c "BEGIN" -c "SELECT bulkhead_acquire_xact('$w')" \
        -c "SELECT count(*) FROM pg_sleep(0.01)" -c "COMMIT" >/dev/null
    check "transaction permit: returned at COMMIT; the next client sees no permit, no guard" \
        test "$(stat_of "$w" running)/$(pgb_psql single -c "SHOW statement_timeout")/$(stat_of "$w" acquired)" = 0/0/2
    out=$(pgb_psql single -c "BEGIN" -c "SELECT bulkhead_acquire_xact('$w')" \
        -c "SELECT pg_sleep(1.5)" -c "COMMIT" 2>&1)
    check "transaction permit: its guard fires inside the transaction (57014), permit returned" \
        test "$(grep -c 'statement timeout' <<<"$out")/$(stat_of "$w" running)" = 1/0

    # session pooling: when a client leaves, PgBouncer runs DISCARD ALL on its
    # server connection before handing it on.  DISCARD ALL releases session
    # advisory locks; whether it releases session permits is reported here,
    # not counted (see the report: a proposed change).
    pgb_psql sessionpool -c "SELECT bulkhead_acquire('$w')" >/dev/null
    sleep 0.2
    local left
    left=$(stat_of "$w" running)
    if [ "$left" = 0 ]; then
        echo "    info: session pooling: DISCARD ALL released the session permit of a client that left"
    else
        echo "    info: session pooling: the session permit of a client that left is still held after" \
             "PgBouncer's DISCARD ALL (held $left; DISCARD ALL does not release session permits)"
        pgb_psql sessionpool -c "SELECT bulkhead_release_all()" >/dev/null
    fi
    check "session permit: running = 0 at the end" test "$(stat_of "$w" running)" = 0
}

# 3. Transparent admission through PgBouncer: a role with bulkhead.workload
# set (ALTER ROLE) gets a permit per transaction ('auto' scope) with no SQL
# change; its plain pgbench script runs through transaction pooling.
pgb_test_transparent() {
    local w=pgb_auto out=$WORK/pgbench_auto.out stopfile=$WORK/sampler_auto.stop rc
    pgb_define "$w" 2 100 30s NULL || { fail "transparent: define workload $w"; return; }
    direct -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS bh_gated" -c "CREATE ROLE bh_gated LOGIN" \
        -c "ALTER ROLE bh_gated SET bulkhead.workload = '$w'" >/dev/null
    rm -f "$stopfile"
    /usr/bin/python3 "$PGB_HERE/sample.py" \
        "host=127.0.0.1 port=$BENCH_PORT dbname=postgres user=postgres" "$w" "$stopfile" \
        >"$WORK/sampler_auto.out" 2>&1 &
    SAMPLER_PID=$!
    sleep 0.3
    echo "    pgbench -c 20 -T 3 as a role with bulkhead.workload set, through PgBouncer"
    run_child timeout -k 10 60 "$BH_BINDIR/pgbench" -n -h 127.0.0.1 -p "$PGB_PORT" -U bh_gated \
        -c 20 -j 2 -T 3 -f "$PGB_HERE/auto_gated.sql" postgres >"$out" 2>&1
    rc=$?
    touch "$stopfile"
    wait "$SAMPLER_PID"
    SAMPLER_PID=
    sed 's/^/    | /' "$out" | grep -E 'processed|failed|abort|error|ERROR' || true
    echo "    | sampler: $(cat "$WORK/sampler_auto.out")"
    local processed failed samples running activity
    processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
    read -r samples running activity < <(
        sed -n 's/^samples=\([0-9]*\) running=\([0-9]*\) activity=\([0-9]*\) .*/\1 \2 \3/p' \
            "$WORK/sampler_auto.out")
    check "transparent: pgbench as the gated role exits 0, no failed transaction ($processed, failed=$failed)" \
        test "$rc" -eq 0 -a "${processed:-0}" -gt 100 -a "${failed:-x}" = 0
    check "transparent: sampled running never above 2 (max $running, activity $activity, $samples samples)" \
        test "${samples:-0}" -ge 50 -a "${running:-9}" -le 2 -a "${activity:-9}" -le 2
    check "transparent: peak_running = 2, one 'auto' permit per transaction ($(stat_of "$w" acquired) = $processed)" \
        test "$(stat_of "$w" peak_running)/$(stat_of "$w" acquired)" = "2/${processed:-x}"
    check "transparent: running = 0 at the end" test "$(stat_of "$w" running)" = 0
}

# 4. Classification rules through PgBouncer.  PgBouncer keeps each client's
# application_name and, when it hands a server connection to a client whose
# value differs, sets it on that connection first (SET application_name):
# the server, and so the rules, see the client's own name, and the gate
# reclassifies at that client's transaction.
pgb_ruled_psql() {    # pgb_ruled_psql APPNAME DB ARGS...: as bh_ruled, through PgBouncer
    local app=$1 db=$2
    shift 2
    env PGAPPNAME="$app" "$BH_BINDIR/psql" -X -q -At -h 127.0.0.1 -p "$PGB_PORT" -U bh_ruled -d "$db" "$@"
}

pgb_test_rules() {
    local a b pid_a pid_b out_web=$WORK/pgbench_web.out out_jobs=$WORK/pgbench_jobs.out
    local rc_web rc_jobs p_web p_jobs f_web f_jobs peak_web peak_jobs
    local show="SELECT current_setting('application_name') || '|' || pg_backend_pid() || '|' ||
                       (SELECT workload || ':' || source || ':' || rule_position FROM bulkhead_classify()) || '|' ||
                       (SELECT string_agg(workload || ':' || scope, ',') FROM bulkhead_activity
                         WHERE pid = pg_backend_pid())"
    pgb_define pgb_web 2 100 30s NULL && pgb_define pgb_jobs 1 100 30s NULL ||
        { fail "rules: define workloads pgb_web, pgb_jobs"; return; }
    direct -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS bh_ruled" \
        -c "CREATE ROLE bh_ruled LOGIN" \
        -c "INSERT INTO bulkhead_rule (position, application_name, workload)
            VALUES (910, 'pgb-web%', 'pgb_web'), (920, 'pgb-jobs%', 'pgb_jobs')" >/dev/null ||
        { fail "rules: define the rules"; return; }
    # wait until the worker loaded them (a session of the web program sees its rule)
    for _ in $(seq 100); do
        [ "$(direct -c "SET application_name = 'pgb-web'" -c "SET ROLE bh_ruled" \
                   -c "SELECT workload FROM bulkhead_classify()")" = pgb_web ] && break
        sleep 0.05
    done
    # (that check ran a gated statement)
    direct -c "SELECT bulkhead_stats_reset('pgb_web')" >/dev/null

    # two clients, one after the other, over the same server connection (pool "single")
    a=$(pgb_ruled_psql pgb-web-1 single -c "$show")
    b=$(pgb_ruled_psql pgb-jobs-1 single -c "$show")
    echo "    | client pgb-web-1:  $a"
    echo "    | client pgb-jobs-1: $b"
    pid_a=$(cut -d'|' -f2 <<<"$a")
    pid_b=$(cut -d'|' -f2 <<<"$b")
    check "rules: both clients got the same server connection (pid $pid_a)" test "$pid_a" = "$pid_b"
    check "rules: the server sees client A's application_name, A is gated by its rule" \
        test "$a" = "pgb-web-1|$pid_a|pgb_web:rule:910|pgb_web:auto"
    check "rules: then client B's, and B is gated by its own rule" \
        test "$b" = "pgb-jobs-1|$pid_b|pgb_jobs:rule:920|pgb_jobs:auto"

    # two programs at once through the pool of 6: every transaction counts in
    # its own client's workload, whichever server connection it ran on
    echo "    pgbench -c 8 -T 3 as pgb-web and as pgb-jobs at once, one role, through PgBouncer"
    env PGAPPNAME=pgb-web timeout -k 10 60 "$BH_BINDIR/pgbench" -n -h 127.0.0.1 -p "$PGB_PORT" \
        -U bh_ruled -c 8 -j 2 -T 3 -f "$PGB_HERE/auto_gated.sql" postgres >"$out_web" 2>&1 &
    local web_pid=$!
    run_child env PGAPPNAME=pgb-jobs timeout -k 10 60 "$BH_BINDIR/pgbench" -n -h 127.0.0.1 -p "$PGB_PORT" \
        -U bh_ruled -c 8 -j 2 -T 3 -f "$PGB_HERE/auto_gated.sql" postgres >"$out_jobs" 2>&1
    rc_jobs=$?
    wait "$web_pid"
    rc_web=$?
    p_web=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out_web")
    p_jobs=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out_jobs")
    f_web=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out_web")
    f_jobs=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out_jobs")
    peak_web=$(stat_of pgb_web peak_running)
    peak_jobs=$(stat_of pgb_jobs peak_running)
    echo "    | pgb-web: processed $p_web, failed $f_web, pgb_web acquired $(stat_of pgb_web acquired), peak_running $peak_web"
    echo "    | pgb-jobs: processed $p_jobs, failed $f_jobs, pgb_jobs acquired $(stat_of pgb_jobs acquired), peak_running $peak_jobs"
    check "rules: both pgbench runs exit 0 with no failed transaction" \
        test "$rc_web/$rc_jobs/${f_web:-x}/${f_jobs:-x}" = 0/0/0/0 -a "${p_web:-0}" -gt 50 -a "${p_jobs:-0}" -gt 50
    # the two psql clients above took one permit each
    check "rules: every pgb-web transaction took a pgb_web permit ($(stat_of pgb_web acquired) = $p_web + 1)" \
        test "$(stat_of pgb_web acquired)" = "$((${p_web:-0} + 1))"
    check "rules: every pgb-jobs transaction took a pgb_jobs permit ($(stat_of pgb_jobs acquired) = $p_jobs + 1)" \
        test "$(stat_of pgb_jobs acquired)" = "$((${p_jobs:-0} + 1))"
    check "rules: each workload's limit held (peak_running $peak_web <= 2, $peak_jobs <= 1)" \
        test "$peak_web" -le 2 -a "$peak_jobs" -le 1
    direct -c "DELETE FROM bulkhead_rule WHERE position IN (910, 920)" >/dev/null
}

# 5. Tenants through PgBouncer: SET LOCAL bulkhead.key inside the
# transaction keys its gate permit, and the key goes with the transaction,
# not with the server connection that the next client gets (pool "single")
pgb_keyed_psql() {    # pgb_keyed_psql ARGS...: as bh_keyed, pool "single"
    "$BH_BINDIR/psql" -X -q -At -h 127.0.0.1 -p "$PGB_PORT" -U bh_keyed -d single "$@"
}

pgb_test_keys() {
    local a b pid_a pid_b
    local show="SELECT pg_backend_pid() || '|' ||
                       (SELECT string_agg(workload || ':' || coalesce(key, '-'), ',')
                          FROM bulkhead_activity WHERE pid = pg_backend_pid())"
    pgb_define pgb_keys 1 100 30s NULL || { fail "keys: define workload pgb_keys"; return; }
    direct -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS bh_keyed" \
        -c "CREATE ROLE bh_keyed LOGIN" \
        -c "ALTER ROLE bh_keyed SET bulkhead.workload = 'pgb_keys'" >/dev/null ||
        { fail "keys: create role bh_keyed"; return; }
    a=$(pgb_keyed_psql -c "BEGIN" -c "SET LOCAL bulkhead.key = 'tenant-1'" -c "$show" -c "COMMIT")
    b=$(pgb_keyed_psql -c "BEGIN" -c "$show" -c "COMMIT")
    echo "    | client 1 (SET LOCAL bulkhead.key = 'tenant-1'): $a"
    echo "    | client 2 (no key):                               $b"
    pid_a=$(cut -d'|' -f1 <<<"$a")
    pid_b=$(cut -d'|' -f1 <<<"$b")
    check "keys: both clients got the same server connection (pid $pid_a)" test "$pid_a" = "$pid_b"
    check "keys: client 1's transaction holds its permit as tenant-1" test "$a" = "$pid_a|pgb_keys:tenant-1"
    check "keys: client 2's transaction on that connection has no key" test "$b" = "$pid_b|pgb_keys:-"
    check "keys: no key is left in use" test "$(direct -c "SELECT count(*) FROM bulkhead_keys")" = 0
}

pgbouncer_tests() {
    if [ -z "$PGB_PID" ]; then
        fail "pgbouncer: not running"
        return
    fi
    pgb_test_pgbench
    pgb_test_session_permit
    pgb_test_transparent
    pgb_test_rules
    pgb_test_keys
    pgb_stop
    local left
    for _ in $(seq 50); do    # the server connections end as PgBouncer goes
        left=$(direct -c "SELECT coalesce(sum(running + queued), 0) FROM bulkhead_stats")
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    check "pgbouncer: stopped, no permit left on the server" test "$left" = 0
}

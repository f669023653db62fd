# shellcheck shell=bash
# test/bench/pgbouncer.sh: Debian's PgBouncer in front of the benchmark
# cluster, in transaction pooling, as the alternative users pick today.
# Source it after cluster.sh; bench_finish stops it at exit.
#
#   bench_pgbouncer_start POOL_SIZE   listen on a free loopback port ($PGB_PORT)
#   bench_pgbouncer_stop

PGB_PORT=
PGB_PID=

bench_pgbouncer_start() {
    local dir=$BENCH_DIR/pgbouncer
    mkdir -p "$dir"
    PGB_PORT=64400
    while [ -n "$(ss -Hltn "sport = :$PGB_PORT" 2>/dev/null)" ]; do PGB_PORT=$((PGB_PORT + 1)); done
    cat >"$dir/pgbouncer.ini" <<EOF2
[databases]
postgres = host=127.0.0.1 port=$BENCH_PORT dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $1
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
EOF2
    printf '"postgres" ""\n"gated" ""\n' >"$dir/userlist.txt"
    chown -R postgres:postgres "$dir"
    # setpriv execs PgBouncer (which refuses root), so $! is its pid
    "${BENCH_SERVER_CPU[@]}" setpriv --reuid=postgres --regid=postgres --init-groups \
        /usr/sbin/pgbouncer "$dir/pgbouncer.ini" >>"$dir/stdout.log" 2>&1 &
    PGB_PID=$!
    for _ in $(seq 100); do
        runuser -u postgres -- "$BH_BINDIR/psql" -X -q -h 127.0.0.1 -p "$PGB_PORT" -d postgres \
            -c "SELECT 1" >/dev/null 2>&1 && return 0
        kill -0 "$PGB_PID" 2>/dev/null || break
        sleep 0.1
    done
    tail -n 20 "$dir/pgbouncer.log" "$dir/stdout.log" >&2
    bh_die "PgBouncer did not start"
}

bench_pgbouncer_stop() {
    [ -n "$PGB_PID" ] || return 0
    kill -INT "$PGB_PID" 2>/dev/null    # safe shutdown: waits for the clients
    for _ in $(seq 50); do kill -0 "$PGB_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PGB_PID" 2>/dev/null || true
    wait "$PGB_PID" 2>/dev/null || true
    PGB_PID=
    return 0
}

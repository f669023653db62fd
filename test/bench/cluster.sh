# shellcheck shell=bash
# test/bench/cluster.sh: builds and a throwaway PostgreSQL cluster for the
# benchmarks.  Source it after scripts/lib.sh, with $top set to the tree.
# bench_cluster_start makes a cluster as the postgres user in a temporary directory, with bulkhead preloaded, on a free
# loopback port; bench_cluster_stop (also run at exit) stops it by its pid
# and removes the directory.  bench_psql runs psql against it.  With
# BENCH_UNDER set (say "valgrind --tool=callgrind ..."), the server runs
# under that command.  With BENCH_HUGE_PAGES=on, the server runs with
# huge_pages = on, in 2 MB pages reserved (vm.nr_hugepages) for each start
# of it only (bench_server_start).  BENCH_EXTENSION_VERSION
# creates the extension at that version (a library of an older release
# serves only its own); BENCH_PRELOAD=0 starts the server without bulkhead
# (shared_preload_libraries empty, no extension): what a statement costs
# without it.

BENCH_DIR=
BENCH_PORT=
BENCH_PID=
BENCH_CONF=()
BENCH_BUILDS=${BENCH_BUILDS:-}
BENCH_BUILDS_OWNER=${BENCH_BUILDS_OWNER:-}

# The server (postmaster, every process it forks, and PgBouncer beside it)
# runs on CPU 0 and pgbench on CPU 1, so that the load generator's own cost,
# which grows with its connections, is not taken from the server's CPU.
# BENCH_PIN=0, or a machine with one CPU, runs everything unpinned.
if [ "${BENCH_PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
    BENCH_SERVER_CPU=(taskset -c 0)
    BENCH_CLIENT_CPU=(taskset -c 1)
    BENCH_PINNING="server and PgBouncer on CPU 0, pgbench on CPU 1 (taskset)"
else
    BENCH_SERVER_CPU=()
    BENCH_CLIENT_CPU=()
    BENCH_PINNING="not pinned"
fi

# bench_prepare: as root, install what is missing, build the tree as shipped
# and install it.  Extra Debian packages may be added to BH_PACKAGES first.
# test/bench/run prepares once for all the scenarios and exports
# BENCH_BUILDS; a scenario script started by it then only installs the build
# (BENCH_BUILDS_OWNER tells which process removes the builds at exit).
# The script then works in $BENCH_BUILDS: the programs it runs as postgres
# must start in a directory postgres can enter, which the tree (a clone
# under /root, say) need not be (see bh_cd_for_postgres).
bench_prepare() {
    bh_require_root
    bh_install_prereqs >/dev/null
    bh_fix_tmpdir
    trap bench_finish EXIT
    if [ -n "${BENCH_BUILDS:-}" ] && [ -f "$BENCH_BUILDS/with/bulkhead.so" ]; then
        bench_use_build with
        bh_cd_for_postgres "$BENCH_BUILDS"
        return
    fi
    BENCH_BUILDS=$(bh_mktemp_dir bulkhead-builds)
    BENCH_BUILDS_OWNER=$BASHPID
    bh_copy_tree "$top" "$BENCH_BUILDS/with"
    bh_build_install "$BENCH_BUILDS/with" >/dev/null
    bh_cd_for_postgres "$BENCH_BUILDS"
}

# bench_build_without_stats: a second build, without the latency statistics,
# in $BENCH_BUILDS/without (see BULKHEAD_NO_LATENCY_STATS in src/shmem/stats.h)
bench_build_without_stats() {
    [ -f "$BENCH_BUILDS/without/bulkhead.so" ] && return
    bh_copy_tree "$top" "$BENCH_BUILDS/without"
    make -s -C "$BENCH_BUILDS/without" PG_CONFIG="$BH_PG_CONFIG" \
        PG_CPPFLAGS="-I$BENCH_BUILDS/without/src -DBULKHEAD_NO_LATENCY_STATS" >/dev/null
}

# bench_use_build with|without: install that build's bulkhead.so (the server
# loads it at its next start)
bench_use_build() {
    install -m 755 "$BENCH_BUILDS/$1/bulkhead.so" "$("$BH_PG_CONFIG" --pkglibdir)/bulkhead.so"
}

# bench_huge_pages_reserve N: have the kernel keep N free huge pages more
# than all it has now, until bench_huge_pages_release gives the pool back
# (vm.nr_hugepages as before).  "All it has" counts the pages other servers
# on the machine hold beyond the pool (surplus pages, as a server's become
# once the pool is given back under it): raising vm.nr_hugepages makes
# those part of the pool first, and only then adds free ones.
BENCH_HUGE_PAGES_BEFORE=
bench_huge_pages_reserve() {
    local want
    [ -w /proc/sys/vm/nr_hugepages ] || bh_die "this kernel has no huge pages to reserve (/proc/sys/vm/nr_hugepages)"
    [ -n "$BENCH_HUGE_PAGES_BEFORE" ] || BENCH_HUGE_PAGES_BEFORE=$(cat /proc/sys/vm/nr_hugepages)
    want=$(($(awk '/^HugePages_Total:/ { print $2 }' /proc/meminfo) + $1))
    echo "$want" >/proc/sys/vm/nr_hugepages
    [ "$(cat /proc/sys/vm/nr_hugepages)" -ge "$want" ] ||
        bh_die "the kernel reserved $(cat /proc/sys/vm/nr_hugepages) huge pages of the $want asked for"
}

# (the pages a server has mapped stay its own, as surplus pages that go
# back to the kernel when it stops; only the free ones leave the pool)
bench_huge_pages_release() {
    [ -z "$BENCH_HUGE_PAGES_BEFORE" ] || echo "$BENCH_HUGE_PAGES_BEFORE" >/proc/sys/vm/nr_hugepages
    BENCH_HUGE_PAGES_BEFORE=
}

# bench_finish: stop the cluster, put the shipped build back, clean up (at exit)
bench_finish() {
    if declare -F bench_pgbouncer_stop >/dev/null; then bench_pgbouncer_stop; fi
    bench_cluster_stop
    bench_huge_pages_release
    if [ -n "$BENCH_BUILDS" ]; then
        # a build of another tree installed with its extension scripts
        # (grants_cost.sh's baseline at the same version): this tree's back
        if [ -n "${BENCH_REINSTALL:-}" ] && [ -f "$BENCH_BUILDS/with/bulkhead.so" ]; then
            make -s -C "$BENCH_BUILDS/with" install PG_CONFIG="$BH_PG_CONFIG" >/dev/null 2>&1 || true
        fi
        [ -f "$BENCH_BUILDS/with/bulkhead.so" ] && bench_use_build with
        [ "$BENCH_BUILDS_OWNER" = "$BASHPID" ] && rm -rf "$BENCH_BUILDS"
    fi
    return 0
}

bench_cluster_stop() {
    if [ -n "$BENCH_PID" ] && kill -0 "$BENCH_PID" 2>/dev/null; then
        kill -INT "$BENCH_PID" 2>/dev/null    # fast shutdown
        for _ in $(seq 300); do kill -0 "$BENCH_PID" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$BENCH_PID" 2>/dev/null && kill -KILL "$BENCH_PID"
    fi
    BENCH_PID=
    [ -n "$BENCH_DIR" ] && bh_stop_postmasters_under "$BENCH_DIR" && rm -rf "$BENCH_DIR"
    BENCH_DIR=
}

# bench_server_start_once: start the server of $BENCH_DIR (pg_ctl, or
# under $BENCH_UNDER); status 1, its log's last lines shown (on stderr), if
# it did not
bench_server_start_once() {
    if [ -z "${BENCH_UNDER:-}" ]; then
        "${BENCH_SERVER_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/pg_ctl" -D "$BENCH_DIR/data" \
            -l "$BENCH_DIR/server.log" -w start >/dev/null ||
            { tail -20 "$BENCH_DIR/server.log" >&2; return 1; }
    else
        # under a tool such as valgrind: start postgres itself, wait for it
        # shellcheck disable=SC2086  # BENCH_UNDER is a command and its options
        (cd "$BENCH_DIR" && "${BENCH_SERVER_CPU[@]}" runuser -u postgres -- $BENCH_UNDER "$BH_BINDIR/postgres" \
            -D "$BENCH_DIR/data" >>"$BENCH_DIR/server.log" 2>&1 &)
        for _ in $(seq 600); do
            runuser -u postgres -- "$BH_BINDIR/pg_isready" -q -h "$BENCH_DIR" -p "$BENCH_PORT" && break
            sleep 0.2
        done
        runuser -u postgres -- "$BH_BINDIR/pg_isready" -q -h "$BENCH_DIR" -p "$BENCH_PORT" ||
            { tail -20 "$BENCH_DIR/server.log" >&2; return 1; }
    fi
    BENCH_PID=$(head -n 1 "$BENCH_DIR/data/postmaster.pid")
}

# bench_server_start: bench_server_start_once; with BENCH_HUGE_PAGES=on,
# with the huge pages the server will map (computed from its settings while
# it is down) reserved just before it starts and the pool given back just
# after: the server keeps what it has mapped until it stops.  A free pool
# left standing would be taken by any other server that starts on the
# machine (huge_pages = try, the default, maps huge pages whenever enough
# are free), leaving this one short, and would give that one huge pages it
# was not meant to have.  If one still starts in between and takes them,
# the start fails for want of huge pages and is tried again (3 times in
# all).
bench_server_start() {
    local try size
    [ "${BENCH_HUGE_PAGES:-}" = on ] || { bench_server_start_once; return; }
    for try in 1 2 3; do
        size=$(stat -c %s "$BENCH_DIR/server.log" 2>/dev/null || echo 0)
        bench_huge_pages_reserve "$(runuser -u postgres -- "$BH_BINDIR/postgres" -D "$BENCH_DIR/data" \
                                    -C shared_memory_size_in_huge_pages)"
        if bench_server_start_once; then bench_huge_pages_release; return 0; fi
        bench_huge_pages_release
        tail -c +$((size + 1)) "$BENCH_DIR/server.log" | grep -q 'could not map anonymous shared memory' ||
            return 1
        bh_warn "another server took the huge pages reserved for this one (start $try of 3)"
    done
    return 1
}

# bench_cluster_start [extra postgresql.conf lines...]
bench_cluster_start() {
    local line create
    BENCH_DIR=$(bh_mktemp_dir bulkhead-bench)
    chown postgres "$BENCH_DIR"
    trap bench_finish EXIT
    runuser -u postgres -- "$BH_BINDIR/initdb" -D "$BENCH_DIR/data" -U postgres \
        --auth=trust --no-locale -E UTF8 -N >"$BENCH_DIR/initdb.log" 2>&1 ||
        { cat "$BENCH_DIR/initdb.log"; bh_die "initdb failed"; }
    BENCH_PORT=54400
    while [ -n "$(ss -Hltn "sport = :$BENCH_PORT" 2>/dev/null)" ]; do
        BENCH_PORT=$((BENCH_PORT + 1))
    done
    BENCH_CONF=("shared_preload_libraries = 'bulkhead'" "bulkhead.database = 'postgres'"
                "synchronous_commit = off" "shared_buffers = '256MB'" "$@")
    [ "${BENCH_PRELOAD:-1}" = 1 ] || BENCH_CONF[0]="shared_preload_libraries = ''"
    [ "${BENCH_HUGE_PAGES:-}" != on ] || BENCH_CONF+=("huge_pages = on")
    {
        echo "port = $BENCH_PORT"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$BENCH_DIR'"
        for line in "${BENCH_CONF[@]}"; do echo "$line"; done
    } >>"$BENCH_DIR/data/postgresql.conf"
    bench_server_start || bh_die "server did not start"
    [ "${BENCH_PRELOAD:-1}" = 1 ] || return 0
    create="CREATE EXTENSION bulkhead"
    [ -z "${BENCH_EXTENSION_VERSION:-}" ] || create+=" VERSION '$BENCH_EXTENSION_VERSION'"
    bench_psql -c "$create" >/dev/null
}

# the settings the cluster runs with, beyond initdb's, as one markdown line
bench_settings() {
    local IFS=';'
    echo "Server settings (beyond initdb's): \`${BENCH_CONF[*]}\`; $BENCH_PINNING." | sed 's/;/; /g'
}

bench_psql() {
    runuser -u postgres -- "$BH_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 \
        -h "$BENCH_DIR" -p "$BENCH_PORT" -d postgres "$@"
}

# bench_wait_loaded NAME: until the worker has loaded workload NAME
bench_wait_loaded() {
    local i
    for i in $(seq 200); do
        [ "$(bench_psql -tAc "SELECT count(*) FROM bulkhead_stats WHERE workload = '$1'")" = 1 ] && return 0
        sleep 0.05
    done
    bh_die "workload $1 was not loaded"
}

# restart the cluster (to load a different bulkhead.so, say); with
# BENCH_HUGE_PAGES=on, a stop and a bench_server_start (its huge pages are
# reserved while it is down)
bench_cluster_restart() {
    if [ "${BENCH_HUGE_PAGES:-}" = on ]; then
        runuser -u postgres -- "$BH_BINDIR/pg_ctl" -D "$BENCH_DIR/data" -m fast -w stop >/dev/null ||
            { tail -20 "$BENCH_DIR/server.log" >&2; bh_die "stop failed"; }
        bench_server_start || bh_die "restart failed"
        return
    fi
    "${BENCH_SERVER_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/pg_ctl" -D "$BENCH_DIR/data" \
        -l "$BENCH_DIR/server.log" -m fast -w restart >/dev/null ||
        { tail -20 "$BENCH_DIR/server.log"; bh_die "restart failed"; }
    BENCH_PID=$(head -n 1 "$BENCH_DIR/data/postmaster.pid")
}

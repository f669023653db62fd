#!/usr/bin/env bash
# scripts/plot_history.sh: plot bulkhead_history (1.4) of a live server to a
# PNG with gnuplot: one row of three panels per workload, against time (UTC):
#   waits        wait_p99_ms (line) and timed_out (bars, right axis)
#   rejections   rejected_full (bars)
#   memory       peak_memory_granted (MB, steps) against the workload's
#                max_memory (dashed; none drawn when it has none), and
#                memory_waits (bars, right axis)
#
#   scripts/plot_history.sh [-d CONNINFO] [-w WORKLOAD]... [-m MINUTES] [-o FILE.png]
#   scripts/plot_history.sh --demo [-o FILE.png] [-s SECONDS]      (as root)
#
#   -d CONNINFO  where to connect (psql's conninfo; default: psql's defaults,
#                PGHOST, PGPORT, ...); the database needs CREATE EXTENSION
#                bulkhead (any role may read bulkhead_history)
#   -w WORKLOAD  only this workload (repeat for several; default: every
#                workload in the history)
#   -m MINUTES   only the last MINUTES (default: the whole ring)
#   -o FILE      the PNG (default: bulkhead_history.png)
#
# gnuplot (Debian's gnuplot-nox) is installed with apt-get when missing (as
# root).  psql is the one on PATH, else the one of PG_CONFIG's server.
#
# --demo makes the picture of doc/monitoring.md: a throwaway cluster of the
# server of PG_CONFIG (default Debian's PostgreSQL 15; bulkhead must be
# installed in it: make install), with one-second intervals, runs pgbench
# loads for SECONDS (default 90) in three equal phases against two
# workloads, plots, stops the server and removes it.  Each transaction
# takes its workload's transaction permit with bulkhead_try_acquire_xact
# and, when refused, skips its work and sleeps a moment (a pgbench client
# would stop at an error):
#   oltp     B = 4, Q = 8, queue_timeout 50 ms; a point read, 4 ms of
#            work and an update; 4, 24, then 8 clients
#   reports  B = 3, Q = 3, queue_timeout 2 s, max_memory 64 MB,
#            memory_timeout 1 s; a sort of 200,000 rows with work_mem =
#            32 MB, no parallel workers (two fit in max_memory, the third
#            waits for memory, and runs shrunk after 1 s); 2, 8, then 3
#            clients
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

CONNINFO=
WORKLOADS=()
MINUTES=
OUT=bulkhead_history.png
DEMO=0
SECONDS_RUN=90
while [ $# -gt 0 ]; do
    case $1 in
        -d) CONNINFO=$2; shift 2 ;;
        -w) WORKLOADS+=("$2"); shift 2 ;;
        -m) MINUTES=$2; shift 2 ;;
        -o) OUT=$2; shift 2 ;;
        -s) SECONDS_RUN=$2; shift 2 ;;
        --demo) DEMO=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) bh_die "unknown argument: $1 (see --help)" ;;
    esac
done
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

# gnuplot, from Debian when missing
need_gnuplot() {
    command -v gnuplot >/dev/null && return 0
    [ "$(id -u)" -eq 0 ] || bh_die "gnuplot is missing: apt-get install gnuplot-nox (as root), or run this as root"
    bh_say "installing gnuplot-nox"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 gnuplot-nox >/dev/null 2>&1 ||
        { DEBIAN_FRONTEND=noninteractive apt-get update -qq -o DPkg::Lock::Timeout=600 >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 gnuplot-nox >/dev/null 2>&1; } ||
        bh_die "could not install gnuplot-nox"
}

PSQL=(psql)
command -v psql >/dev/null || PSQL=("$("$BH_PG_CONFIG" --bindir)/psql")

# plot CONNINFO: query the history, one data file per workload, and plot
plot() {
    local conninfo=$1 work where list w n=0 f max height gp span
    work=$(mktemp -d -t bulkhead-plot.XXXXXX)
    where="true"
    if [ ${#WORKLOADS[@]} -gt 0 ]; then
        list=$(printf "'%s'," "${WORKLOADS[@]//\'/\'\'}")
        where="workload IN (${list%,})"
    fi
    [ -z "$MINUTES" ] || where="$where AND interval_end > now() - interval '$MINUTES minutes'"
    # workload, end (epoch), wait p99 (ms, NaN: none ended), timed out,
    # rejected, peak memory granted (bytes), max_memory (bytes, NaN: none),
    # memory waits
    "${PSQL[@]}" -X -q -A -t -F '|' -v ON_ERROR_STOP=1 ${conninfo:+"$conninfo"} -c "
        SELECT h.workload, extract(epoch FROM h.interval_end)::bigint,
               coalesce(round(h.wait_p99_ms::numeric, 3)::text, 'NaN'),
               h.timed_out, h.rejected_full, h.peak_memory_granted,
               coalesce((SELECT CASE WHEN s.max_memory ~ '^\s*[0-9]+\s*$'
                                     THEN s.max_memory::bigint * 1024
                                     ELSE pg_size_bytes(s.max_memory) END::text
                           FROM bulkhead_stats s WHERE s.workload = h.workload), 'NaN'),
               h.memory_waits
          FROM bulkhead_history h WHERE $where
         ORDER BY h.workload, h.interval_end" >"$work/all" ||
        bh_die "could not read bulkhead_history"
    [ -s "$work/all" ] || bh_die "bulkhead_history has no rows${WORKLOADS:+ for ${WORKLOADS[*]}}${MINUTES:+ in the last $MINUTES minutes}"
    mapfile -t list < <(cut -d'|' -f1 "$work/all" | uniq)
    height=$((300 * ${#list[@]} + 60))
    # about four time tics across
    span=$(awk -F'|' 'NR == 1 { lo = $2 } { hi = $2 } END { print hi - lo }' "$work/all")
    gp=$work/plot.gp
    cat >"$gp" <<GP
set terminal pngcairo size 1500,$height font ",10"
set output "$OUT"
set datafile separator "|"
set datafile missing "NaN"
set xdata time
set timefmt "%s"
set format x "%H:%M:%S"
set xtics $(awk -v s="$span" 'BEGIN { t = s / 4; n = split("1 2 5 10 15 30 60 120 300 600 900 1800 3600 7200 21600", c, " ");
                                     for (i = 1; i < n && c[i] < t; i++); print c[i] }')
set xlabel "UTC"
set grid ytics
set key top left opaque
# room above the data for the key
set offsets graph 0, 0, 0.4, 0
set style fill solid 0.6
set multiplot layout ${#list[@]},3 title "bulkhead\\\\_history, one row per workload"
GP
    for w in "${list[@]}"; do
        n=$((n + 1))
        f=$work/w$n
        awk -F'|' -v w="$w" '$1 == w' "$work/all" >"$f"
        max=$(awk -F'|' 'NR == 1 { print $7 }' "$f")
        # gnuplot strings: \ and " escaped, _ not taken as a subscript
        w=${w//\\/\\\\}; w=${w//\"/\\\"}; w=${w//_/\\\\_}
        cat >>"$gp" <<GP
set title "$w: waits"
set ylabel "wait p99 (ms)"
set yrange [0:*]
set y2label "timed out per interval"
set y2range [0:*]
set y2tics
set ytics nomirror
plot "$f" using 2:3 with lines lw 2 title "wait\\\\_p99\\\\_ms", \
     "$f" using 2:4 axes x1y2 with impulses lw 3 title "timed\\\\_out"
unset y2tics
unset y2label
set ytics mirror
set title "$w: rejections"
set ylabel "rejected per interval"
plot "$f" using 2:5 with impulses lw 3 lc rgb "#c03030" title "rejected\\\\_full"
set title "$w: memory granted"
set ylabel "MB"
set y2label "memory waits per interval"
set y2range [0:*]
set y2tics
set ytics nomirror
GP
        if [ "$max" != NaN ]; then
            cat >>"$gp" <<GP
set yrange [0:$(awk -v m="$max" 'BEGIN { printf "%.1f", m / 1048576 * 1.4 }')]
plot $(awk -v m="$max" 'BEGIN { printf "%.3f", m / 1048576 }') with lines lw 6 lc rgb "#b0b0b0" title "max\\\\_memory", \
     "$f" using 2:8 axes x1y2 with impulses lw 3 lc rgb "#e0a040" title "memory\\\\_waits", \
     "$f" using 2:(\$6 / 1048576) with steps lw 2 lc rgb "#6020a0" title "peak\\\\_memory\\\\_granted"
GP
        else
            cat >>"$gp" <<GP
plot "$f" using 2:8 axes x1y2 with impulses lw 3 lc rgb "#e0a040" title "memory\\\\_waits", \
     "$f" using 2:(\$6 / 1048576) with steps lw 2 lc rgb "#6020a0" title "peak\\\\_memory\\\\_granted (no max\\\\_memory)"
GP
        fi
        printf '%s\n' 'set yrange [*:*]' 'unset y2tics' 'unset y2label' 'set ytics mirror' >>"$gp"
    done
    echo 'unset multiplot' >>"$gp"
    gnuplot "$gp" || bh_die "gnuplot failed (script: $gp)"
    # PLOT_KEEP=1 keeps the data and the gnuplot script
    if [ "${PLOT_KEEP:-0}" = 1 ]; then bh_say "data and script kept in $work"; else rm -rf "$work"; fi
    bh_say "wrote $OUT (${#list[@]} workloads)"
}

# ---- the demo --------------------------------------------------------------

DEMO_DIR=
DEMO_PID=
demo_stop() {
    if [ -n "$DEMO_PID" ] && kill -0 "$DEMO_PID" 2>/dev/null; then
        kill -INT "$DEMO_PID"
        for _ in $(seq 300); do kill -0 "$DEMO_PID" 2>/dev/null || break; sleep 0.1; done
    fi
    [ -z "$DEMO_DIR" ] || rm -rf "$DEMO_DIR"
}

demo() {
    local bindir port psql t third phase o r
    bh_require_root
    bindir=$("$BH_PG_CONFIG" --bindir)
    [ -f "$("$BH_PG_CONFIG" --pkglibdir)/bulkhead.so" ] ||
        bh_die "bulkhead is not installed in $("$BH_PG_CONFIG" --bindir)/..: make install PG_CONFIG=$BH_PG_CONFIG first"
    bh_fix_tmpdir
    DEMO_DIR=$(bh_mktemp_dir bulkhead-plot-demo)
    trap demo_stop EXIT
    chown postgres "$DEMO_DIR"
    bh_cd_for_postgres "$DEMO_DIR"
    port=$(bh_free_port 56400)
    runuser -u postgres -- "$bindir/initdb" -D "$DEMO_DIR/data" -U postgres --no-locale -E UTF8 >/dev/null
    cat >>"$DEMO_DIR/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$DEMO_DIR'
shared_preload_libraries = 'bulkhead'
bulkhead.database = 'postgres'
bulkhead.history_interval = 1
bulkhead.history_length = 600
max_connections = 60
CONF
    runuser -u postgres -- "$bindir/pg_ctl" -D "$DEMO_DIR/data" -l "$DEMO_DIR/log" -w start >/dev/null
    DEMO_PID=$(head -n 1 "$DEMO_DIR/data/postmaster.pid")
    psql=(runuser -u postgres -- "$bindir/psql" -X -q -h "$DEMO_DIR" -p "$port" -U postgres -v ON_ERROR_STOP=1)
    runuser -u postgres -- "$bindir/pgbench" -q -i -s 2 -h "$DEMO_DIR" -p "$port" -U postgres postgres >/dev/null 2>&1
    "${psql[@]}" -c "CREATE EXTENSION bulkhead" -c "
        INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
                                       max_memory, memory_timeout)
        VALUES ('oltp', 4, 8, '50ms', NULL, NULL), ('reports', 3, 3, '2s', '64MB', '1s');"
    for _ in $(seq 100); do
        [ "$("${psql[@]}" -tAc "SELECT count(*) FROM bulkhead_stats")" = 2 ] && break
        sleep 0.1
    done
    cat >"$DEMO_DIR/oltp.sql" <<'SQL'
\set aid random(1, 200000)
BEGIN;
SELECT bulkhead_try_acquire_xact('oltp', '50ms')::int AS ok \gset
\if :ok
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT pg_sleep(0.004);
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
\else
\sleep 10 ms
\endif
END;
SQL
    cat >"$DEMO_DIR/reports.sql" <<'SQL'
BEGIN;
SET LOCAL work_mem = '32MB';
SET LOCAL max_parallel_workers_per_gather = 0;
SELECT bulkhead_try_acquire_xact('reports', '2s')::int AS ok \gset
\if :ok
SELECT aid, abalance FROM pgbench_accounts ORDER BY filler, abalance DESC LIMIT 10;
\else
\sleep 100 ms
\endif
END;
SQL
    chown postgres "$DEMO_DIR"/*.sql
    third=$((SECONDS_RUN / 3))
    bh_say "demo: $SECONDS_RUN s of pgbench loads (oltp 4, 24, 8 clients; reports 2, 8, 3 clients)"
    pgb() {    # pgb CLIENTS SECONDS SCRIPT
        runuser -u postgres -- "$bindir/pgbench" -n -M simple -c "$1" -j 2 -T "$2" -f "$DEMO_DIR/$3" \
            -h "$DEMO_DIR" -p "$port" -U postgres postgres >>"$DEMO_DIR/pgbench.log" 2>&1 ||
            bh_warn "pgbench ($3, $1 clients) failed: $(tail -n 3 "$DEMO_DIR/pgbench.log")"
    }
    for phase in "4 2" "24 8" "8 3"; do
        read -r o r <<<"$phase"
        pgb "$o" "$third" oltp.sql &
        t=$!
        pgb "$r" "$third" reports.sql
        wait "$t"
    done
    sleep 2
    "${psql[@]}" -c "SELECT workload, acquired, rejected_full, timed_out, memory_waits, memory_shrunk, memory_wait_p99_ms FROM bulkhead_stats ORDER BY 1"
    cd - >/dev/null
    plot "host=$DEMO_DIR port=$port user=postgres dbname=postgres"
}

need_gnuplot
if [ "$DEMO" = 1 ]; then demo; else plot "$CONNINFO"; fi

#!/usr/bin/env bash
# test/clients/run.sh: real clients and a real pooler against bulkhead.
#
#   bash test/clients/run.sh        (as root, from anywhere)
#
# Installs what is missing with apt-get (JDK, PostgreSQL JDBC, HikariCP,
# JUnit 5, psycopg 3 and its pool, pytest, PgBouncer), builds and installs
# the extension from a copy of the tree, starts a throwaway preloaded cluster
# on loopback as the postgres user (test/bench/cluster.sh), and runs:
#   java/       the Bulkhead helper (JDBC + HikariCP), JUnit 5; 1.3's lanes
#               through pgJDBC (LaneTest: the extended protocol, autosave)
#   python/     bulkhead.admit() (psycopg 3 + psycopg_pool), pytest
#   pgbouncer/  pgbench through PgBouncer in transaction pooling, and what a
#               session permit does there
#   snippets    the Java and Python snippets of the documentation
#               (README.md and doc/*.md; doc/clients.md has them) are
#               excerpts of these tested files
# then stops everything it started, by pid.  One line per test case, and
# last "N passed, N failed"; exit 0 only if all passed.
set -uo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd -- "$HERE/../.." && pwd -P)
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
# shellcheck source=test/bench/cluster.sh
. "$ROOT/test/bench/cluster.sh"
# shellcheck source=test/clients/pgbouncer/pgbouncer.sh
. "$HERE/pgbouncer/pgbouncer.sh"

# What this script needs (lib.sh's list is for the other suites).
# shellcheck disable=SC2034  # read by bh_install_prereqs
BH_PACKAGES=(postgresql-15 postgresql-server-dev-15 make gcc
             openjdk-17-jdk-headless libpostgresql-jdbc-java libhikaricp-java
             libslf4j-java junit5
             python3 python3-psycopg python3-psycopg-pool python3-pytest
             pgbouncer util-linux iproute2)
JAVA_LIB=/usr/share/java
PYTHON=/usr/bin/python3     # Debian's, with python3-psycopg (not a pyenv one)

PASSED=0
FAILED=0
WORK=
CHILD=
T_START=$(bh_now_us)

pass() { PASSED=$((PASSED + 1)); printf 'ok      %s\n' "$1"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAILED  %s\n' "$1"; }
check() {    # check NAME COMMAND...: pass if COMMAND succeeds
    local name=$1
    shift
    if "$@" >/dev/null 2>&1; then pass "$name"; else fail "$name"; fi
}

# Run a command in the background and wait for it, so that a signal to this
# script reaches the trap at once, and cleanup knows what to stop.
run_child() {
    local rc
    "$@" &
    CHILD=$!
    wait "$CHILD"
    rc=$?
    CHILD=
    return "$rc"
}

cleanup() {
    if [ -n "$CHILD" ]; then
        kill -TERM "$CHILD" 2>/dev/null
        wait "$CHILD" 2>/dev/null
        CHILD=
    fi
    pgb_stop
    bench_cluster_stop
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        bh_stop_postmasters_under "$WORK"
        rm -rf -- "$WORK"
    fi
    WORK=
}

finish() {
    trap - EXIT
    cleanup
    echo
    bh_say "clients: $(bh_fmt_us "$(($(bh_now_us) - T_START))")"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
    exit $?
}

# a helper dying (bh_die) is one failure, and everything is still stopped
bh_die() {
    printf 'error: %s\n' "$*" >&2
    FAILED=$((FAILED + 1))
    finish
}

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bh_require_root
bh_reset_client_env

# ---- 1. packages, build, cluster ----------------------------------------
bh_install_prereqs
bh_fix_tmpdir
WORK=$(bh_mktemp_dir bulkhead-clients)
bh_say "build and install the extension (copy in $WORK/src)"
bh_copy_tree "$ROOT" "$WORK/src"
if ! bh_build_install "$WORK/src" >"$WORK/build.log" 2>&1; then
    tail -n 40 "$WORK/build.log"
    bh_die "build or install failed"
fi
rm -rf -- "$WORK/src"

bh_say "start a cluster"
bench_cluster_start "max_connections = 150"
trap cleanup EXIT     # bench_cluster_start set its own
PSQL_DIRECT=("$BH_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$BENCH_PORT"
             -U postgres -d postgres)
JDBC_URL="jdbc:postgresql://127.0.0.1:$BENCH_PORT/postgres?user=postgres"
PY_DSN="host=127.0.0.1 port=$BENCH_PORT dbname=postgres user=postgres"
"${PSQL_DIRECT[@]}" -c "SELECT 1" >/dev/null || bh_die "no connection to 127.0.0.1:$BENCH_PORT"

# PgBouncer in front of it (the Java and Python suites go through it too)
bh_say "start PgBouncer"
if pgb_start; then
    echo "    PgBouncer $(/usr/sbin/pgbouncer --version | head -n 1 | awk '{print $2}')" \
         "on 127.0.0.1:$PGB_PORT (pid $PGB_PID), pool_mode = transaction"
else
    fail "pgbouncer: start on 127.0.0.1"
fi
JDBC_PGB_URL="jdbc:postgresql://127.0.0.1:$PGB_PORT/postgres?user=postgres"
PY_PGB_DSN="host=127.0.0.1 port=$PGB_PORT dbname=postgres user=postgres"

# count the PASS/FAIL lines of junit_results.py; a run that reported
# nothing (crash, compile error, no test) is one failure
count_junit() {    # count_junit LABEL XML RC
    local label=$1 xml=$2 rc=$3 line n=0 bad=0
    while IFS= read -r line; do
        case $line in
            PASS\ *) pass "${line#PASS }"; n=$((n + 1)) ;;
            FAIL\ *) fail "${line#FAIL }"; n=$((n + 1)); bad=$((bad + 1)) ;;
        esac
    done < <("$PYTHON" "$HERE/junit_results.py" "$label: " "$xml")
    if [ "$n" -eq 0 ]; then
        fail "$label: no test result (exit $rc)"
    elif [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
        fail "$label: exit $rc without a failed test"
    fi
}

# ---- 2. Java: JDBC + HikariCP, JUnit 5 ----------------------------------
java_tests() {
    local t0 cp out=$WORK/java rc
    t0=$(bh_now_us)
    bh_say "java: Bulkhead helper with HikariCP (JUnit 5)"
    cp=$JAVA_LIB/postgresql.jar:$JAVA_LIB/HikariCP.jar:$JAVA_LIB/slf4j-api.jar:$JAVA_LIB/slf4j-simple.jar
    cp=$cp:$JAVA_LIB/junit-jupiter-api.jar:$JAVA_LIB/opentest4j.jar:$JAVA_LIB/apiguardian-api.jar
    cp=$cp:$JAVA_LIB/junit-platform-commons.jar
    mkdir -p "$out/classes"
    if ! javac -Xlint:all -Werror -d "$out/classes" -cp "$cp" \
            "$HERE/java/src/bulkhead/Bulkhead.java" "$HERE/java/test/bulkhead/BulkheadTest.java" \
            "$HERE/java/test/bulkhead/LaneTest.java" \
            >"$out/javac.log" 2>&1; then
        cat "$out/javac.log"
        fail "java: compile"
        return
    fi
    run_child timeout -k 10 150 java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
        -Dbulkhead.jdbc.url="$JDBC_URL" -Dbulkhead.pgbouncer.url="$JDBC_PGB_URL" \
        -jar "$JAVA_LIB/junit-platform-console-standalone.jar" \
        -cp "$out/classes:$cp" --select-class bulkhead.BulkheadTest --select-class bulkhead.LaneTest \
        --disable-banner --disable-ansi-colors --details=summary \
        --reports-dir="$out/reports" >"$out/junit.log" 2>&1
    rc=$?
    grep -E '^\s*\[(jdbc|Failures)|=>|Exception|Error' "$out/junit.log" | head -n 40 | sed 's/^/    /'
    count_junit java "$out/reports/TEST-junit-jupiter.xml" "$rc"
    bh_say "java: $(bh_fmt_us "$(($(bh_now_us) - t0))")"
}

# ---- 3. Python: psycopg 3, pytest -----------------------------------------
python_tests() {
    local t0 rc
    t0=$(bh_now_us)
    bh_say "python: bulkhead.admit() with psycopg 3 (pytest)"
    run_child env BULKHEAD_DSN="$PY_DSN" BULKHEAD_PGBOUNCER_DSN="$PY_PGB_DSN" \
        PYTHONDONTWRITEBYTECODE=1 \
        timeout -k 10 150 "$PYTHON" -m pytest -p no:cacheprovider -q -rfE -s \
        --rootdir="$HERE/python" --junitxml="$WORK/pytest.xml" "$HERE/python" \
        >"$WORK/pytest.log" 2>&1
    rc=$?
    # exit 5: pytest collected no test, which count_junit counts as a failure
    grep -E '^\[psycopg|FAILED|ERROR|Error|passed|failed' "$WORK/pytest.log" | sed 's/^/    /'
    [ "$rc" -eq 0 ] || tail -n 60 "$WORK/pytest.log" | sed 's/^/    | /'
    count_junit python "$WORK/pytest.xml" "$rc"
    bh_say "python: $(bh_fmt_us "$(($(bh_now_us) - t0))")"
}

# ---- 4. PgBouncer ----------------------------------------------------------
pgbouncer_phase() {
    local t0
    t0=$(bh_now_us)
    bh_say "pgbouncer: transaction pooling"
    pgbouncer_tests
    bh_say "pgbouncer: $(bh_fmt_us "$(($(bh_now_us) - t0))")"
}

# ---- 5. the documentation shows the tested code ---------------------------
snippets_phase() {
    local line
    bh_say "snippets: the documentation's client snippets are excerpts of the tested files"
    while IFS= read -r line; do
        case $line in
            PASS\ *) pass "${line#PASS }" ;;
            FAIL\ *) fail "${line#FAIL }" ;;
        esac
    done < <("$PYTHON" "$HERE/snippets_check.py" "$HERE" "$ROOT/README.md" "$ROOT"/doc/*.md 2>&1 ||
             echo "FAIL snippets: snippets_check.py failed")
}

java_tests
python_tests
pgbouncer_phase
snippets_phase
finish

#!/usr/bin/env bash
# scripts/test.sh: the one test command for bulkhead.
#
#   bash scripts/test.sh [regress|isolation|tap|clients|stress|valgrind|bench|all]   (as root; default all)
#
# On a Debian 12 machine it installs what is missing (apt-get), copies the
# source tree to a throwaway directory, builds it there with warnings as errors,
# installs the extension into PostgreSQL 15 (the test servers load
# $libdir/bulkhead.so), and runs `make installcheck` as the postgres user
# (initdb refuses root). Each suite starts and stops its own temporary,
# preloaded server: pg_regress, pg_isolation_regress, the TAP tests; then the
# suites with runner scripts of their own (test/clients/run.sh: JDBC,
# psycopg and PgBouncer; test/stress/run.sh: 48 clients for 60 s;
# test/valgrind/run.sh: regress and isolation with the servers under valgrind);
# and a smoke run of the benchmarks (test/bench/run --quick, about 90 s,
# counted as one test) so that they cannot rot.
#
# It prints the diffs and server logs of what failed, the time each phase
# took, and last a line "N passed, N failed" (pg_regress and isolation tests,
# TAP test files). Exit status 0 only if everything passed.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
SRC_DIR=$(dirname -- "$SCRIPT_DIR")
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

usage() {
    echo "usage: bash scripts/test.sh [regress|isolation|tap|clients|stress|valgrind|bench|all]   (as root; default: all)"
}

case ${1:-all} in
    regress)   PHASES=(regress) ;;
    isolation) PHASES=(isolation) ;;
    tap)       PHASES=(tap) ;;
    clients)   PHASES=(clients) ;;
    stress)    PHASES=(stress) ;;
    valgrind)  PHASES=(valgrind) ;;
    bench)     PHASES=(bench) ;;
    all)       PHASES=(regress isolation tap clients stress valgrind bench) ;;
    -h|--help) usage; exit 0 ;;
    *)         usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { usage >&2; exit 2; }

bh_require_root

# Two runs on one machine would install their builds over each other's
# (the test servers load the extension from the server's own directories):
# one waits for the other.
exec 9>/tmp/bulkhead-test.lock
if ! flock -n 9; then
    bh_say "another scripts/test.sh runs on this machine: waiting for it"
    flock 9
fi

bh_unset_libpq_env

BUILD=
bh_trap_cleanup_work

TIMING_NAMES=()
TIMING_US=()
timed() {    # timed LABEL START_US: record the time since START_US
    TIMING_NAMES+=("$1")
    TIMING_US+=("$(($(bh_now_us) - $2))")
}

declare -A PASSED FAILED
TOTAL_PASSED=0
TOTAL_FAILED=0

# pg_regress / pg_isolation_regress: one line per test. PostgreSQL 15 writes
# "test name ... ok  12 ms" / "... FAILED" ("failed (ignored)" does not fail
# the run); 16 and later write "ok 1 - name" / "not ok 1 - name".
count_pg_regress() {    # count_pg_regress LOG -> "passed failed"
    local log=$1 ok bad
    ok=$(grep -cE '\.\.\. (ok|failed \(ignored\))( |$)|^ok [0-9]+ ' "$log" || true)
    bad=$(grep -cE '\.\.\. FAILED( |$)|^not ok [0-9]+ ' "$log" || true)
    echo "$ok $bad"
}

# prove: "Files=N, Tests=M, ..." at the end; each failed file appears in the
# "Test Summary Report" as "path (Wstat: ...".
count_prove() {    # count_prove LOG -> "passed failed"
    local log=$1 files bad
    files=$(sed -n 's/^Files=\([0-9][0-9]*\),.*/\1/p' "$log" | tail -n 1)
    bad=$(grep -cE '^[^ ]+ +\(Wstat: ' "$log" || true)
    files=${files:-0}
    [ "$files" -ge "$bad" ] || files=$bad
    echo "$((files - bad)) $bad"
}

# Count one suite's results: record_phase NAME PASSED FAILED EXIT_STATUS
# (a failing exit status without a failed test counts as one failure)
record_phase() {
    local name=$1 p=${2:-0} f=${3:-0} rc=$4
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        bh_warn "$name: exit $rc without a failed test: counted as 1 failure"
        f=1
    fi
    PASSED[$name]=$p
    FAILED[$name]=$f
    TOTAL_PASSED=$((TOTAL_PASSED + p))
    TOTAL_FAILED=$((TOTAL_FAILED + f))
    bh_say "$name: $p passed, $f failed, $(bh_fmt_us "${TIMING_US[-1]}")"
}

# A suite with a runner script of its own (by default test/<name>/run.sh):
# it installs what it needs, builds, runs its servers and ends with
# "N passed, N failed".
run_script_phase() {    # run_script_phase NAME [SCRIPT [ARGS...]]
    local name=$1 log="$WORK/$1.out" t0 rc p f
    local -a cmd=("${@:2}")
    [ ${#cmd[@]} -gt 0 ] || cmd=("test/$name/run.sh")
    bh_say "$name: ${cmd[*]}"
    t0=$(bh_now_us)
    set +e
    bash "$BUILD/${cmd[0]}" "${cmd[@]:1}" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    timed "$name" "$t0"
    read -r p f < <(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$log" | tail -n 1)
    record_phase "$name" "$p" "$f" "$rc"
}

run_phase() {    # run_phase NAME: one suite, via make installcheck as postgres
    local name=$1 log="$WORK/$1.out" t0 rc counts p f
    local -a args
    case $name in
        regress)   args=(ISOLATION= TAP_TESTS=) ;;
        isolation) args=(REGRESS= TAP_TESTS=) ;;
        tap)       args=(REGRESS= ISOLATION=) ;;
    esac
    bh_say "$name: make installcheck ${args[*]} (as postgres)"
    t0=$(bh_now_us)
    set +e
    (cd "$BUILD" &&
        runuser -u postgres -- make installcheck PG_CONFIG="$BH_PG_CONFIG" "${args[@]}") 2>&1 |
        tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    timed "$name" "$t0"
    if [ "$name" = tap ]; then counts=$(count_prove "$log"); else counts=$(count_pg_regress "$log"); fi
    read -r p f <<<"$counts"
    record_phase "$name" "$p" "$f" "$rc"
}

show_tail() {    # show_tail FILE LINES
    [ -s "$1" ] || return 0
    printf '\n----- %s (last %s lines) -----\n' "${1#"$BUILD"/}" "$2"
    tail -n "$2" -- "$1"
}

# What explains a failure: the diffs, then the server and TAP logs of the
# suites that failed. pg_regress keeps its server logs in <outputdir>/log
# (log/ for regress, output_iso/log/ for isolation), TAP in tmp_check/log/;
# tmp_check*/log/ is looked at too, should a suite be set up that way.
# TAP logs are tmp_check/log/regress_log_<test> and <test>_<node>.log: is
# FILE one of a test file that prove reported as failed? (All are, when prove
# named none.)
tap_log_of_failed() {    # tap_log_of_failed FILE
    local name t failed
    name=$(basename -- "$1")
    failed=$(sed -n 's/^\([^ ]*\)\.[a-z]* *(Wstat: .*/\1/p' "$WORK/tap.out")
    [ -n "$failed" ] || return 0
    while IFS= read -r t; do
        t=$(basename -- "$t")
        case $name in "regress_log_$t" | "${t}_"*) return 0 ;; esac
    done <<<"$failed"
    return 1
}

show_failure_details() {
    local f phase
    local -a dirs
    bh_say "failure details"
    while IFS= read -r f; do
        show_tail "$f" 1000
    done < <(find "$BUILD" -maxdepth 2 -name regression.diffs -type f | sort)
    for phase in "${PHASES[@]}"; do
        [ "${FAILED[$phase]:-0}" -gt 0 ] || continue
        case $phase in
            regress)   dirs=("$BUILD/log") ;;
            isolation) dirs=("$BUILD/output_iso/log") ;;
            tap)       dirs=("$BUILD/tmp_check/log") ;;
        esac
        for f in "$BUILD"/tmp_check?*/log; do
            case $phase:${f#"$BUILD"/} in
                regress:*iso*|isolation:*regress*) ;;
                *) [ -d "$f" ] && dirs+=("$f") ;;
            esac
        done
        while IFS= read -r f; do
            # initdb's log only says something when initdb failed
            case $f in */initdb.log) grep -qi error "$f" || continue ;; esac
            [ "$phase" != tap ] || tap_log_of_failed "$f" || continue
            show_tail "$f" 80
        done < <(find "${dirs[@]}" -maxdepth 1 -type f 2>/dev/null | sort)
    done
}

summary() {
    local i total=0
    echo
    bh_say "timings"
    for i in "${!TIMING_NAMES[@]}"; do
        printf '    %-14s %9s\n' "${TIMING_NAMES[$i]}" "$(bh_fmt_us "${TIMING_US[$i]}")"
        total=$((total + TIMING_US[i]))
    done
    printf '    %-14s %9s\n' total "$(bh_fmt_us "$total")"
    bh_say "results"
    for i in build "${PHASES[@]}"; do
        [ -n "${PASSED[$i]+set}" ] || continue
        printf '    %-14s %s passed, %s failed\n' "$i" "${PASSED[$i]}" "${FAILED[$i]}"
    done
    echo "$TOTAL_PASSED passed, $TOTAL_FAILED failed"
}

# 1. prerequisites
t0=$(bh_now_us)
bh_install_prereqs
timed prerequisites "$t0"

# 2. a private copy, built and installed as root
t0=$(bh_now_us)
bh_fix_tmpdir
WORK=$(bh_mktemp_dir bulkhead-test)
BUILD=$WORK/bulkhead
bh_copy_tree "$SRC_DIR" "$BUILD"
chown -R postgres:postgres "$BUILD"
timed copy "$t0"

bh_say "build and install in $BUILD ($BH_PG_CONFIG)"
t0=$(bh_now_us)
set +e
bh_build_install "$BUILD"
rc=$?
set -e
timed build+install "$t0"
if [ "$rc" -ne 0 ]; then
    bh_warn "build or install failed (exit $rc)"
    PASSED[build]=0
    FAILED[build]=1
    TOTAL_FAILED=1
    bh_cleanup_work
    summary
    exit 1
fi
chown -R postgres:postgres "$BUILD"

# 3. the suites, each against its own temporary server; a failing suite does
# not stop the next one
for phase in "${PHASES[@]}"; do
    case $phase in
        regress|isolation|tap) run_phase "$phase" ;;
        bench) run_script_phase bench test/bench/run --quick ;;
        *) run_script_phase "$phase" ;;
    esac
done

[ "$TOTAL_FAILED" -eq 0 ] || show_failure_details
bh_cleanup_work
summary
[ "$TOTAL_FAILED" -eq 0 ] && [ "$TOTAL_PASSED" -gt 0 ]

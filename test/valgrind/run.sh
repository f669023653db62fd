#!/usr/bin/env bash
# test/valgrind/run.sh: the pg_regress and isolation suites with every server
# process under valgrind (memcheck).
#
#   bash test/valgrind/run.sh            (as root, like scripts/test.sh)
#
# VALGRIND_KEEP_LOGS=DIR keeps the valgrind logs of each suite in DIR/<suite>;
# VALGRIND_SUITES="regress" runs only that suite; VALGRIND_REGRESS and
# VALGRIND_ISOLATION replace the Makefile's lists of tests; VALGRIND_EXTRA
# adds valgrind options (e.g. --gen-suppressions=all); VALGRIND_ORIGINS=yes
# runs every suite with --track-origins=yes from the start (see below).
#
# Why valgrind and not -fsanitize=address,undefined: an ASan-built
# bulkhead.so needs the ASan runtime first in the process, and Debian's
# postgres is not built with it.  Preloading it (LD_PRELOAD=libasan.so.8)
# makes postgres (and psql) hang before main() does anything, in glibc's
# bindtextdomain() lock (a known ASan/glibc interaction with uninstrumented
# binaries); building PostgreSQL itself with ASan is out of scope.  Valgrind
# needs no rebuild of anything.  Debian's postgres is not built with
# USE_VALGRIND, so palloc chunks are not tracked one by one: valgrind still
# sees uninitialised values, reads outside malloc'd and mapped memory, and
# crashes, which is what this looks for.
#
# How: it copies and builds the tree as scripts/test.sh does (installing the
# extension), then runs `make installcheck` for the REGRESS and ISOLATION
# lists of the Makefile with bindir pointing at a directory where "postgres"
# is a wrapper that execs the real one under valgrind --trace-children=yes
# (initdb, psql, pg_ctl are links to the real ones).  pg_regress thus builds
# its temporary instances exactly as usual.  Each server process writes its
# own valgrind log; afterwards every error report is read: a report with a
# frame in bulkhead's code (bulkhead.so or the build's src/) is a failure;
# reports entirely inside PostgreSQL or libc are counted and shown as noise
# (test/valgrind/bulkhead.supp suppresses the known ones).
#
# Memcheck's --track-origins=yes (which says where an uninitialised value
# was made) doubles the servers' time under valgrind, and it only matters
# once there is a report to attribute: a report whose error is in
# PostgreSQL's code may be about a value that bulkhead left uninitialised.
# So each suite runs first without it; if its logs hold any report that is
# not already bulkhead's (a clean run has none: the known noise is
# suppressed), the suite runs once more with --track-origins=yes and that
# run's reports are attributed as above.  A report in bulkhead's code in
# either run fails the check.
#
# Last line: "N passed, N failed" where the tests of both suites count one
# each, plus one check per suite for "no valgrind error in bulkhead code".
# Exit status 0 only if all passed.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
SRC_DIR=$(cd -- "$SCRIPT_DIR/../.." && pwd -P)
# shellcheck source=scripts/lib.sh
. "$SRC_DIR/scripts/lib.sh"

bh_require_root
bh_reset_client_env

bh_trap_cleanup_work

T0=$(bh_now_us)

# 1. prerequisites: those of the suites, and valgrind
bh_install_prereqs
if [ "$(dpkg-query -W -f='${db:Status-Status}' valgrind 2>/dev/null)" != installed ]; then
    bh_say "installing valgrind"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Use-Pty=0 valgrind >/dev/null
fi
VALGRIND=$(command -v valgrind) || bh_die "valgrind is not installed"
REAL_BINDIR=$("$BH_PG_CONFIG" --bindir)

# 2. a private copy, built and installed (as scripts/test.sh does)
bh_fix_tmpdir
WORK=$(bh_mktemp_dir bulkhead-valgrind)
BUILD=$WORK/bulkhead
bh_copy_tree "$SRC_DIR" "$BUILD"
bh_say "build and install in $BUILD"
bh_build_install "$BUILD" >"$WORK/build.log" 2>&1 || {
    tail -n 40 "$WORK/build.log" >&2
    bh_die "build failed"
}

# 3. a bindir whose postgres runs under valgrind
WRAP=$WORK/bin
VGLOG=$WORK/vglog
mkdir -p "$WRAP" "$VGLOG"
for f in "$REAL_BINDIR"/*; do
    ln -s "$f" "$WRAP/$(basename -- "$f")"
done
rm -f "$WRAP/postgres"
# (the suppressions are read from the copy: the servers run as postgres,
# who may not be able to enter the tree this script lies in)
cat >"$WRAP/postgres" <<EOF
#!/bin/sh
# postgres under valgrind; one log per process (children are followed)
# (VALGRIND_TRACK_ORIGINS: set by run_suite for each run of a suite)
exec "$VALGRIND" --quiet --tool=memcheck --trace-children=yes \\
    --track-origins=\${VALGRIND_TRACK_ORIGINS:-yes} --num-callers=40 --error-limit=no \\
    --leak-check=no --fullpath-after= --read-var-info=no ${VALGRIND_EXTRA:-} \\
    --suppressions="$BUILD/test/valgrind/bulkhead.supp" \\
    --log-file="\${VALGRIND_LOG_DIR:?}/%p.log" \\
    "$REAL_BINDIR/postgres" "\$@"
EOF
chmod 755 "$WRAP/postgres"
chown -R postgres:postgres "$WORK"

# 4. the suites
declare -A PASSED FAILED
TOTAL_PASSED=0
TOTAL_FAILED=0

count_pg_regress() {    # LOG -> "passed failed" (PostgreSQL 15 and 16+ formats)
    local ok bad
    ok=$(grep -cE '\.\.\. (ok|failed \(ignored\))( |$)|^ok [0-9]+ ' "$1" || true)
    bad=$(grep -cE '\.\.\. FAILED( |$)|^not ok [0-9]+ ' "$1" || true)
    echo "$ok $bad"
}

# Read the valgrind logs of a suite: print every report that involves
# bulkhead's code, summarise the others.  Prints "bulkhead_errors other".
# A report is bulkhead's when, in any of its stacks (where the error
# happened, where the value or block came from), the first frame that is
# not libc or valgrind's is in bulkhead (bulkhead.so, or the build's src/
# with debug info: the copy's, or BH_PREBUILT's, where scripts/test.sh
# compiled the objects it copied: scripts/lib.sh, bh_build_install).  A
# frame of bulkhead deeper down does not count: the ProcessUtility and
# ExecutorStart hooks sit under most of the server's work.
scan_logs() {    # scan_logs DIR
    perl -e '
        my ($dir, @src) = grep { $_ ne "" } @ARGV;
        my ($mine, $other) = (0, 0);
        my %kinds;
        # first frame of one stack that belongs to the server or bulkhead
        sub owner {
            for my $fr (@_) {
                return "bulkhead" if $fr =~ m{bulkhead\.so}
                    || grep { $fr =~ m{\Q$_\E/src/} } @src;
                return "postgres" if $fr =~ m{\(in /usr/lib/postgresql/};
            }
            return "system";
        }
        for my $f (sort glob("$dir/*.log")) {
            open(my $fh, "<", $f) or next;
            local $/;
            my $text = <$fh>;
            close $fh;
            # reports are separated by lines holding only "==PID=="
            for my $block (split /^==\d+==\s*$/m, $text) {
                my ($head) = $block =~ /^==\d+== (\S.*)$/m;
                next unless defined $head;
                # the stacks of the report, in order
                my (@stacks, $cur);
                for my $line (split /\n/, $block) {
                    if ($line =~ /^==\d+==\s+(?:at|by) 0x[0-9A-Fa-f]+: (.*)$/) {
                        push @stacks, ($cur = []) unless $cur;
                        push @$cur, $1;
                    } else {
                        undef $cur;
                    }
                }
                if (grep { owner(@$_) eq "bulkhead" } @stacks) {
                    $mine++;
                    print STDERR "----- $f\n$block\n";
                } else {
                    $other++;
                    $kinds{$head}++;
                }
            }
        }
        for my $k (sort { $kinds{$b} <=> $kinds{$a} } keys %kinds) {
            printf STDERR "    (not in bulkhead code) %4d x %s\n", $kinds{$k}, $k;
        }
        print "$mine $other\n";
    ' "$1" "$BUILD" "${BH_PREBUILT:-}"
}

# One run of a suite: run_pass NAME ORIGINS (yes|no).  Sets PASS_P and
# PASS_F (tests passed and failed), PASS_MINE and PASS_OTHER (valgrind
# reports in bulkhead's code and elsewhere).  Each suite has its own log
# directory ($VGLOG/NAME) and its own port (PORT_OF), so that the two can
# run at the same time.
run_pass() {
    local name=$1 origins=$2 log="$WORK/$1-origins-$2.out" rc dir="$VGLOG/$1"
    local -a args
    case $name in
        regress)   args=(ISOLATION= TAP_TESTS=)
                   [ -z "${VALGRIND_REGRESS:-}" ] || args+=("REGRESS=$VALGRIND_REGRESS") ;;
        isolation*) args=(REGRESS= TAP_TESTS= "ISOLATION=${SPECS_OF[$name]}") ;;
    esac
    rm -rf "${dir:?}"
    mkdir -p "$dir"
    chown postgres:postgres "$dir"
    bh_say "$name under valgrind, --track-origins=$origins (make installcheck ${args[*]})"
    set +e
    # the postmaster starts slowly under valgrind: give pg_regress time
    (cd "${DIR_OF[$name]}" &&
        runuser -u postgres -- env PGCTLTIMEOUT=300 VALGRIND_TRACK_ORIGINS="$origins" \
            VALGRIND_LOG_DIR="$dir" \
            make installcheck PG_CONFIG="$BH_PG_CONFIG" bindir="$WRAP" "${args[@]}" \
            EXTRA_REGRESS_OPTS="--port=${PORT_OF[$name]}") >"$log" 2>&1
    rc=$?
    set -e
    cat "$log"
    read -r PASS_P PASS_F <<<"$(count_pg_regress "$log")"
    if [ "$rc" -ne 0 ] && [ "$PASS_F" -eq 0 ]; then
        bh_warn "$name: make installcheck failed (exit $rc) without a failed test: counted as 1 failure"
        PASS_F=1
    fi
    if [ "$PASS_F" -gt 0 ]; then
        find "${DIR_OF[$name]}" -maxdepth 2 -name regression.diffs -type f -exec cat {} +
    fi
    bh_say "$name: valgrind reports"
    read -r PASS_MINE PASS_OTHER <<<"$(scan_logs "$dir")"
    if [ -n "${VALGRIND_KEEP_LOGS:-}" ]; then
        mkdir -p "$VALGRIND_KEEP_LOGS/$name"
        cp -p "$dir"/*.log "$VALGRIND_KEEP_LOGS/$name/" 2>/dev/null || true
    fi
    bh_say "$name (--track-origins=$origins): $PASS_MINE valgrind reports in bulkhead code, $PASS_OTHER elsewhere (PostgreSQL, libc)"
}

# run_suite NAME: both runs of a suite; its last line is "NAME P F" (its
# tests and its valgrind check, passed and failed)
run_suite() {    # run_suite NAME
    local name=$1 t0 p f mine origins=no
    [ "${VALGRIND_ORIGINS:-no}" != yes ] || origins=yes
    t0=$(bh_now_us)
    run_pass "$name" "$origins"
    p=$PASS_P f=$PASS_F mine=$PASS_MINE
    if [ "$origins" = no ] && [ "$PASS_OTHER" -gt 0 ]; then
        # which of them came from a value that bulkhead made?  (the tests
        # of this second run count instead of the first one's)
        bh_say "$name: $PASS_OTHER reports outside bulkhead's code: once more with --track-origins=yes to attribute them"
        run_pass "$name" yes
        p=$PASS_P f=$PASS_F mine=$((mine + PASS_MINE))
    fi
    if [ "$mine" -eq 0 ]; then p=$((p + 1)); else f=$((f + 1)); fi
    bh_say "$name: $p passed, $f failed (tests + valgrind check), $(bh_fmt_us $(($(bh_now_us) - t0)))"
    echo "$name $p $f"
}

# The suites run at the same time, the isolation specs in two halves (the
# second in a copy of the build, so that their outputs and temporary
# instances are apart): each server process is one valgrind, and the tests
# mostly wait (for a lock, a timeout, a step), so three runs at once keep
# two CPUs busy.  Each writes its own file, printed whole once it ends.
SUITES=()
declare -A PORT_OF DIR_OF SPECS_OF
for s in ${VALGRIND_SUITES:-regress isolation}; do
    case $s in
        regress) SUITES+=(regress) DIR_OF[regress]=$BUILD ;;
        isolation)
            # the Makefile's list (or VALGRIND_ISOLATION), cut in two
            read -r -a specs <<<"${VALGRIND_ISOLATION:-$(awk '
                /^ISOLATION = /{f=1} f{sub(/^ISOLATION = /,""); l=$0; sub(/\\$/,"",l);
                printf "%s ", l; if ($0 !~ /\\$/) exit}' "$BUILD/Makefile")}"
            # (every other spec, so that the two halves take about as long:
            # the list's newer specs, the budgets', are the longer ones)
            SPECS_OF[isolation-1]= SPECS_OF[isolation-2]=
            for i in "${!specs[@]}"; do
                SPECS_OF[isolation-$((i % 2 + 1))]+="${specs[$i]} "
            done
            SUITES+=(isolation-1) DIR_OF[isolation-1]=$BUILD
            if [ "${#specs[@]}" -gt 1 ]; then
                SUITES+=(isolation-2) DIR_OF[isolation-2]=$BUILD-2
                cp -a "$BUILD" "$BUILD-2"
            fi ;;
        *) bh_die "unknown suite $s (regress, isolation)" ;;
    esac
done
port=$(bh_free_port)
for s in "${SUITES[@]}"; do
    PORT_OF[$s]=$port
    port=$(bh_free_port $((port + 1)))
done
pids=()
for s in "${SUITES[@]}"; do
    run_suite "$s" >"$WORK/suite-$s.out" 2>&1 &
    pids+=($!)
done
for i in "${!SUITES[@]}"; do
    wait "${pids[$i]}" || true
    s=${SUITES[$i]}
    cat "$WORK/suite-$s.out"
    read -r _ p f < <(tail -n 1 "$WORK/suite-$s.out" | grep "^$s [0-9]* [0-9]*$" || echo "$s 0 1")
    PASSED[$s]=$p
    FAILED[$s]=$f
    TOTAL_PASSED=$((TOTAL_PASSED + p))
    TOTAL_FAILED=$((TOTAL_FAILED + f))
done

bh_cleanup_work
bh_say "total time $(bh_fmt_us $(($(bh_now_us) - T0)))"
for s in "${SUITES[@]}"; do
    printf '    %-10s %s passed, %s failed\n' "$s" "${PASSED[$s]}" "${FAILED[$s]}"
done
echo "$TOTAL_PASSED passed, $TOTAL_FAILED failed"
[ "$TOTAL_FAILED" -eq 0 ]

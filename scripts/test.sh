#!/usr/bin/env bash
# scripts/test.sh: the one test command for bulkhead.
#
#   bash scripts/test.sh [SUITE] [--pg MAJOR]     (as root; default: all suites)
#   bash scripts/test.sh quick                    (a contributor's loop)
#   bash scripts/test.sh [SUITE] --schedule       (what would run, and beside what)
#
# On a Debian 12 machine it installs what is missing (apt-get), gets every
# PostgreSQL version of the matrix (scripts/postgres.sh: 15 from Debian 12's
# packages; 17 and 18 built once from Debian's source packages into a cache;
# 19, a release candidate, from experimental's packages in a Debian sid
# chroot made once into that cache, where its build, servers and suites
# run; a version whose source cannot be downloaded, or whose chroot cannot
# be built, is skipped, and the summary line says so),
# copies the source tree to a throwaway directory per version, builds it
# there with warnings as errors, installs the extension into that version's
# server (the test servers load $libdir/bulkhead.so), and runs `make
# installcheck` as the postgres user (initdb refuses root).
#
# On every version: the module structure of the build (test/structure/run.sh),
# pg_regress, pg_isolation_regress, the TAP tests, each against its own
# temporary preloaded server.  On the first version (15)
# also: locale (regress again from an emptied environment with LC_ALL=C:
# its expected output holds the multi-byte names and the messages), the
# suites with runner scripts of their own (test/clients/run.sh: JDBC,
# psycopg and PgBouncer; test/stress/run.sh: 48 clients for 10 s, its other
# modes 6 s each; test/valgrind/run.sh: regress and isolation with the
# servers under valgrind; test/package/run.sh: the Debian package built,
# installed, installchecked and removed; monitoring/prometheus/tests/run.sh:
# the alert rules under promtool; test/meta/run.sh: META.json), and a smoke
# run of the benchmarks (test/bench/run --quick, each scenario counted as
# one test) so that they cannot rot.
#
# quick: the build, then on the first version (or --pg MAJOR's) structure,
# regress and isolation at once, then every TAP file.
#
# A run of every suite runs them side by side by a schedule of stages and
# lanes (full_schedule, below); any other runs one version after the other,
# one version's regress, isolation and locale at once, each its own server
# on its own port.  An item that runs beside others shows its output when
# it ends.
#
# A phase that fails (a build, a suite, a scenario) is counted and the run
# goes on with the next one.  Everything that runs as postgres starts in a
# directory postgres can enter (the clone may lie where it cannot).
# It prints the diffs and server logs of what failed, the time each phase
# took, and last a line "N passed, N failed" over every version (pg_regress
# and isolation tests, TAP test files, scenarios). Exit status 0 only if all
# passed.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
SRC_DIR=$(dirname -- "$SCRIPT_DIR")
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

usage() {
    echo "usage: bash scripts/test.sh [SUITE] [--pg MAJOR] [--schedule]   (as root)"
    echo "  SUITE: all (default), quick, $(printf '%s ' "${ALL_SUITES[@]}")"
    echo "  --pg MAJOR: only PostgreSQL MAJOR ($(bh_pg_majors | tr '\n' ' ' | sed 's/ $//'));" \
         "default: every version the suite runs on"
    echo "  --schedule: print what would run, in which order and beside what, and exit"
}

# structure (test/structure/run.sh: the module graph, file and function
# lengths, on that version's build), regress, isolation and tap run on
# every version of the matrix
# (scripts/postgres.sh); the others on the first one, Debian 12's own.
EVERY_VERSION=(structure regress isolation tap)
FIRST_VERSION_ONLY=(locale clients stress valgrind package alerts meta bench)
ALL_SUITES=("${EVERY_VERSION[@]}" "${FIRST_VERSION_ONLY[@]}")
# quick, a contributor's loop: the build, then these on the first version
QUICK_SUITES=(structure regress isolation tap)
mapfile -t MAJORS < <(bh_pg_majors)
FIRST_MAJOR=${MAJORS[0]}
# the last released version: a release candidate (a chroot version of
# scripts/postgres.sh) comes after it, and counts as a middle one below
LAST_MAJOR=
for major in "${MAJORS[@]}"; do
    [ -n "$(bh_pg_root_of "$major")" ] || LAST_MAJOR=$major
done

# In a run of every suite, a version other than the first and the last
# released one runs these TAP files only (all of them: scripts/test.sh tap
# --pg MAJOR): the
# code compiled for 17 is 18's but for two declarations (the #if blocks
# are at 16 and 17), so what 17 can break is the server's side, tried here
# on each of its interfaces: wait events and the FIFO queue, the worker's
# and the server's restarts, a standby, the idle guards, the gates (parse
# analysis and snapshots, ExecutorStart, ProcessUtility), deadlocks, the
# upgrade scripts, the holders' sampling (/proc and the cgroup), max_hold's
# signals, the guards' restore through guc.c's internals (19 moved an
# integer setting's reset value: 151 failed there, regress did not), and
# the lanes of 1.3 (the planner's and the executor's hooks, portals and
# cached plans, the settings' nesting levels, the utilities), and the
# priorities of 1.5 (the lock manager's structures differ from 15 to 16),
# and EXPLAIN's option (18 and later; 19 registers it with a GUC check).  The
# same files try a release candidate (19), whose #if blocks are few as
# well.  Everything else runs on the first and the last released versions
# (about 100 s less per run).
TAP_MIDDLE_VERSIONS=(001_fifo 004_restart 005_worker_restart 006_standby
    007_idle_timeout 060_transparent 061_queue_snapshot 070_deadlock
    080_upgrade 132_adaptive_cgroup 150_utility_gate 151_guard_reload
    180_max_hold 210_lane_settings 211_lane_prepared 212_lane_move_faults
    215_lane_review 216_lane_move_keys_full 221_memory_grants 222_caps_frame
    500_priority_permits 545_memory_priority 560_importance
    570_statements_privileges 571_views_bounded 572_history_file_rows
    580_memory_small 590_memory_bound
    600_feedback_underestimate 601_feedback_overgrant 602_feedback_swing
    603_feedback_restart 604_feedback_damaged_file 605_feedback_privacy
    606_feedback_unrequested 607_feedback_extra_floor 608_feedback_extra_partial
    610_explain_option
    620_nodelimit_guc_levels
    621_hashjoin_set_config 622_gather_error_settings 623_nodelimit_error_paths
    624_plain_role_settings 625_parallel_hash_unwrapped)
# The TAP files that drive Debian 12's prometheus-postgres-exporter (0.11)
# and Prometheus (2.42), for which monitoring/ is written: a chroot version
# (scripts/postgres.sh) has neither (sid's take other flags), and runs every
# other file.
TAP_HOST_ONLY=(020_prometheus 160_alerts 161_alert_min_running)

# prove's jobs in a TAP run (the Makefile's TAP_JOBS): the files mostly
# wait, so more of them than CPUs run at once
TAP_JOBS=${BH_TAP_JOBS:-4}

# The schedule of a run of every suite (SCHEDULE, below), four stages of
# two lanes side by side, made from what each phase costs on 2 CPUs (the
# share of both CPUs busy while it runs alone, measured: valgrind 95%,
# TAP on the first version 74%, stress 62%, TAP on the last released
# version 55%, the benchmarks' smoke run 43%, clients 35%, package 26%, a
# version's regress and isolation 17 to 24%):
#   - the five heavy phases (the first version's regress and TAP, stress
#     then valgrind, the last released version's TAP, the benchmarks) run
#     one after the other in lane A, each beside light ones only in lane
#     B: the TAP files that time an adaptive limit or a deadlock check
#     (test/t/testrules.yml) must not run beside another load;
#   - package and bench swap the first version's installed library (the
#     Debian package, the build without latency statistics): nothing else
#     of that version runs meanwhile (stages 3 and 4 hold none);
#   - alerts and meta start no server;
#   - stress, clients and bench each pick a port for their server by
#     looking for one that nobody listens on yet (test/bench/cluster.sh):
#     no two of them start at once.
full_schedule() {
    local f=$FIRST_MAJOR l=$LAST_MAJOR m mids=() b1 b4=''
    for m in "${MAJORS[@]:1}"; do
        [ "$m" = "$l" ] || mids+=("$m")
    done
    if [ -z "$l" ] || [ "$l" = "$f" ]; then
        return 1    # (no second full TAP run: the plain schedule)
    fi
    b1="alerts:$f meta:$f"
    for m in "${mids[@]}"; do
        b1+=" structure:$m+regress:$m+isolation:$m"
        b4+=" tap:$m"
    done
    SCHEDULE=(
        "structure:$f+regress:$f+isolation:$f+locale:$f tap:$f|$b1"
        "stress:$f valgrind:$f|structure:$l+regress:$l+isolation:$l"
        "tap:$l|clients:$f package:$f"
        "bench:$f|${b4# }"
    )
}

SUITE=all
ONLY_MAJOR=
SHOW_SCHEDULE=
while [ $# -gt 0 ]; do
    case $1 in
        --pg) [ $# -ge 2 ] || { usage >&2; exit 2; }
              bh_pg_entry "$2" >/dev/null ||
                  { echo "PostgreSQL $2 is not in the matrix" >&2; usage >&2; exit 2; }
              ONLY_MAJOR=$2; shift 2 ;;
        --schedule) SHOW_SCHEDULE=1; shift ;;
        -h|--help) usage; exit 0 ;;
        all|quick) SUITE=$1; shift ;;
        *) if printf '%s\n' "${ALL_SUITES[@]}" | grep -qxF -- "$1"; then
               SUITE=$1; shift
           else
               usage >&2; exit 2
           fi ;;
    esac
done

# The plan: "suite major" items, in the order they are counted and shown
# in the summary: all suites of one version, then the next version's; the
# benchmark smoke run last.  quick: the suites of QUICK_SUITES on the first
# version (or the one --pg names).
PLAN=()
for pass in suites bench; do
    for major in "${MAJORS[@]}"; do
        if [ -n "$ONLY_MAJOR" ]; then [ "$major" = "$ONLY_MAJOR" ] || continue
        elif [ "$SUITE" = quick ]; then [ "$major" = "$FIRST_MAJOR" ] || continue
        fi
        for suite in "${ALL_SUITES[@]}"; do
            case $SUITE in
                all) ;;
                quick) printf '%s\n' "${QUICK_SUITES[@]}" | grep -qxF "$suite" || continue ;;
                *) [ "$SUITE" = "$suite" ] || continue ;;
            esac
            if [ "$pass" = suites ]; then [ "$suite" != bench ] || continue
            else [ "$suite" = bench ] || continue
            fi
            if [ "$major" != "$FIRST_MAJOR" ] &&
               printf '%s\n' "${FIRST_VERSION_ONLY[@]}" | grep -qxF "$suite"; then
                continue
            fi
            PLAN+=("$suite $major")
        done
    done
done
if [ ${#PLAN[@]} -eq 0 ]; then
    echo "suite $SUITE runs on PostgreSQL $FIRST_MAJOR only" >&2
    exit 2
fi
mapfile -t PLAN_MAJORS < <(printf '%s\n' "${PLAN[@]}" | cut -d' ' -f2 | awk '!seen[$0]++')

# in_plan SUITE MAJOR: is it an item of the plan?
in_plan() { printf '%s\n' "${PLAN[@]}" | grep -qxF "$1 $2"; }

# The schedule (run_stage, below): stages, one after the other, each a
# string of lanes separated by "|" that run side by side; a lane's steps
# (separated by spaces) run one after the other, a step's items (joined by
# "+") at once.
SCHEDULE=()
if [ "$SUITE" = all ] && [ -z "$ONLY_MAJOR" ] && full_schedule; then
    :
elif [ "$SUITE" = quick ]; then
    # structure, regress and isolation at once, then the TAP files alone
    # (measured here beside the rest, TAP took 179 s instead of 150: its
    # adaptive and deadlock chain slows under load, and the run as a whole
    # gained nothing)
    m=${PLAN_MAJORS[0]}
    SCHEDULE=("structure:$m+regress:$m+isolation:$m tap:$m")
else
    # one lane in the order of the plan; one version's pg_regress suites
    # (regress, isolation, locale) at once, each with its own temporary
    # server on its own port: they mostly wait (for the worker to load a
    # table, for a lock, for a timeout), so together they take little more
    # than the longest
    lane=
    for major in "${PLAN_MAJORS[@]}"; do
        together=
        for item in "${PLAN[@]}"; do
            read -r suite m <<<"$item"
            [ "$m" = "$major" ] || continue
            case $suite in
                regress|isolation|locale)
                    [ -n "$together" ] || lane+=" @$major"
                    together+="+$suite:$major" ;;
                *) lane+=" $suite:$major" ;;
            esac
        done
        lane=${lane/@$major/${together#+}}
    done
    SCHEDULE=("${lane# }")
fi
# every item of the plan is in the schedule once, and nothing else
diff <(printf '%s\n' "${PLAN[@]}" | tr ' ' : | sort) \
     <(printf '%s\n' "${SCHEDULE[@]}" | sed 's/[|+ ]/\n/g' | grep . | sort) >/dev/null ||
    bh_die "the schedule does not run the plan: $(printf '[%s] ' "${SCHEDULE[@]}")"
if [ -n "$SHOW_SCHEDULE" ]; then
    for stage in "${SCHEDULE[@]}"; do
        echo "stage:"
        IFS='|' read -r -a lanes <<<"$stage"
        for lane in "${lanes[@]}"; do echo "  lane: $lane"; done
    done
    exit 0
fi

bh_require_root

bh_lock_installs
# (the run's time starts once another run's wait is over)
RUN_T0=$(bh_now_us)

bh_reset_client_env

bh_trap_cleanup_work

# A chroot version's mounts (scripts/postgres.sh: /proc, /dev/shm, and $WORK
# bound inside) are there from its build until the suites end (they may run
# beside other versions' suites), and then only: mount_for MAJOR mounts
# MAJOR's chroot, if it has one; mount_for "" unmounts them all, as the
# exit does whatever happened.
declare -A MOUNTED=()
mount_for() {    # mount_for MAJOR|""
    local major=$1 m root
    if [ -z "$major" ]; then
        for m in "${!MOUNTED[@]}"; do
            bh_pg_chroot_umount "${MOUNTED[$m]}" || bh_warn "could not unmount all of ${MOUNTED[$m]}"
            unset 'MOUNTED[$m]'
        done
        return 0
    fi
    root=$(bh_pg_root_of "$major")
    [ -n "$root" ] && [ -z "${MOUNTED[$major]:-}" ] || return 0
    bh_pg_chroot_mount "$root" "$WORK" || return 1
    MOUNTED[$major]=$root
}
trap 'mount_for ""; memcg_remove_all; bh_cleanup_work' EXIT

TIMING_NAMES=()
TIMING_US=()
timed() {    # timed LABEL START_US: record the time since START_US
    TIMING_NAMES+=("$1")
    TIMING_US+=("$(($(bh_now_us) - $2))")
}

declare -A PASSED FAILED PHASE_DIR PG_CONFIG_OF BUILD_OF WHAT_FAILED VERSION_OF
PHASES=()
TOTAL_PASSED=0
TOTAL_FAILED=0
# Versions of the plan that could not be had (scripts/postgres.sh: no source
# could be downloaded): their suites are counted as skipped, with the reason.
TOTAL_SKIPPED=0
SKIP_REASONS=()

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
    PHASES+=("$name")
    PASSED[$name]=$p
    FAILED[$name]=$f
    TOTAL_PASSED=$((TOTAL_PASSED + p))
    TOTAL_FAILED=$((TOTAL_FAILED + f))
    bh_say "$name: $p passed, $f failed, $(bh_fmt_us "${TIMING_US[-1]}")"
}

# A suite with a runner script of its own (by default test/<suite>/run.sh),
# on the first version: it installs what it needs, builds, runs its servers
# and ends with "N passed, N failed".  It runs in the version's build (which
# postgres owns), so that what it starts as postgres can enter its working
# directory.  Without that last line (the script died early), the phase
# counts as one failure.  BH_PREBUILT names that build (scripts/lib.sh,
# bh_build_install): a script's copy of the tree is built and installed
# once already, by this command, with the same flags.
script_command() {    # script_command SUITE BUILD -> the command, a word a line
    local b=$2
    case $1 in
        bench) printf '%s\n' bash "$b/test/bench/run" --quick ;;
        # the stress tool, shortened: 48 clients for 10 s, each other mode
        # (deadlocks, guards, budgets, runaway holders, tenants, memory,
        # lanes) 6 s (a smoke run; long runs: test/stress/README.md)
        stress) printf '%s\n' env DEADLOCK_SECONDS=6 GUARD_SECONDS=6 BUDGET_SECONDS=6 \
                    HOLD_SECONDS=6 TENANT_SECONDS=6 MEMORY_SECONDS=6 LANE_SECONDS=6 \
                    bash "$b/test/stress/run.sh" 48 10 ;;
        alerts) printf '%s\n' bash "$b/monitoring/prometheus/tests/run.sh" ;;
        *) printf '%s\n' bash "$b/test/$1/run.sh" ;;
    esac
}

# script_exec SUITE MAJOR LIVE: as phase_exec, for a suite with a script
script_exec() {
    local suite=$1 major=$2 live=${3:-0} build=${BUILD_OF[$2]} t0 rc log
    local -a cmd
    mapfile -t cmd < <(script_command "$suite" "$build")
    log="$WORK/$suite-$major.out"
    bh_say "$suite $major: ${cmd[*]}"
    t0=$(bh_now_us)
    set +e
    if [ "$live" = 1 ]; then
        bh_pg_run "$major" "$build" env PG_CONFIG="${PG_CONFIG_OF[$major]}" \
            BH_PREBUILT="$build" "${cmd[@]}" 2>&1 | tee "$log"
        rc=${PIPESTATUS[0]}
    else
        bh_pg_run "$major" "$build" env PG_CONFIG="${PG_CONFIG_OF[$major]}" \
            BH_PREBUILT="$build" "${cmd[@]}" >"$log" 2>&1
        rc=$?
    fi
    set -e
    echo "$rc $(($(bh_now_us) - t0))" >"$WORK/$suite-$major.status"
}

# script_record SUITE MAJOR: count what script_exec left and record it
script_record() {
    local suite=$1 major=$2 name="$1 $2" rc=1 us=0 p='' f='' log="$WORK/$1-$2.out"
    [ ! -s "$WORK/$suite-$major.status" ] || read -r rc us <"$WORK/$suite-$major.status"
    touch -- "$log"
    TIMING_NAMES+=("$name")
    TIMING_US+=("$us")
    read -r p f < <(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$log" | tail -n 1) || true
    if [ -z "$p" ]; then
        bh_warn "$name: no \"N passed, N failed\" line (exit $rc): counted as 1 failure"
        p=0 f=1
    fi
    PHASE_DIR[$name]=${BUILD_OF[$major]}
    # what the scripts print on a failure: their checks' FAILED and not ok
    # lines, the stress tool's VIOLATION and TOOL ERROR lines and its fatal
    # errors, a crash in a server log, and bh_die's "error:"
    WHAT_FAILED[$name]=$(grep -m 8 -E '^(==> )?(FAILED|not ok|error:)|(^|\] )(VIOLATION|TOOL ERROR|tool error|unexpected (error|result))|^bulkhead_stress: |shows a crash' "$log" || true)
    record_phase "$name" "$p" "$f" "$rc"
}

# regress, isolation, tap: make installcheck as postgres in the version's
# build.  locale: regress once more, in a copy of the build, from an
# emptied environment with LC_ALL=C (the expected output must not depend on
# who runs the suite).
phase_dir() {    # phase_dir SUITE MAJOR -> the directory the suite runs in
    if [ "$1" = locale ]; then echo "${BUILD_OF[$2]}-locale"; else echo "${BUILD_OF[$2]}"; fi
}

# phase_prepare SUITE MAJOR: locale's copy of the build (made before any
# suite runs beside it: a copy of a build in use would catch its servers'
# files half-written)
phase_prepare() {
    local dir
    dir=$(phase_dir "$1" "$2")
    [ "$1" = locale ] || return 0
    rm -rf -- "$dir"
    cp -a "${BUILD_OF[$2]}" "$dir"
}

# phase_make DIR MAJOR [PREFIX...] -- ARGS...: make installcheck ARGS in DIR
# as postgres (under the command PREFIX, if any; in MAJOR's chroot if it has
# one), output and errors on stdout
phase_make() {
    local dir=$1 major=$2
    local -a prefix=()
    shift 2
    while [ "$1" != -- ]; do prefix+=("$1"); shift; done
    shift
    # (join: phase_exec's, for a TAP run: it starts in its memory cgroup's
    # leaf "run", cgroup v2)
    bh_pg_run "$major" "$dir" "${join[@]}" \
        runuser -u postgres -- "${prefix[@]}" make installcheck PG_CONFIG="${PG_CONFIG_OF[$major]}" "$@" 2>&1
}

# TAP 220 (test/t/220_memory_oom.pl) runs a server in a memory cgroup with a
# hard limit, to see the OOM killer at work, which postgres cannot make:
# memcg_make MAJOR makes one for MAJOR's TAP run on this machine (a
# chroot's version has no /sys/fs/cgroup: there the test skips), hands it
# to postgres and names it in BULKHEAD_TEST_MEMCG; memcg_remove MAJOR moves
# what is left in it back into this script's cgroup and removes it.  Each
# version's TAP run has its own (bulkhead-oomtest-MAJOR: the limit and the
# OOM counter are a group's, and TAP runs of two versions may overlap).
# cgroup v1 (a hierarchy with the memory controller): one group, which
# postgres may enter with its own processes.  cgroup v2: a process may move
# only under a common ancestor whose cgroup.procs its user may write, so
# the group is the leaf "oom" of a subtree handed to postgres, and the TAP
# run starts in its leaf "run" (memcg_join, as root).  (A "+memory" that
# memcg_make adds to the v2 root's cgroup.subtree_control stays.)  They
# are made in the main shell before the suites start, and removed at the
# end (and by the exit trap).
MEMCG_NAME=bulkhead-oomtest
MEMCG_HOME=''
declare -A MEMCG_OF=() MEMCG_TOP_OF=() MEMCG_RUN_OF=()
memcg_make() {    # memcg_make MAJOR
    local major=$1 v1 v2 top
    if [ -n "$(bh_pg_root_of "$major")" ]; then
        bh_say "tap $major: no memory cgroup in a chroot (220_memory_oom skips)"
        return 0
    fi
    v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ { print $2; exit }' /proc/self/mounts)
    v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
    if [ -n "$v1" ]; then
        MEMCG_HOME=$v1$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; exit }' /proc/self/cgroup)
        top=$v1/$MEMCG_NAME-$major
    elif [ -n "$v2" ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null; then
        MEMCG_HOME=$v2$(awk -F: '$1 == 0 { print $3; exit }' /proc/self/cgroup)
        top=$v2/$MEMCG_NAME-$major
    else
        bh_warn "tap $major: no memory cgroup controller: 220_memory_oom skips"
        return 0
    fi
    MEMCG_HOME=${MEMCG_HOME%/}/cgroup.procs
    MEMCG_TOP_OF[$major]=$top
    memcg_remove "$major"    # (a stale one, of a run that was killed)
    MEMCG_TOP_OF[$major]=$top
    if [ -n "$v1" ]; then
        mkdir "$top" && chown -R postgres: "$top" && MEMCG_OF[$major]=$top
    else
        { grep -qw memory "$v2/cgroup.subtree_control" ||
              echo +memory >"$v2/cgroup.subtree_control"; } &&
        mkdir "$top" && echo +memory >"$top/cgroup.subtree_control" &&
        mkdir "$top/run" "$top/oom" && chown -R postgres: "$top" &&
        MEMCG_OF[$major]=$top/oom MEMCG_RUN_OF[$major]=$top/run
    fi || { bh_warn "tap $major: could not make the memory cgroup $top: 220_memory_oom skips"; memcg_remove "$major"; return 0; }
    bh_say "tap $major: memory cgroup ${MEMCG_OF[$major]} for 220_memory_oom (BULKHEAD_TEST_MEMCG)"
}
# memcg_join MAJOR: the command prefix that starts MAJOR's TAP run in its
# leaf "run" (cgroup v2), or nothing
memcg_join() {
    local run=${MEMCG_RUN_OF[$1]:-}
    [ -n "$run" ] || return 0
    # shellcheck disable=SC2016  # (the shell's own $$, $0 and $@)
    printf '%s\0' sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$run"
}
memcg_remove() {    # memcg_remove MAJOR
    local top=${MEMCG_TOP_OF[$1]:-} d pid try
    unset 'MEMCG_OF[$1]' 'MEMCG_TOP_OF[$1]' 'MEMCG_RUN_OF[$1]'
    [ -n "$top" ] && [ -d "$top" ] || return 0
    for try in 1 2 3 4 5; do
        while IFS= read -r d; do
            [ -e "$d/cgroup.procs" ] || continue
            while IFS= read -r pid; do
                echo "$pid" >"$MEMCG_HOME" 2>/dev/null || true
            done <"$d/cgroup.procs"
            rmdir -- "$d" 2>/dev/null || true
        done < <(find "$top" -depth -type d 2>/dev/null)
        [ -d "$top" ] || return 0
        sleep 0.2
    done
    bh_warn "could not remove the cgroup $top (try $try)"
}
memcg_remove_all() {
    local m
    for m in "${!MEMCG_TOP_OF[@]}"; do memcg_remove "$m"; done
}

# tap_list MAJOR DIR: the PROVE_TESTS of MAJOR's TAP run, or nothing for
# every file (see TAP_MIDDLE_VERSIONS and TAP_HOST_ONLY above)
tap_list() {
    local major=$1 dir=$2
    if [ "$SUITE" = all ] && [ -z "$ONLY_MAJOR" ] &&
       [ "$major" != "$FIRST_MAJOR" ] && [ "$major" != "$LAST_MAJOR" ]; then
        printf 'test/t/%s.pl ' "${TAP_MIDDLE_VERSIONS[@]}"
    elif [ -n "$(bh_pg_root_of "$major")" ]; then
        (cd "$dir" && printf '%s\n' test/t/*.pl |
            grep -vxF -f <(printf 'test/t/%s.pl\n' "${TAP_HOST_ONLY[@]}") | tr '\n' ' ')
    fi
}

# phase_exec SUITE MAJOR PORT LIVE: the suite's make installcheck; its
# output goes to $WORK/SUITE-MAJOR.out (and to stdout as well if LIVE is
# 1), its exit status and duration (µs) to $WORK/SUITE-MAJOR.status.
# PORT: the pg_regress suites' temporary server listens there (suites that
# run at once must not take the same default port).  A TAP run on this
# machine takes its nodes' ports under the lock directory that all of them
# share (PG_TEST_PORT_DIR: the exporter and Prometheus of 020, 160 and 161
# listen on TCP ports of their own, which two runs at once must not share).
phase_exec() {
    local suite=$1 major=$2 port=${3:-} live=${4:-0} dir t0 rc log list
    local -a args prefix=() join=()
    dir=$(phase_dir "$suite" "$major")
    case $suite in
        regress)   args=(ISOLATION= TAP_TESTS=) ;;
        isolation) args=(REGRESS= TAP_TESTS=) ;;
        tap)       args=(REGRESS= ISOLATION= "TAP_JOBS=$TAP_JOBS")
                   list=$(tap_list "$major" "$dir")
                   [ -z "$list" ] || args+=("PROVE_TESTS=$list")
                   if [ -z "$(bh_pg_root_of "$major")" ]; then
                       prefix=(env "PG_TEST_PORT_DIR=$WORK/portlock")
                       [ -z "${MEMCG_OF[$major]:-}" ] ||
                           prefix+=("BULKHEAD_TEST_MEMCG=${MEMCG_OF[$major]}")
                       mapfile -d '' -t join < <(memcg_join "$major")
                   fi ;;
        locale)    args=(ISOLATION= TAP_TESTS=)
                   prefix=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$dir" LC_ALL=C) ;;
    esac
    [ -z "$port" ] || [ "$suite" = tap ] || args+=("EXTRA_REGRESS_OPTS=--port=$port")
    log="$WORK/$suite-$major.out"
    bh_say "$suite $major: ${prefix[*]} make installcheck ${args[*]} (as postgres)"
    t0=$(bh_now_us)
    set +e
    if [ "$live" = 1 ]; then
        phase_make "$dir" "$major" "${prefix[@]}" -- "${args[@]}" | tee "$log"
        rc=${PIPESTATUS[0]}
    else
        phase_make "$dir" "$major" "${prefix[@]}" -- "${args[@]}" >"$log"
        rc=$?
    fi
    set -e
    echo "$rc $(($(bh_now_us) - t0))" >"$WORK/$suite-$major.status"
}

# phase_record SUITE MAJOR: count what phase_exec left and record it
phase_record() {
    local suite=$1 major=$2 name="$1 $2" rc=1 us=0 counts p f log="$WORK/$1-$2.out"
    # (no status: phase_exec died before the end; an exit status of 1)
    [ ! -s "$WORK/$suite-$major.status" ] || read -r rc us <"$WORK/$suite-$major.status"
    touch -- "$log"
    TIMING_NAMES+=("$name")
    TIMING_US+=("$us")
    if [ "$suite" = tap ]; then counts=$(count_prove "$log"); else counts=$(count_pg_regress "$log"); fi
    read -r p f <<<"$counts"
    PHASE_DIR[$name]=$(phase_dir "$suite" "$major")
    WHAT_FAILED[$name]=$(what_failed "$suite" "$log" "${PHASE_DIR[$name]}" || true)
    record_phase "$name" "$p" "$f" "$rc"
}

# The suites run by the schedule (SCHEDULE, below): its stages one after
# the other; a stage's lanes at once; a lane's steps one after the other;
# a step's items at once.  An item is SUITE:MAJOR.  Each item runs in a
# subshell of its own and leaves its output and status in $WORK; the
# results are counted once all have ended, in the order of the plan.  An
# item alone in the only lane of its stage shows its output as it comes;
# the others show theirs whole when they end, one at a time.

item_exec() {    # item_exec SUITE MAJOR PORT LIVE
    case $1 in
        regress|isolation|locale|tap) phase_exec "$@" ;;
        *) script_exec "$1" "$2" "$4" ;;
    esac
}
item_record() {    # item_record SUITE MAJOR
    case $1 in
        regress|isolation|locale|tap) phase_record "$1" "$2" ;;
        *) script_record "$1" "$2" ;;
    esac
}
print_out() {    # print_out FILE: under the lock of the lanes' output
    { flock 8; cat -- "$1"; } 8>>"$WORK/print.lock"
}

# run_step PORT LIVE ITEM...: the ITEMs at once, the pg_regress suites
# each on a port of its own from PORT on (their temporary servers must not
# take the same default port); those of a broken version are left out
run_step() {
    local port=$1 live=$2 item suite major i
    local -a items=() pids=()
    shift 2
    for item; do
        [ -n "${BROKEN[${item#*:}]:-}" ] || items+=("$item")
    done
    [ ${#items[@]} -gt 0 ] || return 0
    if [ ${#items[@]} -gt 1 ]; then
        live=0
        bh_say "at once: ${items[*]}"
    fi
    for item in "${items[@]}"; do
        suite=${item%%:*} major=${item#*:}
        port=$(bh_free_port "$((port + 1))")
        ( item_exec "$suite" "$major" "$port" "$live" ) &
        pids+=($!)
    done
    for i in "${!items[@]}"; do
        wait "${pids[$i]}" || true
        [ "$live" = 1 ] || print_out "$WORK/${items[$i]%%:*}-${items[$i]#*:}.out"
        bh_say "${items[$i]/:/ } ended"
    done
}

# run_lane PORT LIVE STEP...: the steps one after the other (a step: its
# items joined by "+")
run_lane() {
    local port=$1 live=$2 step
    local -a items
    shift 2
    for step; do
        IFS=+ read -r -a items <<<"$step"
        run_step "$port" "$live" "${items[@]}"
    done
}

# run_stage LANE...: the lanes at once (a lane: its steps separated by
# spaces), each with ports of its own
run_stage() {
    local i
    local -a pids=() steps
    if [ $# -eq 1 ]; then
        read -r -a steps <<<"$1"
        run_lane 55000 1 "${steps[@]}"
        return 0
    fi
    bh_say "side by side: $(printf '[%s] ' "$@")"
    for ((i = 1; i <= $#; i++)); do
        read -r -a steps <<<"${!i}"
        ( run_lane "$((55000 + 100 * i))" 0 "${steps[@]}" ) &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || true; done
}

# The names of what failed in a suite, for the summary at the very end (a
# long log may be cut in the middle, where prove and pg_regress name them):
# the failed tests, and for TAP each failed file's first "not ok" lines.
what_failed() {    # what_failed SUITE LOG DIR
    local suite=$1 log=$2 dir=$3 t
    if [ "$suite" != tap ]; then
        sed -n 's/^ *\(test \)\{0,1\}\([^ ]*\) *\.\.\. FAILED.*/\2/p; s/^not ok [0-9]* *[-+] *\([^ ]*\).*/\1/p' "$log"
        return 0
    fi
    # (a TAP log's lines start with "[time](elapsed) "; this never fails:
    # its caller runs under set -e and pipefail)
    while IFS= read -r t; do
        echo "$t"
        t=$(basename -- "$t" .pl)
        { grep -m 3 -E '^(\[[^]]*\]\([^)]*\) )?not ok' "$dir/tmp_check/log/regress_log_$t" 2>/dev/null || true; } |
            sed 's/^/    /'
    done < <(sed -n 's/^\([^ ]*\) *(Wstat: .*/\1/p' "$log")
    return 0
}

show_tail() {    # show_tail FILE LINES
    [ -s "$1" ] || return 0
    printf '\n----- %s (last %s lines) -----\n' "${1#"$WORK"/}" "$2"
    tail -n "$2" -- "$1"
}

# TAP logs are tmp_check/log/regress_log_<test> and <test>_<node>.log: is
# FILE one of a test file that prove reported as failed in LOG? (All are,
# when prove named none.)
tap_log_of_failed() {    # tap_log_of_failed FILE LOG
    local name t failed
    name=$(basename -- "$1")
    failed=$(sed -n 's/^\([^ ]*\)\.[a-z]* *(Wstat: .*/\1/p' "$2")
    [ -n "$failed" ] || return 0
    while IFS= read -r t; do
        t=$(basename -- "$t")
        case $name in "regress_log_$t" | "${t}_"*) return 0 ;; esac
    done <<<"$failed"
    return 1
}

# What explains a failure: for each suite that failed, its diffs, then its
# server and TAP logs.  pg_regress keeps its server logs in <outputdir>/log
# (log/ for regress, output_iso/log/ for isolation), TAP in tmp_check/log/.
show_failure_details() {
    local f phase suite dir
    local -a dirs
    bh_say "failure details"
    for phase in "${PHASES[@]}"; do
        [ "${FAILED[$phase]:-0}" -gt 0 ] || continue
        suite=${phase% *}
        dir=${PHASE_DIR[$phase]:-}
        bh_say "$phase ($dir)"
        case $suite in
            regress)   dirs=("$dir/log") ;;
            isolation) dirs=("$dir/output_iso/log") ;;
            locale)    dirs=("$dir/log") ;;
            tap)       dirs=("$dir/tmp_check/log") ;;
            # script suites print their own details; their last lines
            # say which part failed (the log may be cut before them)
            *)         show_tail "$WORK/$suite-${phase#* }.out" 40; continue ;;
        esac
        while IFS= read -r f; do
            show_tail "$f" 1000
        done < <(find "$dir" -maxdepth 2 -name regression.diffs -type f | sort)
        while IFS= read -r f; do
            # initdb's log only says something when initdb failed
            case $f in */initdb.log) grep -qi error "$f" || continue ;; esac
            [ "$suite" != tap ] || tap_log_of_failed "$f" "$WORK/tap-${phase#* }.out" || continue
            show_tail "$f" 80
        done < <(find "${dirs[@]}" -maxdepth 1 -type f 2>/dev/null | sort)
    done
}

summary() {
    local i
    echo
    # (one version's regress, isolation and locale run at once: the total
    # is the wall clock, less than the sum)
    bh_say "timings"
    for i in "${!TIMING_NAMES[@]}"; do
        printf '    %-20s %9s\n' "${TIMING_NAMES[$i]}" "$(bh_fmt_us "${TIMING_US[$i]}")"
    done
    printf '    %-20s %9s\n' total "$(bh_fmt_us "$(($(bh_now_us) - RUN_T0))")"
    bh_say "versions"
    for i in "${PLAN_MAJORS[@]}"; do
        printf '    %-20s %s\n' "PostgreSQL $i" "${VERSION_OF[$i]:-not run}"
    done
    bh_say "results"
    for i in "${PHASES[@]}"; do
        printf '    %-20s %s passed, %s failed\n' "$i" "${PASSED[$i]}" "${FAILED[$i]}"
    done
    for i in "${PHASES[@]}"; do
        # (a passing phase may print such lines: the stress tool's banner)
        [ "${FAILED[$i]:-0}" -gt 0 ] && [ -n "${WHAT_FAILED[$i]:-}" ] || continue
        printf '    failed in %s:\n' "$i"
        sed 's/^/        /' <<<"${WHAT_FAILED[$i]}"
    done
    if [ "$TOTAL_SKIPPED" -gt 0 ]; then
        for i in "${SKIP_REASONS[@]}"; do
            printf '    SKIPPED: %s\n' "$i"
        done
        echo "$TOTAL_PASSED passed, $TOTAL_FAILED failed, $TOTAL_SKIPPED skipped ($(IFS=';'; echo "${SKIP_REASONS[*]}"))"
    else
        echo "$TOTAL_PASSED passed, $TOTAL_FAILED failed"
    fi
}

# A step that a version's suites need (getting its server, building): on
# failure it counts as one failed test, and that version's suites are
# skipped; the other versions' go on.
declare -A BROKEN
fail_step() {    # fail_step NAME MAJOR MESSAGE
    bh_warn "$3; the suites of PostgreSQL $2 are skipped"
    PHASES+=("$1")
    PASSED[$1]=0
    FAILED[$1]=1
    TOTAL_FAILED=$((TOTAL_FAILED + 1))
    BROKEN[$2]=1
}

# 1. prerequisites: Debian's packages for every version of the plan, then
# each version's server (a source build happens once, into the cache)
t0=$(bh_now_us)
for major in "${PLAN_MAJORS[@]}"; do
    mapfile -t -O "${#BH_PACKAGES[@]}" BH_PACKAGES < <(bh_pg_packages_of "$major")
done
bh_install_prereqs
timed prerequisites "$t0"
for major in "${PLAN_MAJORS[@]}"; do
    t0=$(bh_now_us)
    rc=0
    PG_CONFIG_OF[$major]=$(bh_pg_config_of "$major") || rc=$?
    timed "postgres $major" "$t0"
    if [ "$rc" -eq "$BH_PG_UNAVAILABLE" ]; then
        # no source to be had, no chroot to be made: skip this version's
        # suites, loudly
        n=$(printf '%s\n' "${PLAN[@]}" | grep -c " $major\$" || true)
        reason=$(bh_pg_unavailable_reason "$major")
        TOTAL_SKIPPED=$((TOTAL_SKIPPED + n))
        SKIP_REASONS+=("PostgreSQL $major: $reason, $n suites not run")
        bh_warn "SKIPPING PostgreSQL $major: $reason ($n suites)"
        BROKEN[$major]=1
        continue
    fi
    if [ "$rc" -ne 0 ] ||
       ! VERSION_OF[$major]=$(bh_pg_run "$major" / "${PG_CONFIG_OF[$major]}" --version); then
        fail_step "postgres $major" "$major" "PostgreSQL $major could not be had"
        continue
    fi
    root=$(bh_pg_root_of "$major")
    VERSION_OF[$major]+=" (${root:+chroot $root: }${PG_CONFIG_OF[$major]})"
    bh_say "PostgreSQL $major: ${VERSION_OF[$major]}"
done

# 2. per version, a private copy of the tree, built and installed as root.
# From here on the run stays in $WORK, which postgres can enter.
bh_fix_tmpdir
WORK=$(bh_mktemp_dir bulkhead-test)
bh_cd_for_postgres "$WORK"
for major in "${PLAN_MAJORS[@]}"; do
    [ -z "${BROKEN[$major]:-}" ] || continue
    BUILD_OF[$major]=$WORK/bulkhead-$major
    t0=$(bh_now_us)
    bh_copy_tree "$SRC_DIR" "${BUILD_OF[$major]}"
    bh_say "build and install in ${BUILD_OF[$major]} (${VERSION_OF[$major]})"
    # (in a chroot: as root there, into its server)
    root=$(bh_pg_root_of "$major")
    in_root=()
    [ -z "$root" ] || in_root=(chroot "$root" env -u TMPDIR)
    set +e
    mount_for "$major" &&
        BH_PG_CONFIG=${PG_CONFIG_OF[$major]} bh_build_install "${BUILD_OF[$major]}" "${in_root[@]}"
    rc=$?
    set -e
    timed "build $major" "$t0"
    if [ "$rc" -ne 0 ]; then
        fail_step "build $major" "$major" "build or install for PostgreSQL $major failed (exit $rc)"
        continue
    fi
    # (the postgres user of the chroot, if any: its uid may differ)
    bh_pg_run "$major" / chown -R postgres:postgres "${BUILD_OF[$major]}"
done

# 3. the suites, each against its own temporary server, by the schedule; a
# failing suite does not stop the next one.  Before any starts: locale's
# copies of the builds, the memory cgroups of the TAP runs on this
# machine, and the TAP runs' shared port lock directory.
for item in "${PLAN[@]}"; do
    read -r suite major <<<"$item"
    [ -z "${BROKEN[$major]:-}" ] || continue
    case $suite in
        locale) phase_prepare locale "$major" ;;
        tap) memcg_make "$major" ;;
    esac
done
mkdir -p "$WORK/portlock"
chown postgres: "$WORK/portlock"
t0=$(bh_now_us)
for i in "${!SCHEDULE[@]}"; do
    IFS='|' read -r -a lanes <<<"${SCHEDULE[$i]}"
    run_stage "${lanes[@]}"
done
timed "suites (wall clock)" "$t0"
SUITES_US=${TIMING_US[-1]}
unset 'TIMING_NAMES[-1]' 'TIMING_US[-1]'
memcg_remove_all
for item in "${PLAN[@]}"; do
    read -r suite major <<<"$item"
    [ -z "${BROKEN[$major]:-}" ] || continue
    item_record "$suite" "$major"
done
TIMING_NAMES+=("suites (wall clock)")
TIMING_US+=("$SUITES_US")

mount_for ""
[ "$TOTAL_FAILED" -eq 0 ] || show_failure_details
bh_cleanup_work
summary
[ "$TOTAL_FAILED" -eq 0 ] && [ "$TOTAL_PASSED" -gt 0 ]

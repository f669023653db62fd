#!/usr/bin/env bash
# test/stress/run.sh: the stress test of bulkhead on a throwaway cluster.
#
#   bash test/stress/run.sh [CLIENTS [SECONDS]]     (as root; default 48 60)
#
# Installs what is missing (apt-get), builds and installs the extension from
# a copy of this tree, builds test/stress/bulkhead_stress, starts a
# throwaway preloaded cluster (max_connections = CLIENTS + 20) as the
# postgres user, defines four workloads (three fixed, one adaptive), and runs
# the tool: CLIENTS clients for SECONDS seconds with random acquires, waits,
# work, commits, rollbacks, savepoint rollbacks, cancels, terminations, and
# limit changes and pauses (stress_b is also switched adaptive on and off),
# while the worker moves the adaptive limits and a monitor checks the
# invariants against current_limit.  It prints the tool's summary, fails if the
# server log shows a crash, and ends with the line "N passed, N failed".
# Exit status 0 only if no invariant was violated.
#
# Then the deadlock modes (test/stress/deadlock_modes.c), short: "nocycle"
# (permits in one global order, rows locked after them: zero 40P01 allowed)
# with DEADLOCK_CLIENTS clients, and "cycle" (cycles built on purpose: one
# victim each), each for DEADLOCK_SECONDS seconds (default 32 clients, 20 s).
#
# Then the guards mode (test/stress/guard_modes.c), short: GUARD_CLIENTS
# clients (default 32) for GUARD_SECONDS seconds (default 15) mix session,
# transaction and automatic permits with SET LOCAL, plain SET and savepoints,
# and check the four guarded settings after every step against the rules.
#
# Then the budgets mode (test/stress/budget_modes.c), short: BUDGET_CLIENTS
# clients (default 64) for BUDGET_SECONDS seconds (default 20) acquire and
# release permits of the leaves of two trees of shared budgets (session,
# transaction, try_, automatic; cancels and terminations) while a changer
# moves leaves between budgets and changes reservations, weights and
# limits every 200-500 ms, and a monitor checks each tree's bounds in
# bulkhead_stats by the epoch rule (see budget_modes.c).
#
# Then the holds mode (test/stress/hold_modes.c), short: HOLD_CLIENTS
# clients (default 64) for HOLD_SECONDS seconds (default 20) hold permits
# (session, transaction, automatic; busy or idle, in a transaction too) for
# times around their workloads' max_hold (50-500 ms) while the worker logs,
# cancels, terminates and moves the runaway holders (to a plain workload and
# between two leaves of a tree, into a move_to at or over its limit), a
# changer changes max_hold, on_max_hold, move_to and the targets' limits,
# cancels and terminations come from outside, and a monitor checks the
# bounds in bulkhead_stats by the epoch rule with moves (see hold_modes.c)
# and, at the end, acquired + moved_in = released + moved_out per workload.
#
# Then the tenants mode (test/stress/tenant_modes.c), short: TENANT_CLIENTS
# clients (default 64) for TENANT_SECONDS seconds (default 20) take permits
# of two small workloads with per-key caps as callers of 10,000 keys (hot,
# warm, and many used once), with keyed and unkeyed session, transaction,
# try_ and transparent (SET LOCAL bulkhead.key) permits, cancels and
# terminations, on a cluster with bulkhead.max_keys = 24 (so that new keys
# meet a full key table, 53400); a monitor checks bulkhead_keys against
# the caps, bulkhead_activity and bulkhead_stats, and at the end that no
# key is left and the table holds bulkhead.max_keys keys again.
#
# Then the memory mode (test/stress/memory_modes.c), short: MEMORY_CLIENTS
# clients (default 64) for MEMORY_SECONDS seconds (default 20) run sorts,
# hash aggregates, cursors held open, functions whose queries need memory
# inside an outer statement's grant, CREATE INDEX on temporary tables and
# statements failing inside their sort, in workloads with a max_memory (a
# budget tree, one in shadow mode) and outside any under bulkhead.max_memory,
# with savepoints, cancels and terminations, while a changer changes
# max_memory, memory_timeout and bulkhead.max_memory every 100-400 ms and a
# monitor checks the memory granted at every level against the limits in
# force, plus the floors of the statements that may run shrunk, by an epoch
# rule after a lowering (see memory_modes.c); at the end nothing is granted
# or waiting anywhere.  bulkhead.max_memory is reset at its end.
#
# Then the priority mode (test/stress/priority_modes.c, 1.5), short:
# PRIORITY_CLIENTS clients (default 32) for PRIORITY_SECONDS seconds
# (default 15) take transaction permits at random importance, half of them
# after updating a row (queued lock holders, served ahead and over the
# limit), half before, with cancels, timeouts, terminations and real
# cycles; a monitor bounds every level by its limit plus the lock holders,
# and at the end every permit is returned.
#
# Then the lanes mode (test/stress/lane_modes.c), short: LANE_CLIENTS
# clients (default 64) for LANE_SECONDS seconds (default 20), connected as
# a plain role that a session rule sends to a web lane, run transactions
# mixing cheap and costly statements, writes and utilities, so that
# statement rules (min_cost, command) take and move their automatic permits
# between lanes that cap settings, with savepoints, failing statements,
# SET LOCAL, statement timeouts, cancels, terminations and limit changes;
# each statement's lane and capped settings are checked, the session's own
# values after each transaction, a monitor checks the lanes' bounds and
# bulkhead_activity, and at the end acquired + moved_in = released +
# moved_out per lane.  It runs last: its statement rules (deleted at its
# end) would route the other modes' clients.
#
# Longer runs: bash test/stress/run.sh 128 600
# Extra options for the tool (seed, rates; see bulkhead_stress -h):
#   STRESS_OPTS="-s 42 -C 5" bash test/stress/run.sh
# Only some of the runs (main, nocycle, cycle, guards, budgets, holds, tenants, memory, lanes), e.g. a long nocycle run:
#   STRESS_MODES=nocycle DEADLOCK_CLIENTS=64 DEADLOCK_SECONDS=600 bash test/stress/run.sh
# or a long guards run:
#   STRESS_MODES=guards GUARD_CLIENTS=64 GUARD_SECONDS=600 bash test/stress/run.sh
# or a long budgets run (10 minutes, 64 clients):
#   STRESS_MODES=budgets BUDGET_SECONDS=600 bash test/stress/run.sh
# or a long holds run (10 minutes, 64 clients):
#   STRESS_MODES=holds HOLD_SECONDS=600 bash test/stress/run.sh
# or a long tenants run (10 minutes, 64 clients):
#   STRESS_MODES=tenants TENANT_SECONDS=600 bash test/stress/run.sh
# or a long memory run (10 minutes, 64 clients):
#   STRESS_MODES=memory MEMORY_SECONDS=600 bash test/stress/run.sh
# or a long lanes run (10 minutes, 64 clients):
#   STRESS_MODES=lanes LANE_SECONDS=600 bash test/stress/run.sh
# The server runs on both CPUs (races need them); STRESS_PIN=1 pins it to
# CPU 0 as the benchmarks do.  STRESS_CONF adds a server setting, e.g.
# STRESS_CONF="log_min_messages = debug1" logs each decision of the worker
# on an adaptive limit, and the end says how close two of them came.
set -euo pipefail

STRESS_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
SRC_DIR=$(cd -- "$STRESS_DIR/../.." && pwd -P)
# shellcheck source=scripts/lib.sh
. "$SRC_DIR/scripts/lib.sh"
# read by cluster.sh: the benchmarks pin the server to CPU 0, the stress test does not
BENCH_PIN=${STRESS_PIN:-0}
# shellcheck source=test/bench/cluster.sh
. "$SRC_DIR/test/bench/cluster.sh"

CLIENTS=${1:-48}
SECONDS_=${2:-60}
case $CLIENTS$SECONDS_ in *[!0-9]*|'') bh_die "usage: bash test/stress/run.sh [CLIENTS [SECONDS]]" ;; esac
if [ "$CLIENTS" -lt 1 ] || [ "$SECONDS_" -lt 1 ]; then
    bh_die "CLIENTS and SECONDS must be at least 1"
fi

MODES=${STRESS_MODES:-main nocycle cycle guards budgets holds tenants memory priority lanes}
DL_CLIENTS=${DEADLOCK_CLIENTS:-32}
DL_SECONDS=${DEADLOCK_SECONDS:-20}
case $DL_CLIENTS$DL_SECONDS in *[!0-9]*|'') bh_die "DEADLOCK_CLIENTS and DEADLOCK_SECONDS must be numbers" ;; esac
GD_CLIENTS=${GUARD_CLIENTS:-32}
GD_SECONDS=${GUARD_SECONDS:-15}
case $GD_CLIENTS$GD_SECONDS in *[!0-9]*|'') bh_die "GUARD_CLIENTS and GUARD_SECONDS must be numbers" ;; esac
BG_CLIENTS=${BUDGET_CLIENTS:-64}
BG_SECONDS=${BUDGET_SECONDS:-20}
case $BG_CLIENTS$BG_SECONDS in *[!0-9]*|'') bh_die "BUDGET_CLIENTS and BUDGET_SECONDS must be numbers" ;; esac
HD_CLIENTS=${HOLD_CLIENTS:-64}
HD_SECONDS=${HOLD_SECONDS:-20}
case $HD_CLIENTS$HD_SECONDS in *[!0-9]*|'') bh_die "HOLD_CLIENTS and HOLD_SECONDS must be numbers" ;; esac
TN_CLIENTS=${TENANT_CLIENTS:-64}
TN_SECONDS=${TENANT_SECONDS:-20}
case $TN_CLIENTS$TN_SECONDS in *[!0-9]*|'') bh_die "TENANT_CLIENTS and TENANT_SECONDS must be numbers" ;; esac
MM_CLIENTS=${MEMORY_CLIENTS:-64}
MM_SECONDS=${MEMORY_SECONDS:-20}
case $MM_CLIENTS$MM_SECONDS in *[!0-9]*|'') bh_die "MEMORY_CLIENTS and MEMORY_SECONDS must be numbers" ;; esac
PR_CLIENTS=${PRIORITY_CLIENTS:-32}
PR_SECONDS=${PRIORITY_SECONDS:-15}
case $PR_CLIENTS$PR_SECONDS in *[!0-9]*|'') bh_die "PRIORITY_CLIENTS and PRIORITY_SECONDS must be numbers" ;; esac
LN_CLIENTS=${LANE_CLIENTS:-64}
LN_SECONDS=${LANE_SECONDS:-20}
case $LN_CLIENTS$LN_SECONDS in *[!0-9]*|'') bh_die "LANE_CLIENTS and LANE_SECONDS must be numbers" ;; esac
CONNS=$CLIENTS
[ "$DL_CLIENTS" -le "$CONNS" ] || CONNS=$DL_CLIENTS
[ "$GD_CLIENTS" -le "$CONNS" ] || CONNS=$GD_CLIENTS
[ "$BG_CLIENTS" -le "$CONNS" ] || CONNS=$BG_CLIENTS
[ "$HD_CLIENTS" -le "$CONNS" ] || CONNS=$HD_CLIENTS
[ "$TN_CLIENTS" -le "$CONNS" ] || CONNS=$TN_CLIENTS
[ "$MM_CLIENTS" -le "$CONNS" ] || CONNS=$MM_CLIENTS
[ "$LN_CLIENTS" -le "$CONNS" ] || CONNS=$LN_CLIENTS
[ "$PR_CLIENTS" -le "$CONNS" ] || CONNS=$PR_CLIENTS
CONNS=$((CONNS * 3 / 2 + 20))    # cycle mode: a watcher per pair of clients

bh_require_root

bh_reset_client_env

# what this test needs: the server, its headers, and libpq's for the tool
BH_PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev make gcc)
bh_install_prereqs
bh_fix_tmpdir

WORK=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    bench_cluster_stop
    [ -n "$WORK" ] && rm -rf -- "$WORK"
    WORK=
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WORK=$(bh_mktemp_dir bulkhead-stress)
bh_say "building and installing the extension"
bh_copy_tree "$SRC_DIR" "$WORK/src"
rm -f "$WORK/src/test/stress/bulkhead_stress"
bh_build_install "$WORK/src" >"$WORK/build.log" 2>&1 ||
    { tail -n 40 "$WORK/build.log"; bh_die "the extension did not build"; }
bh_say "building the stress tool"
make -C "$WORK/src/test/stress" PG_CONFIG="$BH_PG_CONFIG" >"$WORK/tool.log" 2>&1 ||
    { cat "$WORK/tool.log"; bh_die "the stress tool did not build"; }

bh_say "starting a throwaway cluster (max_connections = $CONNS)"
# every mode defines its own workloads, and keeps them: room for all of them;
# a small key table (only the tenants mode uses keys): 53400 when it is full;
# queryids computed, so that grant feedback (1.5) notes and applies what the
# memory mode's statements used
bench_cluster_start "max_connections = $CONNS" "bulkhead.max_workloads = 256" \
    "bulkhead.max_keys = 24" "compute_query_id = on" ${STRESS_CONF:+"$STRESS_CONF"}
trap cleanup EXIT    # bench_cluster_start set its own; ours stops it too

# B=2/Q=4, B=4/Q=8 with a statement_timeout guard, B=1/Q=0, and an adaptive
# one, B in [1, 6]/Q=6; short queue timeouts (the tool also passes its own)
WORKLOADS=stress_a,stress_b,stress_c,stress_d
bench_psql -c "INSERT INTO bulkhead_workload
    (name, max_running, max_queued, queue_timeout, statement_timeout,
     adaptive, min_running) VALUES
    ('stress_a', 2, 4, '20ms', NULL, false, 1),
    ('stress_b', 4, 8, '30ms', '15ms', false, 1),
    ('stress_c', 1, 0, '10ms', NULL, false, 1),
    ('stress_d', 6, 6, '25ms', NULL, true, 1)" >/dev/null
for w in ${WORKLOADS//,/ }; do bench_wait_loaded "$w"; done

status=0
CONNINFO="host=$BENCH_DIR port=$BENCH_PORT dbname=postgres user=postgres"
for mode in $MODES; do
    case $mode in
        main)
            bh_say "running bulkhead_stress: $CLIENTS clients, $SECONDS_ s"
            # shellcheck disable=SC2086  # STRESS_OPTS holds options
            timeout --signal=INT --kill-after=30 $((SECONDS_ + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -c "$CLIENTS" -t "$SECONDS_" \
                -d "$CONNINFO" -w "$WORKLOADS" -A stress_b ${STRESS_OPTS:-} || status=$?
            ;;
        nocycle|cycle)
            bh_say "running bulkhead_stress -D $mode: $DL_CLIENTS clients, $DL_SECONDS s"
            timeout --signal=INT --kill-after=30 $((DL_SECONDS + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -D "$mode" -c "$DL_CLIENTS" \
                -t "$DL_SECONDS" -d "$CONNINFO" || status=$?
            ;;
        guards)
            bh_say "running bulkhead_stress -D guards: $GD_CLIENTS clients, $GD_SECONDS s"
            timeout --signal=INT --kill-after=30 $((GD_SECONDS + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -D guards -c "$GD_CLIENTS" \
                -t "$GD_SECONDS" -d "$CONNINFO" || status=$?
            ;;
        budgets)
            bh_say "running bulkhead_stress -D budgets: $BG_CLIENTS clients, $BG_SECONDS s"
            # shellcheck disable=SC2086  # BUDGET_OPTS holds options (-s seed)
            timeout --signal=INT --kill-after=30 $((BG_SECONDS + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -D budgets -c "$BG_CLIENTS" \
                -t "$BG_SECONDS" -d "$CONNINFO" ${BUDGET_OPTS:-} || status=$?
            ;;
        holds)
            bh_say "running bulkhead_stress -D holds: $HD_CLIENTS clients, $HD_SECONDS s"
            # shellcheck disable=SC2086  # HOLD_OPTS holds options (-s seed)
            timeout --signal=INT --kill-after=30 $((HD_SECONDS + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -D holds -c "$HD_CLIENTS" \
                -t "$HD_SECONDS" -d "$CONNINFO" ${HOLD_OPTS:-} || status=$?
            ;;
        tenants)
            bh_say "running bulkhead_stress -D tenants: $TN_CLIENTS clients, $TN_SECONDS s"
            # shellcheck disable=SC2086  # TENANT_OPTS holds options (-s seed)
            timeout --signal=INT --kill-after=30 $((TN_SECONDS + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -D tenants -c "$TN_CLIENTS" \
                -t "$TN_SECONDS" -d "$CONNINFO" ${TENANT_OPTS:-} || status=$?
            ;;
        memory)
            bh_say "running bulkhead_stress -D memory: $MM_CLIENTS clients, $MM_SECONDS s"
            # shellcheck disable=SC2086  # MEMORY_OPTS holds options (-s seed)
            timeout --signal=INT --kill-after=30 $((MM_SECONDS + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -D memory -c "$MM_CLIENTS" \
                -t "$MM_SECONDS" -d "$CONNINFO" ${MEMORY_OPTS:-} || status=$?
            ;;
        priority)
            bh_say "running bulkhead_stress -D priority: $PR_CLIENTS clients, $PR_SECONDS s"
            timeout --signal=INT --kill-after=30 $((PR_SECONDS + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -D priority -c "$PR_CLIENTS" \
                -t "$PR_SECONDS" -d "$CONNINFO" || status=$?
            ;;
        lanes)
            bh_say "running bulkhead_stress -D lanes: $LN_CLIENTS clients, $LN_SECONDS s"
            # shellcheck disable=SC2086  # LANE_OPTS holds options (-s seed)
            timeout --signal=INT --kill-after=30 $((LN_SECONDS + 120)) \
                "$WORK/src/test/stress/bulkhead_stress" -D lanes -c "$LN_CLIENTS" \
                -t "$LN_SECONDS" -d "$CONNINFO" ${LANE_OPTS:-} || status=$?
            ;;
        *) bh_die "unknown stress mode $mode (main, nocycle, cycle, guards, budgets, holds, tenants, memory, priority, lanes)" ;;
    esac
done

# the server must not have crashed or restarted meanwhile
log="$BENCH_DIR/server.log"
if grep -Eq 'was terminated by signal|PANIC|TRAP:|exited with exit code [2-9]|terminating any other active server processes|database system was interrupted' "$log"; then
    echo "the server log shows a crash:"
    grep -E 'was terminated by signal|PANIC|TRAP:|exited with exit code [2-9]|terminating any other active server processes|database system was interrupted' "$log" | head -n 20
    [ "$status" -ne 0 ] || status=1
fi
# with log_min_messages = debug1: the worker's decisions, closest two of a workload
decisions=$(grep -c ': adaptive limit [0-9]*, next ' "$log" || true)
if [ "$decisions" -gt 0 ]; then
    closest=$(grep ': adaptive limit [0-9]*, next ' "$log" | awk '
        { split($2, t, ":"); ms = (t[1] * 3600 + t[2] * 60 + t[3]) * 1000
          match($0, /workload "[^"]*"/); w = substr($0, RSTART, RLENGTH)
          if (w in prev && ms >= prev[w] && (min == "" || ms - prev[w] < min)) min = ms - prev[w]
          prev[w] = ms }
        END { print min == "" ? "-" : min }')
    echo "the worker logged $decisions decisions on adaptive limits; the closest two of a workload came $closest ms apart"
    # the monitor's checks of an adaptive workload over spans under 50 ms assume more
    if [ "$closest" != - ] && [ "${closest%.*}" -lt 50 ]; then
        echo "warning: two decisions came less than 50 ms apart: a violation on an adaptive workload over a short span may not be one (see test/stress/README.md)"
    fi
fi
reaped=$(grep -c 'left by ended processes' "$log" || true)
[ "$reaped" -eq 0 ] ||
    echo "note: the worker freed permit entries of ended backends $reaped times (safety net; see the server log)"

bench_cluster_stop
if [ "$status" -eq 0 ]; then
    echo "1 passed, 0 failed"
else
    echo "0 passed, 1 failed"
fi
exit "$status"

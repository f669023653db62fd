#!/usr/bin/env bash
# test/bench/rules_cost.sh: what classification rules cost a one-statement
# read-only transaction once a session is classified.  pgbench -S -M
# prepared (built-in select-only script), 8 clients, as a role sent to a
# workload by a row of bulkhead_rule (after ten rows that do not match it),
# against the same as a role sent to the same workload by bulkhead.workload.
# The two alternate (rule, setting, rule, setting ...), each SECONDS long;
# the figure is the median TPS of ROUNDS runs each.  The server runs on CPU
# 0, pgbench on CPU 1 (taskset), so that they do not trade places between
# runs.  bulkhead_rule_evaluations() around every run counts how many times
# a backend matched itself against the rules: once per session (its first
# transaction; a run has 9 sessions, pgbench's 8 clients and the connection
# it opens first to read the scale), never again in steady state.
#
#   bash test/bench/rules_cost.sh [SECONDS [ROUNDS]]   (as root; default 10 5)
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then SECS=${1:-1}; ROUNDS=${2:-1}; else SECS=${1:-10}; ROUNDS=${2:-5}; fi
CLIENTS=8

bench_prepare
bench_cluster_start "max_connections = 50"
bench_psql <<'SQL' >/dev/null
INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('wide', 1000, 0);
CREATE ROLE by_setting LOGIN;
ALTER ROLE by_setting SET bulkhead.workload = 'wide';
CREATE ROLE by_rule LOGIN;
INSERT INTO bulkhead_rule (position, application_name, workload)
SELECT i, 'other-' || i || '%', 'wide' FROM generate_series(1, 10) i;
INSERT INTO bulkhead_rule (position, role, application_name, workload)
VALUES (100, 'by_rule', 'bench-%', 'wide');
SQL
bench_wait_loaded wide
runuser -u postgres -- "$BH_BINDIR/pgbench" -i -q -s 1 -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >/dev/null 2>&1 ||
    bh_die "pgbench -i failed"
bench_psql -c "GRANT SELECT ON pgbench_accounts, pgbench_branches TO by_setting, by_rule" >/dev/null
# the rule is loaded: a session of by_rule named bench-* is classified by it
for _ in $(seq 200); do
    [ "$(bench_psql -tAc "SET application_name = 'bench-check'; SET ROLE by_rule;
                          SELECT rule_position FROM bulkhead_classify()")" = 100 ] && break
    sleep 0.05
done

# run KEY: "TPS - FAILED" of one run as by_rule (rule) or by_setting
# (setting); it appends "EVALUATIONS TRANSACTIONS" to $BENCH_DIR/KEY.counts
# (bench_alternate runs it in a subshell)
evals() { bench_psql -tAc "SELECT bulkhead_rule_evaluations()"; }
run() {
    local role=by_$1 out e0 e1 tps failed xacts
    local -a length
    read -r -a length <<<"$(bench_run_length "$CLIENTS" "$SECS")"
    e0=$(evals)
    out=$(runuser -u postgres -- env PGAPPNAME="bench-$1" "${BENCH_CLIENT_CPU[@]}" \
        "$BH_BINDIR/pgbench" -n -S -M prepared -c "$CLIENTS" -j 2 "${length[@]}" -U "$role" \
        -h "$BENCH_DIR" -p "$BENCH_PORT" postgres 2>&1) || true
    e1=$(evals)
    grep -q '^tps = ' <<<"$out" || { tail -n 5 <<<"$out" >&2; bh_die "pgbench failed as $role"; }
    tps=$(awk '/^tps = / { printf "%.0f", $3 }' <<<"$out")
    failed=$(awk '/^number of failed transactions: / { print $5 }' <<<"$out")
    # "N" under -T, "N/M" under -t
    xacts=$(awk '/^number of transactions actually processed: / { split($6, n, "/"); print n[1] }' <<<"$out")
    # the psql calls of evals() evaluate nothing: the superuser is exempt
    echo "$((e1 - e0)) $xacts" >>"$BENCH_DIR/$1.counts"
    echo "$tps - ${failed:-0}"
}

bench_alternate "$ROUNDS" run rule setting
EVALS_rule=$(awk '{ printf "%s ", $1 }' "$BENCH_DIR/rule.counts")
XACTS_rule=$(awk '{ printf "%s ", $2 }' "$BENCH_DIR/rule.counts")
EVALS_setting=$(awk '{ printf "%s ", $1 }' "$BENCH_DIR/setting.counts")
XACTS_setting=$(awk '{ printf "%s ", $2 }' "$BENCH_DIR/setting.counts")
ratio=$(awk -v a="${TPS[rule]}" -v b="${TPS[setting]}" 'BEGIN { printf "%.3f", a / b }')
max_evals=$(tr ' ' '\n' <<<"$EVALS_rule" | grep . | sort -n | tail -n 1)
total_evals=$(tr ' ' '\n' <<<"$EVALS_rule" | awk '{ s += $1 } END { print s + 0 }')
total_xacts=$(tr ' ' '\n' <<<"$XACTS_rule" | awk '{ s += $1 } END { print s + 0 }')
# a run opens CLIENTS + 1 sessions: pgbench first connects once on its own
# to read the scale (SELECT count(*) FROM pgbench_branches)
SESSIONS=$((CLIENTS + 1))
steady=$(awk -v e="$total_evals" -v r="$ROUNDS" -v c="$SESSIONS" 'BEGIN { print e - r * c }')
check=$(bench_psql -tAc "SELECT acquired || ' permits granted, ' || running || ' running' FROM bulkhead_stats WHERE workload = 'wide'")

bench_header "Classification rules: a matching rule against bulkhead.workload (pgbench -S -M prepared, $CLIENTS clients, ${SECS} s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`bash test/bench/rules_cost.sh $SECS $ROUNDS\`; $BENCH_PINNING. Rule: role \`by_rule\` with application_name \`bench-rule\`, matched by the 11th of 11 rules (\`role = 'by_rule' AND application_name LIKE 'bench-%'\`); setting: role \`by_setting\` with \`ALTER ROLE ... SET bulkhead.workload\`. Both take a permit of the same workload (B = 1000, never full) at every transaction."
echo
echo "| sent by | TPS (median) | runs | rule evaluations per run | transactions per run |"
echo "|---|---:|---|---|---|"
echo "| a rule | ${TPS[rule]} | ${RUNS_TPS[rule]} | ${EVALS_rule% } | ${XACTS_rule% } |"
echo "| bulkhead.workload | ${TPS[setting]} | ${RUNS_TPS[setting]} | ${EVALS_setting% } | ${XACTS_setting% } |"
echo
echo "rule / setting: $ratio. Rule evaluations: $total_evals over $total_xacts transactions, at most $max_evals in a run of $SESSIONS sessions ($CLIENTS clients and pgbench's first connection, which reads the scale: one evaluation per session, at its first transaction); beyond the first transaction of each session: $steady, i.e. $(awk -v s="$steady" -v x="$total_xacts" 'BEGIN { printf "%.6f", (x > 0 ? s / x : 0) }') per transaction. Failed transactions: $((FAILED[rule] + FAILED[setting])). bulkhead_stats of the workload: $check."
echo
awk -v r="$ratio" 'BEGIN { exit !(r >= 0.97) }' && met=0 || met=1
bench_target "a matching rule costs within 3% of bulkhead.workload (${ratio}×)" $met
[ "$steady" = 0 ] && met=0 || met=1
bench_target "0 rule evaluations per transaction in steady state ($steady beyond the first transaction of each session)" $met

#!/usr/bin/env bash
# monitoring/prometheus/tests/run.sh: the alert rules, checked with promtool
# (Debian's prometheus package):
#
#   1. promtool check rules ../bulkhead-alerts.yaml
#   2. promtool test rules bulkhead-alerts.test.yaml (fixture series ->
#      the alerts that must fire, and those that must not)
#   3. the unit tests catch broken rules: in a copy of the rules broken on
#      purpose, promtool test rules must fail, and say so about the alert
#      and workload concerned:
#      - the rejection rule reads a metric that does not exist
#        (rejected_total for rejected_full_total): BulkheadCallersRejected;
#      - BulkheadAdaptiveLimitAtMin no longer asks for callers waiting
#        (average queue >= 0 instead of >= 1): it fires for "idle", at
#        min_running with nobody waiting (a firing alert no test expects);
#      - BulkheadAdaptiveLimitAtMin holds 10 minutes instead of 15: it fires
#        for "dip", at min_running for 14 minutes only (likewise);
#      - BulkheadAdaptiveLimitAtMin reads a misspelt min_running metric: it
#        never fires ("hot" is missing at 15 minutes);
#      - BulkheadMemoryWaits fires on any wait (average > 0 instead of
#        >= 1): it fires for "spiky", half a statement waiting on average;
#      - BulkheadMemoryWaits tests the gauge, not its 5-minute average: it
#        never fires for "bursty", whose samples fall to 0 every third minute
#        while two statements wait on average;
#      - BulkheadMemoryWaits holds 5 minutes instead of 10: it fires for
#        "reports" at 9 minutes.
#   4. the Grafana dashboard against the queries:
#      monitoring/grafana/check.py (its panels read only metrics that
#      bulkhead-queries.yaml exports, and show every one of them but those
#      it lists as unused on purpose), and that it rejects copies broken on
#      purpose:
#      - a panel reads bulkhead_rejected_total, which no query exports;
#      - the queries export one more gauge, bulkhead_memory_spare_gauge, that
#        no panel shows.
#
# Ends with "N passed, N failed"; exit status 0 only if all passed.
#
#   bash monitoring/prometheus/tests/run.sh     (any user; promtool and
#                                                python3 needed)
set -euo pipefail

DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
RULES=$DIR/../bulkhead-alerts.yaml
TESTS=$DIR/bulkhead-alerts.test.yaml
PROMTOOL=${PROMTOOL:-promtool}
PYTHON=${PYTHON:-python3}
QUERIES=$DIR/../bulkhead-queries.yaml
GRAFANA=$DIR/../../grafana

passed=0
failed=0
check() {    # check NAME STATUS
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1)); echo "ok: $1"
    else
        failed=$((failed + 1)); echo "FAILED: $1"
    fi
}

if ! command -v "$PROMTOOL" >/dev/null; then
    echo "FAILED: promtool not found: apt-get install prometheus"
    echo "0 passed, 1 failed"
    exit 1
fi

rc=0
"$PROMTOOL" check rules "$RULES" || rc=$?
check "promtool check rules bulkhead-alerts.yaml" "$rc"

rc=0
"$PROMTOOL" test rules "$TESTS" || rc=$?
check "promtool test rules bulkhead-alerts.test.yaml" "$rc"

# Deliberately broken copies: rules and tests side by side in a scratch
# directory, the tests pointing at the broken rules.
tmp=$(mktemp -d -t bulkhead-alerts.XXXXXX)
trap 'rm -rf -- "$tmp"' EXIT
mkdir "$tmp/tests"
cp "$TESTS" "$tmp/tests/"

# broken NAME SED_SCRIPT PATTERN: the rules edited by SED_SCRIPT must differ
# from the real ones, still be valid, and fail the unit tests with an output
# that matches PATTERN (grep -E).
broken() {
    local name=$1 script=$2 pattern=$3 out rc=0
    sed "$script" "$RULES" >"$tmp/bulkhead-alerts.yaml"
    if cmp -s "$RULES" "$tmp/bulkhead-alerts.yaml"; then
        echo "sed '$script' no longer changes the rules file: fix this test"
        rc=1
    else
        "$PROMTOOL" check rules "$tmp/bulkhead-alerts.yaml" >/dev/null ||
            { echo "the broken copy is not even valid"; rc=1; }
        out=$("$PROMTOOL" test rules "$tmp/tests/bulkhead-alerts.test.yaml" 2>&1) &&
            { echo "promtool test rules passed with the broken rule"; rc=1; }
        printf '%s\n' "$out" | sed -n '1,4p'
        if grep -Eq -- "$pattern" <<<"$out"; then
            echo "    ..."
            grep -E -m1 -- "$pattern" <<<"$out" | cut -c1-240
        else
            echo "the failure does not match: $pattern"; rc=1
        fi
    fi
    check "$name" "$rc"
}

broken "a rule reading a wrong metric name fails the unit tests" \
    's/rate(bulkhead_rejected_full_total\[/rate(bulkhead_rejected_total[/' \
    'alertname: BulkheadCallersRejected'
broken "BulkheadAdaptiveLimitAtMin without its queue condition fails the unit tests" \
    's/avg_over_time(bulkhead_queued\[5m\]) >= 1$/avg_over_time(bulkhead_queued[5m]) >= 0/' \
    'alertname="BulkheadAdaptiveLimitAtMin".*workload="idle"'
broken "BulkheadAdaptiveLimitAtMin held 10 minutes instead of 15 fails the unit tests" \
    '/alert: BulkheadAdaptiveLimitAtMin/,/for:/s/for: 15m/for: 10m/' \
    'alertname="BulkheadAdaptiveLimitAtMin".*workload="dip"'
broken "BulkheadAdaptiveLimitAtMin on a misspelt metric fails the unit tests" \
    's/bulkhead_current_limit == bulkhead_config_min_running/bulkhead_current_limit == bulkhead_config_min_runing/' \
    'alertname: BulkheadAdaptiveLimitAtMin, time: 15m'
broken "BulkheadMemoryWaits on any wait at all fails the unit tests" \
    's/avg_over_time(bulkhead_memory_waiting\[5m\]) >= 1$/avg_over_time(bulkhead_memory_waiting[5m]) > 0/' \
    'alertname="BulkheadMemoryWaits".*workload="spiky"'
broken "BulkheadMemoryWaits on the gauge instead of its average fails the unit tests" \
    's/avg_over_time(bulkhead_memory_waiting\[5m\]) >= 1$/bulkhead_memory_waiting >= 1/' \
    'alertname: BulkheadMemoryWaits, time: 10m'
broken "BulkheadMemoryWaits held 5 minutes instead of 10 fails the unit tests" \
    '/alert: BulkheadMemoryWaits/,/for:/s/for: 10m/for: 5m/' \
    'alertname="BulkheadMemoryWaits".*workload="reports"'

# The dashboard. check.py's own lines are indented, so that its "FAILED:"
# lines from the broken copies (expected) and its "N passed, N failed" are
# not taken for this script's.
dashboard_check() {    # dashboard_check QUERIES DASHBOARD -> check.py's status
    local rc=0 out
    out=$("$PYTHON" "$GRAFANA/check.py" --queries "$1" --dashboard "$2" 2>&1) || rc=$?
    printf '%s\n' "$out" | sed 's/^/    /'
    return "$rc"
}

# broken_dashboard NAME FILE SED_SCRIPT PATTERN: a copy of FILE (the queries
# or the dashboard) edited by SED_SCRIPT must differ from it, and check.py
# on it must fail with an output that matches PATTERN (grep -E), while the
# queries file it reads still declares every column its SQL returns (the
# copy is broken only in the way meant).
broken_dashboard() {
    local name=$1 file=$2 script=$3 pattern=$4 rc=0 out queries dashboard
    mkdir -p "$tmp/grafana"
    queries=$QUERIES dashboard=$GRAFANA/bulkhead-dashboard.json
    sed "$script" "$file" >"$tmp/grafana/$(basename "$file")"
    if cmp -s "$file" "$tmp/grafana/$(basename "$file")"; then
        echo "sed '$script' no longer changes $(basename "$file"): fix this test"
        rc=1
    else
        case $file in
            "$QUERIES") queries=$tmp/grafana/$(basename "$file") ;;
            *) dashboard=$tmp/grafana/$(basename "$file") ;;
        esac
        out=$(dashboard_check "$queries" "$dashboard") &&
            { echo "check.py passed the broken copy"; rc=1; }
        if grep -Eq -- "$pattern" <<<"$out"; then
            grep -E -m1 -- "$pattern" <<<"$out" | cut -c1-240
        else
            printf '%s\n' "$out"
            echo "the failure does not match: $pattern"; rc=1
        fi
        grep -q "ok: bulkhead-queries.yaml: each query's SQL columns" <<<"$out" ||
            { echo "the queries copy is malformed: $(grep -A1 'SQL columns' <<<"$out")"; rc=1; }
    fi
    rm -rf -- "$tmp/grafana"
    check "$name" "$rc"
}

if ! command -v "$PYTHON" >/dev/null; then
    check "$PYTHON not found, monitoring/grafana/check.py not run: apt-get install python3" 1
else
    rc=0
    dashboard_check "$QUERIES" "$GRAFANA/bulkhead-dashboard.json" || rc=$?
    check "the Grafana dashboard reads only exported metrics and shows them all (check.py)" "$rc"

    broken_dashboard "a dashboard reading a metric the queries do not export fails check.py" \
        "$GRAFANA/bulkhead-dashboard.json" \
        's/bulkhead_rejected_full_total/bulkhead_rejected_total/' \
        'bulkhead_rejected_total is not exported by the queries'
    broken_dashboard "queries exporting a metric no panel shows fail check.py" \
        "$QUERIES" \
        's/ AS wait_p99_seconds$/ AS wait_p99_seconds,\n           0 AS spare_gauge/; /description: "99th percentile of the waits for a memory grant/s/$/\n    - spare_gauge:\n        usage: "GAUGE"\n        description: "A gauge no panel shows"/' \
        'bulkhead_memory_spare_gauge: exported \(query bulkhead_memory\), shown by no panel'
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

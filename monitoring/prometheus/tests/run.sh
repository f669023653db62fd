#!/usr/bin/env bash
# monitoring/prometheus/tests/run.sh: the alert rules, checked with promtool
# (Debian's prometheus package):
#
#   1. promtool check rules ../bulkhead-alerts.yaml
#   2. promtool test rules bulkhead-alerts.test.yaml (fixture series ->
#      the alerts that must fire, and those that must not)
#   3. the unit tests catch a broken rule: in a copy of the rules whose
#      rejection rule reads a metric that does not exist (rejected_total for
#      rejected_full_total), promtool test rules must fail, and say so about
#      BulkheadCallersRejected.
#
# Ends with "N passed, N failed"; exit status 0 only if all passed.
#
#   bash monitoring/prometheus/tests/run.sh     (any user; promtool needed)
set -euo pipefail

DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
RULES=$DIR/../bulkhead-alerts.yaml
TESTS=$DIR/bulkhead-alerts.test.yaml
PROMTOOL=${PROMTOOL:-promtool}

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

# A deliberately broken copy: rules and tests side by side in a scratch
# directory, the tests pointing at the broken rules.
tmp=$(mktemp -d -t bulkhead-alerts.XXXXXX)
trap 'rm -rf -- "$tmp"' EXIT
mkdir "$tmp/tests"
sed 's/rate(bulkhead_rejected_full_total\[/rate(bulkhead_rejected_total[/' "$RULES" \
    >"$tmp/bulkhead-alerts.yaml"
cp "$TESTS" "$tmp/tests/"
rc=0
if cmp -s "$RULES" "$tmp/bulkhead-alerts.yaml"; then
    echo "the rules file no longer has rate(bulkhead_rejected_full_total[: fix this test"
    rc=1
else
    "$PROMTOOL" check rules "$tmp/bulkhead-alerts.yaml" >/dev/null ||
        { echo "the broken copy is not even valid"; rc=1; }
    out=$("$PROMTOOL" test rules "$tmp/tests/bulkhead-alerts.test.yaml" 2>&1) &&
        { echo "promtool test rules passed with the broken rule"; rc=1; }
    printf '%s\n' "$out" | sed -n '1,12p'
    grep -q 'alertname: BulkheadCallersRejected' <<<"$out" ||
        { echo "the failure does not name BulkheadCallersRejected"; rc=1; }
fi
check "a rule reading a wrong metric name fails the unit tests" "$rc"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

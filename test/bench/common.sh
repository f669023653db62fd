# shellcheck shell=bash
# test/bench/common.sh: what every benchmark script sources first:
#   . "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# Sets $here (test/bench) and $top (the tree), and loads scripts/lib.sh,
# cluster.sh (builds and the throwaway cluster) and measure.sh (pgbench
# runs, medians, reports).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib.sh
. "$top/scripts/lib.sh"
# shellcheck source=cluster.sh
. "$here/cluster.sh"
# shellcheck source=measure.sh
. "$here/measure.sh"

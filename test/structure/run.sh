#!/usr/bin/env bash
# test/structure/run.sh: the module structure of src/, checked on the built
# objects (doc/operations.md, "The module map", lists the modules).
#
#   1. The calls between modules: module A depends on module B when an
#      undefined symbol of A's object (nm -u) is defined by B's.  Every such
#      edge must be listed in modules.allowed, and the graph must have no
#      cycle (tsort).  A new edge is a design decision: add it to the list in
#      the same commit, where a reviewer sees it.  The graph of #include
#      "..." between modules must have no cycle either, and base.h (the
#      ground floor) includes no header of the project.
#   2. No source file over 600 lines.
#   3. No function over 80 lines (its body, in PostgreSQL's layout: the
#      braces at column 0) unless the comment above it gives the reason in
#      a line that starts with "Long:".
#
#   bash test/structure/run.sh [OBJDIR]     (default: src, after make)
#
# Prints one "ok"/"not ok" line per check, then "N passed, N failed" (as the
# test command's phases do), and exits non-zero on a failure.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
objdir=${1:-$top/src}
allowed=$here/modules.allowed
fail=0
passed=0
failed=0
ok() { echo "ok - $*"; passed=$((passed + 1)); }
notok() { echo "not ok - $*"; fail=1; failed=$((failed + 1)); }

shopt -s nullglob
objs=("$objdir"/*.o)
if [ ${#objs[@]} -eq 0 ]; then
    echo "not ok - no object files in $objdir: build first (make)"
    echo "0 passed, 1 failed"
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# symbols defined and used by each module ("D module symbol", "U module
# symbol"), then one line per edge: "from to symbol..."
for o in "${objs[@]}"; do
    m=$(basename "$o" .o)
    nm --defined-only -g "$o" | awk -v m="$m" '{ print "D", m, $3 }'
    nm -u "$o" | awk -v m="$m" '{ print "U", m, $2 }'
done >"$tmp/symbols"
awk '
    $1 == "D" { owner[$3] = $2; next }
    { used[NR] = $2 " " $3 }
    END {
        for (i in used) {
            split(used[i], f, " ")
            if ((f[2] in owner) && owner[f[2]] != f[1])
                edges[f[1] " " owner[f[2]]] = edges[f[1] " " owner[f[2]]] " " f[2]
        }
        for (e in edges) print e edges[e]
    }' "$tmp/symbols" | sort >"$tmp/edges"

# 1. edges against the allowed list, then cycles
grep -v '^[[:space:]]*\(#\|$\)' "$allowed" | awk '{print $1" "$2}' | sort -u >"$tmp/allowed"
awk '{print $1" "$2}' "$tmp/edges" | sort -u >"$tmp/actual"
extra=$(comm -23 "$tmp/actual" "$tmp/allowed")
if [ -z "$extra" ]; then
    ok "every call between modules is in modules.allowed ($(wc -l <"$tmp/actual") edges)"
else
    while read -r a b; do
        echo "not ok - module $a calls module $b, which modules.allowed does not allow: $(grep "^$a $b " "$tmp/edges" | cut -d' ' -f3-)"
    done <<<"$extra"
    fail=1 failed=$((failed + 1))
fi
unused=$(comm -13 "$tmp/actual" "$tmp/allowed")
[ -n "$unused" ] && echo "# allowed but not used: $(echo "$unused" | tr '\n' ',' | sed 's/,$//')"
if tsort "$tmp/actual" >/dev/null 2>"$tmp/tsort.err"; then
    ok "the module graph has no cycle"
else
    notok "the module graph has a cycle: $(grep -v 'input contains a loop' "$tmp/tsort.err" | sed 's/^tsort: //' | tr '\n' ' ')"
fi

# 1b. the include graph: module A includes module B when A.c or A.h has
# `#include "B.h"` (a header without a .c is a module of its own).  It must
# have no cycle either, so that a module's header can be read, and the
# module tested, from the ground floor up; base.h, the ground floor, includes
# no header of the project.
for f in "$top"/src/*.c "$top"/src/*.h; do
    m=$(basename "$f"); m=${m%.*}
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$f" |
        while read -r h; do
            [ -f "$top/src/$h.h" ] || continue
            [ "$h" = "$m" ] || echo "$m $h"
        done
done | sort -u >"$tmp/includes"
if tsort "$tmp/includes" >/dev/null 2>"$tmp/tsort_inc.err"; then
    ok "the include graph has no cycle ($(wc -l <"$tmp/includes") edges)"
else
    notok "the include graph has a cycle: $(grep -v 'input contains a loop' "$tmp/tsort_inc.err" | sed 's/^tsort: //' | tr '\n' ' ')"
fi
if [ ! -f "$top/src/base.h" ]; then
    notok "src/base.h, the ground floor every module includes, is missing"
elif grep -q '^base ' "$tmp/includes"; then
    notok "base.h includes a header of the project: $(grep '^base ' "$tmp/includes" | cut -d' ' -f2 | tr '\n' ' ')"
else
    ok "base.h includes no header of the project"
fi

# 2. file length
long_files=0
for f in "$top"/src/*.c; do
    n=$(wc -l <"$f")
    if [ "$n" -gt 600 ]; then
        echo "not ok - $(basename "$f") has $n lines (at most 600)"
        long_files=1
    fi
done
if [ $long_files = 0 ]; then ok "no source file over 600 lines"; else fail=1 failed=$((failed + 1)); fi

# 3. function length
awk '
    FNR == 1 { comment = ""; in_comment = 0 }
    /^\/\*/ { in_comment = 1; comment = "" }
    in_comment { comment = comment "\n" $0 }
    /\*\// { in_comment = 0 }
    /^[A-Za-z_][A-Za-z0-9_]*\(/ { name = $0; sub(/\(.*/, "", name); reason = (comment ~ /\n \* Long:/) }
    /^\{/ { start = FNR }
    /^\}/ {
        if (start) {
            n = FNR - start - 1
            if (n > 80 && !reason)
                printf "%s:%d %s has %d lines\n", FILENAME, start, name, n
            start = 0; comment = ""
        }
    }
' "$top"/src/*.c >"$tmp/long"
if [ -s "$tmp/long" ]; then
    while read -r line; do echo "not ok - function over 80 lines without a \"Long:\" reason: ${line#"$top"/}"; done <"$tmp/long"
    fail=1 failed=$((failed + 1))
else
    ok "no function over 80 lines without a reason"
fi

echo "$passed passed, $failed failed"
exit $fail

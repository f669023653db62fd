#!/usr/bin/env bash
# test/structure/run.sh: the module structure of src/, checked on the built
# objects (README.md, "How it works", has the module map).
#
#   1. The calls between modules: module A depends on module B when an
#      undefined symbol of A's object (nm -u) is defined by B's.  Every such
#      edge must be listed in modules.allowed, and the graph must have no
#      cycle (tsort).  A new edge is a design decision: add it to the list in
#      the same commit, where a reviewer sees it.
#   2. No source file over 600 lines.
#   3. No function over 80 lines (its body, in PostgreSQL's layout: the
#      braces at column 0) unless the comment above it gives the reason in
#      a line that starts with "Long:".
#
#   bash test/structure/run.sh [OBJDIR]     (default: src, after make)
#
# Prints one "ok"/"not ok" line per check and exits non-zero on a failure.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
objdir=${1:-$top/src}
allowed=$here/modules.allowed
fail=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fail=1; }

shopt -s nullglob
objs=("$objdir"/*.o)
if [ ${#objs[@]} -eq 0 ]; then
    echo "not ok - no object files in $objdir: build first (make)"
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# symbols defined and used by each module
for o in "${objs[@]}"; do
    m=$(basename "$o" .o)
    nm --defined-only -g "$o" | awk '{print $3}' | sort -u >"$tmp/$m.def"
    nm -u "$o" | awk '{print $2}' | sort -u >"$tmp/$m.und"
done
: >"$tmp/edges"
for u in "$tmp"/*.und; do
    a=$(basename "$u" .und)
    for d in "$tmp"/*.def; do
        b=$(basename "$d" .def)
        [ "$a" = "$b" ] && continue
        syms=$(comm -12 "$u" "$d" | tr '\n' ' ')
        [ -n "$syms" ] && echo "$a $b $syms" >>"$tmp/edges"
    done
done

# 1. edges against the allowed list, then cycles
grep -v '^[[:space:]]*\(#\|$\)' "$allowed" | awk '{print $1" "$2}' | sort -u >"$tmp/allowed"
awk '{print $1" "$2}' "$tmp/edges" | sort -u >"$tmp/actual"
extra=$(comm -23 "$tmp/actual" "$tmp/allowed")
if [ -z "$extra" ]; then
    ok "every call between modules is in modules.allowed ($(wc -l <"$tmp/actual") edges)"
else
    while read -r a b; do
        notok "module $a calls module $b, which modules.allowed does not allow: $(grep "^$a $b " "$tmp/edges" | cut -d' ' -f3-)"
    done <<<"$extra"
fi
unused=$(comm -13 "$tmp/actual" "$tmp/allowed")
[ -n "$unused" ] && echo "# allowed but not used: $(echo "$unused" | tr '\n' ',' | sed 's/,$//')"
if tsort "$tmp/actual" >/dev/null 2>"$tmp/tsort.err"; then
    ok "the module graph has no cycle"
else
    notok "the module graph has a cycle: $(grep -v 'input contains a loop' "$tmp/tsort.err" | sed 's/^tsort: //' | tr '\n' ' ')"
fi

# 2. file length
long_files=0
for f in "$top"/src/*.c; do
    n=$(wc -l <"$f")
    if [ "$n" -gt 600 ]; then
        notok "$(basename "$f") has $n lines (at most 600)"
        long_files=1
    fi
done
[ $long_files = 0 ] && ok "no source file over 600 lines"

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
    while read -r line; do notok "function over 80 lines without a \"Long:\" reason: ${line#"$top"/}"; done <"$tmp/long"
else
    ok "no function over 80 lines without a reason"
fi

exit $fail

#!/usr/bin/env bash
# test/structure/run.sh: the structure of src/, checked on the built objects
# and the sources (doc/operations.md, "The module map", lists the modules;
# each folder's README.md says what it owns).
#
#   1. Modules.  A module is a source file src/FOLDER/NAME.c with its header
#      src/FOLDER/NAME.h, which it includes first (a header without a .c is
#      a module of its own; src/bulkhead.c and bulkhead.h stand in src/).
#      Module names are unique across folders.  Every global symbol that a
#      module's object defines for the others is declared in the header of
#      its own name (the symbols PostgreSQL finds by itself are exempt: the
#      SQL-callable functions, which PG_FUNCTION_INFO_V1 declares, _PG_init
#      and the magic block); every header of src/ is a module's own.
#   2. The calls between modules: module A depends on module B when an
#      undefined symbol of A's object (nm -u) is defined by B's.  Every such
#      edge must be listed in modules.allowed, and the graph must have no
#      cycle (tsort).  A new edge is a design decision: add it to the list in
#      the same commit, where a reviewer sees it.  The graph of #include
#      "FOLDER/NAME.h" between modules must have no cycle either, and
#      shmem/base.h (the ground floor) includes no header of the project.
#   3. The folders: the calls and the includes between modules of two
#      folders run only down the order of test/structure/folders (no arrow
#      back up, hence no cycle between folders); every folder of src/ is
#      listed there and has a README.md.
#   4. No source file over 600 lines.
#   5. No function over 80 lines (its body, in PostgreSQL's layout: the
#      braces at column 0) unless the comment above it gives the reason in
#      a line that starts with "Long:".
#
#   bash test/structure/run.sh [OBJDIR]     (default: src, after make)
#
# Prints one "ok"/"not ok" line per check, the folder-level arrows as "#"
# lines, then "N passed, N failed" (as the test command's phases do), and
# exits non-zero on a failure.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
src=$top/src
objdir=${1:-$src}
allowed=$here/modules.allowed
fail=0
passed=0
failed=0
ok() { echo "ok - $*"; passed=$((passed + 1)); }
notok() { echo "not ok - $*"; fail=1; failed=$((failed + 1)); }
# notok_lines TITLE FILE: one "not ok" for a list, each of its lines shown
notok_lines() {
    echo "not ok - $1"
    sed 's/^/#   /' "$2"
    fail=1 failed=$((failed + 1))
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the sources: "module folder path" for each .c and .h ("." for src/ itself)
(cd "$src" && find . -name '*.[ch]' -type f | sed 's|^\./||' | sort) |
    while IFS= read -r f; do
        d=$(dirname "$f"); m=$(basename "$f"); m=${m%.*}
        echo "$m $d $f"
    done >"$tmp/sources"
mapfile -t objs < <(find "$objdir" -name '*.o' -type f | sort)
if [ ${#objs[@]} -eq 0 ]; then
    echo "not ok - no object files under $objdir: build first (make)"
    echo "0 passed, 1 failed"
    exit 1
fi
# every source built, no object without its source (one left by a build
# from before a module moved or was renamed: make clean)
awk '$3 ~ /\.c$/ { sub(/\.c$/, ".o", $3); print $3 }' "$tmp/sources" | sort >"$tmp/want_objs"
printf '%s\n' "${objs[@]}" | sed "s|^$objdir/||" | sort >"$tmp/have_objs"
missing=$(comm -23 "$tmp/want_objs" "$tmp/have_objs")
stale=$(comm -13 "$tmp/want_objs" "$tmp/have_objs")
if [ -z "$missing$stale" ]; then
    ok "one object per source file ($(wc -l <"$tmp/want_objs"))"
else
    notok "objects and sources differ: not built: ${missing:-none}; no source (stale: make clean): $(echo ${stale:-none})"
    mapfile -t objs < <(sed "s|^|$objdir/|" "$tmp/want_objs" | while read -r o; do [ -f "$o" ] && echo "$o"; done)
fi
# src/ itself holds the extension's entry alone; every other module is in
# a folder
root=$(awk '$2 == "." && $3 != "bulkhead.c" && $3 != "bulkhead.h" { print $3 }' "$tmp/sources")
if [ -z "$root" ]; then
    ok "src/ itself holds bulkhead.c and bulkhead.h alone"
else
    notok "modules in src/ itself, outside every folder: $(echo $root)"
fi

# the module of each object, and its folder (from the source beside it)
awk '{print $1, $2}' "$tmp/sources" | sort -u >"$tmp/modules"
dupes=$(awk '{print $1}' "$tmp/modules" | sort | uniq -d)
if [ -z "$dupes" ]; then
    ok "module names are unique across the folders ($(wc -l <"$tmp/modules") modules)"
else
    notok "module names in two folders: $(echo "$dupes" | tr '\n' ' ')"
fi
folder_of() { awk -v m="$1" '$1 == m { print $2; exit }' "$tmp/modules"; }

# 1. symbols defined and used by each module ("D module symbol", "U module
# symbol")
for o in "${objs[@]}"; do
    m=$(basename "$o" .o)
    nm --defined-only -g "$o" | awk -v m="$m" '{ print "D", m, $3 }'
    nm -u "$o" | awk -v m="$m" '{ print "U", m, $2 }'
done >"$tmp/symbols"

# what a module offers: its global symbols but the SQL-callable functions
# (those with a pg_finfo_ twin), pg_finfo_ themselves, _PG_init and the
# magic block; each must be declared in src/FOLDER/MODULE.h, and in no
# other header
awk '$1 == "D" { print $2, $3 }' "$tmp/symbols" | sort -u >"$tmp/defined"
awk '$2 ~ /^pg_finfo_/ { sub(/^pg_finfo_/, "", $2); print $1, $2 }' "$tmp/defined" |
    sort -u >"$tmp/sqlfuncs"
# what each header declares: "header name" for each line of type words
# followed by a name and ( ; or [ (not a statement of an inline function's
# body that calls it, nor a comment)
awk '$3 ~ /\.h$/ { print $3 }' "$tmp/sources" | while read -r h; do
    perl -ne 'next if /^\s*(return|else|if|case|while)\b/;
              print "'"$h"' $1\n" if /^\s*[A-Za-z_][A-Za-z0-9_ *]*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)\s*(?:[(;[]|$)/' "$src/$h"
done | sort -u >"$tmp/declared"
: >"$tmp/undeclared"
while read -r m s; do
    case $s in pg_finfo_* | _PG_init | Pg_magic_func) continue ;; esac
    grep -qxF "$m $s" "$tmp/sqlfuncs" && continue
    own=$(folder_of "$m")/$m.h
    others=$(awk -v s="$s" -v own="$own" '$2 == s && $1 != own { print $1 }' "$tmp/declared" | tr '\n' ' ')
    if [ ! -f "$src/$own" ]; then
        echo "$m defines $s but has no header $own"
    elif ! grep -qxF "$own $s" "$tmp/declared"; then
        echo "$m defines $s, which $own does not declare${others:+; declared in $others}"
    elif [ -n "$others" ]; then
        echo "$m defines $s, declared in $own and again in $others"
    fi
done <"$tmp/defined" >>"$tmp/undeclared"
if [ -s "$tmp/undeclared" ]; then
    notok_lines "every module declares what it offers in the header of its own name" "$tmp/undeclared"
else
    ok "every module declares what it offers in the header of its own name"
fi

# every module has a header of its own name beside it, which its .c
# includes first
awk '$3 ~ /\.c$/ { print $1, $2, $3 }' "$tmp/sources" | while read -r m d c; do
    h=$m.h; [ "$d" = . ] || h=$d/$m.h
    if [ ! -f "$src/$h" ]; then
        echo "$c has no header $h"
    elif [ "$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src/$c" | head -n 1)" != "$h" ]; then
        echo "$c does not include $h first"
    fi
done >"$tmp/noheader"
if [ -s "$tmp/noheader" ]; then
    notok_lines "every module has a header of its own name, included first" "$tmp/noheader"
else
    ok "every module has a header of its own name, included first"
fi

# every header is a module's own: no header names a module that has its .c
# in another folder
awk '$3 ~ /\.h$/ { print $1, $2 }' "$tmp/sources" | while read -r m d; do
    other=$(awk -v m="$m" -v d="$d" '$1 == m && $2 != d && $3 ~ /\.c$/ { print $3 }' "$tmp/sources")
    [ -z "$other" ] || echo "$d/$m.h is not in the folder of $other"
done >"$tmp/strayheaders"
if [ -s "$tmp/strayheaders" ]; then
    notok_lines "every header stands beside its module" "$tmp/strayheaders"
else
    ok "every header stands beside its module"
fi

# 2. the calls: one line per edge, "from to symbol..."
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
[ -z "$unused" ] || echo "# allowed but not used: $(echo "$unused" | tr '\n' ',' | sed 's/,$//')"
if tsort "$tmp/actual" >/dev/null 2>"$tmp/tsort.err"; then
    ok "the module graph has no cycle"
else
    notok "the module graph has a cycle: $(grep -v 'input contains a loop' "$tmp/tsort.err" | sed 's/^tsort: //' | tr '\n' ' ')"
fi

# the include graph: module A includes module B when a file of A has
# `#include "FOLDER/B.h"` and src/FOLDER/B.h exists (a project header is
# always named with its folder)
while read -r m d f; do
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$src/$f" |
        while read -r h; do
            [ -f "$src/$h.h" ] || continue
            b=$(basename "$h")
            [ "$b" = "$m" ] || echo "$m $b"
        done
done <"$tmp/sources" | sort -u >"$tmp/includes"
# a project header is included in quotes by its path from src/ (FOLDER/
# NAME.h), never without its folder, relative to the including file, with
# "..", or in angle brackets: those would be missed above
(cd "$src" && grep -rn --include='*.[ch]' -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' .) |
    while IFS=: read -r f n line; do
        f=${f#./}
        h=$(sed -E 's/^[^<"]*[<"]([^>"]*)[>"].*/\1/' <<<"$line")
        base=$(basename -- "$h")
        [ -n "$(cd "$src" && find . -name "$base" -type f)" ] || continue
        from_src=; from_here=; bare=
        [ -f "$src/$h" ] && from_src=1
        [ -f "$src/$(dirname -- "$f")/$h" ] && from_here=1
        [[ $h == */* ]] || bare=1
        if [[ $h == *..* ]] && [ -n "$from_here$from_src" ]; then echo "$f:$n $h (\"..\")"
        elif [[ $line =~ \<[^\>]*\> ]] && [ -n "$from_src$from_here" ]; then echo "$f:$n <$h> (angle brackets)"
        elif [ -z "$from_src" ] && [ -n "$from_here$bare" ]; then echo "$f:$n $h (not its path from src/)"
        fi
    done >"$tmp/badincludes"
if [ -s "$tmp/badincludes" ]; then
    notok_lines "every project header is included by its path from src/ (\"FOLDER/NAME.h\")" "$tmp/badincludes"
else
    ok "every project header is included by its path from src/ (\"FOLDER/NAME.h\")"
fi
if tsort "$tmp/includes" >/dev/null 2>"$tmp/tsort_inc.err"; then
    ok "the include graph has no cycle ($(wc -l <"$tmp/includes") edges)"
else
    notok "the include graph has a cycle: $(grep -v 'input contains a loop' "$tmp/tsort_inc.err" | sed 's/^tsort: //' | tr '\n' ' ')"
fi
if [ ! -f "$src/shmem/base.h" ]; then
    notok "src/shmem/base.h, the ground floor every module includes, is missing"
elif grep -q '^base ' "$tmp/includes"; then
    notok "base.h includes a header of the project: $(grep '^base ' "$tmp/includes" | cut -d' ' -f2 | tr '\n' ' ')"
else
    ok "base.h includes no header of the project"
fi

# 3. the folders: their order, their READMEs, and the arrows between them
grep -v '^[[:space:]]*\(#\|$\)' "$here/folders" | awk '{print $1}' >"$tmp/order"
awk '{print NR, $1}' "$tmp/order" >"$tmp/rank"
(cd "$src" && find . -type d | sed 's|^\./||; s|^\.$|.|') | sort >"$tmp/dirs"
unlisted=$(grep -vxF -f "$tmp/order" "$tmp/dirs" || true)
gone=$(grep -vxF -f "$tmp/dirs" "$tmp/order" || true)
if [ -z "$unlisted$gone" ]; then
    ok "test/structure/folders lists every folder of src/ ($(wc -l <"$tmp/order"))"
else
    notok "test/structure/folders and src/ differ: not listed: ${unlisted:-none}; listed, not in src/: ${gone:-none}"
fi
noreadme=$(while read -r d; do [ "$d" = . ] || [ -f "$src/$d/README.md" ] || echo "$d"; done <"$tmp/order")
if [ -z "$noreadme" ]; then
    ok "every folder of src/ has a README.md"
else
    notok "folders without a README.md: $(echo "$noreadme" | tr '\n' ' ')"
fi
# "from-folder to-folder kind module->module" for every edge between two
# folders, then each folder pair once, with its rank
{
    awk '{print $1, $2, "calls"}' "$tmp/actual"
    awk '{print $1, $2, "includes"}' "$tmp/includes"
} | while read -r a b kind; do
    fa=$(folder_of "$a"); fb=$(folder_of "$b")
    [ -n "$fa" ] && [ -n "$fb" ] && [ "$fa" != "$fb" ] || continue
    echo "$fa $fb $kind $a->$b"
done | sort -u >"$tmp/folder_edges"
awk 'NR == FNR { rank[$2] = $1; next }
     { r1 = ($1 in rank) ? rank[$1] : 0; r2 = ($2 in rank) ? rank[$2] : 0
       key = $1 " -> " $2
       if (!(key in seen)) { seen[key] = 1; order[++n] = key; up[key] = (r2 >= r1) }
       what[key] = what[key] " " $3 ":" $4 }
     END { for (i = 1; i <= n; i++) print (up[order[i]] ? "UP " : "ok ") order[i] " " what[order[i]] }' \
    "$tmp/rank" "$tmp/folder_edges" >"$tmp/folder_arrows"
sed -n 's/^ok \([^ ]* -> [^ ]*\) .*/# folder arrow: \1/p' "$tmp/folder_arrows"
if grep -q '^UP ' "$tmp/folder_arrows"; then
    grep '^UP ' "$tmp/folder_arrows" | sed 's/^UP /arrow back up: /' >"$tmp/up"
    notok_lines "no arrow runs back up between folders" "$tmp/up"
else
    ok "no arrow runs back up between folders ($(wc -l <"$tmp/folder_arrows") arrows)"
fi

# 4. file length
long_files=0
while read -r m d f; do
    case $f in *.c) ;; *) continue ;; esac
    n=$(wc -l <"$src/$f")
    if [ "$n" -gt 600 ]; then
        echo "not ok - $f has $n lines (at most 600)"
        long_files=1
    fi
done <"$tmp/sources"
if [ $long_files = 0 ]; then ok "no source file over 600 lines"; else fail=1 failed=$((failed + 1)); fi

# 5. function length
mapfile -t cfiles < <(awk '$3 ~ /\.c$/ { print $3 }' "$tmp/sources")
(cd "$src" && awk '
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
' "${cfiles[@]}") >"$tmp/long"
if [ -s "$tmp/long" ]; then
    while read -r line; do echo "not ok - function over 80 lines without a \"Long:\" reason: src/$line"; done <"$tmp/long"
    fail=1 failed=$((failed + 1))
else
    ok "no function over 80 lines without a reason"
fi

echo "$passed passed, $failed failed"
exit $fail

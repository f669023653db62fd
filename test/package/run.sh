#!/usr/bin/env bash
# test/package/run.sh: the Debian package of bulkhead, built, installed,
# tested and removed on this machine's PostgreSQL 15 (Debian 12's).
#
#   bash test/package/run.sh        (as root)
#
# 1. copies this tree (without .git and build products) to a scratch
#    directory and builds the package there: dpkg-buildpackage -us -uc -b;
# 2. checks the .deb's contents: the library, the control file and every
#    sql/bulkhead--*.sql of the tree, plus the documentation every Debian
#    package carries (copyright, changelogs), nothing else;
# 3. lintian on the .changes: no error (warnings are printed);
# 4. installs it with `apt-get install ./<deb>` into a PostgreSQL 15 without
#    bulkhead: files a `make install` left there are moved aside first and
#    put back at the end, so that the machine is left as it was;
# 5. checks `dpkg -L` against the same list;
# 6. runs the autopkgtest, debian/tests/installcheck, with the autopkgtest
#    tool (null runner: on this machine, against the installed package):
#    pg_regress and the isolation specs, each in a pg_virtualenv cluster;
# 7. removes the package (apt-get remove) and checks that its files are gone.
#
# Ends with the line "N passed, N failed" (one per step). It takes the
# install lock of scripts/lib.sh, as every script that installs into the
# shared PostgreSQL 15 does.
set -euo pipefail

PKG_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
SRC_DIR=$(cd -- "$PKG_DIR/../.." && pwd -P)
# shellcheck source=scripts/lib.sh
. "$SRC_DIR/scripts/lib.sh"

MAJOR=15
PACKAGE=postgresql-$MAJOR-bulkhead
PKGLIBDIR=/usr/lib/postgresql/$MAJOR/lib
SHAREDIR=/usr/share/postgresql/$MAJOR/extension
NEEDED=("postgresql-$MAJOR" "postgresql-server-dev-$MAJOR" postgresql-server-dev-all
        postgresql-common debhelper dpkg-dev lintian autopkgtest make gcc)

bh_require_root
bh_lock_installs
bh_reset_client_env

PASSED=0
FAILED=0
check() {    # check NAME STATUS: count one step
    if [ "$2" -eq 0 ]; then
        PASSED=$((PASSED + 1))
        bh_say "ok: $1"
    else
        FAILED=$((FAILED + 1))
        bh_say "FAILED: $1"
    fi
}

# prerequisites (apt-get only when something is missing)
missing=()
for p in "${NEEDED[@]}"; do
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    bh_say "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Use-Pty=0 \
        "${missing[@]}" >/dev/null || bh_die "apt-get install ${missing[*]} failed"
fi

bh_fix_tmpdir
WORK=$(bh_mktemp_dir bulkhead-package)
ASIDE=$WORK/aside                   # what a `make install` left in PostgreSQL 15
INSTALLED=0
restore() {
    local f
    if [ "$INSTALLED" -eq 1 ]; then
        bh_warn "removing $PACKAGE (interrupted run)"
        DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "$PACKAGE" >/dev/null 2>&1 || true
    fi
    if [ -d "$ASIDE" ]; then
        while IFS= read -r f; do
            mkdir -p "$(dirname -- "/$f")"
            mv -f -- "$ASIDE/$f" "/$f"
        done < <(cd "$ASIDE" && find . -type f -printf '%P\n')
        rm -rf -- "$ASIDE"
    fi
    bh_cleanup_work
}
trap restore EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The files the package must hold: the library, the control file, every SQL
# script of the tree (install and upgrade scripts), and the documentation of
# every Debian package.
expected=$(
    {
        printf '%s\n' "$PKGLIBDIR/bulkhead.so" "$SHAREDIR/bulkhead.control"
        for f in "$SRC_DIR"/sql/bulkhead--*.sql; do
            printf '%s\n' "$SHAREDIR/$(basename -- "$f")"
        done
        for f in copyright changelog.Debian.gz changelog.gz; do
            printf '/usr/share/doc/%s/%s\n' "$PACKAGE" "$f"
        done
    } | sort)

# 1. build from a clean copy
bh_copy_tree "$SRC_DIR" "$WORK/src"
rm -rf -- "$WORK/src/debian/$PACKAGE" "$WORK/src/debian/.debhelper"
bh_say "dpkg-buildpackage -us -uc -b in $WORK/src"
rc=0
(cd "$WORK/src" && dpkg-buildpackage -us -uc -b) >"$WORK/build.log" 2>&1 || rc=$?
deb=$(find "$WORK" -maxdepth 1 -name "${PACKAGE}_*.deb" | head -n 1)
[ -n "$deb" ] || rc=1
[ "$rc" -eq 0 ] || tail -n 40 "$WORK/build.log"
check "dpkg-buildpackage builds $(basename -- "${deb:-$PACKAGE (no .deb)}")" "$rc"
if [ "$rc" -ne 0 ]; then
    echo "$PASSED passed, $FAILED failed"
    exit 1
fi
ls -l "$WORK"/*.deb

# 2. the .deb's contents: its regular files
got=$(dpkg-deb --fsys-tarfile "$deb" | tar -tvf - | awk '$1 ~ /^-/ {print substr($NF, 2)}' | sort)
while IFS= read -r f; do printf '    %s\n' "$f"; done <<<"$got"
rc=0
diff -u <(echo "$expected") <(echo "$got") || rc=$?
check ".deb holds the library, the control file, every SQL script and the docs, nothing else" "$rc"

# 3. lintian (as nobody: it need not run as root)
chmod -R a+rX "$WORK"
rc=0
runuser -u nobody -- lintian --no-cfg "$WORK"/*.changes >"$WORK/lintian.out" 2>&1 || rc=$?
sed 's/^/    /' "$WORK/lintian.out"
bh_say "lintian: $(grep -c '^E: ' "$WORK/lintian.out" || true) errors, $(grep -c '^W: ' "$WORK/lintian.out" || true) warnings"
if grep -q '^E: ' "$WORK/lintian.out"; then rc=1; fi
check "lintian: no error" "$rc"

# 4. install into a PostgreSQL 15 without bulkhead
while IFS= read -r f; do
    mkdir -p "$ASIDE/$(dirname -- "${f#/}")"
    mv -- "$f" "$ASIDE/${f#/}"
done < <(find "$PKGLIBDIR" "$SHAREDIR" -maxdepth 1 -name 'bulkhead*' -type f;
         find "$PKGLIBDIR/bitcode" -maxdepth 2 -path '*bulkhead*' -type f 2>/dev/null)
[ ! -d "$ASIDE" ] || bh_say "moved aside until the end: $(cd "$ASIDE" && find . -type f | wc -l) files of an earlier make install"
INSTALLED=1
rc=0
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Use-Pty=0 "$deb" \
    >"$WORK/install.log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || tail -n 20 "$WORK/install.log"
check "apt-get install $deb" "$rc"

# 5. dpkg -L: the same files
rc=0
listed=$(dpkg -L "$PACKAGE" | while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done | sort)
diff -u <(echo "$expected") <(echo "$listed") || rc=$?
check "dpkg -L $PACKAGE lists the expected files" "$rc"

# 6. the autopkgtest, against the installed package
rc=0
chown -R postgres:postgres "$WORK/src"
autopkgtest --no-built-binaries --output-dir="$WORK/autopkgtest" "$WORK/src" -- null \
    >"$WORK/autopkgtest.log" 2>&1 || rc=$?
# what the suites printed: one line per test, then the summary
grep -E '^(ok|not ok) |\.\.\. (ok|FAILED)|tests passed|failed|^installcheck +(PASS|FAIL)' \
    "$WORK/autopkgtest.log" | sed 's/^/    /' || true
[ "$rc" -eq 0 ] || tail -n 60 "$WORK/autopkgtest.log"
check "autopkgtest debian/tests/installcheck (regress and isolation on the installed package)" "$rc"

# 7. remove
rc=0
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "$PACKAGE" >"$WORK/remove.log" 2>&1 || rc=$?
INSTALLED=0
left=$(echo "$expected" | grep -v '^/usr/share/doc/' | while IFS= read -r f; do [ ! -e "$f" ] || echo "$f"; done)
[ -z "$left" ] || { echo "left behind: $left"; rc=1; }
check "apt-get remove $PACKAGE removes its files" "$rc"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]

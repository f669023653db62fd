# shellcheck shell=bash
# scripts/lib.sh: helpers shared by scripts/test.sh and scripts/demo.sh.
# Source it; it defines functions and a few variables, and runs nothing.
#
#   BH_PG_CONFIG    pg_config of the server to build against (env PG_CONFIG
#                   overrides; default: Debian's PostgreSQL 15)
#   BH_BINDIR       that server's bindir (initdb, pg_ctl, psql, ...)

# shellcheck source=scripts/postgres.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/postgres.sh"

BH_PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
# shellcheck disable=SC2034  # used by demo.sh
BH_BINDIR=/usr/lib/postgresql/15/bin

# Debian packages the build, the tests and the demo need.
BH_PACKAGES=(postgresql-15 postgresql-server-dev-15 postgresql-contrib
             libipc-run-perl make gcc perl prometheus-postgres-exporter
             prometheus postgresql-server-dev-all debhelper dpkg-dev lintian
             autopkgtest python3 gdb)

bh_say()  { printf '==> %s\n' "$*"; }
bh_warn() { printf 'warning: %s\n' "$*" >&2; }
bh_die()  { printf 'error: %s\n' "$*" >&2; exit 1; }

# Wall clock in microseconds, and a duration in microseconds as "12.3 s".
bh_now_us() { local t=${EPOCHREALTIME//[!0-9]/}; printf '%s\n' "$((10#$t))"; }
bh_fmt_us() {
    local us=$1
    printf '%d.%d s' "$((us / 1000000))" "$(((us % 1000000) / 100000))"
}

bh_require_root() {
    [ "$(id -u)" -eq 0 ] ||
        bh_die "run as root (it installs packages and the extension, and runs servers as the postgres user)"
}

# Two runs of the test command or the demo on one machine would install their
# builds over each other's (the servers load the extension from their own
# directories): the second waits for the first.  The lock is held on file
# descriptor 9 until the script exits.  A caller that holds it already (fd 9
# open on the lock file, inherited) passes it on: flock on the same open
# file is granted at once.  Runs that install into servers of their own
# (BULKHEAD_PG_CONFIG_<major>, scripts/postgres.sh) may each name a lock of
# their own in BULKHEAD_TEST_LOCK and run side by side.
BH_INSTALL_LOCK=${BULKHEAD_TEST_LOCK:-/tmp/bulkhead-test.lock}
bh_lock_installs() {
    [ "$(readlink /proc/$$/fd/9 2>/dev/null)" = "$BH_INSTALL_LOCK" ] ||
        exec 9>"$BH_INSTALL_LOCK"
    if ! flock -n 9; then
        bh_say "another test or demo run on this machine installs bulkhead: waiting for it"
        flock 9
    fi
}

# Install the missing prerequisites with apt-get, quietly; `apt-get update`
# runs only when something is missing. Idempotent.  Another apt-get running
# on the machine is waited for (up to 10 minutes), not failed on.
bh_install_prereqs() {
    local pkg missing=() log
    for pkg in "${BH_PACKAGES[@]}"; do
        if [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]; then
            missing+=("$pkg")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        bh_say "prerequisites already installed"
    else
        bh_say "installing: ${missing[*]}"
        log=$(mktemp -t bulkhead-apt.XXXXXX)
        if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq -o DPkg::Lock::Timeout=600 &&
               DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                   -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0 "${missing[@]}"; } >"$log" 2>&1; then
            tail -n 40 "$log" >&2
            rm -f "$log"
            bh_die "apt-get failed"
        fi
        rm -f "$log"
    fi
    [ -x "$BH_PG_CONFIG" ] || bh_die "no pg_config at $BH_PG_CONFIG"
    # shellcheck disable=SC2034  # used by demo.sh
    BH_BINDIR=$("$BH_PG_CONFIG" --bindir)
    id postgres >/dev/null 2>&1 || bh_die "no postgres user (it comes with postgresql-common)"
}

# The servers and pg_regress run as postgres and make their sockets and files
# in $TMPDIR: if postgres cannot use it (say, a directory under /root), fall
# back to /tmp for everything.
bh_fix_tmpdir() {
    if [ -n "${TMPDIR:-}" ] && ! runuser -u postgres -- test -w "$TMPDIR" -a -x "$TMPDIR"; then
        bh_warn "TMPDIR=$TMPDIR is not usable by the postgres user; using /tmp"
        unset TMPDIR
    fi
}

# PostgreSQL 15's programs (initdb, pg_ctl, psql, pgbench, postgres) find
# their own path by changing into their directory and back: one started as
# postgres in a directory postgres cannot enter (a clone under /root, say)
# prints 'could not change directory to "...": Permission denied'.  Whatever
# runs as postgres must start elsewhere: bh_cd_for_postgres DIR changes into
# DIR, which postgres must be able to enter.
bh_cd_for_postgres() {
    runuser -u postgres -- test -x "$1" || bh_die "the postgres user cannot enter $1"
    cd -- "$1"
}

# The first port from FROM (default 56000) on which nothing listens, on
# the loopback address or as a socket file in /tmp.
bh_free_port() {    # bh_free_port [FROM] -> port
    local p=${1:-56000}
    while [ -e "/tmp/.s.PGSQL.$p" ] || (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do
        p=$((p + 1))
    done
    printf '%s\n' "$p"
}

# A fresh temporary directory (mode 755) that the postgres user can reach:
# in $TMPDIR, or in /tmp when $TMPDIR lies somewhere postgres cannot enter.
bh_mktemp_dir() {    # bh_mktemp_dir PREFIX -> path
    local dir
    dir=$(mktemp -d -t "$1.XXXXXX")
    chmod 755 "$dir"
    if ! runuser -u postgres -- test -x "$dir"; then
        rmdir "$dir"
        dir=$(mktemp -d -p /tmp "$1.XXXXXX")
        chmod 755 "$dir"
    fi
    printf '%s\n' "$dir"
}

# Copy the source tree SRC to DST (created), leaving out .git and build and
# test products.
bh_copy_tree() {
    local src=$1 dst=$2
    mkdir -p "$dst"
    tar -C "$src" -cf - \
        --exclude=./.git \
        --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
        --exclude='./tmp_check*' --exclude=./results --exclude=./output_iso \
        --exclude=./log \
        --exclude=./regression.diffs --exclude=./regression.out \
        . | tar -C "$dst" -xf -
}

# In DIR: make clean, make (warnings are errors: the Makefile sets
# PG_CFLAGS = -Wall -Werror), make install. Runs as the caller (root),
# under the command PREFIX if one is given (a chroot's version:
# scripts/postgres.sh, bh_pg_run).
#
# BH_PREBUILT (set by scripts/test.sh for the suites with scripts of their
# own, which copy the tree from there): a tree that scripts/test.sh has
# built that way and installed, with the same pg_config, and of which DIR
# is a copy (bh_copy_tree).  Its objects and library are copied into DIR
# instead of compiling the same sources once more, and installed only if
# the installed library is not that one (what runs beside the script keeps
# the library it loaded).
bh_build_install() {    # bh_build_install DIR [PREFIX...]
    local dir=$1
    shift
    if [ $# -eq 0 ] && [ -n "${BH_PREBUILT:-}" ] && [ -f "$BH_PREBUILT/bulkhead.so" ] &&
       [ "$(cd -- "$BH_PREBUILT" && pwd -P)" != "$(cd -- "$dir" && pwd -P)" ]; then
        echo "bulkhead built already in $BH_PREBUILT: its objects copied into $dir"
        if ! { (cd -- "$BH_PREBUILT" &&
                    find . -path './tmp_check*' -prune -o \( -name '*.o' -o -name '*.so' -o -name '*.bc' \) \
                        -type f -print0 | tar --null -T - -cf -) | tar -C "$dir" -xf - &&
               make -C "$dir" -q PG_CONFIG="$BH_PG_CONFIG" >/dev/null 2>&1; }; then
            echo "the copy of $BH_PREBUILT is not up to date: built again"
            BH_PREBUILT='' bh_build_install "$dir"
            return
        fi
        cmp -s "$dir/bulkhead.so" "$("$BH_PG_CONFIG" --pkglibdir)/bulkhead.so" ||
            make -C "$dir" install PG_CONFIG="$BH_PG_CONFIG"
        return
    fi
    "$@" make -C "$dir" -s clean PG_CONFIG="$BH_PG_CONFIG" >/dev/null &&
    "$@" make -C "$dir" -j"$(nproc)" PG_CONFIG="$BH_PG_CONFIG" &&
    "$@" make -C "$dir" install PG_CONFIG="$BH_PG_CONFIG"
}

# Stop every postmaster whose data directory lies under DIR: read the pid
# from each postmaster.pid, check that the process runs there (its cwd is
# the data directory), then SIGQUIT (immediate shutdown), SIGKILL if it
# lingers. Prints what it stopped, on stderr.
bh_stop_postmasters_under() {
    local dir=$1 pidfile pid cwd i
    [ -d "$dir" ] || return 0
    while IFS= read -r pidfile; do
        pid=$(head -n 1 "$pidfile" 2>/dev/null) || continue
        case $pid in ''|*[!0-9]*) continue ;; esac
        cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || continue
        case $cwd in "$dir"/*) ;; *) continue ;; esac
        bh_warn "stopping leftover postgres (pid $pid, data $cwd)"
        kill -QUIT "$pid" 2>/dev/null || continue
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    done < <(find "$dir" -name postmaster.pid -type f 2>/dev/null)
    return 0
}

# The suites start their own servers: stray libpq settings (PGHOST, PGPORT,
# ...) must not steer them, and every client speaks UTF-8 whatever the
# caller's locale (the expected outputs hold multi-byte workload names).
# Messages stay untranslated (as pg_regress and the TAP modules do it): a
# German caller's locale must not reach psql or the servers' messages.
bh_reset_client_env() {
    local var
    while IFS= read -r var; do
        unset "$var"
    done < <(compgen -e | grep -E '^PG[A-Z]+$' || true)
    export PGCLIENTENCODING=UTF8
    unset LANGUAGE LC_ALL
    export LC_MESSAGES=C
}

# The scratch directory $WORK of a test script: bh_cleanup_work (set as the
# EXIT trap by bh_trap_cleanup_work) stops any server left under it and
# removes it.
WORK=
bh_cleanup_work() {
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        bh_stop_postmasters_under "$WORK"
        rm -rf -- "$WORK"
    fi
    WORK=
}
bh_trap_cleanup_work() {
    trap bh_cleanup_work EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

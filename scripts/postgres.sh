# shellcheck shell=bash
# scripts/postgres.sh: the PostgreSQL versions bulkhead is tested on, and how
# each one is had. Source it (scripts/lib.sh does); it defines functions and
# runs nothing.
#
# A version is one line of BH_PG_MATRIX: "MAJOR KIND ARG":
#   package SUITE-PACKAGE   Debian 12's own server packages (postgresql-MAJOR
#                           and postgresql-server-dev-MAJOR)
#   source  SUITE           Debian's source package postgresql-MAJOR from that
#                           suite, built once into $BH_PG_CACHE/<source version>
#
# The source build is pristine upstream (Debian's patches are skipped, so
# that everything, pkglibdir included, lies under the cache prefix), with TAP
# support and the contrib modules. A directory counts as a build only once
# its ".complete" marker is written, so an interrupted build is redone.

BH_PG_MATRIX=(
    "15 package bookworm"
    "18 source sid"
)
BH_PG_CACHE=${BH_PG_CACHE:-/var/cache/bulkhead-pg}

# Debian packages a source build needs.
BH_PG_BUILD_PACKAGES=(dpkg-dev bison flex gcc make perl libreadline-dev
                      zlib1g-dev libipc-run-perl)

bh_pg_majors() {    # all majors of the matrix, one per line
    local line
    for line in "${BH_PG_MATRIX[@]}"; do
        printf '%s\n' "${line%% *}"
    done
}

bh_pg_entry() {    # bh_pg_entry MAJOR -> "KIND ARG", or fails
    local line
    for line in "${BH_PG_MATRIX[@]}"; do
        [ "${line%% *}" = "$1" ] && { printf '%s\n' "${line#* }"; return 0; }
    done
    return 1
}

# The Debian packages a version needs before bh_pg_config_of can answer.
bh_pg_packages_of() {    # bh_pg_packages_of MAJOR -> package names
    local kind arg
    read -r kind arg < <(bh_pg_entry "$1") || return 1
    case $kind in
        package) printf '%s\n' "postgresql-$1" "postgresql-server-dev-$1" ;;
        source)  printf '%s\n' "${BH_PG_BUILD_PACKAGES[@]}" ;;
    esac
}

# An existing complete source build of MAJOR in the cache (the newest), or
# nothing.
bh_pg_cached_build() {    # bh_pg_cached_build MAJOR -> dir
    local d found=
    for d in "$BH_PG_CACHE/$1".*/; do
        [ -f "$d.complete" ] && found=${d%/}
    done
    [ -n "$found" ] && printf '%s\n' "$found"
}

# apt-get or apt-cache with a sources list of our own (one deb-src line for
# SUITE), so that the machine's apt configuration is left alone.
bh_pg_apt_src() {    # bh_pg_apt_src SUITE apt-get|apt-cache ARGS...
    local suite=$1 tool=$2 dir="$BH_PG_CACHE/apt-$1"
    shift 2
    mkdir -p "$dir/lists/partial"
    printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian %s main\n' \
        "$suite" >"$dir/sources.list"
    "$tool" -qq -o Dir::Etc::SourceList="$dir/sources.list" \
        -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$dir/lists" "$@"
}

# Download, configure, build and install postgresql-MAJOR from SUITE into
# $BH_PG_CACHE/<version>; prints the prefix. Output of the steps goes to a
# log in the cache, whose tail is shown if a step fails.
bh_pg_build_source() {    # bh_pg_build_source MAJOR SUITE -> prefix
    local major=$1 suite=$2 version src prefix log
    mkdir -p "$BH_PG_CACHE"
    log="$BH_PG_CACHE/build-$major.log"
    : >"$log"
    bh_pg_apt_src "$suite" apt-get update >>"$log" 2>&1 ||
        { tail -n 20 "$log" >&2; bh_die "apt-get update for deb-src $suite failed"; }
    version=$(bh_pg_apt_src "$suite" apt-cache showsrc "postgresql-$major" 2>>"$log" |
              sed -n 's/^Version: //p' | sort -V | tail -n 1)
    [ -n "$version" ] || bh_die "no source package postgresql-$major in $suite"
    version=${version#*:}
    version=${version%%-*}              # 18.6-1 -> 18.6, the upstream version
    prefix="$BH_PG_CACHE/$version"
    if [ -f "$prefix/.complete" ]; then
        printf '%s\n' "$prefix"
        return 0
    fi
    bh_say "building PostgreSQL $version from Debian's source package (suite $suite) into $prefix" >&2
    src="$BH_PG_CACHE/src-$version"
    rm -rf -- "$src" "$prefix"
    mkdir -p "$src"
    (
        set -e
        umask 022                       # the servers run as postgres
        cd "$src"
        bh_pg_apt_src "$suite" apt-get source --download-only "postgresql-$major"
        dpkg-source --skip-patches -x ./*.dsc tree
        cd tree
        ./configure --prefix="$prefix" --enable-tap-tests --without-icu \
            --enable-debug
        make -j"$(nproc)" -s world-bin
        make -s install-world-bin
    ) >>"$log" 2>&1 || { tail -n 40 "$log" >&2; bh_die "building PostgreSQL $version failed (log: $log)"; }
    rm -rf -- "$src"
    touch "$prefix/.complete"
    printf '%s\n' "$prefix"
}

# The pg_config of MAJOR, building it first if its kind needs that.
bh_pg_config_of() {    # bh_pg_config_of MAJOR -> path
    local kind arg prefix
    read -r kind arg < <(bh_pg_entry "$1") || bh_die "PostgreSQL $1 is not in the matrix ($(bh_pg_majors | tr '\n' ' '))"
    case $kind in
        package)
            printf '%s\n' "/usr/lib/postgresql/$1/bin/pg_config" ;;
        source)
            prefix=$(bh_pg_cached_build "$1") || prefix=$(bh_pg_build_source "$1" "$arg") || return 1
            printf '%s\n' "$prefix/bin/pg_config" ;;
    esac
}

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
#
# A suite's index can list a version whose files the mirror no longer serves
# (trixie listed postgresql-17 17.12-0+deb13u1 while its files answered 404):
# then the older uploads of BH_PG_POOL_VERSIONS are tried, newest first,
# straight from the pool, each file checked against the .dsc's SHA-256 sums.
# If none of them can be had either, bh_pg_config_of fails with status
# BH_PG_UNAVAILABLE (3), so that a caller can skip that version and say why.

BH_PG_MATRIX=(
    "15 package bookworm"
    "17 source trixie"
    "18 source sid"
)
declare -gA BH_PG_POOL_VERSIONS=(
    [17]="17.11-0+deb13u1 17.10-0+deb13u1 17.9-0+deb13u1"
)
BH_PG_POOL_URL=${BH_PG_POOL_URL:-http://deb.debian.org/debian/pool/main}
BH_PG_UNAVAILABLE=3
BH_PG_CACHE=${BH_PG_CACHE:-/var/cache/bulkhead-pg}

# Debian packages a source build needs.
BH_PG_BUILD_PACKAGES=(dpkg-dev bison flex gcc make perl libreadline-dev
                      zlib1g-dev libipc-run-perl curl)

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

# Download one upload of source package PKG (e.g. postgresql-17_17.11-0+deb13u1)
# from the pool into DIR: the .dsc, then every file it lists, each checked
# against the .dsc's Checksums-Sha256. (The .dsc's own signature is checked
# too when debian-keyring is installed; dpkg-source -x checks the sums again.)
bh_pg_fetch_pool() {    # bh_pg_fetch_pool PKG VERSION DIR
    local pkg=$1 version=${2#*:} dir=$3 url sum size name n=0
    url="$BH_PG_POOL_URL/${pkg:0:1}/$pkg"
    curl -fsS --retry 2 -o "$dir/${pkg}_$version.dsc" "$url/${pkg}_$version.dsc" || return 1
    if [ -f /usr/share/keyrings/debian-keyring.gpg ]; then
        gpgv --keyring /usr/share/keyrings/debian-keyring.gpg \
            "$dir/${pkg}_$version.dsc" || return 1
    fi
    while read -r sum size name; do
        curl -fsS --retry 2 -o "$dir/$name" "$url/$name" || return 1
        if ! printf '%s  %s\n' "$sum" "$dir/$name" | sha256sum --quiet -c - ||
           [ "$(stat -c %s "$dir/$name")" != "$size" ]; then
            bh_warn "$name does not match the SHA-256 sum or size in ${pkg}_$version.dsc"
            return 1
        fi
        n=$((n + 1))
    done < <(sed -n '/^Checksums-Sha256:/,/^[^ ]/s/^ \([0-9a-f]\{64\}\) /\1 /p' \
                 "$dir/${pkg}_$version.dsc")
    [ "$n" -gt 0 ] || { bh_warn "${pkg}_$version.dsc lists no files"; return 1; }
}

# Download the source of postgresql-MAJOR into DIR (emptied first): the
# version SUITE lists, with `apt-get source`, or else the first of
# BH_PG_POOL_VERSIONS[MAJOR] the pool serves; prints the version used.
# The tools' output goes to LOG, what was tried to stderr.
bh_pg_download_source() {    # bh_pg_download_source MAJOR SUITE DIR LOG -> version
    local major=$1 suite=$2 dir=$3 log=$4 listed v
    listed=$(bh_pg_apt_src "$suite" apt-cache showsrc "postgresql-$major" 2>>"$log" |
             sed -n 's/^Version: //p' | sort -V | tail -n 1)
    rm -rf -- "$dir"
    mkdir -p "$dir"
    if [ -n "$listed" ] &&
       (cd "$dir" && bh_pg_apt_src "$suite" apt-get source --download-only \
                         "postgresql-$major=$listed") >>"$log" 2>&1; then
        printf '%s\n' "$listed"
        return 0
    fi
    bh_warn "postgresql-$major ${listed:-(not listed)} from $suite could not be downloaded; trying the pool: ${BH_PG_POOL_VERSIONS[$major]:-}"
    for v in ${BH_PG_POOL_VERSIONS[$major]:-}; do
        rm -rf -- "$dir"
        mkdir -p "$dir"
        if bh_pg_fetch_pool "postgresql-$major" "$v" "$dir" 2>>"$log"; then
            bh_say "postgresql-$major $v downloaded from the pool, SHA-256 sums as in its .dsc" >&2
            printf '%s\n' "$v"
            return 0
        fi
    done
    return 1
}

# Download, configure, build and install postgresql-MAJOR from SUITE into
# $BH_PG_CACHE/<version>; prints the prefix. Output of the steps goes to a
# log in the cache, whose tail is shown if a step fails.
bh_pg_build_source() {    # bh_pg_build_source MAJOR SUITE -> prefix
    local major=$1 suite=$2 version src prefix log dl
    mkdir -p "$BH_PG_CACHE"
    log="$BH_PG_CACHE/build-$major.log"
    : >"$log"
    bh_pg_apt_src "$suite" apt-get update >>"$log" 2>&1 ||
        { tail -n 20 "$log" >&2; bh_die "apt-get update for deb-src $suite failed"; }
    dl="$BH_PG_CACHE/download-$major"
    version=$(bh_pg_download_source "$major" "$suite" "$dl" "$log") || {
        tail -n 20 "$log" >&2
        bh_warn "no source of PostgreSQL $major could be downloaded (suite $suite, then the pool: ${BH_PG_POOL_VERSIONS[$major]:-no older versions known}); log: $log"
        exit "$BH_PG_UNAVAILABLE"
    }
    bh_say "PostgreSQL $major: Debian source package postgresql-$major $version" >&2
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
        dpkg-source --skip-patches -x "$dl"/*.dsc tree
        cd tree
        ./configure --prefix="$prefix" --enable-tap-tests --without-icu \
            --enable-debug
        make -j"$(nproc)" -s world-bin
        make -s install-world-bin
    ) >>"$log" 2>&1 || { tail -n 40 "$log" >&2; bh_die "building PostgreSQL $version failed (log: $log)"; }
    rm -rf -- "$src" "$dl"
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
            prefix=$(bh_pg_cached_build "$1") || prefix=$(bh_pg_build_source "$1" "$arg") || return $?
            printf '%s\n' "$prefix/bin/pg_config" ;;
    esac
}

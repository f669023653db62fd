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
#   chroot  SUITE           Debian's binary packages of a release candidate,
#                           which only experimental has and whose binaries
#                           need a newer libc than Debian 12's: a Debian SUITE
#                           chroot made once with debootstrap into
#                           $BH_PG_CACHE/chroot-MAJOR, with postgresql-MAJOR,
#                           its client, its server headers, libpq-dev and
#                           libpq5 from experimental (each pinned by name,
#                           never the whole suite), the rest from SUITE.
#                           Everything of that version (build, install,
#                           servers, suites) runs inside it: bh_pg_run.
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
# BH_PG_UNAVAILABLE (3), so that a caller can skip that version and say why;
# so does a chroot that cannot be built (say, the release candidate left
# experimental): remove $BH_PG_CACHE/chroot-MAJOR to get a newer upload.

BH_PG_MATRIX=(
    "15 package bookworm"
    "17 source trixie"
    "18 source sid"
    "19 chroot sid"
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

# A chroot version: the packages pinned to experimental (MAJOR is replaced),
# and what else its build and suites need, from the chroot's own suite
# (PGXS, pg_regress and the TAP modules come with postgresql-server-dev;
# IPC::Run is for the TAP files).  A chroot made with other lists is made
# again.
BH_PG_CHROOT_PINNED=(postgresql-MAJOR postgresql-client-MAJOR postgresql-server-dev-MAJOR
                     libpq-dev libpq5)
BH_PG_CHROOT_PACKAGES=(gcc make libipc-run-perl)
BH_PG_MIRROR=${BH_PG_MIRROR:-http://deb.debian.org/debian}

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
        chroot)  printf '%s\n' debootstrap ;;
    esac
}

# The root directory MAJOR runs in: its chroot, or nothing for a version
# that runs on this machine.
bh_pg_root_of() {    # bh_pg_root_of MAJOR -> dir
    local kind arg
    read -r kind arg < <(bh_pg_entry "$1") || return 1
    [ "$kind" != chroot ] || printf '%s\n' "$BH_PG_CACHE/chroot-$1"
}

# What to say when bh_pg_config_of MAJOR failed with BH_PG_UNAVAILABLE.
bh_pg_unavailable_reason() {    # bh_pg_unavailable_reason MAJOR -> text
    local kind arg
    read -r kind arg < <(bh_pg_entry "$1") || return 1
    case $kind in
        chroot) printf 'the Debian %s chroot with postgresql-%s from experimental could not be built (log: %s)\n' \
                    "$arg" "$1" "$BH_PG_CACHE/build-$1.log" ;;
        *)      printf 'no source could be downloaded\n' ;;
    esac
}

# Run COMMAND for MAJOR, in DIR: here, or inside MAJOR's chroot (which must
# be mounted: bh_pg_chroot_mount; DIR is the same path inside and out),
# without TMPDIR (a directory of this machine's, which the chroot may lack).
bh_pg_run() {    # bh_pg_run MAJOR DIR COMMAND...
    local major=$1 dir=$2 root
    shift 2
    root=$(bh_pg_root_of "$major")
    if [ -z "$root" ]; then
        (cd -- "$dir" && "$@")
    else
        chroot "$root" /usr/bin/env -u TMPDIR -C "$dir" "$@"
    fi
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

# The mounts under ROOT (a chroot), deepest first; none if ROOT does not
# exist (never every mount of the machine: an empty root would match them).
bh_pg_chroot_mounts() {    # bh_pg_chroot_mounts ROOT -> mount points
    local root
    root=$(realpath -e -- "$1" 2>/dev/null) && [ "$root" != / ] || return 0
    awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts |
        sort -r
}

# What the servers and suites of a chroot need, for as long as they run:
# /proc (ps, pg_ctl, bulkhead's reads of /proc/self), a tmpfs of its own on
# /dev/shm (POSIX shared memory: dynamic_shared_memory_type = posix), and
# DIR (this machine's) bound to the same path inside, so that a build and
# its logs have one path inside and out.  Undone by bh_pg_chroot_umount.
bh_pg_chroot_mount() {    # bh_pg_chroot_mount ROOT [DIR]
    local root=$1 dir=${2:-}
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc" || return 1
    mountpoint -q "$root/dev/shm" ||
        mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm" || return 1
    [ -n "$dir" ] || return 0
    mkdir -p -- "$root$dir" &&
    { mountpoint -q "$root$dir" || mount --bind "$dir" "$root$dir"; }
}

# Unmount everything under ROOT: first the servers whose data lies in a
# bound directory are stopped (a server keeps /dev/shm busy), then the
# mounts go, deepest first; a busy one is detached lazily (so that nothing
# can reach through it any more).  Fails if a mount stays.
bh_pg_chroot_umount() {    # bh_pg_chroot_umount ROOT
    local root=$1 mp
    [ -d "$root" ] || return 0
    while IFS= read -r mp; do
        case $mp in */proc|*/dev/shm) ;; *) bh_stop_postmasters_under "$mp" ;; esac
    done < <(bh_pg_chroot_mounts "$root")
    while IFS= read -r mp; do
        umount -- "$mp" 2>/dev/null || {
            bh_warn "$mp is busy: detaching it lazily"
            umount -l -- "$mp"
        }
    done < <(bh_pg_chroot_mounts "$root")
    [ -z "$(bh_pg_chroot_mounts "$root")" ] ||
        { bh_warn "still mounted under $root: $(bh_pg_chroot_mounts "$root" | tr '\n' ' ')"; return 1; }
}

# The steps of bh_pg_build_chroot, each stopping the build when it fails
# (set -e would not: its caller tests the status).
bh_pg_chroot_steps() {    # bh_pg_chroot_steps ROOT SUITE PACKAGES...
    local root=$1 suite=$2
    shift 2
    debootstrap --variant=minbase "$suite" "$root" "$BH_PG_MIRROR" || return 1
    # The archive reachable here can be a frozen copy whose Release files
    # are past their Valid-Until date: apt refuses those unless told (the
    # signatures are still checked); debootstrap does not look at the date.
    printf 'deb [check-valid-until=no] %s %s main\n' \
        "$BH_PG_MIRROR" "$suite" "$BH_PG_MIRROR" experimental >"$root/etc/apt/sources.list" &&
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" &&
    chmod 755 "$root/usr/sbin/policy-rc.d" &&
    mkdir -p "$root/etc/postgresql-common" &&
    echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.conf" &&
    bh_pg_chroot_mount "$root" &&
    chroot "$root" apt-get update -qq &&
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends -o Dpkg::Use-Pty=0 "$@" &&
    chroot "$root" apt-get clean
}

# What a chroot of MAJOR from SUITE is made of, as its .complete marker
# holds it: the suite, then the packages asked for.
bh_pg_chroot_recipe() {    # bh_pg_chroot_recipe MAJOR SUITE -> one line
    local pkg
    printf '%s' "$2"
    for pkg in "${BH_PG_CHROOT_PINNED[@]}"; do
        printf ' %s/experimental' "${pkg//MAJOR/$1}"
    done
    printf ' %s' "${BH_PG_CHROOT_PACKAGES[@]}"
    printf '\n'
}

# Make MAJOR's chroot: debootstrap (minbase) of SUITE, then the packages of
# BH_PG_CHROOT_PINNED from experimental, each named with /experimental (so
# that nothing else comes from there: experimental's priority is 1), and
# BH_PG_CHROOT_PACKAGES from SUITE, without recommends.  No service starts
# (policy-rc.d) and no cluster is made at install: the suites make their own.
# The .complete marker (holding bh_pg_chroot_recipe) is written last, so an
# interrupted build is redone; the downloaded .debs are dropped.  Prints
# the root; exits with BH_PG_UNAVAILABLE if the chroot cannot be built.
# Output goes to a log in the cache, whose tail is shown on a failure.
bh_pg_build_chroot() {    # bh_pg_build_chroot MAJOR SUITE -> root
    local major=$1 suite=$2 root log recipe rc=0
    local -a packages
    root=$(bh_pg_root_of "$major")
    log="$BH_PG_CACHE/build-$major.log"
    mkdir -p "$BH_PG_CACHE"
    : >"$log"
    recipe=$(bh_pg_chroot_recipe "$major" "$suite")
    read -r -a packages <<<"${recipe#* }"
    bh_say "making a Debian $suite chroot for PostgreSQL $major in $root: debootstrap, then ${packages[*]} (log: $log)" >&2
    # an interrupted build may have left its mounts: never remove through them
    bh_pg_chroot_umount "$root" >>"$log" 2>&1 || bh_die "cannot unmount what is mounted under $root"
    rm -rf -- "$root"
    mkdir -p -- "$root"
    (umask 022 && bh_pg_chroot_steps "$root" "$suite" "${packages[@]}" &&
        chroot "$root" "/usr/lib/postgresql/$major/bin/pg_config" --version) >>"$log" 2>&1 || rc=$?
    bh_pg_chroot_umount "$root" >>"$log" 2>&1 || rc=1
    if [ "$rc" -ne 0 ]; then
        tail -n 20 "$log" >&2
        bh_warn "the Debian $suite chroot for PostgreSQL $major could not be built; log: $log"
        exit "$BH_PG_UNAVAILABLE"
    fi
    printf '%s\n' "$recipe" >"$root/.complete"
    printf '%s\n' "$root"
}

# The pg_config of MAJOR, building it first if its kind needs that (for a
# chroot, its path inside: run it with bh_pg_run).
bh_pg_config_of() {    # bh_pg_config_of MAJOR -> path
    local kind arg prefix own="BULKHEAD_PG_CONFIG_$1"
    # a server of one's own (a copy of a built one: its paths follow its
    # binaries), so that runs side by side do not install into one server
    if [ -n "${!own:-}" ]; then printf '%s\n' "${!own}"; return 0; fi
    read -r kind arg < <(bh_pg_entry "$1") || bh_die "PostgreSQL $1 is not in the matrix ($(bh_pg_majors | tr '\n' ' '))"
    case $kind in
        package)
            printf '%s\n' "/usr/lib/postgresql/$1/bin/pg_config" ;;
        source)
            prefix=$(bh_pg_cached_build "$1") || prefix=$(bh_pg_build_source "$1" "$arg") || return $?
            printf '%s\n' "$prefix/bin/pg_config" ;;
        chroot)
            [ "$(cat -- "$(bh_pg_root_of "$1")/.complete" 2>/dev/null)" = \
              "$(bh_pg_chroot_recipe "$1" "$arg")" ] ||
                (bh_pg_build_chroot "$1" "$arg" >/dev/null) || return $?
            printf '%s\n' "/usr/lib/postgresql/$1/bin/pg_config" ;;
    esac
}

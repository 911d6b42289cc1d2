#!/usr/bin/env bash
# Base images of the offline test world, made without any registry:
#
#   local/debian:bookworm         debootstrap minbase (+ what a repacked Debian python needs) plus
#                                 the host's CA certificates, so HTTPS through the machine's proxy
#                                 works: the runtime base of the world's images
#   local/debian:bookworm-python  the same plus Debian's python3 (3.11): the env-builder base, in
#                                 the role python:3.12-slim-bookworm plays for users
#   local/busybox:static    FROM scratch + Debian's busybox-static (2 MB), for quick engine tests
#
# Both Debian images take their apt packages from the world's own Debian repository, served with the
# channel at http://127.0.0.1:$ENVBUILD_WORLD_PORT/debian (debootstrap --download-only of minbase plus
# what images install at build time, e.g. gcc/g++ for torch.compile), the role a team's internal Debian
# mirror plays: image builds (--network host) stay offline.
#
#   base_images.sh [up]     make both, reusing images whose labels still match (about 0.2 s)
#   base_images.sh mirror   print the Debian mirror debootstrap uses (from apt's sources)
#
# The debootstrap rootfs is cached as a tarball in the state dir WITHOUT the host CAs, so a pruned
# engine re-imports in seconds and the CAs are always the host's current ones. Every image carries
# org.envbuild.world.* labels saying what it was made from.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
CACHE_DIR=$STATE/cache
APT_ETC=${ENVBUILD_APT_ETC:-/etc/apt}
HOST_CA_BUNDLE=${ENVBUILD_HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
HOST_EXTRA_CA_DIR=${ENVBUILD_HOST_EXTRA_CA_DIR:-/usr/local/share/ca-certificates}

DEBIAN_TAG=local/debian:bookworm
PYTHON_TAG=local/debian:bookworm-python
BUSYBOX_TAG=local/busybox:static
SUITE=bookworm
VARIANT=minbase
# libexpat1/libssl3/libsqlite3-0: the Debian python repack links them and minbase lacks them.
INCLUDE=ca-certificates,libexpat1,libssl3,libsqlite3-0
# The env-builder stage runs envbuild's installer (standard library + py-rattler, abi3) on python3.
PYTHON_INCLUDE=$INCLUDE,python3
IMAGE_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
# What envbuild's Dockerfiles apt-get install at build time (docker/blocks/compiler.j2).
BUILD_TIME_DEBS=gcc,g++,libc6-dev
WORLD_PORT=${ENVBUILD_WORLD_PORT:-8765}
DEBIAN_REPO=$STATE/debian
IMAGE_APT_SOURCE="deb [trusted=yes] http://127.0.0.1:$WORLD_PORT/debian ./"
LABEL=org.envbuild.world

say() { printf 'world: %s\n' "$*"; }
die() { printf 'world: error: %s\n' "$*" >&2; exit 1; }

docker_cli() {
    if [[ -x /usr/bin/docker ]]; then echo /usr/bin/docker; else command -v docker; fi
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Prints the URI of the first enabled `deb` source for $SUITE, in apt's own reading order.
# Reads both formats: one-line (*.list) and deb822 (*.sources).
mirror_from_apt_sources() {
    local files=() f
    [[ -f $APT_ETC/sources.list ]] && files+=("$APT_ETC/sources.list")
    for f in "$APT_ETC"/sources.list.d/*.list "$APT_ETC"/sources.list.d/*.sources; do
        [[ -f $f ]] && files+=("$f")
    done
    # apt reads sources.list.d in name order whatever the extension.
    local sorted=()
    ((${#files[@]})) && mapfile -t sorted < <(printf '%s\n' "${files[@]}" | awk -v main="$APT_ETC/sources.list" \
        '$0 == main { print "0 " $0; next } { print "1 " $0 }' | sort | cut -d' ' -f2-)
    for f in "${sorted[@]}"; do
        if [[ $f == *.sources ]]; then
            deb822_mirror "$f" && return 0
        else
            one_line_mirror "$f" && return 0
        fi
    done
    return 1
}

one_line_mirror() {
    awk -v suite="$SUITE" '
        { sub(/#.*/, ""); gsub(/\[[^]]*\]/, " ") }
        $1 == "deb" && $3 == suite { print $2; found = 1; exit }
        END { exit found ? 0 : 1 }' "$1"
}

deb822_mirror() {
    awk -v suite="$SUITE" '
        function has(list, word,   n, parts, i) {
            n = split(list, parts, /[ \t]+/)
            for (i = 1; i <= n; i++) if (parts[i] == word) return 1
            return 0
        }
        function flush(   n, uris) {
            if (has(f["types"], "deb") && has(f["suites"], suite) && tolower(f["enabled"]) != "no" && f["uris"] != "") {
                split(f["uris"], uris, /[ \t]+/)
                print uris[1]; found = 1; exit
            }
            delete f; key = ""
        }
        /^[ \t]*#/ { next }
        /^[ \t]*$/ { flush(); next }
        /^[ \t]/ { if (key != "") f[key] = f[key] " " $0; next }
        {
            key = tolower(substr($0, 1, index($0, ":") - 1))
            value = substr($0, index($0, ":") + 1)
            gsub(/^[ \t]+|[ \t]+$/, "", value)
            f[key] = value
        }
        END { if (!found) flush(); exit found ? 0 : 1 }' "$1"
}

debian_mirror() {
    local mirror=${ENVBUILD_DEBIAN_MIRROR:-}
    if [[ -z $mirror ]]; then
        mirror=$(mirror_from_apt_sources) \
            || die "no enabled 'deb' source for $SUITE in $APT_ETC/sources.list(.d); set ENVBUILD_DEBIAN_MIRROR to a Debian mirror URL"
    fi
    [[ $mirror =~ ^(https?|file|ftp):// ]] \
        || die "debootstrap cannot use the apt source '$mirror'; set ENVBUILD_DEBIAN_MIRROR to an http(s) or file:// Debian mirror"
    echo "${mirror%/}"
}

image_label() {
    "$(docker_cli)" image inspect "$1" --format "{{index .Config.Labels \"$LABEL.$2\"}}" 2>/dev/null || true
}

image_id() {
    "$(docker_cli)" image inspect "$1" --format '{{.Id}}' 2>/dev/null || true
}

# The tag moved to a new image: drop the old one unless something still uses it.
drop_replaced_image() {
    local old=$1 tag=$2
    [[ -n $old && $old != "$(image_id "$tag")" ]] || return 0
    "$(docker_cli)" rmi "$old" >/dev/null 2>&1 || true
}

ensure_packages() {
    bash "$REPO/tests/world/engine.sh" install
}

# ---- local/busybox:static -------------------------------------------------------------------

busybox_image() {
    local version recipe
    version=$(dpkg-query -W -f='${Version}' busybox-static)
    recipe="busybox-static $version"
    if [[ $(image_label "$BUSYBOX_TAG" recipe) == "$recipe" ]]; then
        say "image $BUSYBOX_TAG ready (reused)"
        return 0
    fi
    local started=$SECONDS work old applet
    old=$(image_id "$BUSYBOX_TAG")
    work=$(mktemp -d "$STATE/tmp/busybox.XXXXXX")
    mkdir -p "$work/bin" "$work/tmp" "$work/etc"
    chmod 1777 "$work/tmp"
    cp /bin/busybox "$work/bin/busybox"
    for applet in $(/bin/busybox --list); do
        [[ $applet == busybox ]] || ln -s busybox "$work/bin/$applet"
    done
    tar --numeric-owner --owner=0 --group=0 -C "$work" -c . | "$(docker_cli)" import \
        --change 'ENV PATH=/bin' \
        --change 'CMD ["/bin/sh"]' \
        --change "LABEL $LABEL.source=\"Debian busybox-static $version, FROM scratch\"" \
        --change "LABEL $LABEL.recipe=\"$recipe\"" \
        - "$BUSYBOX_TAG" >/dev/null
    rm -rf "$work"
    drop_replaced_image "$old" "$BUSYBOX_TAG"
    say "image $BUSYBOX_TAG imported in $((SECONDS - started)) s"
}

# ---- local/debian:bookworm ------------------------------------------------------------------

debian_recipe() { echo "debootstrap --variant=$VARIANT --include=$1 $SUITE; apt: $IMAGE_APT_SOURCE"; }

# The world's Debian repository: every package of minbase plus $BUILD_TIME_DEBS and their dependencies,
# as one flat repository (Packages.gz), cached under its recipe.
debian_repo() {
    local recipe="debootstrap --download-only --variant=$VARIANT --include=$INCLUDE,python3,$BUILD_TIME_DEBS $SUITE"
    if [[ -s $DEBIAN_REPO/Packages.gz && $(cat "$DEBIAN_REPO/recipe" 2>/dev/null) == "$recipe" ]]; then
        say "debian repository ready (reused)"
        return 0
    fi
    local started=$SECONDS work mirror
    mirror=$(debian_mirror)
    work=$(mktemp -d "$STATE/tmp/debs.XXXXXX")
    debootstrap --download-only --variant="$VARIANT" --include="$INCLUDE,python3,$BUILD_TIME_DEBS" "$SUITE" \
        "$work/root" "$mirror" >"$STATE/debootstrap-repo.log" 2>&1 \
        || die "debootstrap --download-only $SUITE from $mirror failed; see $STATE/debootstrap-repo.log"
    rm -rf "$DEBIAN_REPO"
    mkdir -p "$DEBIAN_REPO"
    mv "$work/root/var/cache/apt/archives/"*.deb "$DEBIAN_REPO/"
    (cd "$DEBIAN_REPO" && dpkg-scanpackages --multiversion . 2>/dev/null | gzip -9n >Packages.gz)
    echo "$recipe" >"$DEBIAN_REPO/recipe"
    rm -rf "$work"
    say "debian repository ($(find "$DEBIAN_REPO" -name '*.deb' | wc -l) packages) made from $mirror in $((SECONDS - started)) s"
}

rootfs_cache() {
    echo "$CACHE_DIR/debian-$SUITE-$VARIANT-$(debian_recipe "$1" | sha256sum | cut -c1-12).tar"
}

make_rootfs_cache() {
    local cache=$1 include=$2 mirror started=$SECONDS work
    mirror=$(debian_mirror)
    work=$(mktemp -d "$STATE/tmp/rootfs.XXXXXX")
    debootstrap --variant="$VARIANT" --include="$include" "$SUITE" "$work/rootfs" "$mirror" \
        >"$STATE/debootstrap.log" 2>&1 \
        || die "debootstrap $SUITE from $mirror failed; see $STATE/debootstrap.log"
    # The host's resolver and name would leak into the image; the engine provides its own.
    rm -f "$work/rootfs/etc/resolv.conf" "$work/rootfs/etc/hostname"
    rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
    tar --numeric-owner -C "$work/rootfs" -cf "$cache.partial" .
    printf '%s\n' "mirror=$mirror" "debootstrap=$(dpkg-query -W -f='${Version}' debootstrap)" \
        "made=$(date -u +%FT%TZ)" >"$cache.info"
    mv "$cache.partial" "$cache"
    rm -rf "$work"
    say "rootfs $SUITE ($include) made with debootstrap from $mirror in $((SECONDS - started)) s"
}

# The cached rootfs with its CA bundle and extra-CA folder replaced by the host's.
rootfs_with_host_cas() {
    local cache=$1 out=$2 stage=$3
    [[ -s $HOST_CA_BUNDLE ]] || die "host CA bundle $HOST_CA_BUNDLE is missing; set ENVBUILD_HOST_CA_BUNDLE"
    mkdir -p "$stage/${IMAGE_CA_BUNDLE%/*}" "$stage/usr/local/share/ca-certificates"
    cp "$HOST_CA_BUNDLE" "$stage$IMAGE_CA_BUNDLE"
    # The extra CA files too, so update-ca-certificates inside derived images keeps the proxy CA.
    if [[ -d $HOST_EXTRA_CA_DIR ]]; then
        cp -r "$HOST_EXTRA_CA_DIR/." "$stage/usr/local/share/ca-certificates/"
    fi
    mkdir -p "$stage/etc/apt"
    echo "$IMAGE_APT_SOURCE" >"$stage/etc/apt/sources.list"
    chmod -R u=rwX,go=rX "$stage"
    cp "$cache" "$out"
    # The engine refuses duplicate paths in an imported tar, so replace rather than add.
    tar --delete -f "$out" ".$IMAGE_CA_BUNDLE" ./usr/local/share/ca-certificates/ ./etc/apt/sources.list 2>/dev/null || true
    tar --numeric-owner --owner=0 --group=0 -C "$stage" -rf "$out" ".$IMAGE_CA_BUNDLE" ./usr/local/share/ca-certificates \
        ./etc/apt/sources.list
}

# debian_image TAG INCLUDE: a debootstrap image of $SUITE with INCLUDE and the host's CAs.
debian_image() {
    local tag=$1 include=$2 recipe ca_sha cache
    recipe=$(debian_recipe "$include")
    ca_sha=$(sha256_of "$HOST_CA_BUNDLE")
    if [[ $(image_label "$tag" recipe) == "$recipe" && $(image_label "$tag" ca-sha256) == "$ca_sha" ]]; then
        say "image $tag ready (reused)"
        return 0
    fi
    cache=$(rootfs_cache "$include")
    [[ -s $cache ]] || make_rootfs_cache "$cache" "$include"
    local started=$SECONDS work old mirror
    old=$(image_id "$tag")
    mirror=$(sed -n 's/^mirror=//p' "$cache.info" 2>/dev/null || true)
    work=$(mktemp -d "$STATE/tmp/import.XXXXXX")
    rootfs_with_host_cas "$cache" "$work/rootfs.tar" "$work/ca"
    "$(docker_cli)" import \
        --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change "ENV SSL_CERT_FILE=$IMAGE_CA_BUNDLE" \
        --change 'CMD ["bash"]' \
        --change "LABEL $LABEL.source=\"$recipe ${mirror:-unknown mirror}, plus the host CA certificates\"" \
        --change "LABEL $LABEL.recipe=\"$recipe\"" \
        --change "LABEL $LABEL.ca-sha256=\"$ca_sha\"" \
        "$work/rootfs.tar" "$tag" >/dev/null
    rm -rf "$work"
    drop_replaced_image "$old" "$tag"
    say "image $tag imported from the cached rootfs in $((SECONDS - started)) s"
}

main() {
    case ${1:-up} in
        mirror) debian_mirror ;;
        up)
            mkdir -p "$CACHE_DIR" "$STATE/tmp"
            ensure_packages
            "$(docker_cli)" info >/dev/null 2>&1 || die "no Docker engine answers; run tests/world/engine.sh up first"
            exec 8>"$STATE/images.lock"
            flock 8
            # Work dirs of a run that died half way; safe to drop while we hold the lock.
            rm -rf "$STATE/tmp/"{busybox,rootfs,import}.* "$CACHE_DIR/"*.partial
            busybox_image
            debian_repo
            debian_image "$DEBIAN_TAG" "$INCLUDE"
            debian_image "$PYTHON_TAG" "$PYTHON_INCLUDE"
            ;;
        *)
            echo "usage: $0 [up|mirror]" >&2
            exit 2
            ;;
    esac
}

main "$@"

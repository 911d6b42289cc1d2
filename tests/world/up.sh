#!/usr/bin/env bash
# Bring up the offline test world: Debian packages, Docker engine, base images, local registry and,
# when tests/world/channel_up.sh exists, the local channel. Idempotent; about 1 s when all exists.
#
# Several users may share one world (one state dir). Each `up` takes a lease named by
# ENVBUILD_WORLD_LEASE (default "manual"), held until the matching `down.sh`; a lease may name
# the process it belongs to (ENVBUILD_WORLD_LEASE_PID) so a holder that died is not waited for.
# `down.sh` stops the daemons only when the last lease is gone. with-world.sh does all this.
#
# Writes $STATE/env/world.env (KEY=VALUE lines) for with-world.sh to export to the command it runs;
# exports nothing itself.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
export ENVBUILD_WORLD_DIR=$STATE
LEASE=${ENVBUILD_WORLD_LEASE:-manual}
LEASE_PID=${ENVBUILD_WORLD_LEASE_PID:-}

die() { printf 'world: error: %s\n' "$*" >&2; exit 1; }

[[ $LEASE =~ ^[A-Za-z0-9._-]+$ ]] || die "ENVBUILD_WORLD_LEASE='$LEASE' must be letters, digits, '.', '_' or '-'"

# shellcheck source=lease-lib.sh
source "$HERE/lease-lib.sh"

take_lease() {
    local identity=""
    if [[ -n $LEASE_PID ]]; then
        identity=$(process_identity "$LEASE_PID") || die "lease holder pid $LEASE_PID does not exist"
    fi
    mkdir -p "$STATE/leases"
    echo "$identity" >"$STATE/leases/$LEASE"
}

write_env_file() {
    mkdir -p "$STATE/env"
    {
        echo "ENVBUILD_TEST_WORLD=$STATE"
        echo "DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}"
        echo "ENVBUILD_TEST_REGISTRY=${ENVBUILD_REGISTRY_ADDR:-127.0.0.1:5000}"
        echo "ENVBUILD_TEST_DEBIAN_IMAGE=local/debian:bookworm"
        echo "ENVBUILD_TEST_BUILDER_IMAGE=local/debian:bookworm-python"
        echo "ENVBUILD_TEST_BUSYBOX_IMAGE=local/busybox:static"
        echo "ENVBUILD_TEST_HOST_CA_BUNDLE=${ENVBUILD_HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
    } >"$STATE/env/world.env.partial"
    mv "$STATE/env/world.env.partial" "$STATE/env/world.env"
}

main() {
    # One up or down at a time per state dir; fd 6 is closed for every child so no daemon they
    # start can inherit (and hold forever) this lock.
    exec 6>"$STATE/world.lock"
    flock 6
    take_lease
    bash "$HERE/engine.sh" install 6>&-
    bash "$HERE/engine.sh" up 6>&-
    bash "$HERE/base_images.sh" up 6>&-
    bash "$HERE/registry.sh" up 6>&-
    if [[ -f $HERE/channel_up.sh ]]; then
        bash "$HERE/channel_up.sh" 6>&-
    fi
    write_env_file
}

main "$@"

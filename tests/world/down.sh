#!/usr/bin/env bash
# Tear down the offline test world: drop this caller's lease (ENVBUILD_WORLD_LEASE, default
# "manual"); when no live lease is left, run tests/world/channel_down.sh (when it exists), stop the
# registry and the engine, each only if this state dir started it. Base images and caches stay.
#
#   down.sh           release and stop when last
#   down.sh --force   stop now, whoever else holds a lease (they are dropped)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
export ENVBUILD_WORLD_DIR=$STATE
LEASE=${ENVBUILD_WORLD_LEASE:-manual}
LEASES=$STATE/leases

say() { printf 'world: %s\n' "$*"; }

# shellcheck source=lease-lib.sh
source "$HERE/lease-lib.sh"

live_leases() {
    local lease
    for lease in "$LEASES"/*; do
        [[ -f $lease ]] || continue
        if lease_is_live "$lease"; then
            basename "$lease"
        else
            rm -f "$lease"
        fi
    done
}

main() {
    local force=false holders
    [[ ${1:-} == --force ]] && force=true
    exec 6>"$STATE/world.lock"
    flock 6
    rm -f "$LEASES/$LEASE"
    holders=$(live_leases | paste -sd' ' -)
    if [[ -n $holders ]] && ! $force; then
        say "kept running: still leased by $holders (down.sh --force stops it anyway)"
        return 0
    fi
    $force && rm -f "$LEASES"/*
    if [[ -f $HERE/channel_down.sh ]]; then
        bash "$HERE/channel_down.sh" 6>&- || say "channel_down.sh failed; going on with the rest"
    fi
    local status=0
    bash "$HERE/registry.sh" down 6>&- || status=1
    bash "$HERE/engine.sh" down 6>&- || status=1
    rm -f "$STATE/env/world.env"
    return "$status"
}

main "$@"

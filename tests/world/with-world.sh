#!/usr/bin/env bash
# Run a command inside the offline test world: up, CMD, and always down (also on failure and
# Ctrl-C). Exits with CMD's status. CMD sees the variables of $STATE/env/*.env (ENVBUILD_TEST_WORLD,
# DOCKER_HOST, ENVBUILD_TEST_REGISTRY, ... and whatever the channel hook adds there).
#
#   tests/world/with-world.sh CMD [ARGS...]
#
# The lease is named after this process, so a concurrent run keeps the world up until it ends.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

if (($# == 0)); then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi

STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
LEASE="run-$$"

world() {
    ENVBUILD_WORLD_DIR=$STATE ENVBUILD_WORLD_LEASE=$LEASE ENVBUILD_WORLD_LEASE_PID=$$ bash "$HERE/$1"
}

# shellcheck disable=SC2329  # called by the EXIT trap
teardown() {
    # A second Ctrl-C must not leave daemons half stopped; the ignore is inherited by down.sh.
    trap '' INT TERM
    world down.sh || echo "world: teardown failed; run tests/world/down.sh --force" >&2
}

trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

world up.sh || {
    status=$?
    echo "world: setup failed (exit $status); nothing was run" >&2
    exit "$status"
}

set -a
for env_file in "$STATE"/env/*.env; do
    # shellcheck disable=SC1090  # written by up.sh and the channel hook
    [[ -f $env_file ]] && source "$env_file"
done
set +a

"$@"
exit $?

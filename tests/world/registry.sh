#!/usr/bin/env bash
# The local image registry of the offline test world: Debian's docker-registry with our own config,
# listening on loopback only (the engine treats 127.0.0.0/8 registries as plain HTTP by default).
#
#   registry.sh up       make sure a registry answers at ENVBUILD_REGISTRY_ADDR (default 127.0.0.1:5000)
#   registry.sh down     stop the registry `up` started from THIS state dir (nothing else)
#   registry.sh status   say whether a registry answers there (exit 3 when none does)
#
# Storage, config, pid and log live in ENVBUILD_WORLD_DIR/registry (default .world/registry). The port is
# the machine's, so the worlds using it register machine-wide (lease-lib.sh): the world that started the
# registry and ends while another world is still leased hands it over instead of stopping it under that
# world's pushes.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
REG_DIR=$STATE/registry
PID_FILE=$REG_DIR/registry.pid
CONFIG=$REG_DIR/config.yml
LOG=$REG_DIR/registry.log
ADDR=${ENVBUILD_REGISTRY_ADDR:-127.0.0.1:5000}
HOST=${ADDR%:*}
PORT=${ADDR##*:}
READY_TIMEOUT=${ENVBUILD_REGISTRY_TIMEOUT:-30}
MACHINE_DIR=${ENVBUILD_WORLD_MACHINE_DIR:-/run/envbuild-world}
REGISTRY_USERS=$MACHINE_DIR/registry-users-$PORT

say() { printf 'world: %s\n' "$*"; }
die() { printf 'world: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=lease-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lease-lib.sh"

# What answers GET /v2/ at $ADDR: "registry" (200 + distribution header), "other", or "none".
# Plain bash /dev/tcp, so a fresh machine needs no curl.
probe() {
    local reply
    # shellcheck disable=SC2016  # the inner script expands its own positional arguments
    reply=$(timeout 3 bash -c '
        exec 3<>"/dev/tcp/$1/$2" || exit 1
        printf "GET /v2/ HTTP/1.0\r\nHost: %s\r\n\r\n" "$1:$2" >&3
        while IFS= read -r line <&3; do
            line=${line%$'"'"'\r'"'"'}
            [[ -z $line ]] && break
            echo "$line"
        done' _ "$HOST" "$PORT" 2>/dev/null) || { echo none; return; }
    if [[ $reply == "HTTP/"*" 200"* ]] && grep -qi '^docker-distribution-api-version: registry/2' <<<"$reply"; then
        echo registry
    else
        echo other
    fi
}

# A daemon we started outlives this script, so init is its parent and may reap it late: an exited
# daemon stays a zombie for a while, which must count as gone.
pid_is_registry() {
    local pid=$1 stat
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $stat == "$pid (docker-registry) "* && ${stat##*) } != [ZX]* ]]
}

recorded_pid() {
    local pid
    [[ -f $PID_FILE ]] || return 1
    pid=$(cat "$PID_FILE")
    pid_is_registry "$pid" || return 1
    echo "$pid"
}

write_config() {
    mkdir -p "$REG_DIR/data"
    cat >"$CONFIG" <<EOF
# Written by tests/world/registry.sh: loopback only, storage in the world's state dir, no auth.
version: 0.1
log:
  level: warn
  fields:
    service: envbuild-test-registry
storage:
  filesystem:
    rootdirectory: $REG_DIR/data
  delete:
    enabled: true
http:
  addr: $ADDR
  headers:
    X-Content-Type-Options: [nosniff]
EOF
}

wait_until_ready() {
    local pid=$1 deadline=$((SECONDS + READY_TIMEOUT))
    until [[ $(probe) == registry ]]; do
        pid_is_registry "$pid" || die "docker-registry (pid $pid) exited while starting; last log lines: $(tail -n 3 "$LOG" | tr '\n' ' ')"
        ((SECONDS < deadline)) || die "docker-registry (pid $pid) did not answer at $ADDR within ${READY_TIMEOUT} s; see $LOG"
        sleep 0.1
    done
}

registry_up() {
    bash "$REPO/tests/world/engine.sh" install 9>&-
    local pid started=$SECONDS
    register_world "$REGISTRY_USERS"
    if pid=$(recorded_pid); then
        wait_until_ready "$pid"
        say "registry $ADDR already running (started by this world, pid $pid)"
        return 0
    fi
    rm -f "$PID_FILE"
    case $(probe) in
        registry)
            say "registry $ADDR already answering (started elsewhere; left alone)"
            return 0
            ;;
        other)
            die "$ADDR answers but not as an open registry (Debian's docker-registry service with auth? stop it with '/etc/init.d/docker-registry stop') or set ENVBUILD_REGISTRY_ADDR to a free loopback port"
            ;;
    esac
    write_config
    # setsid: Ctrl-C in the terminal must not kill it; down.sh stops it. Lock fds are closed
    # so the daemon never holds one of our locks.
    setsid docker-registry serve "$CONFIG" >>"$LOG" 2>&1 </dev/null 6>&- 7>&- 8>&- 9>&- &
    pid=$!
    echo "$pid" >"$PID_FILE"
    wait_until_ready "$pid"
    say "registry $ADDR started in $((SECONDS - started)) s (pid $pid, storage $REG_DIR/data)"
}

registry_down() {
    local pid deadline heir
    unregister_world "$REGISTRY_USERS"
    if ! pid=$(recorded_pid); then
        rm -f "$PID_FILE"
        say "registry not started by this world; left alone"
        return 0
    fi
    if heir=$(leased_other_world "$REGISTRY_USERS"); then
        mkdir -p "$heir/registry"
        cp "$PID_FILE" "$heir/registry/registry.pid"
        rm -f "$PID_FILE"
        say "registry $ADDR (pid $pid) kept running: the world at $heir still uses it and stops it when it ends"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 20))
    while pid_is_registry "$pid"; do
        ((SECONDS < deadline)) || kill -KILL "$pid" 2>/dev/null || true
        sleep 0.1
    done
    rm -f "$PID_FILE"
    say "registry $ADDR stopped (pid $pid)"
}

registry_status() {
    local pid
    case $(probe) in
        registry)
            if pid=$(recorded_pid); then
                say "registry $ADDR answering (started by this world, pid $pid)"
            else
                say "registry $ADDR answering (started elsewhere)"
            fi
            ;;
        other)
            say "$ADDR answers, but not as an open registry"
            return 3
            ;;
        none)
            say "no registry answers at $ADDR"
            return 3
            ;;
    esac
}

main() {
    mkdir -p "$REG_DIR"
    case ${1:-} in
        up | down)
            exec 9>"$REG_DIR/lock"
            flock 9
            "registry_$1"
            ;;
        status) registry_status ;;
        *)
            echo "usage: $0 up|down|status" >&2
            exit 2
            ;;
    esac
}

main "$@"

#!/usr/bin/env bash
# The Docker engine of the offline test world.
#
#   engine.sh install   install the Debian packages the whole world needs (only the missing ones)
#   engine.sh up        make sure an engine answers; start dockerd only when none does
#   engine.sh down      stop the dockerd that `up` started from THIS state dir (nothing else)
#   engine.sh status    say whether an engine answers and who started it (exit 3 when none answers)
#
# State (pid, marker, log) lives in ENVBUILD_WORLD_DIR (default: .world/ in the repository).
# Reference counting within one state dir is up.sh's and down.sh's. The engine is the machine's (its
# socket and pid file are dockerd's defaults), so every world that uses it also registers in a
# machine-wide folder: a world that started the engine and ends while another world still holds a
# lease hands the engine over to that world instead of stopping it under its tests.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
ENGINE_DIR=$STATE/engine
PID_FILE=$ENGINE_DIR/dockerd.pid
MARKER=$ENGINE_DIR/started-by-this-world
LOG=$ENGINE_DIR/dockerd.log
READY_TIMEOUT=${ENVBUILD_ENGINE_TIMEOUT:-60}
STOP_TIMEOUT=${ENVBUILD_ENGINE_STOP_TIMEOUT:-60}
# dockerd's own defaults; we keep them so every docker client on the machine finds this engine.
SYSTEM_PID_FILE=/var/run/docker.pid
SYSTEM_SOCKET=/var/run/docker.sock
MACHINE_DIR=${ENVBUILD_WORLD_MACHINE_DIR:-/run/envbuild-world}
ENGINE_USERS=$MACHINE_DIR/engine-users

# Every package the world uses, so a fresh machine pays for one `apt-get update` only.
# The shellcheck package: the generated CI pipelines' shell steps are checked with it (tests/unit/teams/test_ci.py).
# rsync: gitlab-ci-local copies the repository into its build folder with it (tests/system/test_gitlab_local_world.py).
# skopeo: reads what `envbuild image --push` put in the registry, as a registry client (tests/system/test_image_world.py).
WORLD_PACKAGES=(docker.io debootstrap docker-registry busybox-static shellcheck rsync skopeo dpkg-dev)

say() { printf 'world: %s\n' "$*"; }
die() { printf 'world: error: %s\n' "$*" >&2; exit 1; }

# The 20.10 CLI from docker.io matches the engine; any other docker CLI is the fallback.
docker_cli() {
    if [[ -x /usr/bin/docker ]]; then
        echo /usr/bin/docker
    else
        command -v docker || true
    fi
}

engine_answers() {
    local cli
    cli=$(docker_cli)
    [[ -n $cli ]] || return 1
    timeout 10 "$cli" info --format '{{.ServerVersion}}' >/dev/null 2>&1
}

engine_version() {
    timeout 10 "$(docker_cli)" version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null || echo unknown
}

missing_packages() {
    local pkg status
    for pkg in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
        [[ $status == ii* ]] || echo "$pkg"
    done
}

ensure_packages() {
    local missing started
    mapfile -t missing < <(missing_packages "$@")
    ((${#missing[@]} == 0)) && return 0
    ((EUID == 0)) || die "missing Debian packages ${missing[*]}; run as root or install them with apt-get"
    started=$SECONDS
    # An exclusive lock because two test runs starting together would both run apt-get.
    (
        flock 7
        # Whoever held the lock before us may have installed some of them.
        local still_missing apt=(apt-get -q -o DPkg::Lock::Timeout=300)
        mapfile -t still_missing < <(missing_packages "${missing[@]}")
        ((${#still_missing[@]} == 0)) && exit 0
        export DEBIAN_FRONTEND=noninteractive
        "${apt[@]}" update >"$STATE/apt.log" 2>&1 \
            || die "apt-get update failed; see $STATE/apt.log"
        "${apt[@]}" install -y --no-install-recommends "${still_missing[@]}" >>"$STATE/apt.log" 2>&1 \
            || die "apt-get install ${still_missing[*]} failed; see $STATE/apt.log"
    ) 7>"$STATE/apt.lock"
    say "installed ${missing[*]} in $((SECONDS - started)) s"
}

# A daemon we started outlives this script, so init is its parent and may reap it late: an exited
# daemon stays a zombie for a while, which must count as gone.
pid_is_live() {
    local pid=$1 comm=$2 stat
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $stat == "$pid ($comm) "* && ${stat##*) } != [ZX]* ]]
}

pid_is_dockerd() { pid_is_live "$1" dockerd; }

# The PID this state dir recorded, printed only while that process is still a dockerd.
recorded_pid() {
    local pid
    [[ -f $PID_FILE ]] || return 1
    pid=$(cat "$PID_FILE")
    pid_is_dockerd "$pid" || return 1
    echo "$pid"
}

# A crashed dockerd leaves its pid file and socket behind, and a new one refuses to start over them.
clean_stale_system_files() {
    local pid=""
    [[ -f $SYSTEM_PID_FILE ]] && pid=$(cat "$SYSTEM_PID_FILE" 2>/dev/null || true)
    if [[ -n $pid ]] && pid_is_dockerd "$pid"; then
        return 0
    fi
    rm -f "$SYSTEM_PID_FILE"
    [[ -S $SYSTEM_SOCKET ]] && ! engine_answers && rm -f "$SYSTEM_SOCKET"
    return 0
}

wait_until_ready() {
    local pid=$1 deadline=$((SECONDS + READY_TIMEOUT))
    until engine_answers; do
        pid_is_dockerd "$pid" || die "dockerd (pid $pid) exited while starting; last log lines: $(tail -n 3 "$LOG" | tr '\n' ' ')"
        ((SECONDS < deadline)) || die "dockerd (pid $pid) did not answer within ${READY_TIMEOUT} s; see $LOG"
        sleep 0.2
    done
}

start_dockerd() {
    command -v dockerd >/dev/null || die "dockerd not found after installing docker.io"
    clean_stale_system_files
    local started=$SECONDS pid
    # setsid keeps the terminal's Ctrl-C away from the engine: down.sh stops it in order instead.
    # fds 6-9 are closed so the daemon never inherits (and holds forever) one of our lock files.
    setsid dockerd >>"$LOG" 2>&1 </dev/null 6>&- 7>&- 8>&- 9>&- &
    pid=$!
    echo "$pid" >"$PID_FILE"
    printf 'pid=%s\nstarted=%s\n' "$pid" "$(date -u +%FT%TZ)" >"$MARKER"
    wait_until_ready "$pid"
    say "engine dockerd $(engine_version) started in $((SECONDS - started)) s (pid $pid, log $LOG)"
}

# shellcheck source=lease-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lease-lib.sh"

engine_up() {
    ensure_packages docker.io
    register_world "$ENGINE_USERS"
    local pid
    if [[ -n ${DOCKER_HOST:-} && $DOCKER_HOST != "unix://$SYSTEM_SOCKET" ]]; then
        engine_answers || die "DOCKER_HOST=$DOCKER_HOST does not answer; unset DOCKER_HOST to let the world start its own engine"
        say "engine at DOCKER_HOST=$DOCKER_HOST answers (not ours; left alone)"
        return 0
    fi
    if pid=$(recorded_pid); then
        # Ours but maybe still starting (a concurrent `up`): wait for it rather than start another.
        wait_until_ready "$pid"
        say "engine already running (started by this world, pid $pid)"
        return 0
    fi
    rm -f "$PID_FILE" "$MARKER"
    if engine_answers; then
        say "engine $(engine_version) already answering (started elsewhere; left alone)"
        return 0
    fi
    start_dockerd
}

engine_down() {
    local pid deadline heir
    unregister_world "$ENGINE_USERS"
    if ! pid=$(recorded_pid); then
        rm -f "$PID_FILE" "$MARKER"
        say "engine not started by this world; left alone"
        return 0
    fi
    if heir=$(leased_other_world "$ENGINE_USERS"); then
        mkdir -p "$heir/engine"
        cp "$PID_FILE" "$heir/engine/dockerd.pid"
        cp "$MARKER" "$heir/engine/started-by-this-world" 2>/dev/null || true
        rm -f "$PID_FILE" "$MARKER"
        say "engine (pid $pid) kept running: the world at $heir still uses it and stops it when it ends"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + STOP_TIMEOUT))
    while pid_is_dockerd "$pid"; do
        if ((SECONDS >= deadline)); then
            say "dockerd (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT} s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
            deadline=$((SECONDS + 10))
        fi
        sleep 0.1
    done
    rm -f "$PID_FILE" "$MARKER"
    clean_stale_system_files
    say "engine stopped (pid $pid)"
}

engine_status() {
    local pid
    if engine_answers; then
        if pid=$(recorded_pid); then
            say "engine $(engine_version) answering (started by this world, pid $pid)"
        else
            say "engine $(engine_version) answering (started elsewhere)"
        fi
        return 0
    fi
    say "no engine answers"
    return 3
}

main() {
    mkdir -p "$ENGINE_DIR"
    case ${1:-} in
        install) ensure_packages "${WORLD_PACKAGES[@]}" ;;
        up | down)
            # One state dir, one writer: concurrent up/down calls take turns; and one machine, one
            # writer of the engine's users and owner.
            exec 9>"$ENGINE_DIR/lock"
            flock 9
            mkdir -p "$MACHINE_DIR"
            exec 8>"$MACHINE_DIR/engine.lock"
            flock 8
            "engine_$1"
            ;;
        status) engine_status ;;
        *)
            echo "usage: $0 install|up|down|status" >&2
            exit 2
            ;;
    esac
}

main "$@"

#!/usr/bin/env bash
# Stop the world's http server that channel_up.sh started (by its recorded PID, nothing else).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
PID_FILE=$STATE/channel/server.pid

say() { printf 'channel: %s\n' "$*"; }

if [[ ! -f $PID_FILE ]]; then
    say "no server recorded in $PID_FILE: nothing to stop"
    exit 0
fi
pid=$(cat "$PID_FILE")
if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "tests.world.channel serve"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        [[ -e /proc/$pid ]] || break
        sleep 0.1
    done
    if [[ -e /proc/$pid ]]; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    say "stopped server pid $pid"
else
    say "recorded pid $pid is not our server any more: leaving it alone"
fi
rm -f "$PID_FILE"

#!/usr/bin/env bash
# Build the conda side of the offline world (cached: about 0.2 s when nothing changed) and serve it:
# one threaded http server on 127.0.0.1:$ENVBUILD_WORLD_PORT (default 8765) for the whole world dir,
#   channels   http://127.0.0.1:8765/conda/{conda-forge,pytorch,nvidia}
#   pip index  http://127.0.0.1:8765/pypi/simple
# Idempotent: a server this script started earlier and that still answers is kept.
# State: ENVBUILD_WORLD_DIR (default .world/ in the repository); PID and log in its channel/ folder.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
PORT=${ENVBUILD_WORLD_PORT:-8765}
PY=${PYTHON:-$REPO/.venv/bin/python}
RUN_DIR=$STATE/channel
PID_FILE=$RUN_DIR/server.pid
LOG=$RUN_DIR/server.log

say() { printf 'channel: %s\n' "$*"; }
die() { printf 'channel: error: %s\n' "$*" >&2; exit 1; }

[[ -x $PY ]] || die "no python at $PY: run \`make setup\` or set PYTHON"
mkdir -p "$RUN_DIR"
cd "$REPO"

"$PY" -m tests.world.channel build --world "$STATE"

our_server_alive() {
    [[ -f $PID_FILE ]] || return 1
    local pid; pid=$(cat "$PID_FILE")
    [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "tests.world.channel serve"
}

if our_server_alive; then
    if "$PY" -m tests.world.channel wait --port "$PORT" --timeout 5; then
        say "server already up (pid $(cat "$PID_FILE")) at http://127.0.0.1:$PORT"
        exit 0
    fi
    die "server pid $(cat "$PID_FILE") runs but does not answer on port $PORT: run channel_down.sh, then retry"
fi
rm -f "$PID_FILE"

# Somebody else's server on our port: fine only when it serves this very world.
if "$PY" -m tests.world.channel wait --port "$PORT" --timeout 0 2>/dev/null; then
    remote=$("$PY" -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())" \
        "http://127.0.0.1:$PORT/conda/conda-forge/noarch/repodata.json")
    if [[ $remote == "$(cat "$STATE/conda/conda-forge/noarch/repodata.json")" ]]; then
        say "another process already serves this world on port $PORT; using it"
        exit 0
    fi
    die "port $PORT is taken by a server that is not this world's: stop it or set ENVBUILD_WORLD_PORT"
fi

nohup setsid "$PY" -m tests.world.channel serve --world "$STATE" --port "$PORT" >"$LOG" 2>&1 </dev/null &
echo $! >"$PID_FILE"
if ! "$PY" -m tests.world.channel wait --port "$PORT" --timeout 15; then
    tail -5 "$LOG" >&2 || true
    die "the server did not come up; log: $LOG"
fi
say "serving $STATE at http://127.0.0.1:$PORT (pid $(cat "$PID_FILE"))"

#!/usr/bin/env bash
# Every test, inside the offline world: what `make test` runs.
#
#   bash tests/run-all.sh [PYTEST ARGS...]
#
# Brings the world up, runs `.venv/bin/python -m pytest ARGS`, always brings it down (Ctrl-C and
# failures included), then repeats pytest's summary line. pytest's "no tests collected" (exit 5)
# counts as a failure: a selection that runs nothing must not pass CI.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
VENV=${VENV:-.venv}
# Not resolved through symlinks: a venv python is only a venv python under its own path.
[[ $VENV == /* ]] || VENV=$REPO/$VENV
PYTHON=$VENV/bin/python
STATE=${ENVBUILD_WORLD_DIR:-$REPO/.world}
STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
LOG=$STATE/last-test-run.log

if [[ ! -x $PYTHON ]]; then
    echo "run-all: error: no virtual environment at $VENV; run 'make setup' (or 'make test')" >&2
    exit 1
fi

# Colour survives the tee below only when asked for; unbuffered so output streams live.
color=()
[[ -t 1 ]] && color=(--color=yes)
export PYTHONUNBUFFERED=1

# Ctrl-C reaches every process in the foreground group: pytest stops, with-world.sh tears the
# world down, `tee -i` ignores it so teardown output still reaches the terminal and the log, and
# this script carries on to the summary. A no-op trap, not an ignore: ignored signals would be
# inherited, and pytest would no longer stop on Ctrl-C.
trap ':' INT
ENVBUILD_WORLD_DIR=$STATE bash "$REPO/tests/world/with-world.sh" \
    "$PYTHON" -m pytest "${color[@]}" "$@" 2>&1 | tee -i "$LOG"
status=${PIPESTATUS[0]}

# The last "N passed/failed ... in T s" line pytest printed, without colour codes.
summary=$(sed 's/\x1b\[[0-9;]*m//g' "$LOG" \
    | grep -E '(passed|failed|error|errors|skipped|deselected|xfailed|xpassed|no tests ran).* in [0-9.]+s' \
    | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')

case $status in
    0) echo "run-all: pytest: ${summary:-passed}" ;;
    5)
        echo "run-all: error: pytest collected no tests (exit 5); check the paths, -m or -k you passed: ${summary:-}" >&2
        exit 1
        ;;
    *) echo "run-all: FAILED (exit $status): ${summary:-no pytest summary; see $LOG}" >&2 ;;
esac
exit "$status"

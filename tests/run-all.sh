#!/usr/bin/env bash
# `make test`: bring up the offline world (engine, base images, channels, pip index), run every
# test, stop what was started, exit with pytest's status. "No tests ran" is a failure here.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${VENV:-.venv}/bin/python

run_pytest() {
    "$PYTHON" -m pytest "$@"
    status=$?
    if ((status == 5)); then
        echo "run-all: pytest collected no tests; that is a failure" >&2
        return 1
    fi
    return "$status"
}

export -f run_pytest
export PYTHON
bash tests/world/with-world.sh bash -c 'run_pytest "$@"' run_pytest "$@"

#!/usr/bin/env bash
# `make demo`: the main job on the embedded offline default. Brings up the offline world (engine,
# base images, local conda channel and pip index), then walks a spec through every stage envbuild has:
# targets -> render -> lock -> image -> smoke. Stops what it started.
#   DEMO=cuda (default)  the mission's image: PyTorch-CUDA through the pip route, real torch 2.14.1 and
#                        torchvision 0.29.1 (CUDA 13.0 wheels) from the world's pip index, about 6 GB;
#                        on a machine without a GPU its GPU checks skip with their reasons
#   DEMO=cpu             the quick path: envs/pytorch.yaml's CPU target. The world has no real
#                        torchvision for that torch (tests/world/CHANNEL.md), so its smoke fails on the
#                        pinned torchvision by name instead of passing.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${VENV:-.venv}/bin
DEMO=${DEMO:-cuda}
case $DEMO in
    cuda) SPEC=tests/fixtures/specs/torch-cuda-pip.yaml TARGET=13.0 TAG=torch-cuda-pip:2.14.1-cuda13.0 ;;
    cpu) SPEC=envs/pytorch.yaml TARGET=cpu TAG=pytorch:2.13.0-cpu ;;
    *) echo "demo: DEMO=$DEMO: write DEMO=cuda or DEMO=cpu" >&2; exit 2 ;;
esac
OUT=${ENVBUILD_DEMO_DIR:-.world/demo}
PORT=${ENVBUILD_WORLD_PORT:-8765}
CHANNEL="http://127.0.0.1:$PORT/conda/conda-forge"
PIP_INDEX="http://127.0.0.1:$PORT/pypi/simple"

step() { printf '\n== %s\n' "$*"; }

run_demo() {
    step "targets of $SPEC"
    "$BIN/envbuild" targets "$SPEC"
    step "lint"
    "$BIN/envbuild" lint "$SPEC" || true
    step "render every target into $OUT/render"
    # the demo's own output of an earlier run: render replaces only folders it wrote itself
    rm -rf "$OUT/render"
    "$BIN/envbuild" render "$SPEC" --out "$OUT/render"
    step "lock the $TARGET target against the offline channel ($CHANNEL) and pip index"
    "$BIN/envbuild" lock "$SPEC" --cuda "$TARGET" --channel "$CHANNEL" --pip-index "$PIP_INDEX" \
        --locks "$OUT/locks" --base-image local/debian:bookworm
    step "build the $TARGET image"
    "$BIN/envbuild" image "$SPEC" --cuda "$TARGET" --channel "$CHANNEL" --pip-index "$PIP_INDEX" --locks "$OUT/locks" \
        --base-image local/debian:bookworm --builder-image "${ENVBUILD_BUILDER_IMAGE:-local/debian:bookworm-python}" \
        --network host --frozen
    step "smoke-test it from the inside"
    "$BIN/envbuild" smoke "$TAG"
    step "images"
    "$BIN/envbuild" images "$SPEC"
}

export ENVBUILD_WORLD_LEASE=demo ENVBUILD_WORLD_LEASE_PID=$$
bash tests/world/with-world.sh bash -c "$(declare -f step run_demo); BIN=$BIN SPEC=$SPEC OUT=$OUT CHANNEL=$CHANNEL PIP_INDEX=$PIP_INDEX TARGET=$TARGET TAG=$TAG; run_demo"

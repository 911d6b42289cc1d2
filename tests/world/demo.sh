#!/usr/bin/env bash
# `make demo`: the main job on the embedded offline default. Brings up the offline world (engine,
# base images, local conda channel and pip index), then walks envs/pytorch.yaml's CPU target through
# every stage envbuild has: targets -> render -> lock -> image -> smoke. Stops what it started.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${VENV:-.venv}/bin
SPEC=envs/pytorch.yaml
OUT=${ENVBUILD_DEMO_DIR:-.world/demo}
PORT=${ENVBUILD_WORLD_PORT:-8765}
CHANNEL="http://127.0.0.1:$PORT/conda/conda-forge"

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
    step "lock the CPU target against the offline channel ($CHANNEL)"
    "$BIN/envbuild" lock "$SPEC" --cuda cpu --channel "$CHANNEL" --locks "$OUT/locks" \
        --base-image local/debian:bookworm
    step "build the CPU image"
    "$BIN/envbuild" image "$SPEC" --cuda cpu --channel "$CHANNEL" --locks "$OUT/locks" \
        --base-image local/debian:bookworm --builder-image "${ENVBUILD_BUILDER_IMAGE:-local/debian:bookworm-python}" \
        --network host --frozen
    step "smoke-test it from the inside"
    "$BIN/envbuild" smoke "pytorch:2.13.0-cpu"
    step "images"
    "$BIN/envbuild" images "$SPEC"
}

export ENVBUILD_WORLD_LEASE=demo ENVBUILD_WORLD_LEASE_PID=$$
bash tests/world/with-world.sh bash -c "$(declare -f step run_demo); BIN=$BIN SPEC=$SPEC OUT=$OUT CHANNEL=$CHANNEL; run_demo"

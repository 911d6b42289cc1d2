"""`make bench-image`: cold build, rebuild after a change outside the environment, size overhead,
and whether the env layer is byte-identical across two builds from scratch.

Two targets: the default spec's CPU image (line `image:`) and the real CUDA torch 2.14.1 of
tests/fixtures/specs/torch-cuda-pip.yaml (line `image-cuda:`, about 6 GB, three builds take some
8 minutes on 2 cores). Targets (issue "Images"): rebuild <= 10 % of cold; image <= 5 % over the
installed env plus the base; the env layer digest always equal. Printed, never asserted: these
machines are shared.

Beside each, in the same run, from the same index or lock and base: the plain one-stage Dockerfile
a user would write instead (`<label>: cold= baseline= ratio=`), and a one-package change
(`incremental:`): a small pure-Python package added to the spec, relocked, rebuilt with the cache;
which of the env's layers it made new, and whether the CUDA and torch layers stayed. The CPU image
is pushed to the world's registry before and after the change (`push:`, what the second push sent).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import yaml

from bench._world import BenchEnv, bench_env
from builder.image.build import ENV_COPY, BuildOptions, ImageResult, build_image, docker_client, push_image
from builder.image.context import make_context
from builder.lock.targets import lock_targets
from builder.specs.cuda import TargetId
from builder.specs.model import load_spec
from builder.specs.target import Sources, resolve_targets, with_images
from tests.world.offline import (
    BUILDER_BASE,
    CHANNEL,
    CUDA_TORCH_SPEC,
    PIP_INDEX,
    RUNTIME_BASE,
    WORLD,
    cuda_torch_build_fits,
)

# What a user writes without envbuild. pip route: Debian's python (the env-builder base, the world's
# stand-in for python:3.11-slim) and pip from the index (Debian strips ensurepip), then the same pins
# the spec names, from the same index. conda route: the same installer and lock, run once in place.
PIP_BASELINE = """FROM {base}
RUN python3 -c "import urllib.request as r; r.urlretrieve('{pip_wheel}', '/tmp/pip-26.3-py3-none-any.whl')" \\
 && python3 /tmp/pip-26.3-py3-none-any.whl/pip install --no-cache-dir --break-system-packages \\
      --index-url {index} torch=={torch} torchvision=={torchvision} numpy \\
 && rm /tmp/pip-26.3-py3-none-any.whl
"""
CONDA_BASELINE = """FROM {base}
COPY envbuild/layers/installer/ /
COPY envbuild/plan.json /opt/envbuild/plan.json
RUN python3 -m zipfile -e /opt/envbuild/installer/rattler.zip /tmp/envbuild-rattler \\
 && PYTHONPATH=/opt/envbuild/installer:/tmp/envbuild-rattler python3 -m builder.lock.install \\
      --plan /opt/envbuild/plan.json --prefix /opt/env --cache-dir /tmp/envbuild-cache \\
 && rm -rf /tmp/envbuild-cache /tmp/envbuild-rattler /opt/envbuild
ENV PATH=/opt/env/bin:$PATH
"""
# Small, pure Python, in the world's channel and in neither test spec.
ADDED_PACKAGE = "packaging"

NETWORK = BuildOptions(network="host")
NO_CACHE = BuildOptions(network="host", no_cache=True)


def build(env, folder: Path, options: BuildOptions, change_outside_env: bool = False):
    context = make_context(env.target, env.lock_path, folder)
    if change_outside_env:
        # The smoke suite ships with every image but is not part of the environment.
        readme = context.root / "smoke" / "README.md"
        readme.write_text(readme.read_text() + f"\n<!-- bench {time.time_ns()} -->\n")
    return build_image(context, options)


def installed_env_bytes(image_id: str) -> int:
    """The bytes of the files and links under /opt/env (`du` would add 4 kB per folder, which no
    layer stores)."""
    client = docker_client()
    script = r"""find /opt/env \( -type f -o -type l \) -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}'"""
    out = client.containers.run(image_id, ["sh", "-c", script], remove=True, user="0")
    return int(out.split()[0])


def import_torch_seconds(image_id: str) -> float:
    """`import torch` as the image's own user, the second of two runs (the page cache warm): stale
    pycs would show here, since that user cannot write new ones."""
    client = docker_client()
    timed = "import time; t = time.time(); import torch; print(time.time() - t)"
    script = f"python -c 'import torch' && python -c '{timed}'"
    out = client.containers.run(image_id, ["sh", "-c", script], remove=True)
    return float(out.split()[-1])


def baseline_seconds(env: BenchEnv, context_root: Path) -> float:
    """Build the plain one-stage Dockerfile of this target in `context_root` (a build context
    envbuild made: the conda baseline takes its installer and plan), --no-cache; its seconds."""
    target = env.target
    if target.route.value == "pip":
        text = PIP_BASELINE.format(base=BUILDER_BASE, pip_wheel=f"{WORLD}/pypi/files/pip-26.3-py3-none-any.whl",
                                   index=PIP_INDEX, torch=target.torch, torchvision=target.torchvision)
    else:
        text = CONDA_BASELINE.format(base=BUILDER_BASE)
    (context_root / "Dockerfile.baseline").write_text(text)
    client = docker_client()
    started = time.monotonic()
    image_id = None
    for chunk in client.api.build(path=str(context_root), dockerfile="Dockerfile.baseline", rm=True, forcerm=True,
                                  nocache=True, network_mode="host", decode=True):
        if "error" in chunk:
            raise SystemExit(f"bench: baseline build failed: {chunk['error']}")
        if isinstance(chunk.get("aux"), dict) and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
    seconds = time.monotonic() - started
    if image_id:
        size = int(client.api.inspect_image(image_id)["Size"])
        print(f"baseline ({target.route.value} route, one stage): {seconds:.1f} s, image {size / 1e6:.0f} MB")
        client.api.remove_image(image_id, force=True)
    return seconds


def with_added_package(env: BenchEnv) -> BenchEnv:
    """The same env with ADDED_PACKAGE added to its spec's conda packages, relocked."""
    spec_path = env.target.spec.source
    assert spec_path is not None
    data = yaml.safe_load(spec_path.read_text())
    data["conda"] = [*(data.get("conda") or []), ADDED_PACKAGE]
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = with_images(load_spec(spec_path), RUNTIME_BASE, BUILDER_BASE)
    target = resolve_targets(spec, (TargetId(env.target.cuda),), Sources(channels=(CHANNEL,), pip_index=PIP_INDEX))[0]
    result = lock_targets([target], lock_root=env.folder / "locks")[0]
    if result.status == "failed":
        raise SystemExit(f"bench: relock with {ADDED_PACKAGE} failed: {result.message}")
    return BenchEnv(target, result.path, env.folder)


def incremental(env: BenchEnv, cold: ImageResult, push: bool) -> None:
    """Add one small package, relock, rebuild with the cache: what was made new. With `push`, both
    images go to the world's registry: what the second push sent, and what the registry already had."""
    registry = os.environ.get("ENVBUILD_TEST_REGISTRY", "") if push else ""
    if registry:
        push_image(cold, registry)
    changed = with_added_package(env)
    rebuild = build(changed, env.folder / "incremental", NETWORK)
    client = docker_client()
    before = set(client.api.inspect_image(cold.image_id)["RootFS"]["Layers"]) if _exists(cold.image_id) else set()
    before |= {layer["digest"] for layer in cold.env_layers}
    history = [h for h in reversed(client.api.history(rebuild.image_id))]
    sizes = [int(h["Size"]) for h in history if "#(nop)" not in h.get("CreatedBy", "")
             or "#(nop) COPY" in h["CreatedBy"] or "#(nop) ADD" in h["CreatedBy"]]
    layers = client.api.inspect_image(rebuild.image_id)["RootFS"]["Layers"]
    new_bytes = sum(size for size, digest in zip(sizes, layers, strict=False) if digest not in before)
    big = {layer["group"]: layer["digest"] for layer in cold.env_layers if layer["group"] in ("cuda", "torch")}
    after = {layer["group"]: layer["digest"] for layer in rebuild.env_layers}
    stable = "yes" if big and all(after.get(group) == digest for group, digest in big.items()) else "no"
    print(f"incremental: rebuild_s={rebuild.seconds:.1f} new_bytes={new_bytes} "
          f"new_bytes_ratio={new_bytes / rebuild.size:.4f} big_layers_stable={stable}", flush=True)
    for layer in rebuild.env_layers:
        print(f"  env layer {layer['group']}: {layer['size'] / 1e6:.1f} MB {layer['digest'][:19]}"
              f"{'' if layer['digest'] in before else ' (new)'}")
    if registry:
        push_image(rebuild, registry)
        print(f"push: first image sent {cold.push_sent_bytes or 0:,} bytes; after the change, sent "
              f"{rebuild.push_sent_bytes or 0:,} bytes, the registry already had {rebuild.push_reused_bytes or 0:,}",
              flush=True)


def _exists(image_id: str) -> bool:
    try:
        docker_client().api.inspect_image(image_id)
        return True
    except Exception:  # noqa: BLE001 - gone: the layers of the result are what is left to compare
        return False


def build_only_bytes(result: ImageResult) -> int:
    """Bytes in the image's layers that its final filesystem deletes: the installer and the plans,
    copied in by `COPY envbuild/layers/<name>/ /` (every whole-root copy after the bootstrap group's)."""
    history = list(reversed(docker_client().api.history(result.image_id)))
    copies = [int(h["Size"]) for h in history if ENV_COPY.search(h.get("CreatedBy", ""))]
    return sum(copies[1:])


def measure(env, label: str) -> None:
    """The four measurements of one target, then its summary line `<label>: cold= ...`."""
    baseline = baseline_seconds(env, make_context(env.target, env.lock_path, env.folder / "baseline").root)
    cold = build(env, env.folder / "cold", NO_CACHE)
    print(f"{label}: cold build (--no-cache): {cold.seconds:.1f} s, image {cold.size / 1e6:.0f} MB, "
          f"env layers {cold.env_layer_size / 1e6:.0f} MB {cold.env_layer_digest[:19]}")
    print(f"{label}: cold={cold.seconds:.1f} baseline={baseline:.1f} ratio={cold.seconds / baseline:.2f}", flush=True)
    extra = build_only_bytes(cold)
    print(f"{label}: build-only bytes in layers: {extra} ({100 * extra / cold.size:.2f} % of the image)")
    rebuild = build(env, env.folder / "rebuild", NETWORK, change_outside_env=True)
    print(f"{label}: rebuild after a smoke-suite change: {rebuild.seconds:.1f} s")
    again = build(env, env.folder / "again", NO_CACHE)
    print(f"{label}: second build from scratch: {again.seconds:.1f} s, env layers {again.env_layer_digest[:19]}")
    if again.base_size is None:
        raise SystemExit(f"bench: the engine does not know the runtime base {env.target.runtime_image.reference}")
    installed = installed_env_bytes(again.image_id)  # the tags moved there; earlier builds are gone
    overhead = 100 * (again.size / (installed + again.base_size) - 1)
    print(f"{label}: installed env {installed / 1e6:.0f} MB + base {cold.base_size / 1e6:.0f} MB "
          f"-> image {again.size / 1e6:.0f} MB")
    print(f"{label}: import torch as the image's user: {import_torch_seconds(again.image_id):.2f} s")
    stable = "yes" if again.env_layer_digest == cold.env_layer_digest else "no"
    print(f"{label}: cold={cold.seconds:.1f} rebuild={rebuild.seconds:.1f} "
          f"rebuild_ratio={rebuild.seconds / cold.seconds:.3f} size_overhead={overhead:.2f} "
          f"env_layer_stable={stable}", flush=True)
    incremental(env, again, push=label == "image")


def main() -> None:
    with bench_env("cpu") as env:
        measure(env, "image")
    # The real CUDA torch (pip route, about 6 GB): the same targets hold for an image 30x larger.
    fits, why_not = cuda_torch_build_fits()
    if not fits:
        print(f"image-cuda: skipped: {why_not}")
        return
    with bench_env("13.0", CUDA_TORCH_SPEC) as env:
        measure(env, "image-cuda")


if __name__ == "__main__":
    main()

"""`make bench-image`: cold build, rebuild after a change outside the environment, size overhead,
and whether the env layer is byte-identical across two builds from scratch.

Two targets: the default spec's CPU image (line `image:`) and the real CUDA torch 2.14.1 of
tests/fixtures/specs/torch-cuda-pip.yaml (line `image-cuda:`, about 6 GB, three builds take some
8 minutes on 2 cores). Targets (issue "Images"): rebuild <= 10 % of cold; image <= 5 % over the
installed env plus the base; the env layer digest always equal. Printed, never asserted: these
machines are shared.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench._world import bench_env
from builder.image.build import BuildOptions, build_image, docker_client
from builder.image.context import make_context
from tests.world.offline import CUDA_TORCH_SPEC, cuda_torch_build_fits

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


def measure(env, label: str) -> None:
    """The four measurements of one target, then its summary line `<label>: cold= ...`."""
    cold = build(env, env.folder / "cold", NO_CACHE)
    print(f"{label}: cold build (--no-cache): {cold.seconds:.1f} s, image {cold.size / 1e6:.0f} MB, "
          f"env layer {cold.env_layer_size / 1e6:.0f} MB {cold.env_layer_digest[:19]}")
    rebuild = build(env, env.folder / "rebuild", NETWORK, change_outside_env=True)
    print(f"{label}: rebuild after a smoke-suite change: {rebuild.seconds:.1f} s")
    again = build(env, env.folder / "again", NO_CACHE)
    print(f"{label}: second build from scratch: {again.seconds:.1f} s, env layer {again.env_layer_digest[:19]}")
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

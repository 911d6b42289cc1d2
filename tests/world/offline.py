"""What code running against the offline world needs to know of it, shared by tests and benchmarks:
where its channel is, its base images, and how to make an env of its own there.

Values come from the variables tests/world/with-world.sh exports, with the world's defaults.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import yaml

from tests.paths import FIXTURES, REPO

PORT = os.environ.get("ENVBUILD_WORLD_PORT", "8765")
WORLD = f"http://127.0.0.1:{PORT}"  # the world's file server: conda channels and the pip index
CHANNEL = f"{WORLD}/conda/conda-forge"
PIP_INDEX = f"{WORLD}/pypi/simple"
# torch 2.14.1 + torchvision 0.29.1, CUDA 13.0 wheels with their nvidia-* wheels (about 6 GB installed)
CUDA_TORCH_SPEC = FIXTURES / "specs" / "torch-cuda-pip.yaml"
RUNTIME_BASE = os.environ.get("ENVBUILD_TEST_DEBIAN_IMAGE", "local/debian:bookworm")
BUILDER_BASE = os.environ.get("ENVBUILD_TEST_BUILDER_IMAGE", "local/debian:bookworm-python")
# What locking, building and smoke testing the CUDA_TORCH_SPEC image takes of the engine's disk at its
# peak: 8.0 GB measured (df of the engine's root each second, 2026-12-04) with the env in layer groups,
# where the two-stage build held the 5.8 GB env three times (17.1 GB); with a margin.
CUDA_TORCH_BUILD_BYTES = 10 * 10**9


def engine_free_bytes() -> int | None:
    """Free bytes where the world's engine keeps its data; None when that folder is not on this
    machine (a remote engine)."""
    import docker

    client = docker.from_env()
    try:
        root = client.info().get("DockerRootDir") or ""
    finally:
        client.close()
    return shutil.disk_usage(root).free if root and os.path.isdir(root) else None


def cuda_torch_build_fits() -> tuple[bool, str]:
    """Whether the CUDA torch image can be built on the engine's disk now, and why not."""
    free = engine_free_bytes()
    if free is None or free >= CUDA_TORCH_BUILD_BYTES:
        return True, ""
    return False, (f"the engine's disk has {free / 1e9:.1f} GB free; building the CUDA torch image needs "
                   f"about {CUDA_TORCH_BUILD_BYTES / 1e9:.0f} GB at its peak")


# The world's CPU torch has no torchvision that imports with it (FIELD-NOTES: only the CUDA 13.0 pair does),
# and the smoke suite fails a pinned torchvision that is missing (tests/system/test_smoke_container.py). A test
# of something else that needs a passing CPU env takes the spec without the pin.
NO_CPU_TORCHVISION = ("torchvision",)


def unique_spec_copy(folder: Path, prefix: str, source: Path = REPO / "envs" / "pytorch.yaml",
                     drop: tuple[str, ...] = ()) -> Path:
    """A spec (envs/pytorch.yaml by default) under a unique env name, so its tags never touch
    anyone else's images; `drop`: top-level keys left out (see NO_CPU_TORCHVISION)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    data = yaml.safe_load(source.read_text())
    data["name"] = name
    for key in drop:
        data.pop(key, None)
    spec = folder / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def remove_env_images(name: str) -> None:
    """Every image of the env `name` (one made by unique_spec_copy)."""
    import docker

    client = docker.from_env()
    for image in client.images.list(filters={"label": f"io.envbuild.env={name}"}):
        client.images.remove(image.id, force=True)
    client.close()

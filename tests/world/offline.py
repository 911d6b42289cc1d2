"""What code running against the offline world needs to know of it, shared by tests and benchmarks:
where its channel is, its base images, and how to make an env of its own there.

Values come from the variables tests/world/with-world.sh exports, with the world's defaults.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PORT = os.environ.get("ENVBUILD_WORLD_PORT", "8765")
CHANNEL = f"http://127.0.0.1:{PORT}/conda/conda-forge"
PIP_INDEX = f"http://127.0.0.1:{PORT}/pypi/simple"
# torch 2.14.1 + torchvision 0.29.1, CUDA 13.0 wheels with their nvidia-* wheels (about 6 GB installed)
CUDA_TORCH_SPEC = ROOT / "tests" / "fixtures" / "specs" / "torch-cuda-pip.yaml"
RUNTIME_BASE = os.environ.get("ENVBUILD_TEST_DEBIAN_IMAGE", "local/debian:bookworm")
BUILDER_BASE = os.environ.get("ENVBUILD_TEST_BUILDER_IMAGE", "local/debian:bookworm-python")


def unique_spec_copy(folder: Path, prefix: str, source: Path = ROOT / "envs" / "pytorch.yaml") -> Path:
    """A spec (envs/pytorch.yaml by default) under a unique env name, so its tags never touch
    anyone else's images."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    data = yaml.safe_load(source.read_text())
    data["name"] = name
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

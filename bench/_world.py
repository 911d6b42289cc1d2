"""What the image and smoke benchmarks share: an env of their own on the offline world.

The default spec under a unique name (its tags never touch a developer's images), locked against
the world's channel for the world's runtime base, through the same library calls `envbuild image`
makes. Run inside tests/world/with-world.sh (the Makefile does).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from builder.image import docker_client
from builder.lock import lock_targets
from builder.spec import load_spec
from builder.target import Sources, Target, resolve_targets, with_images

ROOT = Path(__file__).resolve().parent.parent
PORT = os.environ.get("ENVBUILD_WORLD_PORT", "8765")
CHANNEL = f"http://127.0.0.1:{PORT}/conda/conda-forge"
RUNTIME_BASE = os.environ.get("ENVBUILD_TEST_DEBIAN_IMAGE", "local/debian:bookworm")
BUILDER_BASE = os.environ.get("ENVBUILD_TEST_BUILDER_IMAGE", "local/debian:bookworm-python")


@dataclass(frozen=True)
class BenchEnv:
    target: Target
    lock_path: Path
    folder: Path


def require_world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        sys.exit("bench: the offline world is not up; run through `make bench` (tests/world/with-world.sh)")


@contextmanager
def bench_env(cuda: str = "cpu") -> Iterator[BenchEnv]:
    """A locked target of a uniquely named copy of envs/pytorch.yaml; its images removed after."""
    require_world()
    folder = Path(tempfile.mkdtemp(prefix="envbuild-bench-"))
    name = f"envbuild-bench-{uuid.uuid4().hex[:8]}"
    data = yaml.safe_load((ROOT / "envs" / "pytorch.yaml").read_text())
    data["name"] = name
    spec_path = folder / f"{name}.yaml"
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = with_images(load_spec(spec_path), RUNTIME_BASE, BUILDER_BASE)
    target = resolve_targets(spec, (cuda,), Sources(channels=(CHANNEL,)))[0]
    try:
        result = lock_targets([target], lock_root=folder / "locks")[0]
        if result.status == "failed":
            sys.exit(f"bench: lock failed: {result.message}")
        yield BenchEnv(target, result.path, folder)
    finally:
        client = docker_client()
        for image in client.images.list(filters={"label": f"io.envbuild.env={name}"}):
            client.images.remove(image.id, force=True)
        shutil.rmtree(folder, ignore_errors=True)

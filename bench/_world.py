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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from builder.lock.targets import lock_targets
from builder.specs.cuda import TargetId
from builder.specs.model import load_spec
from builder.specs.target import Sources, Target, resolve_targets, with_images
from tests.world.offline import (
    BUILDER_BASE,
    CHANNEL,
    PIP_INDEX,
    RUNTIME_BASE,
    remove_env_images,
    unique_spec_copy,
)


@dataclass(frozen=True)
class BenchEnv:
    target: Target
    lock_path: Path
    folder: Path


def require_world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        sys.exit("bench: the offline world is not up; run through `make bench` (tests/world/with-world.sh)")


@contextmanager
def bench_env(cuda: str = "cpu", source: Path | None = None) -> Iterator[BenchEnv]:
    """A locked target of a uniquely named copy of `source` (envs/pytorch.yaml by default), its
    pip packages from the world's index; its images removed after."""
    require_world()
    folder = Path(tempfile.mkdtemp(prefix="envbuild-bench-"))
    spec_path = unique_spec_copy(folder, "envbuild-bench", *([source] if source else []))
    try:
        spec = with_images(load_spec(spec_path), RUNTIME_BASE, BUILDER_BASE)
        target = resolve_targets(spec, (TargetId.parse(cuda),), Sources(channels=(CHANNEL,), pip_index=PIP_INDEX))[0]
        result = lock_targets([target], lock_root=folder / "locks")[0]
        if result.status == "failed":
            sys.exit(f"bench: lock failed: {result.message}")
        yield BenchEnv(target, result.path, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        remove_env_images(spec_path.stem)

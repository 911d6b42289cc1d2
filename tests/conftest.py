"""Fixtures shared by the tests that build real images on the offline world's engine.

Images are built once per session from a copy of envs/pytorch.yaml under a unique env name, so
their tags never collide with a developer's own images or `make demo`'s, and every image of that
name is removed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.world.offline import BUILDER_BASE, ROOT, RUNTIME_BASE, remove_env_images, unique_spec_copy
from tests.world.offline import CHANNEL as WORLD_CHANNEL

__all__ = ["BUILDER_BASE", "ROOT", "RUNTIME_BASE", "WORLD_CHANNEL", "envbuild"]


def envbuild(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
             timeout: float = 900) -> subprocess.CompletedProcess:
    """The envbuild command as a user runs it (plain output: CI=true)."""
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=cwd or ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "CI": "true", **(env or {})})


TEST_KINDS = ("unit", "world", "docker", "torch")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test says what it needs (`-m unit` must select exactly the fast ones): one unmarked test
    fails the collection."""
    unmarked = [item.nodeid for item in items if not {m.name for m in item.iter_markers()} & set(TEST_KINDS)]
    if unmarked:
        raise pytest.UsageError(f"tests without a marker ({', '.join(TEST_KINDS)}): {', '.join(unmarked)}")


@dataclass(frozen=True)
class WorldEnv:
    """A spec of its own (unique env name) and its lock folder, on the offline world."""

    name: str
    spec: Path
    locks: Path

    def world_args(self) -> list[str]:
        return ["--channel", WORLD_CHANNEL, "--locks", str(self.locks)]

    def image_args(self, *targets: str) -> list[str]:
        cuda = [arg for target in targets for arg in ("--cuda", target)]
        return ["image", str(self.spec), *cuda, *self.world_args(), "--base-image", RUNTIME_BASE,
                "--builder-image", BUILDER_BASE, "--network", "host", "--json"]

    def build(self, *targets: str, extra: tuple[str, ...] = ()) -> list[dict]:
        done = envbuild(*self.image_args(*targets), *extra)
        assert done.returncode == 0, done.stderr[-4000:]
        return json.loads(done.stdout)


@pytest.fixture(scope="session")
def docker_world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        pytest.skip("the offline world is not up: run through `make test`")


@pytest.fixture(scope="session")
def world_env(docker_world, tmp_path_factory) -> Iterator[WorldEnv]:
    folder = tmp_path_factory.mktemp("world-env")
    spec = unique_spec_copy(folder, "envbuild-test")
    name = spec.stem
    yield WorldEnv(name, spec, folder / "locks")
    remove_env_images(name)


@pytest.fixture(scope="session")
def built(world_env: WorldEnv) -> dict[str, dict]:
    """The CPU image (real python and CPU torch) and the CUDA 12.9 image (stand-in packages)."""
    return {result["target"]: result for result in world_env.build("cpu", "12.9")}

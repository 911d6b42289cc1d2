"""Fixtures shared by the tests that build real images on the offline world's engine.

Images are built once per session from a copy of envs/pytorch.yaml under a unique env name, so
their tags never collide with a developer's own images or `make demo`'s, and every image of that
name is removed at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.system.world_env import WorldEnv
from tests.world.offline import remove_env_images, unique_spec_copy


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

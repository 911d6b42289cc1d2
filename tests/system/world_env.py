"""An env of a test's own on the offline world: what the system tests that build images share."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.envbuild_cli import envbuild
from tests.world.offline import BUILDER_BASE, RUNTIME_BASE
from tests.world.offline import CHANNEL as WORLD_CHANNEL


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
        return json.loads(done.stdout)["images"]

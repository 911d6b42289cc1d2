"""The shipped spec (envs/pytorch.yaml) pins the torch the offline world's conda channel has, not the newest
release `envbuild init` starts from; the two may differ only while the spec says why. A world that moves to
another pytorch, or a spec that moves off the world's, fails here instead of in a 2-minute system test."""

from __future__ import annotations

import pytest
import yaml

from builder.init.choose import starter_draft
from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from tests.paths import REPO

pytestmark = pytest.mark.unit

SPEC = REPO / "envs" / "pytorch.yaml"
WORLD = REPO / "tests" / "world" / "channel" / "world.yaml"


def _world_conda_forge() -> dict:
    return yaml.safe_load(WORLD.read_text(encoding="utf-8"))["conda_forge"]


def test_every_conda_forge_target_of_the_shipped_spec_has_its_pytorch_and_torchvision_in_the_world() -> None:
    releases = {r["version"]: r for r in _world_conda_forge()["pytorch"]}
    for target in resolve_targets(load_spec(SPEC)):
        if target.route.value != "conda-forge":
            continue
        release = releases.get(target.torch)
        assert release is not None, f"{target.key}: torch {target.torch}; the world's conda channel has {sorted(releases)}"
        assert release["torchvision"] == target.torchvision, target.key
        assert target.python in release["pythons"], target.key
        flavour = "cpu" if target.cuda is None else f"cuda{str(target.cuda).replace('.', '')}"
        assert flavour in release["flavours"], f"{target.key}: no {flavour} build of pytorch {target.torch} in the world"


def test_the_spec_pins_the_torch_of_the_worlds_one_real_pytorch_build() -> None:
    assert load_spec(SPEC).torch == _world_conda_forge()["real_pytorch"]["version"]


def test_a_pin_older_than_the_starters_is_explained_in_the_spec() -> None:
    shipped, starter = load_spec(SPEC).torch, starter_draft("pytorch").data["torch"]
    text = SPEC.read_text(encoding="utf-8")
    if shipped != starter:
        assert f"torch {shipped}" in text and f"({starter})" in text and "offline test world" in text, (
            f"envs/pytorch.yaml pins torch {shipped}, `envbuild init` starts from {starter}: say why in the spec")

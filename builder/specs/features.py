"""What a spec's `features:` mean (builder/data/features.yaml): packages every target's environment gets,
and the variables that make the image's smoke suite hold it to the feature."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from builder.specs.model import Feature
from builder.yamlio import data_text, load_yaml


class FeatureData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    conda: tuple[str, ...] = ()
    smoke_env: dict[str, str] = {}
    source: str


@lru_cache(maxsize=1)
def load_features() -> dict[Feature, FeatureData]:
    text = data_text("features.yaml")
    return {Feature(name): FeatureData.model_validate(row) for name, row in load_yaml(text).items()}


def feature_conda_packages(features: Iterable[Feature]) -> list[str]:
    """The conda packages the features add, once each, in the order the spec names the features."""
    data = load_features()
    return list(dict.fromkeys(package for feature in features for package in data[feature].conda))


def feature_smoke_env(features: Iterable[Feature]) -> dict[str, str]:
    data = load_features()
    return {name: value for feature in features for name, value in sorted(data[feature].smoke_env.items())}


# torch.compile (inductor) is in every torch release since 2.0 (PyTorch 2.0 release notes).
FIRST_COMPILE_TORCH = (2, 0)


def compiles(torch_version: str, features: Iterable[Feature]) -> bool:
    """Whether the image gets a C/C++ compiler and its smoke suite requires torch.compile: torch >= 2.0
    unless the spec opted out with `features: [no-compile]`."""
    from packaging.version import InvalidVersion, Version

    if Feature.NO_COMPILE in tuple(features):
        return False
    try:
        return Version(torch_version).release[:2] >= FIRST_COMPILE_TORCH
    except InvalidVersion:
        return False


def compile_smoke_env(torch_version: str, features: Iterable[Feature]) -> dict[str, str]:
    """The variables that hold the image to the features, and to torch.compile when it compiles."""
    features = tuple(features)
    env = feature_smoke_env(features)
    if compiles(torch_version, features):
        env["ENVBUILD_REQUIRE_COMPILE"] = "1"
    return dict(sorted(env.items()))

"""A pixi manifest whose values have other types than pixi's schema gives them (an int where pixi expects a
table, a string for a list) is one line naming the key, never an internal error."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from builder.errors import EnvbuildError, UsageError
from builder.init.pixi_manifest import read_pixi_manifest_data
from tests.unit.value_paths import value_paths

pytestmark = pytest.mark.unit

MANIFEST: dict[str, Any] = {
    "workspace": {"name": "vision", "channels": ["conda-forge"], "platforms": ["linux-64"]},
    "system-requirements": {"cuda": "12.0"},
    "dependencies": {"python": "3.11.*", "pytorch-gpu": ">=2.7"},
    "pypi-dependencies": {"numpy": "*"},
    "pypi-options": {"index-url": "https://mirror.example/simple",
                     "extra-index-urls": ["https://download.pytorch.org/whl/cu126"]},
    "target": {"linux-64": {"dependencies": {"cuda-version": "12.6"}}},
    "feature": {"cuda": {"platforms": ["linux-64"], "channels": ["conda-forge"],
                         "dependencies": {"cuda-version": "12.6"}, "system-requirements": {"cuda": "12"}}},
    "environments": {"cuda": ["cuda"]},
}


def _with(path: tuple, value: Any) -> dict:
    data = copy.deepcopy(MANIFEST)
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return data


def test_the_manifest_as_it_is_reads() -> None:
    assert read_pixi_manifest_data(copy.deepcopy(MANIFEST), "pixi.toml").variants


@pytest.mark.parametrize(("path", "value", "words"), [
    (("dependencies",), 7, "dependencies is a number where pixi's manifest has a table"),
    (("feature", "cuda", "dependencies"), "pytorch", "feature.cuda.dependencies is a string where"),
    (("environments", "cuda"), 3, "environments.cuda is a number where pixi's manifest has a list or a table"),
    (("workspace", "channels"), True, "workspace.channels is true/false where pixi's manifest has a list"),
    (("target",), ["linux-64"], "target is a list where"),
    (("pypi-options", "extra-index-urls"), "https://x.example", "pypi-options.extra-index-urls is a string"),
])
def test_a_value_of_another_type_is_named(path: tuple, value: Any, words: str) -> None:
    with pytest.raises(UsageError, match="^pixi.toml: " + words.replace(".", r"\.").replace("/", ".")):
        read_pixi_manifest_data(_with(path, value), "pixi.toml")


@pytest.mark.parametrize("wrong", [7, "s", [1], {"x": 1}, True, 1.5])
def test_no_value_of_any_type_anywhere_is_an_internal_error(wrong: Any) -> None:
    for path in value_paths(MANIFEST):
        try:
            read_pixi_manifest_data(_with(path, wrong), "pixi.toml")
        except EnvbuildError:
            pass

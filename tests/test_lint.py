"""Lint rules from the seeds' advice, each shown to fire and to stay quiet."""

from __future__ import annotations

import pytest

from builder.lint import lint_spec
from builder.spec import parse_spec

pytestmark = pytest.mark.unit

BASE = {
    "name": "vision-train", "python": "3.11", "torch": "2.7.1", "targets": [{"cuda": "12.6"}],
    "images": {"runtime": {"image": "ubuntu:24.04", "digest": "sha256:" + "a" * 64},
               "builder": {"image": "python:3.12-slim-bookworm", "digest": "sha256:" + "b" * 64}},
}


def findings(**changes):
    data = dict(BASE)
    data.update(changes)
    return [(f.level, f.field) for f in lint_spec(parse_spec(data))]


def test_clean_spec_has_no_findings() -> None:
    assert findings() == []


def test_torch_in_both_conda_and_pip_is_an_error() -> None:
    assert ("error", "pip") in findings(pip=["torch==2.7.1"])
    assert ("error", "conda") in findings(route="pip", conda=["pytorch=2.7.1"])


def test_torch_pinned_in_conda_extras_is_a_warning() -> None:
    assert findings(conda=["pytorch=2.7.1"]) == [("warning", "conda")]


def test_legacy_channel_mixed_with_conda_forge_pytorch_warns() -> None:
    assert findings(channels=["conda-forge", "pytorch"]) == [("warning", "channels")]
    assert ("warning", "channels") in findings(
        route="pytorch-channel", torch="2.5.1", channels=["conda-forge", "pytorch", "nvidia"])
    assert findings(route="pytorch-channel", torch="2.5.1", channels=["pytorch", "nvidia", "conda-forge"]) == []


@pytest.mark.parametrize("name", ["env1", "test", "myenv", "tmp", "env"])
def test_names_that_say_nothing_warn(name: str) -> None:
    assert findings(name=name) == [("warning", "name")]


def test_cudatoolkit_warns() -> None:
    assert findings(conda=["cudatoolkit=11.8"]) == [("warning", "conda")]


def test_unpinned_base_images_warn() -> None:
    data = dict(BASE)
    data.pop("images")
    assert [(f.level, f.field) for f in lint_spec(parse_spec(data))] == [
        ("warning", "images.runtime"), ("warning", "images.builder")]

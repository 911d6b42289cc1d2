"""The spec model: valid specs load, every bad value is refused with file, field, value and rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builder.errors import UsageError
from builder.spec.model import Route, load_spec, parse_spec

pytestmark = pytest.mark.unit

ENVS = Path(__file__).resolve().parent.parent / "envs"

MINIMAL = {"name": "vision", "python": "3.11", "torch": "2.7.1", "targets": [{"cuda": "12.6"}]}


def spec_with(**changes):
    data = dict(MINIMAL)
    data.update(changes)
    return data


@pytest.mark.parametrize("path", sorted(ENVS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_specs_load(path: Path) -> None:
    spec = load_spec(path)
    assert spec.source == path
    assert spec.targets


def test_defaults() -> None:
    spec = parse_spec(MINIMAL)
    assert spec.route is Route.CONDA_FORGE
    assert spec.effective_channels == ("conda-forge",)
    assert spec.platforms == ("linux-64",)
    assert spec.user.name == "envbuild" and spec.user.uid == 1000
    assert spec.targets[0].key == "cuda12.6"


def test_float_cuda_from_yaml_is_read_as_text() -> None:
    spec = parse_spec(yaml.safe_load("name: vision\npython: '3.11'\ntorch: 2.7.1\ntargets: [{cuda: 11.8}, {cuda: cpu}]"))
    assert [t.key for t in spec.targets] == ["cuda11.8", "cpu"]


def test_a_spec_file_float_keeps_its_written_digits(tmp_path: Path) -> None:
    path = tmp_path / "vision.yaml"
    path.write_text("name: vision\npython: '3.11'\ntorch: 2.7.1\ntargets: [{cuda: 12.10}, {cuda: 12.6}]\n")
    assert [t.key for t in load_spec(path).targets] == ["cuda12.10", "cuda12.6"]  # not 12.1


def test_a_float_that_may_have_lost_digits_is_refused() -> None:
    with pytest.raises(UsageError, match="write the CUDA version in quotes"):
        parse_spec(spec_with(targets=[{"cuda": 12.0 + 1e-9}]))


@pytest.mark.parametrize(
    ("changes", "field", "value"),
    [
        ({"targets": [{"cuda": "11"}]}, "targets.0.cuda", "'11'"),
        ({"route": "homebrew"}, "route", "'homebrew'"),
        ({"python": 3.1}, "python", "3.1"),
        ({"torch": "latest"}, "torch", "'latest'"),
        ({"name": "Bad Name"}, "name", "'Bad Name'"),
        ({"conda": ["numpy\nRUN rm -rf /"]}, "conda.0", "'numpy\\nRUN rm -rf /'"),
        ({"conda": ["numpy && rm -rf /"]}, "conda.0", "'numpy && rm -rf /'"),
        ({"pip": ["requests; curl evil"]}, "pip.0", "'requests; curl evil'"),
        ({"labels": {"team": 'x" \nRUN evil'}}, "labels.team", None),
        ({"labels": {"Bad Key": "x"}}, "labels.Bad Key.[key]", "'Bad Key'"),
        ({"images": {"runtime": {"image": "ubuntu:24.04\nRUN evil"}}}, "images.runtime.image", None),
        ({"images": {"runtime": {"image": "ubuntu:24.04", "digest": "sha256:abc"}}}, "images.runtime.digest", None),
        ({"user": {"name": "root; rm", "uid": 1000}}, "user.name", None),
        ({"channels": ["conda-forge --override"]}, "channels.0", None),
        ({"unknown_field": 1}, "unknown_field", None),
        ({"targets": [{"cuda": "12.6"}, {"cuda": "12.6"}]}, "(top level)", None),
    ],
)
def test_bad_values_name_file_field_and_value(changes, field, value) -> None:
    with pytest.raises(UsageError) as caught:
        parse_spec(spec_with(**changes), "envs/team.yaml")
    message = caught.value.message
    assert message.startswith("envs/team.yaml: ")
    assert f" {field}:" in message or f": {field}:" in message
    if value is not None:
        assert value in message
    assert "\n" not in message


def test_not_a_mapping() -> None:
    with pytest.raises(UsageError, match="must be a YAML mapping"):
        parse_spec(["a"], "x.yaml")


def test_bad_yaml_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(UsageError, match=r"bad.yaml: not valid YAML at line"):
        load_spec(bad)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the spec"):
        load_spec(tmp_path / "absent.yaml")

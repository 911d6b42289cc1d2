"""The spec model: valid specs load, every bad value is refused with file, field, value and rule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builder.errors import UsageError
from builder.specs.cuda import CudaVersion, TargetId, cuda_json, cuda_or_cpu, target_key
from builder.specs.model import Route, load_spec, parse_spec
from tests.paths import REPO

pytestmark = pytest.mark.unit

ENVS = REPO / "envs"

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


# --- the CUDA version type ------------------------------------------------------------------------

def test_cuda_version_forms_and_order() -> None:
    cuda = CudaVersion.parse("12.9")
    assert (str(cuda), cuda.digits, cuda.key, str(cuda.major_floor)) == ("12.9", "129", "cuda12.9", "12.0")
    assert CudaVersion.parse("12.10") > cuda > CudaVersion.parse("12.1")  # 12.10 is not 12.1
    assert str(CudaVersion.parse("12.10")) == "12.10"
    assert (cuda_or_cpu(cuda), cuda_or_cpu(None), cuda_json(None), target_key(None)) == ("12.9", "cpu", None, "cpu")


@pytest.mark.parametrize("text", ["12", "12.", "12.06", "cpu", "12.9.1", " 12.9", "v12.9", ""])
def test_cuda_version_refuses_other_text(text: str) -> None:
    with pytest.raises(UsageError, match="is not a CUDA version like 12.6"):
        CudaVersion.parse(text)


def test_a_target_id_is_a_cuda_version_or_cpu() -> None:
    assert TargetId.parse("cpu") == TargetId(None) and str(TargetId.parse("cpu")) == "cpu"
    assert TargetId.parse("12.10").cuda == CudaVersion(12, 10)
    with pytest.raises(UsageError, match="'CPU' names no target: write a CUDA version like 12.6, or cpu"):
        TargetId.parse("CPU")


def test_a_spec_target_holds_its_cuda_typed_and_writes_it_back_as_text() -> None:
    spec = parse_spec(spec_with(targets=[{"cuda": "12.10"}, {"cuda": "cpu"}]))
    assert [t.cuda for t in spec.targets] == [CudaVersion(12, 10), None]
    assert [t["cuda"] for t in spec.model_dump(mode="json")["targets"]] == ["12.10", "cpu"]


def test_a_cuda_written_with_a_leading_zero_is_refused() -> None:
    with pytest.raises(UsageError, match="targets.0.cuda: '12.06' contains characters or a form"):
        parse_spec(spec_with(targets=[{"cuda": "12.06"}]), "envs/team.yaml")


def test_the_spec_stage_imports_no_stage_above_it() -> None:
    code = ("import sys, builder.specs.target, builder.specs.fleet; "
            "print(' '.join(m for m in sys.modules if m.startswith('builder.') and m.split('.')[1] in "
            "('host', 'init', 'lock', 'image', 'teams', 'cli')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == "", done.stdout + done.stderr

"""Lint rules: each registered once with an id, shown to fire and to stay quiet, on specs and on the files
teams bring (environment.yml, requirements.txt, conda-lock.yml, Dockerfile)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.findings import Severity
from builder.init.read import read_conda_lock_data, read_environment_data
from builder.init.read_requirements import read_requirements_text
from builder.lint.rules import LINT, lint_path, lint_reading, lint_spec
from builder.specs.model import parse_spec
from tests import paths

pytestmark = pytest.mark.unit

BASE = {
    "name": "vision-train", "python": "3.11", "torch": "2.7.1", "targets": [{"cuda": "12.6"}],
    "images": {"runtime": {"image": "ubuntu:24.04", "digest": "sha256:" + "a" * 64},
               "builder": {"image": "python:3.12-slim-bookworm", "digest": "sha256:" + "b" * 64}},
}
CORPUS = paths.CORPUS / "envfiles"
MANIFEST = yaml.safe_load((CORPUS / "MANIFEST.yaml").read_text(encoding="utf-8"))


def findings(**changes):
    data = dict(BASE)
    data.update(changes)
    return [(f.severity.value, f.rule) for f in lint_spec(parse_spec(data))]


def env_rules(data) -> set[str]:
    return {f.rule for f in lint_reading(read_environment_data(data, "environment.yml"))}


def test_a_target_no_channel_builds_is_an_error() -> None:
    assert ("error", "lint.targets.unresolvable") in findings(targets=[{"cuda": "12.65"}])
    assert not [rule for _, rule in findings() if rule == "lint.targets.unresolvable"]


def test_clean_spec_has_no_findings() -> None:
    assert findings() == []


def test_every_rule_has_a_dotted_id_and_a_summary() -> None:
    assert len(LINT) >= 15
    for rule in LINT:
        assert rule.id.startswith("lint.") and rule.summary


def test_torch_in_both_conda_and_pip_is_an_error() -> None:
    assert ("error", "lint.torch.conda-and-pip") in findings(pip=["torch==2.7.1"])
    assert ("error", "lint.torch.conda-and-pip") in findings(route="pip", conda=["pytorch=2.7.1"])


def test_torch_pinned_in_conda_extras_is_a_warning() -> None:
    assert findings(conda=["pytorch=2.7.1"]) == [("warning", "lint.torch.pinned-in-extras")]


def test_torch_pinned_in_a_projects_optional_extra_is_a_warning(tmp_path: Path) -> None:
    project = ('[project]\nname = "demo"\nversion = "1"\ndependencies = ["torch>=2.4", "einops"]\n'
               '[project.optional-dependencies]\ndev = ["pytest", "torch==2.7.1"]\ndocs = ["sphinx"]\n')
    (tmp_path / "pyproject.toml").write_text(project, encoding="utf-8")
    found = [f for f in lint_path(tmp_path / "pyproject.toml") if f.rule == "lint.torch.pinned-in-extras"]
    assert [(f.severity.value, f.evidence) for f in found] == [("warning", "extra dev: torch==2.7.1")]
    (tmp_path / "pyproject.toml").write_text(project.replace(', "torch==2.7.1"', ""), encoding="utf-8")
    assert not [f for f in lint_path(tmp_path / "pyproject.toml") if f.rule == "lint.torch.pinned-in-extras"]


def test_legacy_channel_mixed_with_conda_forge_pytorch_warns() -> None:
    assert findings(channels=["conda-forge", "pytorch"]) == [("warning", "lint.channels.legacy-with-conda-forge")]
    assert ("warning", "lint.channels.legacy-with-conda-forge") in findings(
        route="pytorch-channel", torch="2.5.1", channels=["conda-forge", "pytorch", "nvidia"])
    assert findings(route="pytorch-channel", torch="2.5.1", channels=["pytorch", "nvidia", "conda-forge"],
                    targets=[{"cuda": "12.4"}]) == []


@pytest.mark.parametrize("name", ["env1", "test", "myenv", "tmp", "env"])
def test_names_that_say_nothing_warn(name: str) -> None:
    assert findings(name=name) == [("warning", "lint.name.vague")]


def test_cudatoolkit_warns() -> None:
    assert findings(conda=["cudatoolkit=11.8"]) == [("warning", "lint.cuda.cudatoolkit-era")]
    assert "lint.cuda.cudatoolkit-era" in env_rules({"dependencies": ["pytorch=2.1", "cudatoolkit-dev=11.8"]})


def test_unpinned_base_images_are_info_until_the_env_is_locked_then_warn(tmp_path: Path) -> None:
    data = dict(BASE)
    data.pop("images")
    spec_file = tmp_path / "envs" / "team.yaml"
    spec_file.parent.mkdir()
    spec_file.write_text(yaml.safe_dump({**data, "name": "team"}))
    unpinned = [("images.runtime", "ubuntu:24.04"), ("images.builder", "python:3.12-slim-bookworm")]

    def seen() -> list[tuple[str, str | None, str]]:
        return [(f.severity.value, f.location.field, f.message.split(" ", 1)[0]) for f in lint_path(spec_file)
                if f.rule == "lint.images.unpinned"]

    assert seen() == [("info", field, image) for field, image in unpinned]
    assert "once the env is locked" in lint_path(spec_file)[0].message
    lock = spec_file.parent / "team" / "locks" / "cpu" / "conda-lock.yml"
    lock.parent.mkdir(parents=True)
    lock.write_text("version: 1\n")  # lint looks only for the file: a lock committed beside the spec
    assert seen() == [("warning", field, image) for field, image in unpinned]
    assert [(f.severity.value, f.location.field) for f in lint_spec(parse_spec(data))] == [
        ("info", "images.runtime"), ("info", "images.builder")]  # a spec from no file has no lock folder


def test_nvidia_above_conda_forge_warns_for_conda_forge_torch_only() -> None:
    cf = {"channels": ["nvidia", "conda-forge"], "dependencies": ["pytorch-gpu=2.5", "cuda-version=12.6"]}
    assert "lint.channels.nvidia-above-conda-forge" in env_rules(cf)
    assert "lint.channels.nvidia-above-conda-forge" not in env_rules({**cf, "channels": ["conda-forge", "nvidia"]})
    legacy = {"channels": ["pytorch", "nvidia", "conda-forge"], "dependencies": ["pytorch=2.5.1", "pytorch-cuda=12.4"]}
    assert "lint.channels.nvidia-above-conda-forge" not in env_rules(legacy)
    assert ("warning", "lint.channels.nvidia-above-conda-forge") in findings(channels=["nvidia", "conda-forge"])


def test_defaults_mixed_with_conda_forge_warns() -> None:
    deps = ["pytorch=2.5.1", "cuda-version=12.6"]
    assert "lint.channels.defaults-with-conda-forge" in env_rules({"channels": ["conda-forge", "defaults"],
                                                                   "dependencies": deps})
    assert "lint.channels.defaults-with-conda-forge" in env_rules({"channels": ["anaconda", "conda-forge"],
                                                                   "dependencies": deps})
    assert "lint.channels.defaults-with-conda-forge" not in env_rules({"channels": ["conda-forge", "nodefaults"],
                                                                       "dependencies": deps})


def test_unpinned_ml_packages_warn() -> None:
    assert "lint.packages.ml-unpinned" in env_rules({"dependencies": ["pytorch", "cuda-version=12.6"]})
    assert "lint.packages.ml-unpinned" not in env_rules({"dependencies": ["pytorch=2.5.1", "cuda-version=12.6",
                                                                          "numpy"]})
    assert ("warning", "lint.packages.ml-unpinned") in findings(pip=["xformers"])
    # conda's own grammar (rattler's MatchSpec) decides what a conda line pins, pip's what a requirement pins
    assert ("warning", "lint.packages.ml-unpinned") in findings(conda=["transformers"])
    assert ("warning", "lint.packages.ml-unpinned") not in findings(conda=["transformers>=4.40,<5"])
    assert ("warning", "lint.packages.ml-unpinned") not in findings(pip=["xformers>=0.0.28"])


def test_conda_forge_cuda_torch_without_cuda_version_warns() -> None:
    assert "lint.cuda.conda-forge-without-cuda-version" in env_rules({"dependencies": ["pytorch=2.5.1=cuda*"]})
    assert "lint.cuda.conda-forge-without-cuda-version" in env_rules({"dependencies": ["pytorch-gpu=2.5.1"]})
    assert "lint.cuda.conda-forge-without-cuda-version" not in env_rules(
        {"dependencies": ["pytorch-gpu=2.5.1", "cuda-version=12.6"]})
    assert "lint.cuda.conda-forge-without-cuda-version" not in env_rules({"dependencies": ["pytorch-cpu=2.5.1"]})


def test_pip_torch_without_a_cuda_index_warns() -> None:
    def rules(text: str) -> set[str]:
        return {f.rule for f in lint_reading(read_requirements_text(text, "requirements.txt"))}

    assert "lint.pip.torch-without-cuda-index" in rules("torch==2.5.1\nnumpy\n")
    assert "lint.pip.torch-without-cuda-index" not in rules("--index-url https://download.pytorch.org/whl/cu124\n"
                                                            "torch==2.5.1\n")
    assert "lint.pip.torch-without-cuda-index" not in rules("torch==2.5.1+cu124\n")


def test_torch_wheels_from_pip_next_to_conda_torch_warn() -> None:
    data = {"dependencies": ["pytorch=2.5.1", "pytorch-cuda=12.4", "pip", {"pip": ["xformers==0.0.28", "einops"]}]}
    found = [f for f in lint_reading(read_environment_data(data, "environment.yml"))
             if f.rule == "lint.pip.torch-wheels-next-to-conda-torch"]
    assert found and "xformers" in found[0].message and found[0].fix
    assert "lint.pip.torch-wheels-next-to-conda-torch" not in env_rules(
        {"dependencies": ["pytorch=2.5.1", "pip", {"pip": ["einops"]}]})
    assert ("warning", "lint.pip.torch-wheels-next-to-conda-torch") in findings(pip=["flash-attn==2.7.0"])


def test_a_pip_section_without_pip_warns() -> None:
    assert "lint.pip.section-without-pip" in env_rules({"dependencies": ["pytorch=2.5.1", {"pip": ["einops"]}]})
    assert "lint.pip.section-without-pip" not in env_rules(
        {"dependencies": ["pytorch=2.5.1", "pip", {"pip": ["einops"]}]})


def test_end_of_life_python_warns() -> None:
    assert "lint.python.end-of-life" in env_rules({"dependencies": ["python=3.7.13", "pytorch=2.0.1"]})
    assert "lint.python.end-of-life" not in env_rules({"dependencies": ["python=3.13", "pytorch=2.7.1"]})


def test_a_lock_with_two_cuda_majors_is_an_error() -> None:
    def record(name: str, version: str, build: str) -> dict:
        return {"name": name, "version": version, "manager": "conda", "platform": "linux-64",
                "url": f"https://conda.anaconda.org/conda-forge/linux-64/{name}-{version}-{build}.conda"}

    lock = {"version": 1, "metadata": {"channels": [{"url": "conda-forge"}], "platforms": ["linux-64"]},
            "package": [record("pytorch", "2.5.1", "cuda126_py311h0_300"), record("cuda-version", "12.6", "h0_3"),
                        record("cupy", "13.3.0", "py311cuda118h0_0")]}
    found = lint_reading(read_conda_lock_data(lock, "conda-lock.yml"))
    mixed = [f for f in found if f.rule == "lint.lock.mixed-cuda-majors"]
    assert mixed and mixed[0].severity is Severity.ERROR and "CUDA 11" in mixed[0].message
    lock["package"] = lock["package"][:2]
    assert not [f for f in lint_reading(read_conda_lock_data(lock, "conda-lock.yml"))
                if f.rule == "lint.lock.mixed-cuda-majors"]


@pytest.mark.parametrize("entry", [e for e in MANIFEST["files"] if e["expect"].get("lint")], ids=lambda e: e["dir"])
def test_lint_on_real_files_reports_what_the_corpus_expects(entry) -> None:
    found = {f.rule for f in lint_path(CORPUS / entry["dir"] / entry["file"])}
    for rule in entry["expect"]["lint"]:
        assert rule.lstrip("!") in LINT
        assert (rule[1:] not in found) if rule.startswith("!") else (rule in found), (rule, found)


def test_lint_reads_every_corpus_file_it_can_import() -> None:
    for entry in MANIFEST["files"]:
        if "error" not in entry["expect"]:
            for finding in lint_path(CORPUS / entry["dir"] / entry["file"]):
                assert finding.fix and finding.location and finding.location.path


def test_lint_cli_json_and_rules_listing(tmp_path: Path) -> None:
    source = CORPUS / "gaussian-splatting-env" / "environment.yml"
    result = CliRunner().invoke(cli, ["lint", str(source), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["schema_version"] == 1 and report["report"] == "lint" and report["path"] == str(source)
    assert {"lint.cuda.cudatoolkit-era", "lint.python.end-of-life"} <= {f["rule"] for f in report["findings"]}
    assert all(f["fix"] and f["severity"] in ("error", "warning", "info") for f in report["findings"])
    listing = CliRunner().invoke(cli, ["lint", "--rules", "--json"])
    assert listing.exit_code == 0
    assert [r["rule"] for r in json.loads(listing.output)["rules"]] == LINT.ids()
    only = CliRunner().invoke(cli, ["lint", str(source), "--rule", "lint.python.end-of-life"])
    assert only.exit_code == 0 and "lint.python.end-of-life" in only.output and "cudatoolkit" not in only.output
    bad = CliRunner().invoke(cli, ["lint", str(source), "--rule", "lint.nope"])
    assert bad.exit_code != 0 and "no such rule" in bad.output and len(bad.output.strip().splitlines()) == 1


def test_lint_on_a_spec_still_exits_one_on_an_error(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**BASE, "pip": ["torch==2.7.1"]}), encoding="utf-8")
    result = CliRunner().invoke(cli, ["lint", str(spec)])
    assert result.exit_code == 1 and "error: lint.torch.conda-and-pip" in result.output


def test_dockerfile_base_images_without_a_digest_warn_once_each() -> None:
    from builder.init.dockerfile import read_dockerfile_text

    text = ("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build\nRUN make\nFROM build AS test\n"
            "FROM python:3.12-slim@sha256:" + "c" * 64 + "\nRUN pip install torch==2.5.1\n")
    found = [f for f in lint_reading(read_dockerfile_text(text, "Dockerfile")) if f.rule == "lint.images.unpinned"]
    assert [f.evidence for f in found] == ["FROM nvidia/cuda:12.4.1-devel-ubuntu22.04"]


def test_our_own_defaults_pass_our_own_lint(tmp_path: Path, monkeypatch) -> None:
    """The shipped spec and the starter `envbuild init` writes: nothing above info (both are unlocked)."""
    from builder.init.importer import init_spec

    shipped = lint_path(paths.REPO / "envs" / "pytorch.yaml")
    monkeypatch.chdir(tmp_path)
    starter = lint_path(init_spec(name="team").path)
    for found in (shipped, starter):
        assert [f.rule for f in found if f.severity is not Severity.INFO] == []
        assert "lint.images.unpinned" in {f.rule for f in found}  # said, as info

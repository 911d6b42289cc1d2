"""The formats envbuild writes (environment.yml, the exported pixi.toml and uv pyproject.toml): each model
written and read back by the format's own reader (PyYAML, tomllib) holds what the model said, and the
parts a model leaves empty are left out of the file, not written empty."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from builder.errors import UsageError
from builder.formats import dockerfile, environment_yml, pixi_toml, uv_pyproject
from builder.formats.dockerfile import Dockerfile, StageBlock
from builder.formats.environment_yml import CondaEntry, EnvironmentFile
from builder.formats.pixi_toml import (
    CondaDependency,
    CudaFloor,
    Feature,
    PixiManifest,
    PypiDependency,
    RichPlatform,
)
from builder.formats.uv_pyproject import UvIndex, UvProject, UvSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.unit

INDEX = "https://wheels.example/whl/cu126"

ENV = EnvironmentFile(
    env_name="vision", target_key="cuda12.6", channels=("conda-forge",),
    conda=(CondaEntry("python=3.11"), CondaEntry("pytorch=2.7.1=cuda126*", "linux"), CondaEntry("pip")),
    pip=("einops>=0.7",), pip_repositories=(INDEX,), allow_pypi_requests=True)


def test_environment_yml_holds_the_models_lines_and_the_selector_as_conda_lock_reads_it() -> None:
    text = environment_yml.dumps(ENV)
    data = yaml.safe_load(text)
    assert data["name"] == "vision-cuda12.6" == ENV.name
    assert data["channels"] == ["conda-forge"]
    assert data["dependencies"] == ["python=3.11", "pytorch=2.7.1=cuda126*", "pip", {"pip": ["einops>=0.7"]}]
    assert data["pip-repositories"] == [INDEX] and data["allow-pypi-requests"] is True
    assert '  - "pytorch=2.7.1=cuda126*"  # [linux]\n' in text  # the selector: a comment, as conda-lock reads it


def test_the_conda_part_of_an_environment_yml_has_no_pip_part() -> None:
    data = yaml.safe_load(environment_yml.dumps(ENV.conda_part()))
    assert data["dependencies"] == ["python=3.11", "pytorch=2.7.1=cuda126*", "pip"]
    assert "pip-repositories" not in data and "allow-pypi-requests" not in data


def _manifest(**changes: object) -> PixiManifest:
    rich = RichPlatform("linux-64-cuda12-6", "linux-64", CudaFloor("12.0", "7.5"))
    fields: dict[str, object] = {
        "name": "vision", "channels": ("conda-forge",), "platforms": (rich, "osx-arm64"), "requires_pixi": ">=0.71.0",
        "dependencies": {"python": CondaDependency("3.11.*")},
        "features": (Feature("cuda12-6", ("linux-64-cuda12-6",),
                             {"pytorch": CondaDependency("==2.7.1", "cuda126*")},
                             {"torch": PypiDependency("==2.7.1", index=INDEX)}),
                     Feature("cpu", ("osx-arm64",))),
        "environments": {"default": ("cuda12-6",), "cuda12-6": ("cuda12-6",), "cpu": ("cpu",)},
        "header": ("one line", "another")}
    fields.update(changes)
    return PixiManifest(**fields)


def test_a_pixi_manifest_reads_back_as_its_model() -> None:
    text = pixi_toml.dumps(_manifest())
    assert text.startswith("# one line\n# another\n")
    data = tomllib.loads(text)
    assert data["workspace"] == {
        "name": "vision", "channels": ["conda-forge"], "requires-pixi": ">=0.71.0",
        "platforms": [{"name": "linux-64-cuda12-6", "platform": "linux-64", "cuda": {"driver": "12.0", "arch": "7.5"}},
                      "osx-arm64"]}
    assert data["dependencies"] == {"python": "3.11.*"}
    assert "pypi-dependencies" not in data  # none asked: no empty table
    assert data["feature"]["cuda12-6"] == {
        "platforms": ["linux-64-cuda12-6"],
        "dependencies": {"pytorch": {"version": "==2.7.1", "build": "cuda126*"}},
        "pypi-dependencies": {"torch": {"version": "==2.7.1", "index": INDEX}}}
    assert data["feature"]["cpu"] == {"platforms": ["osx-arm64"], "dependencies": {}}
    assert data["environments"] == {"default": ["cuda12-6"], "cuda12-6": ["cuda12-6"], "cpu": ["cpu"]}
    assert list(data["feature"]) == ["cuda12-6", "cpu"]  # in the model's order


def test_a_driver_floor_without_a_gpu_floor_is_a_plain_version_and_extras_a_table() -> None:
    plain = RichPlatform("linux-64-cuda13-0", "linux-64", CudaFloor("13.0"))
    data = tomllib.loads(pixi_toml.dumps(_manifest(
        platforms=(plain,), pypi_dependencies={"rich": PypiDependency(">=13", ("jupyter",)), "einops": PypiDependency("*")})))
    assert data["workspace"]["platforms"] == [{"name": "linux-64-cuda13-0", "platform": "linux-64", "cuda": "13.0"}]
    assert data["pypi-dependencies"] == {"rich": {"version": ">=13", "extras": ["jupyter"]}, "einops": "*"}


def _project(**changes: object) -> UvProject:
    fields: dict[str, object] = {
        "name": "vision", "requires_python": "==3.11.*", "dependencies": ("einops",),
        "optional_dependencies": {"cu126": ("torch==2.7.1+cu126",), "cpu": ("torch==2.7.1+cpu",)},
        "environments": ("sys_platform == 'linux'",), "conflicts": (("cu126", "cpu"),),
        "sources": {"torch": (UvSource("pytorch-cu126", "cu126"), UvSource("pytorch-cpu", "cpu")), "torchvision": ()},
        "indexes": (UvIndex("pytorch-cu126", INDEX), UvIndex("pytorch-cpu", "https://wheels.example/whl/cpu"))}
    fields.update(changes)
    return UvProject(**fields)


def test_a_uv_project_reads_back_as_its_model() -> None:
    data = tomllib.loads(uv_pyproject.dumps(_project()))
    assert data["project"] == {"name": "vision", "version": "0.0.0", "requires-python": "==3.11.*",
                               "dependencies": ["einops"],
                               "optional-dependencies": {"cu126": ["torch==2.7.1+cu126"], "cpu": ["torch==2.7.1+cpu"]}}
    uv = data["tool"]["uv"]
    assert uv["package"] is False and uv["environments"] == ["sys_platform == 'linux'"]
    assert uv["conflicts"] == [[{"extra": "cu126"}, {"extra": "cpu"}]]
    assert uv["sources"] == {"torch": [{"index": "pytorch-cu126", "extra": "cu126"},
                                       {"index": "pytorch-cpu", "extra": "cpu"}]}  # torchvision: no source, left out
    assert uv["index"] == [{"name": "pytorch-cu126", "url": INDEX, "explicit": True},
                           {"name": "pytorch-cpu", "url": "https://wheels.example/whl/cpu", "explicit": True}]


def test_a_uv_project_of_one_extra_has_no_conflicts() -> None:
    data = tomllib.loads(uv_pyproject.dumps(_project(conflicts=())))
    assert "conflicts" not in data["tool"]["uv"]


def test_writing_an_export_never_replaces_a_file_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "pixi.toml"
    path.write_text("# the team's own\n", encoding="utf-8")
    with pytest.raises(UsageError):
        pixi_toml.write(path, _manifest())
    assert path.read_text(encoding="utf-8") == "# the team's own\n"
    written = uv_pyproject.write(tmp_path / "pyproject.toml", _project())
    assert (tmp_path / "pyproject.toml").read_text(encoding="utf-8") == written
    assert pixi_toml.write(path, _manifest(), force=True) == path.read_text(encoding="utf-8")


def test_a_dockerfile_has_each_block_in_its_stage_and_no_run_of_blank_lines() -> None:
    blocks = (StageBlock(builder="RUN make-python", runtime="COPY --from=env-builder /staging /"),
              StageBlock(runtime="\n\nUSER trainer  \n\n"), StageBlock())
    text = dockerfile.dumps(Dockerfile("vision", "cuda12.6", "python:3.12-slim", "ubuntu:24.04", blocks))
    assert text.startswith('# Generated by envbuild ') and 'the spec "vision", target cuda12.6.' in text
    body = text[text.index("FROM "):]
    assert body == ("FROM python:3.12-slim AS env-builder\nRUN make-python\nFROM ubuntu:24.04\n"
                    "COPY --from=env-builder /staging /\n\nUSER trainer\n")
    assert "\n\n\n" not in text and text.endswith("\n") and not text.endswith("\n\n")

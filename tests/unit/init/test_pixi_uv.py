"""pixi and uv (issue 26): `init --from` a pixi.toml, a pixi.lock or uv's pyproject.toml (one target per CUDA
variant, driver and GPU floors kept), `envbuild export pixi|uv SPEC`, and both checked by the real tools'
rules: the exported pixi.toml against pixi's published manifest schema (tests/fixtures/pixi-schema), the
exported pyproject.toml locked by uv itself, offline, against a local wheel index of stand-in wheels built
here. (tests/system/test_pixi_uv_world.py locks it against the offline world's pip index.)
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.errors import UsageError
from builder.init.importer import init_spec
from builder.init.pixi_manifest import PIXI_TABLES
from builder.lint.rules import lint_path
from builder.specs.model import load_spec
from builder.specs.target import Sources, resolve_targets
from builder.teams.export import render_pixi, write_export
from tests import paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.unit

ROOT = paths.REPO
SCHEMA_FOLDER = paths.FIXTURES / "pixi-schema"
PIXI_SCHEMA = json.loads((SCHEMA_FOLDER / "pixi.schema.json").read_text(encoding="utf-8"))


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def imported(tmp_path: Path, name: str, text: str, **options):
    out = tmp_path / "envs" / "spec.yaml"
    result = init_spec(write(tmp_path, name, text), out=out, **options)
    assert load_spec(out) == result.spec  # the written file reads back as the spec that was checked
    return result


def notes_of(result) -> dict[str, tuple[str, str]]:
    return {n.entry: (n.outcome, n.reason) for n in result.notes}


# ---------------------------------------------------------------------------------------------
# Reading pixi.toml


RICH = """
    [workspace]
    name = "vision"
    channels = ["conda-forge"]
    platforms = [
      { name = "gpu", platform = "linux-64", cuda = { driver = "12.0", arch = "8.6" } },
      "linux-64",
    ]

    [dependencies]
    python = ">=3.12.13,<3.13"
    numpy = ">=2"

    [feature.cuda]
    platforms = ["gpu"]

    [feature.cuda.dependencies]
    pytorch-gpu = "==2.7.1"
    cuda-version = "12.6.*"

    [feature.cpu]
    platforms = ["linux-64"]

    [feature.cpu.dependencies]
    pytorch-cpu = "==2.7.1"

    [environments]
    cuda = ["cuda"]
    cpu = ["cpu"]
    """


def test_rich_platforms_give_one_target_per_environment_with_the_gpu_floor_kept(tmp_path: Path) -> None:
    result = imported(tmp_path, "pixi.toml", RICH)
    spec = result.spec
    assert [t.key for t in result.targets] == ["cuda12.6", "cpu"]
    assert (spec.route.value, spec.torch, spec.python) == ("conda-forge", "2.7.1", "3.12")
    # conda-forge's 12.6 build has kernels from sm_50: the declared floor 8.6 is the team's GPUs, kept as fleet
    assert [entry.gpu for entry in spec.fleet] == ["8.6"]
    assert result.targets[0].cuda_arch == "8.6"
    platform = 'platform gpu (linux-64: cuda = { driver = "12.0", arch = "8.6" })'
    said = [(n.outcome, n.reason) for n in result.notes if n.entry == platform]
    assert ("derived", "driver floor CUDA 12.0 (driver >= 525.60.13): runs target cuda12.6 (its minimum driver, "
                       "minor-version compatibility: 525.60.13)") in said
    assert any(outcome == "derived" and reason.startswith("fleet: gpu 8.6") for outcome, reason in said)
    notes = notes_of(result)
    assert notes["environment cuda"] == ("derived", "target cuda12.6")
    assert notes["environment default"][0] == "dropped"  # the default feature alone installs no torch
    assert "numpy>=2" in spec.conda


def test_a_gpu_floor_at_the_builds_own_floor_adds_no_fleet_entry(tmp_path: Path) -> None:
    result = imported(tmp_path, "pixi.toml", RICH.replace('arch = "8.6"', 'arch = "5.0"'))
    assert result.spec.fleet == ()
    assert any("GPU floor 5.0: the lowest GPU the target cuda12.6 build has kernels for" in n.reason
               for n in result.notes)


def test_a_driver_floor_older_than_the_target_is_said(tmp_path: Path) -> None:
    text = RICH.replace('driver = "12.0"', 'driver = "11.8"').replace('cuda-version = "12.6.*"', "")
    text = text.replace('pytorch-gpu = "==2.7.1"', 'pytorch-gpu = "==2.7.1"\ncuda-version = "12.6.*"')
    result = imported(tmp_path, "pixi.toml", text)
    assert any(n.outcome == "assumed" and "driver floor CUDA 11.8" in n.reason and "older than target cuda12.6"
               in n.reason for n in result.notes)


def test_system_requirements_cuda_makes_conda_forges_pytorch_a_cuda_build_the_driver_runs(tmp_path: Path) -> None:
    result = imported(tmp_path, "pixi.toml", """
        [project]
        name = "old-style"
        channels = ["conda-forge"]
        platforms = ["linux-64"]

        [system-requirements]
        cuda = "12"

        [dependencies]
        pytorch = "2.7.*"
        """)
    # 2.7 on conda-forge: cuda126 and cuda129 builds; a CUDA 12 driver runs both, the newest is chosen
    assert [t.key for t in result.targets] == ["cuda12.9"]
    assert notes_of(result)['[system-requirements] cuda = "12"'][0] == "derived"


def test_without_a_declared_cuda_conda_forges_pytorch_is_its_cpu_build(tmp_path: Path) -> None:
    result = imported(tmp_path, "pixi.toml", """
        [workspace]
        name = "laptop"
        channels = ["conda-forge"]
        platforms = ["linux-64", "osx-arm64"]

        [dependencies]
        pytorch = "==2.7.1"
        """)
    assert [t.key for t in result.targets] == ["cpu"]
    assert result.spec.platforms == ("linux-64", "osx-arm64")


def test_wildcard_targets_and_a_pyproject_with_tool_pixi(tmp_path: Path) -> None:
    result = imported(tmp_path, "pyproject.toml", """
        [project]
        name = "wheels"
        requires-python = ">=3.11,<3.12"
        dependencies = ["requests>=2"]

        [tool.pixi.workspace]
        channels = ["conda-forge"]
        platforms = [
          { name = "linux-64-cuda", platform = "linux-64", cuda = "12.0" },
          { name = "linux-64-cpu", platform = "linux-64" },
        ]

        [tool.pixi.target."*-cuda".pypi-dependencies]
        torch = { version = "==2.6.0", index = "https://download.pytorch.org/whl/cu124" }

        [tool.pixi.target.linux-64-cpu.pypi-dependencies]
        torch = { version = "==2.6.0", index = "https://download.pytorch.org/whl/cpu" }
        """)
    assert [t.key for t in result.targets] == ["cuda12.4", "cpu"]
    assert (result.spec.route.value, result.spec.python) == ("pip", "3.11")
    assert "requests>=2" in result.spec.pip


# ---------------------------------------------------------------------------------------------
# Reading pixi.lock


LOCK_V7 = """
    version: 7
    platforms:
    - name: p1
      subdir: linux-64
      virtual-packages:
      - __cuda=12.0
      - __cuda_arch=8.0
      - __glibc=2.28
    - name: linux-64
      virtual-packages:
      - __glibc=2.28
    environments:
      default:
        channels:
        - url: https://conda.anaconda.org/conda-forge/
        packages:
          p1:
          - conda: https://conda.anaconda.org/conda-forge/linux-64/python-3.12.11-h9e4cc4f_0_cpython.conda
          - conda: https://conda.anaconda.org/conda-forge/noarch/cuda-version-12.9-h4f385c5_3.conda
          - conda: https://conda.anaconda.org/conda-forge/linux-64/pytorch-2.8.0-cuda129_mkl_py312_h7947483_302.conda
          linux-64:
          - conda: https://conda.anaconda.org/conda-forge/linux-64/python-3.12.11-h9e4cc4f_0_cpython.conda
          - conda: https://conda.anaconda.org/conda-forge/linux-64/pytorch-2.8.0-cpu_mkl_py312_h1234567_100.conda
      wheels:
        channels:
        - url: https://conda.anaconda.org/conda-forge/
        packages:
          linux-64:
          - conda: https://conda.anaconda.org/conda-forge/linux-64/python-3.12.11-h9e4cc4f_0_cpython.conda
          - pypi: https://download.pytorch.org/whl/cu126/torch-2.7.1%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl
    packages: []
    """


def test_a_v7_lock_gives_one_target_per_locked_build_with_its_declared_floors(tmp_path: Path) -> None:
    result = imported(tmp_path, "pixi.lock", LOCK_V7)
    assert [t.key for t in result.targets] == ["cuda12.9", "cpu", "cuda12.6"]
    spec = result.spec
    assert (spec.route.value, spec.torch, spec.python) == ("conda-forge", "2.8.0", "3.12")
    assert spec.target("cuda12.6").route is not None and spec.target("cuda12.6").torch == "2.7.1"
    assert [entry.gpu for entry in spec.fleet] == ["8.0"]  # above conda-forge 12.9's sm_50
    assert any(n.entry.startswith("platform p1") and "driver floor CUDA 12.0" in n.reason for n in result.notes)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_older_lock_versions_read_the_same_way(tmp_path: Path, version: int) -> None:
    result = imported(tmp_path, "pixi.lock", f"""
        version: {version}
        environments:
          default:
            channels:
            - url: https://conda.anaconda.org/conda-forge/
            packages:
              linux-64:
              - conda: https://conda.anaconda.org/conda-forge/linux-64/python-3.11.9-hb806964_0_cpython.conda
              - conda: https://conda.anaconda.org/conda-forge/linux-64/pytorch-2.5.1-cuda126_py311_hd1234ab_303.conda
        """)
    assert [t.key for t in result.targets] == ["cuda12.6"]
    assert (result.spec.torch, result.spec.python) == ("2.5.1", "3.11")


# ---------------------------------------------------------------------------------------------
# Reading uv's pyproject.toml


def test_a_pyproject_whose_torch_is_only_a_build_requirement_builds_against_it(tmp_path: Path) -> None:
    # a CUDA extension's pyproject: torch only in [build-system] requires, the rest tool configuration
    result = imported(tmp_path, "pyproject.toml", """
        [build-system]
        requires = ["setuptools >= 64", "torch >= 2.10"]
        build-backend = "setuptools.build_meta"

        [tool.black]
        line-length = 88
    """, upgrade=True)
    assert result.spec.torch.startswith("2.") and int(result.spec.torch.split(".")[1]) >= 10
    assert any(entry.startswith("setuptools") for entry in result.spec.pip)
    assert notes_of(result)["[build-system] requires"][0] == "derived"
    with pytest.raises(UsageError, match=r"\[build-system\] requires"):  # no torch anywhere: still refused
        imported(tmp_path / "none", "pyproject.toml", """
            [build-system]
            requires = ["setuptools"]
        """)
    with_project = imported(tmp_path / "dep", "pyproject.toml", """
        [build-system]
        requires = ["setuptools", "torch>=2.10"]
        [project]
        name = "p"
        dependencies = ["torch==2.7.1"]
    """, upgrade=True)
    assert with_project.spec.torch == "2.7.1"  # [project]'s torch is the one installed, not the build's


def test_dependency_groups_with_their_own_index_are_variants(tmp_path: Path) -> None:
    result = imported(tmp_path, "pyproject.toml", """
        [project]
        name = "groups"
        requires-python = ">=3.11"
        dependencies = ["torch==2.7.1", "numpy"]

        [dependency-groups]
        cu128 = ["torch==2.7.1"]
        cpu = ["torch==2.7.1"]
        dev = ["ruff"]

        [tool.uv]
        conflicts = [[{ group = "cu128" }, { group = "cpu" }]]

        [tool.uv.sources]
        torch = [
          { index = "pytorch-cu128", group = "cu128" },
          { index = "pytorch-cpu", group = "cpu" },
        ]

        [[tool.uv.index]]
        name = "pytorch-cu128"
        url = "https://download.pytorch.org/whl/cu128"
        explicit = true

        [[tool.uv.index]]
        name = "pytorch-cpu"
        url = "https://download.pytorch.org/whl/cpu"
        explicit = true
        """)
    assert [t.key for t in result.targets] == ["cuda12.8", "cpu"]
    assert notes_of(result)["group dev"][0] == "dropped"
    assert "numpy" in result.spec.pip and "ruff" not in result.spec.pip


def test_one_unconditional_index_is_one_variant(tmp_path: Path) -> None:
    result = imported(tmp_path, "pyproject.toml", """
        [project]
        name = "single"
        requires-python = "==3.12.*"
        dependencies = ["torch>=2.7", "torchvision", "xformers==0.0.33.post2"]

        [[tool.uv.index]]
        name = "pytorch"
        url = "https://download.pytorch.org/whl/cu128"
        explicit = true

        [tool.uv.sources]
        torch = [{ index = "pytorch", marker = "sys_platform == 'linux'" }]
        torchvision = { index = "pytorch" }
        """)
    assert [t.key for t in result.targets] == ["cuda12.8"]
    assert (result.spec.torch, result.spec.python) == ("2.11.0", "3.12")  # the newest torch with a cu128 build


# ---------------------------------------------------------------------------------------------
# Bad input: one line each, nothing written


@pytest.mark.parametrize("name, text, message", [
    ("pixi.toml", '[workspace]\nname = "x"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n\n'
                  '[dependencies]\npytorch = "*"\n\n[gpu]\ncuda = "12"\n',
     "[gpu] is not a table of pixi's manifest"),
    ("pyproject.toml", '[project]\nname = "web"\ndependencies = ["fastapi"]\n\n[tool.uv]\npackage = false\n',
     "no torch in it"),
    ("pixi.lock", "version: 3\nenvironments: {}\n", "a pixi.lock of version 3; envbuild reads pixi.lock versions 4 to 7"),
    ("pixi.lock", "version: 99\nenvironments:\n  default: {}\n", "a pixi.lock of version 99"),
    ("pixi.toml", '[workspace]\nname = "x"\nplatforms = ["linux-64"\n', "not valid TOML ("),
    ("pyproject.toml", '[project\nname = "x"\n', "not valid TOML ("),
])
def test_bad_input_is_one_line_and_nothing_is_written(tmp_path: Path, name: str, text: str, message: str) -> None:
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    out = tmp_path / "spec.yaml"
    result = CliRunner().invoke(cli, ["init", "--from", str(source), "--out", str(out)])
    assert result.exit_code != 0
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not out.exists()


def test_the_readers_know_every_table_of_pixis_schema() -> None:
    assert set(PIXI_SCHEMA["properties"]) | {"$schema"} == set(PIXI_TABLES)


def test_lint_reads_a_pixi_manifest_like_any_environment_file(tmp_path: Path) -> None:
    findings = lint_path(write(tmp_path, "pixi.toml", RICH))
    assert all(f.rule.startswith("lint.") for f in findings)


def test_init_json_names_each_target(tmp_path: Path) -> None:
    source = write(tmp_path, "pixi.toml", RICH)
    result = CliRunner().invoke(cli, ["init", "--from", str(source), "--out", str(tmp_path / "s.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["targets"] == ["cuda12.6", "cpu"]
    assert any(n["entry"] == "environment cpu" for n in report["notes"])


# ---------------------------------------------------------------------------------------------
# Export, and back


def exported_pixi(spec_path: Path, tmp_path: Path) -> tuple[Path, dict]:
    out = tmp_path / "pixi" / "pixi.toml"
    spec = load_spec(spec_path)
    write_export("pixi", spec, spec_path, resolve_targets(spec), out)
    return out, tomllib.loads(out.read_text(encoding="utf-8"))


def test_the_exported_pixi_toml_validates_against_pixis_published_schema(tmp_path: Path) -> None:
    _, data = exported_pixi(ROOT / "envs" / "pytorch.yaml", tmp_path)
    jsonschema.Draft7Validator(PIXI_SCHEMA).validate(data)
    # SchemaStore's copy leaves out the manifest's top-level `additionalProperties: false`: checked here
    assert set(data) <= set(PIXI_SCHEMA["properties"])
    platforms = {p["name"]: p for p in data["workspace"]["platforms"] if isinstance(p, dict)}
    # each CUDA target's driver floor (CUDA X.0, minor-version compatibility) and its build's lowest GPU
    assert platforms["linux-64-cuda13-0"]["cuda"] == {"driver": "13.0", "arch": "7.5"}
    assert platforms["linux-64-cuda11-8"]["cuda"] == {"driver": "11.0", "arch": "3.7"}
    assert data["feature"]["cuda12-9"]["dependencies"]["pytorch"] == {"version": "==2.13.0", "build": "cuda129*"}
    assert data["feature"]["cuda11-8"]["pypi-dependencies"]["torch"] == {
        "version": "==2.7.1", "index": "https://download.pytorch.org/whl/cu118"}
    assert data["environments"]["default"] == ["cuda13-0"]


def test_schema_validation_catches_a_broken_platform(tmp_path: Path) -> None:
    _, data = exported_pixi(ROOT / "envs" / "pytorch.yaml", tmp_path)
    data["workspace"]["platforms"][0]["cuda"] = {"arch": "8.6"}  # arch without driver: pixi refuses it
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(PIXI_SCHEMA).validate(data)


def test_the_fleets_lowest_gpu_raises_the_exported_floor(tmp_path: Path) -> None:
    spec_path = write(tmp_path, "envs/fleet.yaml", """
        name: fleet
        python: "3.11"
        torch: "2.7.1"
        route: conda-forge
        targets: [{cuda: "12.6"}]
        fleet: ["8.9"]
        """)
    _, data = exported_pixi(spec_path, tmp_path)
    assert data["workspace"]["platforms"][0]["cuda"] == {"driver": "12.0", "arch": "8.9"}


def test_pixi_round_trip_gives_back_the_same_targets(tmp_path: Path) -> None:
    spec_path = ROOT / "envs" / "pytorch.yaml"
    out, _ = exported_pixi(spec_path, tmp_path)
    back = init_spec(out, out=tmp_path / "back.yaml")
    original = resolve_targets(load_spec(spec_path))
    assert [(t.key, t.torch, t.route) for t in back.targets] == [(t.key, t.torch, t.route) for t in original]
    assert back.spec.python == "3.11" and "numpy" in back.spec.conda


PIP_SPEC = """
    name: wheels
    python: "{python}"
    torch: "2.7.1"
    torchvision: "0.22.1"
    route: pip
    platforms: [linux-64]
    targets: [{{cuda: "12.8"}}, {{cuda: "11.8"}}, {{cuda: cpu}}]
    conda: [numpy]
    pip: ["requests>=2"]
    """


def test_uv_round_trip_gives_back_the_same_targets(tmp_path: Path) -> None:
    spec_path = write(tmp_path, "envs/wheels.yaml", PIP_SPEC.format(python="3.11"))
    spec = load_spec(spec_path)
    written = write_export("uv", spec, spec_path, resolve_targets(spec))
    assert written.path == tmp_path / "envs" / "wheels" / "uv" / "pyproject.toml"
    data = tomllib.loads(written.path.read_text(encoding="utf-8"))
    assert data["project"]["optional-dependencies"]["cu128"] == ["torch==2.7.1+cu128", "torchvision==0.22.1+cu128"]
    assert data["tool"]["uv"]["conflicts"] == [[{"extra": "cu128"}, {"extra": "cu118"}, {"extra": "cpu"}]]
    assert {"index": "pytorch-cu118", "extra": "cu118"} in data["tool"]["uv"]["sources"]["torch"]
    assert any("conda packages left out (numpy)" in note for note in written.notes)
    back = init_spec(written.path, out=tmp_path / "back.yaml")
    assert [t.key for t in back.targets] == ["cuda12.8", "cuda11.8", "cpu"]
    assert (back.spec.torch, back.spec.torchvision, back.spec.python) == ("2.7.1", "0.22.1", "3.11")
    assert back.spec.pip == ("requests>=2",)


def test_uv_exports_header_names_an_extra_the_file_has(tmp_path: Path) -> None:
    text = PIP_SPEC.format(python="3.11").replace('{cuda: "12.8"}, ', "")  # no cu128 extra
    spec_path = write(tmp_path, "envs/wheels.yaml", text)
    spec = load_spec(spec_path)
    written = write_export("uv", spec, spec_path, resolve_targets(spec))
    shown = written.path.read_text(encoding="utf-8")
    named = shown.split("`uv sync --extra ", 1)[1].split("`", 1)[0]
    assert named == "cu118" and named in tomllib.loads(shown)["project"]["optional-dependencies"]


def test_uv_export_of_a_spec_without_pip_targets_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["export", "uv", str(ROOT / "envs" / "pytorch.yaml"), "--out",
                                      str(tmp_path / "pyproject.toml")])
    assert result.exit_code == 0, result.output  # pytorch.yaml has two pip targets
    spec_path = write(tmp_path, "envs/cf.yaml", "name: cf\npython: '3.11'\ntorch: '2.7.1'\ntargets: [{cuda: '12.6'}]\n")
    refused = CliRunner().invoke(cli, ["export", "uv", str(spec_path), "--out", str(tmp_path / "no.toml")])
    assert refused.exit_code != 0 and "no target on route pip" in refused.output
    assert len(refused.output.strip().splitlines()) == 1 and not (tmp_path / "no.toml").exists()


def test_export_cli_refuses_to_replace_a_file_without_force_and_reports_json(tmp_path: Path) -> None:
    out = tmp_path / "pixi.toml"
    args = ["export", "pixi", str(ROOT / "envs" / "pytorch.yaml"), "--out", str(out)]
    first = CliRunner().invoke(cli, [*args, "--json"])
    assert first.exit_code == 0, first.output
    report = json.loads(first.output)
    assert report["format"] == "pixi" and {"target": "cuda12.9", "name": "cuda12-9"} in report["environments"]
    again = CliRunner().invoke(cli, args)
    assert again.exit_code != 0 and "exists; pass --force" in again.output
    assert CliRunner().invoke(cli, [*args, "--force"]).exit_code == 0


def test_exported_text_names_no_path_of_this_machine(tmp_path: Path) -> None:
    text, _, _ = render_pixi(load_spec(ROOT / "envs" / "pytorch.yaml"), "pytorch.yaml",
                             resolve_targets(load_spec(ROOT / "envs" / "pytorch.yaml")))
    assert str(ROOT) not in text and "from pytorch.yaml" in text


# ---------------------------------------------------------------------------------------------
# uv locks the exported project (offline, stand-in wheels)


def stand_in_wheel(folder: Path, name: str, version: str) -> Path:
    """A wheel with only its metadata: enough for a resolver, nothing to import."""
    info = f"{name}-{version}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: envbuild-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{name}/__init__.py": ""}
    path = folder / f"{name}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(text)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def local_index(root: Path, tags: list[str], packages: dict[str, str]) -> None:
    """A PEP 503 simple index per wheel tag (root/<tag>/<name>/index.html), as download.pytorch.org lays out."""
    for tag in tags:
        for name, version in packages.items():
            folder = root / tag / name
            folder.mkdir(parents=True)
            wheel = stand_in_wheel(folder, name, f"{version}+{tag}")
            sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
            (folder / "index.html").write_text(f'<a href="{wheel.name}#sha256={sha}">{wheel.name}</a>\n')


def uv_binary() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _uv_lock_offline(tmp_path: Path, tags_with_wheels: list[str]) -> tuple[Path, subprocess.CompletedProcess]:
    """Export the pip spec's three targets for uv and run `uv lock --offline` on it, against a local index
    that holds wheels for `tags_with_wheels` (and an empty index for the other tags)."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python not in ("3.9", "3.10", "3.11", "3.12", "3.13"):
        pytest.skip(f"torch 2.7 has no Python {python}")
    local_index(tmp_path / "index", tags_with_wheels, {"torch": "2.7.1", "torchvision": "0.22.1"})
    for tag in {"cu128", "cu118", "cpu"} - set(tags_with_wheels):
        for name in ("torch", "torchvision"):
            (tmp_path / "index" / tag / name).mkdir(parents=True)
            (tmp_path / "index" / tag / name / "index.html").write_text("\n")
    spec_path = write(tmp_path, "envs/wheels.yaml", PIP_SPEC.format(python=python).replace('pip: ["requests>=2"]',
                                                                                           "pip: []"))
    spec = load_spec(spec_path)
    targets = resolve_targets(spec, sources=Sources(pip_index=(tmp_path / "index").as_uri() + "/{tag}"))
    written = write_export("uv", spec, spec_path, targets, tmp_path / "project" / "pyproject.toml")
    done = subprocess.run([uv_binary(), "lock", "--offline", "--no-progress"], cwd=written.path.parent,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "cache"), "UV_PYTHON": sys.executable,
                               "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"})
    return written.path.parent, done


def test_uv_locks_the_exported_project_offline_from_the_targets_indexes(tmp_path: Path) -> None:
    project, done = _uv_lock_offline(tmp_path, ["cu128", "cu118", "cpu"])
    assert done.returncode == 0, done.stderr
    lock = tomllib.loads((project / "uv.lock").read_text(encoding="utf-8"))
    locked = {(p["name"], p["version"]) for p in lock["package"]}
    for tag in ("cu128", "cu118", "cpu"):
        assert ("torch", f"2.7.1+{tag}") in locked and ("torchvision", f"0.22.1+{tag}") in locked
    assert lock["conflicts"] and len(lock["conflicts"][0]) == 3


def test_uv_refuses_an_export_whose_index_lacks_the_wheel(tmp_path: Path) -> None:
    """The check can fail: an index without the cu118 wheel is uv's error, not a silent pass."""
    _, done = _uv_lock_offline(tmp_path, ["cu128", "cpu"])
    assert done.returncode != 0 and "torch" in done.stderr


def test_the_schema_fixture_says_where_it_came_from() -> None:
    source = yaml.safe_load((SCHEMA_FOLDER / "SOURCE.yaml").read_text(encoding="utf-8"))
    assert PIXI_SCHEMA["$comment"] == f"Generated from `pixi` {source['generated_from'].split()[-1]}"
    assert hashlib.sha256((SCHEMA_FOLDER / "pixi.schema.json").read_bytes()).hexdigest() == source["schema_sha256"]


def test_a_variant_that_cannot_be_read_is_left_out_with_its_reason(tmp_path: Path) -> None:
    result = imported(tmp_path, "pyproject.toml", """
        [project]
        name = "mixed"
        requires-python = ">=3.11"

        [project.optional-dependencies]
        cu128 = ["torch==2.7.1"]
        xpu = ["torch==2.7.1"]
        old = ["torch==9.9.9"]

        [tool.uv.sources]
        torch = [
          { index = "cu128", extra = "cu128" },
          { index = "xpu", extra = "xpu" },
          { index = "cu128", extra = "old" },
        ]

        [[tool.uv.index]]
        name = "cu128"
        url = "https://download.pytorch.org/whl/cu128"

        [[tool.uv.index]]
        name = "xpu"
        url = "https://download.pytorch.org/whl/xpu"
        """)
    assert [t.key for t in result.targets] == ["cuda12.8"]
    notes = notes_of(result)
    assert notes["extra xpu"][0] == "dropped" and "XPU" in notes["extra xpu"][1]
    assert notes["extra old"][0] == "dropped" and "newer than envbuild's compatibility data" in notes["extra old"][1]


def test_every_variant_unreadable_is_the_first_ones_refusal(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        imported(tmp_path, "pixi.toml", """
            [workspace]
            name = "none"
            channels = ["conda-forge"]
            platforms = ["linux-64"]

            [dependencies]
            numpy = "*"
            """)
    assert "no environment in it installs torch" in refused.value.message


def test_pips_default_index_is_known_by_pips_own_name_for_it() -> None:
    # The address comes from pip at run time; a mirror or a private index is not the default.
    from pip._internal.models.index import PyPI

    from builder.init.variants import is_pips_default_index

    assert is_pips_default_index(PyPI.simple_url) and is_pips_default_index(PyPI.simple_url + "/")
    assert is_pips_default_index(f"https://{PyPI.file_storage_domain}/packages/aa/bb/x-1.0-py3-none-any.whl")
    assert not is_pips_default_index("https://pypi-index.invalid/simple")
    assert not is_pips_default_index("https://download.pytorch.org/whl/cu128")


def test_a_torch_only_a_hatch_env_script_installs_is_read_with_its_index(tmp_path: Path) -> None:
    from builder.init.importer import init_spec

    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "p"\nrequires-python = ">=3.9"\n[tool.hatch.envs.ci.scripts]\n'
                    'test = ["pip install torch==2.4.1 torchvision==0.19.1 --index-url '
                    'https://download.pytorch.org/whl/cu121", "pytest"]\n', encoding="utf-8")
    spec = init_spec(path, out=tmp_path / "envs" / "spec.yaml").spec
    assert (spec.torch, spec.torchvision, [str(t.cuda) for t in spec.targets]) == ("2.4.1", "0.19.1", ["12.1"])


def test_an_optional_extras_torch_pin_is_named_and_the_projects_torch_kept(tmp_path: Path) -> None:
    from builder.init.importer import init_spec

    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "p"\ndependencies = ["torch>=2.1", "einops"]\n'
                    '[project.optional-dependencies]\ndev = ["pytest", "torch==2.7.1"]\n', encoding="utf-8")
    result = init_spec(path, out=tmp_path / "envs" / "spec.yaml")
    assert result.spec.torch != "2.7.1" and "pytest" in result.spec.pip
    assert any(n.entry == "extra dev: torch==2.7.1" and n.outcome == "dropped" for n in result.notes)


def test_a_pixi_locks_packages_no_other_depends_on_are_kept_or_named() -> None:
    from builder.init.pixi_lock import read_pixi_lock_data

    cf = "https://conda.anaconda.org/conda-forge/linux-64"
    git = "git+https://github.com/org/tool.git?rev=abc#abc"
    data = {"version": 6, "environments": {"default": {
        "channels": [{"url": "https://conda.anaconda.org/conda-forge/"}],
        "packages": {"linux-64": [{"conda": f"{cf}/pytorch-2.8.0-cpu_mkl_py313_h1_102.conda"},
                                  {"conda": f"{cf}/ninja-1.13.2-h1_0.conda"},
                                  {"conda": f"{cf}/libzlib-1.3.1-h1_2.conda"},
                                  {"conda": f"{cf}/python-3.13.9-h1_0_cp313.conda"},
                                  {"pypi": git}]}}},
        "packages": [{"conda": f"{cf}/pytorch-2.8.0-cpu_mkl_py313_h1_102.conda", "depends": ["libzlib >=1.3"]},
                     {"conda": f"{cf}/ninja-1.13.2-h1_0.conda", "depends": ["libzlib"]},
                     {"conda": f"{cf}/libzlib-1.3.1-h1_2.conda"},
                     {"conda": f"{cf}/python-3.13.9-h1_0_cp313.conda", "depends": ["libzlib"]},
                     {"pypi": git, "name": "tool", "requires_dist": ["torch"]}]}
    variant = read_pixi_lock_data(data, "pixi.lock").variants[0].reading
    assert variant.conda == ["ninja=1.13.2"]  # libzlib is a dependency; torch and python are read apart
    assert any(n.entry == git and n.outcome == "unmapped" for n in variant.notes)


def test_a_package_the_manifest_beside_the_lock_asks_for_is_kept_though_another_depends_on_it(
        tmp_path: Path) -> None:
    from builder.init.pixi_lock import manifest_beside, read_pixi_lock_data

    cf = "https://conda.anaconda.org/conda-forge/linux-64"
    files = ["pytorch-2.8.0-cpu_mkl_py313_h1_102", "pyarrow-15.0.2-h1_0", "pandas-2.2.3-h1_0",
             "python-3.13.9-h1_0_cp313"]
    data = {"version": 6, "environments": {"default": {
        "channels": [{"url": "https://conda.anaconda.org/conda-forge/"}],
        "packages": {"linux-64": [{"conda": f"{cf}/{f}.conda"} for f in files]}}},
        "packages": [{"conda": f"{cf}/{files[2]}.conda", "depends": ["pyarrow >=10"]}]}
    assert read_pixi_lock_data(data, "pixi.lock").variants[0].reading.conda == ["pandas=2.2.3"]
    (tmp_path / "pixi.toml").write_text('[workspace]\nname = "p"\n[dependencies]\npandas = "*"\n'
                                        '[feature.io.dependencies]\npyarrow = ">=15"\n', encoding="utf-8")
    asked = manifest_beside(tmp_path / "pixi.lock")
    assert asked == {"pandas", "pyarrow"}
    assert read_pixi_lock_data(data, "pixi.lock", asked).variants[0].reading.conda == ["pyarrow=15.0.2",
                                                                                      "pandas=2.2.3"]
    assert manifest_beside(tmp_path / "other" / "pixi.lock") == frozenset()


def test_a_manifests_platforms_other_than_linux_are_told_they_get_nothing(tmp_path: Path) -> None:
    from builder.init.importer import init_spec

    path = tmp_path / "pixi.toml"
    path.write_text('[workspace]\nname = "p"\nchannels = ["conda-forge"]\n'
                    'platforms = ["linux-64", "osx-arm64", "win-64"]\n[dependencies]\npytorch = "2.5.*"\n',
                    encoding="utf-8")
    notes = init_spec(path, out=tmp_path / "envs" / "spec.yaml").notes
    assert any(n.entry == "platforms = ['osx-arm64', 'win-64']" and n.outcome == "dropped" for n in notes)

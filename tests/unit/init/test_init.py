"""`envbuild init`: real-world environment.yml shapes to specs that load, resolve and lint; broken ones refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.errors import UsageError
from builder.init.importer import (
    check_draft,
    cuda_from_build,
    cuda_from_tag,
    draft_from_environment,
    init_spec,
    parse_conda_line,
    read_environment_data,
    render_spec,
)
from builder.lint.rules import lint_spec
from builder.specs.model import DEFAULT_CHANNELS, Route, load_spec
from builder.specs.target import resolve_targets
from tests import paths

pytestmark = pytest.mark.unit

FIXTURES = paths.FIXTURES / "environment-yml"

# fixture -> (name, route, torch, torchvision, python, targets)
ROUTES = {
    "pytorch-channel.yml": ("pytorch-dataparallel", "pytorch-channel", "2.5.1", "0.20.1", "3.9", ["cuda11.8"]),
    "pytorch-channel-export.yml": ("dp_train", "pytorch-channel", "2.1.0", "0.16.0", "3.11", ["cuda12.1"]),
    "cudatoolkit-era.yml": ("segmentation", "conda-forge", "2.0.1", "0.15.2", "3.10", ["cuda11.8"]),
    "conda-forge-cuda-version.yml": ("vision-train", "conda-forge", "2.7.1", "0.22.1", "3.12", ["cuda12.6"]),
    "conda-forge-pytorch-gpu.yml": ("speech", "conda-forge", "2.5.1", None, "3.11", ["cuda12.6"]),
    "conda-forge-export.yml": ("detector", "conda-forge", "2.5.1", "0.20.1", "3.12", ["cuda12.6"]),
    "pip-cu-index.yml": ("llm-finetune", "pip", "2.3.1", "0.18.1", "3.11", ["cuda12.1"]),
    "pip-local-tag.yml": ("audio-lab", "pip", "2.4.1", "0.19.1", "3.12", ["cuda12.4"]),
    "pip-only-torch.yml": ("notebooks", "pip", "2.6.0", None, "3.11", ["cuda12.6"]),
    "cpu-only-pytorch-channel.yml": ("ci-tests", "pytorch-channel", "2.2.2", None, "3.11", ["cpu"]),
    "cpu-only-pip.yml": ("cpu-inference", "pip", "2.5.1", None, "3.12", ["cpu"]),
    "with-unmapped.yml": ("research-env", "conda-forge", "2.5.1", None, "3.11", ["cuda12.6"]),
}


def run_init(tmp_path: Path, fixture: str, **options):
    out = tmp_path / "envs" / "spec.yaml"
    return init_spec(FIXTURES / fixture, out=out, **options), out


def notes(result, outcome: str) -> dict[str, str]:
    return {n.entry: n.reason for n in result.notes if n.outcome == outcome}


@pytest.mark.parametrize("fixture", sorted(ROUTES))
def test_each_shape_becomes_a_spec_that_loads_and_resolves(tmp_path: Path, fixture: str) -> None:
    name, route, torch, torchvision, python, keys = ROUTES[fixture]
    result, out = run_init(tmp_path, fixture)
    spec = load_spec(out)
    assert (spec.name, spec.route.value, spec.torch, spec.torchvision, spec.python) == (
        name, route, torch, torchvision, python)
    assert [t.key for t in resolve_targets(spec)] == keys
    assert spec == result.spec
    # torch, its CUDA switches and python are the spec's fields now, never extras as well
    extras = {p.split("=")[0].split("<")[0].split(">")[0] for p in spec.conda + spec.pip}
    assert not extras & {"pytorch", "torch", "torchvision", "python", "pytorch-cuda", "cpuonly", "cudatoolkit",
                         "cuda-version", "pytorch-gpu"}


def test_seed_001_environment_leaves_torch_open_and_says_what_it_chose(tmp_path: Path) -> None:
    result, _ = run_init(tmp_path, "pytorch-channel.yml")
    assumed = notes(result, "assumed")
    assert "newest release that fits route pytorch-channel, CUDA 11.8, Python 3.9" in assumed["pytorch"]
    assert assumed["torchvision"].startswith("torchvision 0.20.1")
    assert notes(result, "derived")["pytorch-cuda=11.8"].startswith("target cuda11.8")
    assert result.spec.conda == ("torchaudio", "jupyter", "matplotlib", "pandas", "pip")
    assert result.spec.pip == ("ipykernel",)
    # conda adds its defaults to [pytorch, nvidia]; envbuild puts conda-forge there, which is the route's default
    assert result.spec.channels is None
    assert result.spec.effective_channels == ("pytorch", "nvidia", "conda-forge")


def test_conda_env_export_loses_builds_prefix_and_what_torch_brings(tmp_path: Path) -> None:
    result, out = run_init(tmp_path, "pytorch-channel-export.yml")
    text = out.read_text(encoding="utf-8")
    assert "/home/alice" not in text and "prefix" not in yaml.safe_load(text)
    assert all(package.count("=") <= 1 for package in result.spec.conda)  # name=version, no build
    assert "numpy=1.26.0" in result.spec.conda and "ffmpeg=4.3" in result.spec.conda
    assert result.spec.pip == ("tqdm==4.66.1",)
    dropped = notes(result, "dropped")
    for line in ("_libgcc_mutex=0.1=main", "cuda-cudart=12.1.105=0", "libcublas=12.1.0.26=0",
                 "pytorch-mutex=1.0=cuda", "torchtriton=2.1.0=py311", "prefix:", "channels: defaults"):
        assert line in dropped, line
    assert not any(p.startswith(("cuda-", "libcu", "_")) for p in result.spec.conda)
    assert "a `conda env export`: all 47 installed packages" in notes(result, "assumed")["(the whole file)"]
    assert result.unmapped == []


def test_conda_forge_export_reads_cuda_from_the_build_string(tmp_path: Path) -> None:
    result, _ = run_init(tmp_path, "conda-forge-export.yml")
    derived = notes(result, "derived")
    assert derived["pytorch=2.5.1=cuda126_mkl_py312_heeca0f5_309"] == \
        "torch 2.5.1, route conda-forge, target cuda12.6"
    assert result.spec.conda == ("numpy=2.1.3", "opencv=4.10.0")
    assert "libtorch=2.5.1=cuda126_mkl_h9e9ca8e_309" in notes(result, "dropped")


def test_cuda_developer_tools_are_kept_without_their_version(tmp_path: Path) -> None:
    result, _ = run_init(tmp_path, "conda-forge-cuda-version.yml")
    assert "cuda-nvcc" in result.spec.conda
    assert "cuda-nvcc=12.6.85" in notes(result, "unpinned")
    assert result.spec.channels is None  # [conda-forge, nodefaults] is the route's default
    assert result.spec.pip == ("wandb==0.17.0",)


def test_pip_route_drops_cuda_wheels_and_local_tags(tmp_path: Path) -> None:
    result, _ = run_init(tmp_path, "pip-local-tag.yml")
    assert result.spec.pip == ("torchaudio==2.4.1",)
    dropped = notes(result, "dropped")
    assert "nvidia-cublas-cu12==12.4.2.65" in dropped and "triton==3.0.0" in dropped
    assert "torchaudio==2.4.1+cu124" in notes(result, "unpinned")
    assert result.targets[0].pip_index == "https://download.pytorch.org/whl/cu124"


def test_public_wheel_index_stays_envbuilds_default(tmp_path: Path) -> None:
    result, _ = run_init(tmp_path, "pip-cu-index.yml")
    assert result.spec.pip_index is None
    assert result.spec.pip == ("transformers>=4.40", "accelerate")


def test_mirror_wheel_index_becomes_the_specs_pip_index(tmp_path: Path) -> None:
    source = tmp_path / "environment.yml"
    source.write_text(yaml.safe_dump({"name": "mirrored", "dependencies": [
        "python=3.11", {"pip": ["--index-url https://pypi.corp.example/pytorch/cu121", "torch==2.3.1"]}]}))
    result = init_spec(source, out=tmp_path / "mirrored.yaml")
    assert result.spec.pip_index == "https://pypi.corp.example/pytorch/cu121"
    assert [t.key for t in result.targets] == ["cuda12.1"]
    assert result.targets[0].pip_index == "https://pypi.corp.example/pytorch/cu121"


def test_pip_torch_without_a_cuda_hint_takes_the_newest_cuda_and_says_so(tmp_path: Path) -> None:
    result, _ = run_init(tmp_path, "pip-only-torch.yml")
    assert notes(result, "assumed")["torch==2.6.0"].startswith("target cuda12.6: no line names a CUDA version")


def test_lines_that_cannot_be_mapped_are_listed_with_their_reason(tmp_path: Path) -> None:
    result, out = run_init(tmp_path, "with-unmapped.yml")
    unmapped = {n.entry: n.reason for n in result.unmapped}
    assert set(unmapped) == {
        "variables:", "-e .", "git+https://github.com/example/tool.git@v1.2",
        "mylib @ https://example.org/mylib-1.0-py3-none-any.whl", "--trusted-host pypi.internal.example",
    }
    assert "editable" in unmapped["-e ."]
    assert notes(result, "dropped")['pywin32==306; sys_platform == "win32"'] == (
        '`sys_platform == "win32"` is false on Linux, where envbuild builds')
    # conda's bracket form reads as the pin it is (rattler's MatchSpec)
    assert result.spec.conda == ("h5py", "numpy>=1.24", "pip") and result.spec.pip == ("rich>=13",)
    assert notes(result, "assumed")["name: Research Env"].startswith("name research-env")
    # the file itself lists them, one comment line each
    text = out.read_text(encoding="utf-8")
    assert "#   unmapped: -e . -> an editable install" in text


BROKEN = {
    "broken-not-yaml.yml": "not valid YAML at line 4",
    "broken-no-dependencies.yml": "no `dependencies:` list",
    "broken-torch-unknown.yml": "the nearest set it builds is torch 1.12.1 -> 2.0.1; target cuda11.3 -> cuda11.7; "
                                "torchvision 0.13.1 -> 0.15.2 (route pytorch-channel). Run `envbuild init --from",
    "broken-conflicting-cuda.yml": "conflicting CUDA hints: 'pytorch-cuda=12.1' says CUDA 12.1, "
                                   "'cudatoolkit=11.8' says CUDA 11.8",
    "broken-torch-twice.yml": "torch comes from both conda ('pytorch=2.1.0') and pip ('torch==2.1.0')",
    "broken-no-torch.yml": "no torch in it",
    "broken-impossible-cuda.yml": "torch 2.1 has no CUDA 12.4 build on route pytorch-channel; "
                                  "the first with 12.4 is 2.4; CUDA targets for 2.1: 11.8, 12.1",
}


@pytest.mark.parametrize("fixture", sorted(BROKEN))
def test_broken_files_give_one_clear_line_and_write_nothing(tmp_path: Path, fixture: str) -> None:
    with pytest.raises(UsageError) as error:
        run_init(tmp_path, fixture)
    assert BROKEN[fixture] in error.value.message
    assert error.value.message.startswith(str(FIXTURES / fixture))
    assert "\n" not in error.value.message
    assert not (tmp_path / "envs").exists() or list((tmp_path / "envs").iterdir()) == []


@pytest.mark.parametrize("data, message", [
    (["python=3.11"], "an environment.yml is a YAML mapping"),
    ({"dependencies": [{"pip": ["--extra-index-url https://download.pytorch.org/whl/cu124", "torch==2.5.1+cpu"]}]},
     "'torch==2.5.1+cpu' says CPU, '--extra-index-url https://download.pytorch.org/whl/cu124' says CUDA 12.4"),
    ({"dependencies": ["python=3.11", "pytorch-gpu", "cpuonly"]},
     "it mixes the legacy pytorch channel ('cpuonly') with conda-forge's torch ('pytorch-gpu')"),
    ({"dependencies": ["python=3.8", "pytorch=2.13.0", "cuda-version=12.9"]},
     "torch 2.13 supports Python 3.10 to 3.15, not 3.8"),
    ({"dependencies": ["pytorch>=3", "cuda-version=12.9"]},
     "no torch release in envbuild's compatibility data fits 'pytorch>=3' with route conda-forge, CUDA 12.9"),
    ({"dependencies": ["pytorch=2.0.1", "cudatoolkit=9.2"]},
     "'cudatoolkit=9.2' is older than what envbuild builds; the nearest set it builds is target cuda9.2 -> "
     "cuda11.2 (route conda-forge)"),
    ({"dependencies": ["pytorch=2.1.0", "torchvision=0.18.0", "cuda-version=11.8"]},
     "torchvision 0.18.0 does not pair with torch 2.1; use torchvision 0.16.2"),
])
def test_impossible_or_contradictory_environments_are_refused(tmp_path: Path, data, message: str) -> None:
    with pytest.raises(UsageError) as error:
        reading = read_environment_data(data, "environment.yml")
        draft = draft_from_environment(reading, "probe")
        check_draft(draft, render_spec(draft))
    assert message in error.value.message


def test_an_existing_spec_is_kept_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "envs" / "spec.yaml"
    out.parent.mkdir()
    out.write_text("mine\n")
    with pytest.raises(UsageError, match="exists; pass --force"):
        init_spec(FIXTURES / "cudatoolkit-era.yml", out=out)
    assert out.read_text() == "mine\n"
    init_spec(FIXTURES / "cudatoolkit-era.yml", out=out, force=True)
    assert load_spec(out).name == "segmentation"
    # no staging file left behind; the schema the spec's modeline names is written beside it
    assert sorted(p.name for p in out.parent.iterdir()) == ["envbuild-spec.schema.json", "spec.yaml"]


def test_same_input_same_bytes(tmp_path: Path) -> None:
    first = init_spec(FIXTURES / "pytorch-channel-export.yml", out=tmp_path / "a.yaml")
    init_spec(FIXTURES / "pytorch-channel-export.yml", out=tmp_path / "b.yaml")
    assert first.path.read_bytes() == (tmp_path / "b.yaml").read_bytes()


def test_values_cannot_escape_their_yaml_scalar_or_comment(tmp_path: Path) -> None:
    source = tmp_path / "environment.yml"
    source.write_text(yaml.safe_dump({
        "name": "x\ntorch: 9.9",
        "dependencies": ["python=3.11", "pytorch=2.5.1", "cuda-version=12.6",
                         "numpy\nroute: pip", "scipy # [linux]\ntargets: []"],
    }))
    result = init_spec(source, out=tmp_path / "spec.yaml")
    spec = load_spec(result.path)
    assert (spec.name, spec.torch, spec.route.value, [t.key for t in result.targets]) == (
        "x-torch-9.9", "2.5.1", "conda-forge", ["cuda12.6"])
    assert {n.entry for n in result.unmapped} == {"numpy\nroute: pip", "scipy # [linux]\ntargets: []"}
    comments = [line for line in result.path.read_text().splitlines() if "route: pip" in line]
    assert comments and all(line.startswith("#") for line in comments)


def test_starter_spec_is_commented_and_valid(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = init_spec(name="vision-team")
    assert result.path == Path("envs/vision-team.yaml")
    text = result.path.read_text(encoding="utf-8")
    assert text.startswith("# yaml-language-server: $schema=envbuild-spec.schema.json\n# A starter envbuild spec")
    assert "# images:" in text and "# ca_certificates:" in text
    spec = load_spec(result.path)
    keys = [t.key for t in resolve_targets(spec)]
    assert keys[-1] == "cpu" and keys[0].startswith("cuda")
    assert spec.route.value == "conda-forge" and spec.torchvision
    assert [f.location.field for f in lint_spec(spec)] == ["images.runtime", "images.builder"]


def test_cli_prints_the_table_and_the_lint_findings(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    outcome = runner.invoke(cli, ["init", "--from", str(FIXTURES / "with-unmapped.yml")])
    assert outcome.exit_code == 0, outcome.output
    assert "wrote envs/research-env.yaml: torch 2.5.1, route conda-forge, targets cuda12.6" in outcome.output
    assert "5 line(s) could not be mapped" in outcome.output
    assert "info: lint.images.unpinned" in outcome.output
    again = runner.invoke(cli, ["init", "--from", str(FIXTURES / "with-unmapped.yml")])
    assert again.exit_code == 2 and "exists; pass --force" in again.output


def test_cli_json(tmp_path: Path) -> None:
    out = tmp_path / "spec.yaml"
    outcome = CliRunner().invoke(cli, ["init", "--from", str(FIXTURES / "pip-local-tag.yml"), "--out", str(out),
                                       "--name", "audio", "--json"])
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.output)
    assert (data["name"], data["route"], data["targets"], data["path"]) == ("audio", "pip", ["cuda12.4"], str(out))
    assert {"entry": "triton==3.0.0", "outcome": "dropped",
            "reason": "comes with the torch wheel for the target's CUDA"} in data["notes"]


def test_cli_broken_file_exits_2_with_one_line(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(cli, ["init", "--from", str(FIXTURES / "broken-conflicting-cuda.yml"),
                                       "--out", str(tmp_path / "spec.yaml")])
    assert outcome.exit_code == 2
    assert outcome.output.count("\n") == 1 and "conflicting CUDA hints" in outcome.output
    assert not (tmp_path / "spec.yaml").exists()


@pytest.mark.parametrize("text, expected", [
    ("numpy", ("numpy", None, None, None)),
    ("numpy=1.26.0=py311h08b1b3b_0", ("numpy", "1.26.0", "py311h08b1b3b_0", None)),
    ("numpy 1.26.* py311_0", ("numpy", "1.26.*", "py311_0", None)),
    ("numpy >= 1.24", ("numpy", ">=1.24", None, None)),
    ("scipy>=1.10,<2", ("scipy", ">=1.10,<2", None, None)),
    ("pytorch::pytorch==2.1.0=py3.11_cuda12.1_cudnn8.9.2_0", ("pytorch", "==2.1.0", "py3.11_cuda12.1_cudnn8.9.2_0", "pytorch")),
    ("conda-forge::PyYAML", ("pyyaml", None, None, "conda-forge")),
    # conda's bracket form and labelled channels, which a hand-written pattern refused
    ("numpy[version='>=1.24']", ("numpy", ">=1.24", None, None)),
    ("nvidia/label/cuda-11.8.0::cuda-toolkit", ("cuda-toolkit", None, None, "nvidia/label/cuda-11.8.0")),
])
def test_conda_lines(text: str, expected) -> None:
    line = parse_conda_line(text)
    assert (line.name, line.version, line.build, line.channel) == expected


@pytest.mark.parametrize("text", ["numpy 1.2 b 3", "numpy >=1|<0", "!bad", "numpy\nroute: pip"])
def test_conda_lines_envbuild_cannot_read(text: str) -> None:
    assert parse_conda_line(text) is None


@pytest.mark.parametrize("build, expected", [
    ("py3.11_cuda12.1_cudnn8.9.2_0", ("12.1", "pytorch-channel")),
    ("py3.11_cpu_0", ("cpu", "pytorch-channel")),
    ("cuda126_mkl_py312_heeca0f5_309", ("12.6", "conda-forge")),
    ("cuda118_py310h0", ("11.8", "conda-forge")),
    ("cuda129*", ("12.9", "conda-forge")),
    ("cuda*", ("cuda", "conda-forge")),
    ("cpu_mkl_py311h0", ("cpu", "conda-forge")),
    ("py311h0", (None, None)),
])
def test_torch_build_strings(build: str, expected) -> None:
    cuda, family = cuda_from_build(build)
    assert (cuda, family.value if family else None) == expected


@pytest.mark.parametrize("tag, expected", [("cu121", "12.1"), ("cu118", "11.8"), ("cu130", "13.0"),
                                           ("cpu", "cpu"), ("cu92", "9.2"), ("rocm6.0", None), ("simple", None)])
def test_wheel_tags(tag: str, expected) -> None:
    assert cuda_from_tag(tag) == expected


# ---------------------------------------------------------------------------------------------
# The forms issue 14 found refused or misread in real files


def draft_of(data) -> tuple[dict, dict[str, tuple[str, str]]]:
    reading = read_environment_data(data, "environment.yml")
    draft = draft_from_environment(reading, "probe", upgrade=True)
    check_draft(draft, render_spec(draft))
    return draft.data, {n.entry: (n.outcome, n.reason) for n in draft.notes}


def test_conda_forge_build_globs_and_cuda_version_ranges_are_read() -> None:
    data, said = draft_of({"channels": ["conda-forge"], "dependencies": [
        "python=3.11", "pytorch>=2.1.0=cuda120*", "torchvision=*=cuda120*"]})
    assert (data["route"], data["targets"]) == ("conda-forge", [{"cuda": "12.0"}])
    assert said["pytorch>=2.1.0=cuda120*"][0] == "assumed" and "CUDA 12.0" in said["pytorch>=2.1.0=cuda120*"][1]
    data, said = draft_of({"channels": ["conda-forge"], "dependencies": ["pytorch-gpu", "cuda-version>=12.0,<12.7"]})
    assert data["route"] == "conda-forge" and data["targets"][0]["cuda"].startswith("12.")
    assert 0 <= float(data["targets"][0]["cuda"].split(".")[1]) <= 6
    assert "the file allows CUDA" in said["pytorch-gpu"][1] and "<12.7" in said["pytorch-gpu"][1]


def test_pytorch_channel_prefixes_keep_their_channels() -> None:
    data, said = draft_of({"channels": ["conda-forge", "nodefaults"], "dependencies": [
        "python=3.10", "pytorch::pytorch>=2.1", "nvidia::pytorch-cuda=12.1"]})
    assert data["route"] == "pytorch-channel"
    # pytorch and nvidia are added first, which makes the list the route's default (so it is left out)
    assert "channels" not in data and DEFAULT_CHANNELS[Route.PYTORCH_CHANNEL][:2] == ("pytorch", "nvidia")
    assert said["channels:"] == ("assumed", "pytorch, nvidia added first: route pytorch-channel takes pytorch "
                                            "and pytorch-cuda from them")
    data, _ = draft_of({"channels": ["conda-forge", "bioconda"], "dependencies": ["pytorch::pytorch=2.4.1",
                                                                                  "pytorch::pytorch-cuda=12.1"]})
    assert data["channels"] == ["pytorch", "nvidia", "conda-forge", "bioconda"]


def test_a_foreign_pip_index_is_named_and_the_packages_stay() -> None:
    # pip's index options apply to the whole file, not to the lines after them (issue 32)
    data, said = draft_of({"dependencies": ["python=3.11", "pip", {"pip": [
        "--extra-index-url https://download.pytorch.org/whl/cu121", "torch==2.3.1", "einops",
        "--extra-index-url https://pypi.nvidia.com", "cudf-cu12==24.4.*"]}]})
    assert data["pip"] == ["einops", "cudf-cu12==24.4.*"] and data["targets"] == [{"cuda": "12.1"}]
    assert said["--extra-index-url https://pypi.nvidia.com"][0] == "dropped"
    from pip._internal.models.index import PyPI

    data, said = draft_of({"dependencies": ["python=3.11", "pip", {"pip": [
        "torch==2.3.1", f"--extra-index-url {PyPI.simple_url}", "einops"]}]})
    assert data["pip"] == ["einops"] and said[f"--extra-index-url {PyPI.simple_url}"][0] == "dropped"


def test_nvidia_cuda_wheels_are_cuda_evidence() -> None:
    data, said = draft_of({"dependencies": ["python=3.11", "pip", {"pip": [
        "torch==2.3.1", "nvidia-cuda-runtime-cu12==12.1.105", "nvidia-cudnn-cu12==8.9.2.26"]}]})
    assert data["targets"] == [{"cuda": "12.1"}]
    assert said["nvidia-cuda-runtime-cu12==12.1.105"] == ("derived", "target cuda12.1 (route pip)")
    assert "nvidia-cuda-runtime-cu12" not in " ".join(data["pip"])
    # a major alone narrows the choice to that major instead of the newest CUDA
    data, _ = draft_of({"dependencies": ["python=3.11", "pip", {"pip": ["torch==2.7.1", "nvidia-nccl-cu11"]}]})
    assert data["targets"] == [{"cuda": "11.8"}]
    with pytest.raises(UsageError, match="conflicting CUDA majors"):
        draft_of({"dependencies": ["pip", {"pip": ["torch==2.7.1+cu126", "cuml-cu11"]}]})


def test_an_old_torch_is_refused_with_the_nearest_set_and_written_with_upgrade() -> None:
    reading = read_environment_data({"dependencies": ["python=3.7", "pytorch=1.13.1", "pytorch-cuda=11.6"]},
                                    "environment.yml")
    with pytest.raises(UsageError) as refused:
        draft_from_environment(reading, "probe")
    assert "torch 1.13.1 -> 2.0.1; target cuda11.6 -> cuda11.7; python 3.7 -> 3.8" in refused.value.message
    data, said = draft_of({"dependencies": ["python=3.7", "pytorch=1.13.1", "pytorch-cuda=11.6"]})
    assert (data["torch"], data["python"], data["targets"]) == ("2.0.1", "3.8", [{"cuda": "11.7"}])
    assert [o for o, _ in said.values()].count("upgraded") == 3


def test_a_torch_newer_than_the_data_or_a_cuda_it_never_built_is_not_upgraded() -> None:
    with pytest.raises(UsageError, match="newer than envbuild's compatibility data"):
        draft_of({"dependencies": ["pytorch=9.0.0", "cuda-version=12.6"]})
    with pytest.raises(UsageError, match="the first with 12.4 is 2.4"):
        draft_of({"channels": ["pytorch", "nvidia"], "dependencies": ["pytorch=2.1.0", "pytorch-cuda=12.4"]})


@pytest.mark.parametrize("text, route, cuda", [
    ("--extra-index-url https://download.pytorch.org/whl/cu118\ntorch==2.1.0+cu118\ntorchvision==0.16.0+cu118\n",
     "pip", "11.8"),
    ("torch==2.1.2 --index-url https://download.pytorch.org/whl/cu121\nnumpy==1.26.4\n", "pip", "12.1"),
    ("python=3.10\npytorch=2.1.0\npytorch-cuda=11.8\ntorchvision=0.16.0\n", "pytorch-channel", "11.8"),
])
def test_requirements_files_and_conda_lists_are_read(text: str, route: str, cuda: str) -> None:
    from builder.init.read_requirements import read_requirements_text

    draft = draft_from_environment(read_requirements_text(text, "requirements.txt"), "probe")
    check_draft(draft, render_spec(draft))
    assert (draft.data["route"], draft.data["targets"]) == (route, [{"cuda": cuda}])


def test_dockerfile_args_pip_and_conda_lines_are_read() -> None:
    from builder.init.dockerfile import read_dockerfile_text

    text = ("ARG CUDA=12.1\nFROM nvidia/cuda:${CUDA}.1-cudnn8-runtime-ubuntu22.04\n"
            "RUN pip install --no-cache-dir torch==2.3.1 torchvision \\\n    einops && pip install -U pip\n")
    draft = draft_from_environment(read_dockerfile_text(text, "Dockerfile"), "probe")
    assert (draft.data["route"], draft.data["torch"], draft.data["targets"]) == ("pip", "2.3.1", [{"cuda": "12.1"}])
    assert draft.data["pip"] == ["einops"]
    text = "FROM continuumio/miniconda3\nRUN conda install -y -c pytorch -c nvidia pytorch=2.4.1 pytorch-cuda=12.4\n"
    draft = draft_from_environment(read_dockerfile_text(text, "Dockerfile"), "probe")
    assert (draft.data["route"], draft.data["targets"]) == ("pytorch-channel", [{"cuda": "12.4"}])


def test_a_foreign_conda_lock_of_any_version_names_its_torch_build() -> None:
    from builder.init.read import read_conda_lock_data

    def record(name: str, version: str, build: str, channel: str = "conda-forge", manager: str = "conda") -> dict:
        return {"name": name, "version": version, "manager": manager, "platform": "linux-64",
                "url": f"https://conda.anaconda.org/{channel}/linux-64/{name}-{version}-{build}.conda"}

    legacy = {"metadata": {"platforms": ["linux-64"]},  # no `version:` key at all
              "package": [record("pytorch", "2.4.1", "py3.11_cuda12.1_cudnn9.1.0_0", "pytorch"),
                          record("pytorch-cuda", "12.1", "ha16c6d3_6", "pytorch"), record("python", "3.11.9", "h0")]}
    draft = draft_from_environment(read_conda_lock_data(legacy, "conda-lock.yml"), "probe")
    assert (draft.data["route"], draft.data["torch"], draft.data["python"], draft.data["targets"]) == (
        "pytorch-channel", "2.4.1", "3.11", [{"cuda": "12.1"}])
    pip_torch = {"version": 3, "metadata": {"platforms": ["linux-64"]},
                 "package": [record("python", "3.12.4", "h0"),
                             {"name": "torch", "version": "2.5.1+cu124", "manager": "pip", "platform": "linux-64",
                              "url": "https://download.pytorch.org/whl/cu124/torch-2.5.1%2Bcu124-cp312-linux.whl"}]}
    draft = draft_from_environment(read_conda_lock_data(pip_torch, "conda-lock.yml"), "probe")
    assert (draft.data["route"], draft.data["torch"], draft.data["targets"]) == ("pip", "2.5.1", [{"cuda": "12.4"}])
    with pytest.raises(UsageError, match="has a `package:` list"):
        read_conda_lock_data({"version": 1, "metadata": {}}, "conda-lock.yml")


def test_a_multi_stage_dockerfile_takes_the_cuda_of_its_last_stage() -> None:
    from builder.init.dockerfile import read_dockerfile_text

    text = ("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build\nRUN make\n"
            "FROM nvidia/cuda:12.1.1-runtime-ubuntu22.04\nRUN pip install torch==2.3.1\n")
    draft = draft_from_environment(read_dockerfile_text(text, "Dockerfile"), "probe")
    assert draft.data["targets"] == [{"cuda": "12.1"}]


@pytest.mark.parametrize("text, outcome, reason", [
    ("torch==2.5.1; python_version < '3.13'\n", "unmapped", "environment markers on the Python version"),
    ('einops; sys_platform == "darwin"\ntorch==2.5.1\n', "dropped", "is false on Linux"),
])
def test_markers_that_linux_cannot_settle_are_not_guessed(text: str, outcome: str, reason: str) -> None:
    from builder.init.read_requirements import read_requirements_text

    reading = read_requirements_text(text, "requirements.txt")
    entry = text.splitlines()[0]
    assert any(n.entry == entry and n.outcome == outcome and reason in n.reason for n in reading.notes)


def test_torch_from_a_url_is_refused_with_what_to_write() -> None:
    from builder.init.read_requirements import read_requirements_text

    with pytest.raises(UsageError, match="takes torch from a URL; pin it by version"):
        read_requirements_text("torch @ https://download.pytorch.org/whl/cu121/torch-2.3.1.whl\n", "requirements.txt")


@pytest.mark.parametrize("name, text", [
    ("environment.yml", "dependencies: [1, null, {pip: [2, null]}, 'pytorch=2.5.1']\n"),
    ("environment.yml", "dependencies: ['pytorch>=', 'cuda-version>=abc']\n"),
    ("environment.yml", "name: [x]\ndependencies: [pytorch]\nchannels: {a: b}\n"),
    ("requirements.txt", "torch>=2.0 --index-url\n"),
    ("requirements.txt", "\\\n"),
    ("conda-lock.yml", "package: [1, 2]\n"),
    ("conda-lock.yml", "version: 1\npackage:\n- {name: pytorch, version: null}\n"),
    ("Dockerfile", "FROM\n"),
    ("Dockerfile", "FROM pytorch/pytorch\nRUN pip install 'unbalanced\n"),
    ("Dockerfile", "FROM x\nRUN conda install -c\n"),
])
def test_odd_inputs_give_a_spec_or_one_line_never_a_traceback(tmp_path: Path, name: str, text: str) -> None:
    from builder.errors import EnvbuildError
    from builder.lint.rules import lint_path

    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    for run in (lambda: init_spec(source, out=tmp_path / "spec.yaml", force=True), lambda: lint_path(source)):
        try:
            run()
        except EnvbuildError as error:
            assert "\n" not in str(error) and str(error).startswith(str(source))

"""envbuild onboard: the target chosen from recorded host facts, prefix rules and kernelspecs on real
files, and the command's usage checks. Onboarding end to end on the offline world runs in
tests/system/test_onboard_world.py."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from builder.errors import EnvbuildError, UsageError
from builder.host.doctor import MINOR_COMPAT, NEEDS_NEWER_DRIVER, NO_DRIVER, RUNS
from builder.specs.model import Feature, load_spec
from builder.specs.target import resolve_targets
from builder.teams.onboard import (
    MARKER,
    EnvMarker,
    choose_prefix,
    choose_target,
    docker_run_line,
    envs_dir_note,
    install_environment,
    kernels_dir,
    prefix_status,
    prefix_warnings,
    register_kernel,
)
from tests.envbuild_cli import envbuild
from tests.paths import REPO
from tests.unit.host.doctor_helpers import A100_PAIR, H100, host

SPEC = REPO / "envs" / "pytorch.yaml"
unit = pytest.mark.unit


def targets(*keys: str):
    resolved = resolve_targets(load_spec(SPEC))
    return [t for t in resolved if not keys or t.key in keys]


# --- choosing the target (recorded host facts) ---------------------------------------------------

@unit
@pytest.mark.parametrize(("driver", "cuda", "gpus", "chosen", "verdict"), [
    ("580.95.05", (13, 0), H100, "cuda13.0", RUNS),
    ("575.57.08", (12, 9), H100, "cuda12.9", RUNS),
    # 12.2: 11.8 runs fully, 12.x only under minor-version compatibility; a full run wins.
    ("535.54.03", (12, 2), A100_PAIR, "cuda11.8", RUNS),
    (None, None, (), "cpu", RUNS),
])
def test_the_newest_target_this_host_runs(driver, cuda, gpus, chosen: str, verdict: str) -> None:
    choice = choose_target(targets(), host(driver, cuda, gpus), asked=False, platform="linux-64")
    assert (choice.target.key, choice.verdict) == (chosen, verdict)
    if chosen == "cpu":
        assert choice.reason == ("no CUDA target runs here (cuda13.0, cuda12.9, cuda12.6, cuda11.8: does not run (no "
                                 "driver); `envbuild doctor` says why), so the CPU target")
    else:
        assert choice.reason.startswith(f"the newest CUDA target this host runs: {RUNS} (driver")


@unit
def test_minor_version_compatibility_when_nothing_runs_fully() -> None:
    choice = choose_target(targets("cuda13.0", "cuda12.9", "cuda12.6", "cpu"), host("535.54.03", (12, 2), A100_PAIR),
                           asked=False, platform="linux-64")
    assert (choice.target.key, choice.verdict) == ("cuda12.9", MINOR_COMPAT)
    assert "minor-version compatibility" in choice.reason


@unit
def test_an_asked_target_keeps_its_verdict_in_the_reason() -> None:
    choice = choose_target(targets("cuda13.0"), host("535.54.03", (12, 2), A100_PAIR), asked=True,
                           platform="linux-64")
    assert (choice.target.key, choice.verdict) == ("cuda13.0", NEEDS_NEWER_DRIVER)
    assert choice.reason.startswith("asked for with --cuda; on this host: does not run (needs a newer driver): the "
                                    "driver supports CUDA 12.2, so CUDA 13.0 builds cannot run")
    here = choose_target(targets("cuda12.9"), host(None, None), asked=True, platform="linux-64")
    assert here.verdict == NO_DRIVER


@unit
def test_only_targets_made_for_this_platform() -> None:
    # 12.6 and 11.8 are linux-64 only; a Mac with no driver gets the CPU target of the other three.
    choice = choose_target(targets(), host(None, None), asked=False, platform="osx-arm64")
    assert choice.target.key == "cpu" and "cuda12.6" not in choice.reason
    with pytest.raises(UsageError, match=r"no target of pytorch is made for win-64: cuda12\.6 \(linux-64\)"):
        choose_target(targets("cuda12.6"), host(None, None), asked=True, platform="win-64")
    with pytest.raises(EnvbuildError, match="has no CPU target"):
        choose_target(targets("cuda13.0"), host(None, None), asked=False, platform="linux-64")


# --- prefixes and kernelspecs (real files) -------------------------------------------------------

@unit
def test_prefix_from_name_under_the_envs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [cpu] = targets("cpu")
    monkeypatch.setenv("ENVBUILD_ENVS_DIR", str(tmp_path / "envs"))
    assert choose_prefix(cpu, None, "team") == tmp_path / "envs" / "team"
    assert choose_prefix(cpu, None, None) == tmp_path / "envs" / "pytorch-cpu"
    with pytest.raises(UsageError, match="not both"):
        choose_prefix(cpu, tmp_path, "team")
    with pytest.raises(UsageError, match="a plain folder name"):
        choose_prefix(cpu, None, "../up")


@unit
def test_the_envs_folder_is_the_user_data_folders_unless_an_earlier_envbuild_made_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [cpu] = targets("cpu")
    monkeypatch.delenv("ENVBUILD_ENVS_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if sys.platform.startswith("linux"):
        assert choose_prefix(cpu, None, None) == tmp_path / "data" / "envbuild" / "envs" / "pytorch-cpu"
    assert envs_dir_note() is None
    legacy = tmp_path / "home" / ".envbuild" / "envs"
    legacy.mkdir(parents=True)
    assert choose_prefix(cpu, None, "team") == legacy / "team"
    note = envs_dir_note()
    assert note is not None and str(legacy) in note and "envbuild/envs" in note and "ENVBUILD_ENVS_DIR" in note
    monkeypatch.setenv("ENVBUILD_ENVS_DIR", str(tmp_path / "mine"))
    assert choose_prefix(cpu, None, "team") == tmp_path / "mine" / "team" and envs_dir_note() is None


@unit
def test_a_prefix_with_white_space_is_warned_where_torch_compile_builds(tmp_path: Path) -> None:
    [cpu] = targets("cpu")
    assert prefix_warnings(tmp_path / "team-env", cpu) == []
    [warning] = prefix_warnings(tmp_path / "team env", cpu)
    assert "'" + str(tmp_path / "team env") + "'" in warning and "torch.compile" in warning
    assert "--prefix" in warning
    opted_out = cpu.spec.model_copy(update={"features": [Feature.NO_COMPILE]})
    assert prefix_warnings(tmp_path / "team env", replace(cpu, spec=opted_out)) == []


@unit
def test_prefix_status_refuses_what_envbuild_did_not_make(tmp_path: Path) -> None:
    [cpu] = targets("cpu")
    assert prefix_status(tmp_path / "absent", cpu, "a" * 64) == "new"
    (tmp_path / "empty").mkdir()
    assert prefix_status(tmp_path / "empty", cpu, "a" * 64) == "new"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(EnvbuildError, match="is not empty and is not an envbuild environment: refusing"):
        prefix_status(foreign, cpu, "a" * 64)
    (tmp_path / "file").write_text("x")
    with pytest.raises(EnvbuildError, match="is a file"):
        prefix_status(tmp_path / "file", cpu, "a" * 64)
    ours = tmp_path / "ours"
    (ours / "conda-meta").mkdir(parents=True)
    EnvMarker("pytorch", "cpu", "2.13.0", None, "a" * 64, "envbuild").write(ours)
    assert prefix_status(ours, cpu, "a" * 64) == "unchanged"
    assert prefix_status(ours, cpu, "b" * 64) == "replace"
    [cuda] = targets("cuda12.9")
    with pytest.raises(EnvbuildError, match=r"holds envbuild environment pytorch \(cpu\), not pytorch \(cuda12\.9\)"):
        prefix_status(ours, cuda, "a" * 64)
    (ours / MARKER).write_text("{broken")
    with pytest.raises(EnvbuildError, match="not an envbuild environment"):
        prefix_status(ours, cpu, "a" * 64)


@unit
def test_a_prefix_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    prefix = tmp_path / "a-file" / "env"
    [cpu] = targets("cpu")
    assert prefix_status(prefix, cpu, "a" * 64) == "new"
    marker = EnvMarker("pytorch", "cpu", "2.13.0", None, "a" * 64, "envbuild")
    with pytest.raises(EnvbuildError, match=f"cannot create the environment at {prefix}: .*choose another --prefix"):
        install_environment(tmp_path / "conda-lock.yml", "linux-64", prefix, None, marker)


@unit
def test_kernelspec_only_with_ipykernel_in_conda_meta(tmp_path: Path) -> None:
    [cuda] = targets("cuda12.9")
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    absent = register_kernel(prefix, cuda, "pytorch-cuda12.9", tmp_path / "kernels", SPEC)
    assert absent.path is None and not (tmp_path / "kernels").exists()
    assert absent.hint == (f"no ipykernel in this environment: add `ipykernel` to the conda list of {SPEC} and "
                           "onboard again to get a Jupyter kernel")
    (prefix / "conda-meta" / "ipykernel-6.29.5-pyhd8ed1ab_0.json").write_text("{}")
    kernel = register_kernel(prefix, cuda, "Team Env!", tmp_path / "kernels")
    assert kernel.name == "team-env" and kernel.path == tmp_path / "kernels" / "team-env" / "kernel.json"
    spec = json.loads(kernel.path.read_text())
    assert spec["display_name"] == "pytorch (CUDA 12.9, torch 2.13.0)"
    assert spec["argv"] == [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]


@unit
def test_an_unwritable_kernels_folder_is_a_hint_and_leaves_nothing(tmp_path: Path) -> None:
    [cpu] = targets("cpu")
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "ipykernel-6.29.5-pyhd8ed1ab_0.json").write_text("{}")
    blocked = tmp_path / "kernels"
    blocked.write_text("a file where the kernels folder should be")
    kernel = register_kernel(prefix, cpu, "team", blocked)
    assert kernel.path is None and kernel.hint.startswith(f"could not write the Jupyter kernel into {blocked}/team")
    assert blocked.read_text() == "a file where the kernels folder should be"


@unit
def test_kernels_folder_follows_jupyter_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # jupyter_core is not a dependency of envbuild; without it the documented default applies.
    try:
        import jupyter_core  # noqa: F401
    except ImportError:
        monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
        assert kernels_dir() == tmp_path / "data" / "kernels"
        monkeypatch.delenv("JUPYTER_DATA_DIR")
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
        if sys.platform.startswith("linux"):
            assert kernels_dir() == Path.home() / ".local" / "share" / "jupyter" / "kernels"
            monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # as jupyter_core reads it on Linux
            assert kernels_dir() == tmp_path / "xdg" / "jupyter" / "kernels"
    else:
        from jupyter_core.paths import jupyter_data_dir

        assert kernels_dir() == Path(jupyter_data_dir()) / "kernels"
    assert kernels_dir(tmp_path / "k") == tmp_path / "k"


@unit
def test_docker_run_line_asks_for_gpus_only_for_cuda_builds() -> None:
    assert docker_run_line("reg/pytorch:2.13.0-cuda12.9", "12.9") == (
        'docker run --rm -it --gpus all --shm-size 1g -v "$PWD":/work -w /work reg/pytorch:2.13.0-cuda12.9')
    assert "--gpus" not in docker_run_line("pytorch:2.13.0-cpu", None)


@unit
def test_image_build_options_without_image_are_one_usage_line(tmp_path: Path) -> None:
    done = envbuild("onboard", str(SPEC), "--cuda", "cpu", "--prefix", str(tmp_path / "env"), "--network", "host")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "Error: --network: for --image builds"
    assert not (tmp_path / "env").exists()

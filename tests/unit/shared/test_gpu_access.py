"""How GPUs reach containers (builder/gpu_access.py): the decision on engine answers captured here and
taken from the engine's own sources (tests/fixtures/engine-info/gpu_access_cases.yaml), `--gpus` in CDI
names, and the engine's refusals at container start named by their cause."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builder.gpu_access import (
    CDI,
    GPU_CAPABILITY,
    EngineGpuFacts,
    cdi_device_names,
    decide_gpu_access,
    docker_run_gpu_flag,
    engine_gpu_access,
    gpu_refusal,
    load_gpu_access_data,
    read_cdi_devices,
)
from tests.paths import FIXTURES

pytestmark = pytest.mark.unit

CASES = yaml.safe_load((FIXTURES / "engine-info" / "gpu_access_cases.yaml").read_text())["cases"]


def _answers(case: dict, specs: Path) -> tuple[dict, dict]:
    info = dict(case["info"])
    if "CDISpecDirs" in info:
        info["CDISpecDirs"] = [str(specs) if entry == "{specs}" else entry for entry in info["CDISpecDirs"]]
    return case["version"], info


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_each_engine_answer_takes_the_expected_path(case: dict, tmp_path: Path) -> None:
    for name, text in (case.get("local_specs") or {}).items():
        (tmp_path / name).write_text(text)
    version, info = _answers(case, tmp_path)
    access = engine_gpu_access(version, info, local_engine=True)
    expect = case["expect"]
    assert (access.path, access.level) == (expect["path"], expect["level"]), access.reason
    assert expect["says"] in access.reason
    assert list(access.devices) == expect.get("devices", [])
    assert "\n" not in access.reason and len(access.reason) < 300
    assert access.uses_cdi == (access.path == CDI)
    if access.level == "warning":  # a line that needs a fix says which
        assert access.fix and "nvidia-ctk cdi generate" in access.fix


def test_an_engine_that_lists_no_devices_and_runs_elsewhere_is_not_guessed_at(tmp_path: Path) -> None:
    (tmp_path / "nvidia.yaml").write_text("kind: nvidia.com/gpu\ndevices:\n- name: all\n")
    facts = EngineGpuFacts("27.5.1", "1.47", (str(tmp_path),), None)
    remote = engine_gpu_access({"Version": "27.5.1", "ApiVersion": "1.47"}, {"CDISpecDirs": [str(tmp_path)]},
                               local_engine=False)
    assert remote.path == GPU_CAPABILITY and "not on this machine" in remote.reason
    assert decide_gpu_access(facts, read_cdi_devices([str(tmp_path)])).devices == ("nvidia.com/gpu=all",)


def test_the_engine_answers_are_read_as_the_api_spells_them() -> None:
    facts = EngineGpuFacts.from_engine(
        {"Version": "28.2.2", "ApiVersion": "1.50"},
        {"CDISpecDirs": ["/etc/cdi"], "DiscoveredDevices": [
            {"Source": "cdi", "ID": "nvidia.com/gpu=all"}, {"Source": "other", "ID": "x.com/y=z"}, "junk", {}]})
    assert facts == EngineGpuFacts("28.2.2", "1.50", ("/etc/cdi",), ("nvidia.com/gpu=all",))
    assert EngineGpuFacts.from_engine({}, {"ServerVersion": "20.10.24"}) == EngineGpuFacts("20.10.24", None, None, None)


@pytest.mark.parametrize(("count", "ids", "names"), [
    (-1, (), ["nvidia.com/gpu=all"]),
    (2, (), ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]),  # a count is the first N by index, as --gpus N is
    (None, ("GPU-e9050893-7feb-1b73-f785-1e25e3d12837", "1"),
     ["nvidia.com/gpu=GPU-e9050893-7feb-1b73-f785-1e25e3d12837", "nvidia.com/gpu=1"]),
    (None, ("0:1", "MIG-4f8d2a1c-7e9b-5c3a-8f6d-2b1e9c7a5d3f"),
     ["nvidia.com/gpu=0:1", "nvidia.com/gpu=MIG-4f8d2a1c-7e9b-5c3a-8f6d-2b1e9c7a5d3f"]),
    (None, (), []),
])
def test_gpus_keep_their_meaning_as_cdi_names(count, ids, names) -> None:
    assert cdi_device_names(count, ids) == names


def test_the_docker_run_flag_follows_the_path() -> None:
    on_cdi = decide_gpu_access(EngineGpuFacts("28.2.2", "1.50", ("/etc/cdi",), ("nvidia.com/gpu=all",)))
    assert docker_run_gpu_flag(on_cdi) == "--device nvidia.com/gpu=all"
    assert docker_run_gpu_flag(decide_gpu_access(EngineGpuFacts("20.10.24", "1.41", None, None))) == "--gpus all"
    assert docker_run_gpu_flag(None) == "--gpus all"


# What engines answered at container start (the SDK's str() of the APIError: status, URL, reason and
# the engine's message in parentheses). Sources in builder/data/gpu_access.yaml's start_errors.
REFUSALS = [
    ('500 Server Error for http+docker://localhost/v1.50/containers/4f0c/start: Internal Server Error '
     '("CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=all")', "cdi_unresolvable"),
    ('500 Server Error for http+docker://localhost/v1.41/containers/4f0c/start: Internal Server Error '
     '("could not select device driver "cdi" with capabilities: []")', "cdi_no_driver"),
    ('500 Server Error: Internal Server Error ("CDI device injection failed: no CDI specification '
     'directories specified")', "cdi_no_spec_dirs"),
    ('500 Server Error for http+docker://localhost/v1.41/containers/4f0c/start: Internal Server Error '
     '("could not select device driver "" with capabilities: [[gpu]]")', "no_gpu_runtime"),
]


@pytest.mark.parametrize(("message", "kind"), REFUSALS, ids=[kind for _, kind in REFUSALS])
def test_each_refusal_gets_its_own_cause(message: str, kind: str) -> None:
    refusal = gpu_refusal(message, ["nvidia.com/gpu=all"])
    assert refusal is not None and refusal.id == kind
    assert refusal.note.endswith(": ran the CPU checks only")
    line = refusal.required(2)
    assert line.startswith("2 GPU(s) required but ") and "\n" not in line and len(line) < 300


def test_an_unresolvable_device_is_named_with_the_command_that_writes_its_spec() -> None:
    refusal = gpu_refusal(REFUSALS[0][0], ["nvidia.com/gpu=0", "nvidia.com/gpu=1"])
    assert refusal is not None
    assert refusal.cause == "the engine has CDI on but no CDI spec names nvidia.com/gpu=0, nvidia.com/gpu=1"
    assert load_gpu_access_data().cdi.generate in refusal.fix


def test_the_runtime_refusal_reads_as_before() -> None:
    refusal = gpu_refusal(REFUSALS[3][0])
    assert refusal is not None
    assert refusal.note == "no NVIDIA container runtime on this engine: ran the CPU checks only"
    assert refusal.required(1) == ("1 GPU(s) required but this engine has no NVIDIA runtime "
                                   "(install nvidia-container-toolkit and restart the engine)")


def test_other_engine_errors_are_not_gpu_refusals() -> None:
    assert gpu_refusal('500 Server Error ("error setting rlimit type 8: operation not permitted")') is None


def test_spec_folders_that_are_missing_or_hold_other_files_give_no_devices(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("kind: nvidia.com/gpu\ndevices:\n- name: all\n")
    (tmp_path / "list.yaml").write_text("- just a list\n")
    (tmp_path / "folder.yaml").mkdir()
    assert read_cdi_devices([str(tmp_path), str(tmp_path / "absent")]) == ()

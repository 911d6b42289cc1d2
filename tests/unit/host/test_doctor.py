"""envbuild doctor: verdicts on recorded facts of GPU hosts (NVML values, nvidia-smi tables of both
header styles), the real gather on this machine (no GPU, no engine), and the CLI."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest

from builder.host.checks import UNDECIDED, UNKNOWN
from builder.host.doctor import (
    ARCH_NOT_IN_BUILD,
    FAIL,
    INFO,
    MINOR_COMPAT,
    MISSING,
    NEEDS_NEWER_DRIVER,
    NO_DRIVER,
    OK,
    RUNS,
    WARNING,
    DoctorReport,
    EngineFacts,
    diagnose,
    gather_host_facts,
)
from builder.host.gpuinfo import MIB, gpus_from_nvml, rank_by_free_memory
from builder.host.hostkind import probe_host
from builder.specs.cuda import CudaVersion
from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from smoke.driver import DriverReading
from tests.envbuild_cli import envbuild
from tests.nvidia_replay import needs_no_nvml, nvml_answers, replay_nvidia_smi
from tests.unit.host.doctor_helpers import (
    A100_PAIR,
    ENGINE_UP,
    H100,
    K80_BOARD,
    RTX_5090,
    SPEC,
    by_target,
    checked,
    host,
    spec_targets,
)

unit = pytest.mark.unit


def findings_of(report: DoctorReport, target: str, subject: str) -> list:
    return [f for t in report.targets if t.target == target for f in t.findings if f.subject == subject]


# --- driver verdicts -----------------------------------------------------------------------------

@unit
def test_535_driver_runs_11_8_minor_compat_12_x_and_not_13_0() -> None:
    report = checked(diagnose(host("535.54.03", (12, 2), A100_PAIR), list(spec_targets().values())))
    assert by_target(report) == {"cuda13.0": NEEDS_NEWER_DRIVER, "cuda12.9": MINOR_COMPAT,
                                 "cuda12.6": MINOR_COMPAT, "cuda11.8": RUNS, "cpu": RUNS}
    [driver] = findings_of(report, "cuda13.0", "driver")
    assert driver.message == ("the driver supports CUDA 12.2, so CUDA 13.0 builds cannot run "
                              "(they need driver >= 580.65.06)")
    assert driver.fix == ("update the NVIDIA driver to >= 580.65.06 (>= 580.95.05 for full compatibility), "
                          "or use target cuda11.8, or cuda12.9 under minor-version compatibility")
    [minor] = findings_of(report, "cuda12.6", "driver")
    assert minor.level == WARNING and "minor-version compatibility" in minor.message
    assert minor.fix == "update the NVIDIA driver to >= 560.35.05"
    assert [f.level for f in findings_of(report, "cuda12.6", "archs")] == [OK]  # sm_80 is in the 12.6 wheel
    assert report.cannot_run == ["cuda13.0"]


@unit
@pytest.mark.parametrize(("driver_version", "cuda", "target", "verdict"), [
    ("525.60.13", (12, 0), "cuda12.9", MINOR_COMPAT),  # the oldest CUDA 12 driver
    ("520.61.05", (11, 8), "cuda12.6", NEEDS_NEWER_DRIVER),
    ("575.57.08", (12, 9), "cuda12.9", RUNS),  # the 12.9 toolkit's own driver
    ("560.28.03", (12, 6), "cuda12.6", RUNS),  # 12.6 GA driver: below 12.6 Update 3's, but says CUDA 12.6
    ("580.65.06", (13, 0), "cuda13.0", RUNS),
    ("570.124.06", (12, 8), "cuda13.0", NEEDS_NEWER_DRIVER),
    ("610.43.02", (13, 3), "cuda11.8", RUNS),
    ("331.62", None, "cuda11.8", NEEDS_NEWER_DRIVER),  # prints no CUDA version at all
    ("470.256.02", None, "cuda11.8", MINOR_COMPAT),
    (None, (12, 2), "cuda12.9", MINOR_COMPAT),  # no version string, CUDA only: judged by the major
    (None, (11, 4), "cuda12.6", NEEDS_NEWER_DRIVER),
])
def test_driver_verdict_follows_min_and_full_compat_drivers(driver_version: str | None, cuda: tuple[int, int] | None,
                                                           target: str, verdict: str) -> None:
    # An A100 (sm_80, in every build) so that the driver alone decides.
    report = checked(diagnose(host(driver_version, cuda, A100_PAIR), [spec_targets()[target]]))
    assert by_target(report) == {target: verdict}


@unit
@pytest.mark.parametrize("cuda", [(13, 0), None])
def test_a_driver_that_lists_no_gpu_never_runs_a_cuda_build(cuda: tuple[int, int] | None) -> None:
    # A vGPU guest or a broken host: driver 580 answers but lists no GPU, so nothing says the build runs.
    report = checked(diagnose(host("580.65.06", cuda), [spec_targets()["cuda12.6"]]))
    assert by_target(report) == {"cuda12.6": UNKNOWN}
    assert [f.level for f in findings_of(report, "cuda12.6", "GPUs")] == [UNDECIDED]


@unit
def test_a_driver_without_cuda_version_is_judged_by_its_version() -> None:
    report = checked(diagnose(host("331.62", None), [spec_targets()["cuda11.8"]]))
    [driver] = findings_of(report, "cuda11.8", "driver")
    assert driver.message == ("driver 331.62 is older than every CUDA 11.x driver, so CUDA 11.8 builds cannot run "
                              "(they need driver >= 450.80.02)")
    assert any(f.level == INFO and "does not report its CUDA version" in f.message for f in report.findings)


# --- recorded nvidia-smi tables through the real gather ------------------------------------------

@unit
@needs_no_nvml
@pytest.mark.parametrize(("fixture", "driver", "cuda", "ranked", "verdicts"), [
    ("kmd-610-4gpu.txt", "610.43.02", (13, 3),  # new header: KMD Version / CUDA UMD Version
     [(0, 0), (2, 0), (3, 0), (1, 3)],
     # B200s named in the table: sm_100 from gpus.yaml, which the CUDA 12.6 and 11.8 builds lack
     {"cuda13.0": RUNS, "cuda12.9": RUNS, "cuda12.6": ARCH_NOT_IN_BUILD, "cuda11.8": ARCH_NOT_IN_BUILD, "cpu": RUNS}),
    ("classic-535-2gpu.txt", "535.54.03", (12, 2),  # classic header: Driver Version / CUDA Version
     [(1, 0), (0, 35)],
     {"cuda13.0": NEEDS_NEWER_DRIVER, "cuda12.9": MINOR_COMPAT, "cuda12.6": MINOR_COMPAT, "cuda11.8": RUNS,
      "cpu": RUNS}),
])
def test_gpu_hosts_from_recorded_nvidia_smi(fixture: str, driver: str, cuda: tuple[int, int],
                                            ranked: list[tuple[int, int]], verdicts: dict[str, str],
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replay_nvidia_smi(tmp_path / "bin", fixture, monkeypatch)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    facts = gather_host_facts()
    assert (facts.driver.source, facts.driver.driver_version, facts.driver.cuda) == ("nvidia-smi", driver, cuda)
    assert [(gpu.index, gpu.utilization) for gpu in facts.gpus] == ranked
    free = [gpu.memory_free for gpu in facts.gpus]
    assert free == sorted(free, reverse=True)
    report = checked(diagnose(facts, list(spec_targets().values())))
    assert by_target(report) == verdicts
    # The table shows no compute capability; the model name does (builder/data/gpus.yaml).
    assert not any("compute capability unknown" in f.message for f in report.findings)
    assert all(gpu.capability_source == "model name" for gpu in facts.gpus)


@unit
@needs_no_nvml
def test_four_b200_host_memory_from_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replay_nvidia_smi(tmp_path / "bin", "kmd-610-4gpu.txt", monkeypatch)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    busy = gather_host_facts().gpus[-1]
    assert (busy.name, busy.bus_id, busy.memory_free, busy.memory_total) == (
        "NVIDIA B200", "00000000:43:00.0", (183359 - 2048) * MIB, 183359 * MIB)


# --- GPU architecture vs the build's arch list ---------------------------------------------------

@unit
def test_k80_needs_the_11_8_build() -> None:
    report = checked(diagnose(host("470.256.02", (11, 4), K80_BOARD), list(spec_targets().values())))
    # 12.6, 13.0 and conda-forge's 12.9 (sm_50 and up) have no sm_37 kernels: a newer driver would not help,
    # so they read as arch misses.
    assert by_target(report) == {"cuda13.0": ARCH_NOT_IN_BUILD, "cuda12.9": ARCH_NOT_IN_BUILD,
                                 "cuda12.6": ARCH_NOT_IN_BUILD, "cuda11.8": MINOR_COMPAT, "cpu": RUNS}
    [driver] = findings_of(report, "cuda12.6", "driver")
    assert (driver.level, driver.fix) == (INFO, None)
    assert "a newer driver would not help" in driver.message
    [arch] = findings_of(report, "cuda12.6", "archs")
    assert arch.level == FAIL
    assert arch.message.startswith("GPU 0,1 (Tesla K80, sm_37) is not in torch 2.13.0's CUDA 12.6 build (sm_50 ")
    assert "no kernel image is available for execution on the device" in arch.message
    assert arch.fix == "use target cuda11.8 (its build has sm_37 kernels)"
    assert [f.level for f in findings_of(report, "cuda11.8", "archs")] == [OK]


@unit
def test_k80_without_a_fitting_target_gets_the_last_build_with_sm_37(tmp_path: Path) -> None:
    spec = tmp_path / "only-126.yaml"
    spec.write_text(SPEC.read_text().split("targets:")[0]
                    + 'targets:\n  - {cuda: "12.6", route: pip, platforms: [linux-64]}\n'
                    + "images:\n  runtime: {image: \"ubuntu:24.04\"}\n")
    report = checked(diagnose(host("535.54.03", (12, 2), K80_BOARD), resolve_targets(load_spec(spec))))
    assert by_target(report) == {"cuda12.6": ARCH_NOT_IN_BUILD}
    [arch] = findings_of(report, "cuda12.6", "archs")
    assert arch.fix == ("add a target with torch 2.7 and CUDA 11.8 (official wheels with sm_37 kernels); no current "
                        "torch build has them")


@unit
@pytest.mark.parametrize(("driver_version", "cuda", "fix_11_8"), [
    # 13.0 has sm_120 but needs driver 580: conda-forge's 12.9 build (sm_120 in its list) is the way out
    ("575.57.08", (12, 9), "use target cuda12.9 (its build has sm_120 kernels)"),
    ("580.95.05", (13, 0), "use target cuda13.0 (its build has sm_120 kernels)"),
])
def test_sm_120_is_not_in_the_11_8_and_12_6_builds(driver_version: str, cuda: tuple[int, int], fix_11_8: str) -> None:
    report = checked(diagnose(host(driver_version, cuda, RTX_5090), list(spec_targets().values())))
    verdicts = by_target(report)
    assert (verdicts["cuda11.8"], verdicts["cuda12.6"]) == (ARCH_NOT_IN_BUILD, ARCH_NOT_IN_BUILD)
    [arch] = findings_of(report, "cuda11.8", "archs")
    assert "(NVIDIA GeForce RTX 5090, sm_120)" in arch.message and arch.fix == fix_11_8
    # conda-forge's own 12.9 arch list (the feedstock's, not the wheels') has sm_120
    assert [f.level for f in findings_of(report, "cuda12.9", "archs")] == [OK]
    assert {"cuda11.8", "cuda12.6"} <= set(report.cannot_run)


@unit
@pytest.mark.parametrize(("driver_version", "cuda", "verdict", "arch_level"), [
    ("535.54.03", (12, 2), ARCH_NOT_IN_BUILD, FAIL),  # PTX JIT does not work under minor-version compatibility
    ("560.35.05", (12, 6), RUNS, INFO),  # JIT on first use: slow start, runs
])
def test_ptx_only_coverage_needs_a_full_compat_driver(driver_version: str, cuda: tuple[int, int], verdict: str,
                                                      arch_level: str) -> None:
    target = spec_targets()["cuda12.6"]
    ptx_only = dataclasses.replace(
        target, release=target.release.model_copy(update={"archs": {CudaVersion(12, 6): ["sm_80", "compute_80"]}}))
    report = checked(diagnose(host(driver_version, cuda, H100), [ptx_only]))
    assert by_target(report) == {"cuda12.6": verdict}
    [arch] = findings_of(report, "cuda12.6", "archs")
    assert arch.level == arch_level and "compute_80" in arch.message


# --- NVML values ---------------------------------------------------------------------------------

@unit
def test_nvml_values_become_gpus_ranked_by_free_memory() -> None:
    mixed = [
        *A100_PAIR,
        {"index": 2, "name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "uuid": None, "pci_bus_id": None,
         "cuda_compute_capability": (8, 0), "memory": None, "utilization_gpu": None},
    ]
    ranked = rank_by_free_memory(gpus_from_nvml(mixed))
    assert [(g.index, g.name, g.uuid, g.sm, g.utilization) for g in ranked] == [
        (1, "NVIDIA A100-SXM4-40GB", "GPU-9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4", "sm_80", 0),
        (0, "NVIDIA A100-SXM4-40GB", "GPU-5b4c1d2e-8f61-2a3b-9c0d-1e2f3a4b5c6d", "sm_80", 35),
        (2, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", None, "sm_80", None),  # unknown memory goes last
    ]
    assert ranked[0].as_dict() == {
        "index": 1, "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4",
        "bus_id": "00000000:0F:00.0", "capability": "8.0", "memory_free": 42_520_805_376,
        "memory_total": 42_949_672_960, "utilization": 0, "capability_source": "driver",
        "capability_candidates": ["8.0"], "architecture": None, "mig_mode": None,
            "mig_instances": None}


# --- host findings -------------------------------------------------------------------------------

@unit
def test_no_gpu_and_no_engine_says_what_is_missing() -> None:
    engine = EngineFacts(address="unix:///var/run/docker.sock", reachable=False,
                         error="DockerException: Error while fetching server API version")
    facts = dataclasses.replace(host(None, None, engine=engine, toolkit={}),
                                driver=DriverReading(None, None, None, ["NVML: NVMLError_LibraryNotFound",
                                                                        "nvidia-smi: not on PATH"]))
    report = checked(diagnose(facts, list(spec_targets().values())))
    missing = {f.subject: f for f in report.findings if f.level == MISSING}
    assert set(missing) == {"Docker engine", "NVIDIA driver", "NVIDIA container toolkit"}
    assert missing["Docker engine"].fix.startswith("start the Docker engine (`sudo systemctl start docker`")
    assert "nvidia-smi: not on PATH" in missing["NVIDIA driver"].message
    assert by_target(report) == {"cuda13.0": NO_DRIVER, "cuda12.9": NO_DRIVER, "cuda12.6": NO_DRIVER,
                                 "cuda11.8": NO_DRIVER, "cpu": RUNS}
    assert findings_of(report, "cuda13.0", "driver")[0].fix.startswith("run it on a GPU host with driver >= 580.65.06")
    assert report.cannot_run == []


@unit
@pytest.mark.parametrize(("visible", "order", "subjects"), [
    ("", None, ["CUDA_VISIBLE_DEVICES"]),
    ("-1", None, ["CUDA_VISIBLE_DEVICES"]),
    ("0,5", "PCI_BUS_ID", ["CUDA_VISIBLE_DEVICES"]),
    ("1,0", None, ["CUDA_DEVICE_ORDER"]),
    ("1,0", "PCI_BUS_ID", []),
    ("GPU-9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4", None, []),
])
def test_cuda_visible_devices_pitfalls(visible: str, order: str | None, subjects: list[str]) -> None:
    report = checked(diagnose(host("535.54.03", (12, 2), A100_PAIR, visible=visible, order=order)))
    assert [f.subject for f in report.findings if f.level == WARNING] == subjects


@unit
def test_gpus_without_container_toolkit_cannot_start_gpu_containers() -> None:
    no_runtime = dataclasses.replace(ENGINE_UP, runtimes=("io.containerd.runc.v2", "runc"))
    report = checked(diagnose(host("535.54.03", (12, 2), A100_PAIR, engine=no_runtime, toolkit={})))
    [toolkit] = [f for f in report.findings if f.subject == "NVIDIA container toolkit"]
    assert toolkit.level == MISSING and "could not select device driver" in toolkit.message
    assert "nvidia-ctk runtime configure --runtime=docker" in toolkit.fix
    runtime_only = checked(diagnose(host("535.54.03", (12, 2), A100_PAIR, toolkit={})))  # engine lists `nvidia`
    assert [f.level for f in runtime_only.findings if f.subject == "NVIDIA container toolkit"] == [OK]


@unit
def test_an_engine_older_than_gpus_flag_is_a_warning() -> None:
    old = dataclasses.replace(ENGINE_UP, version="18.09.7")
    [engine] = [f for f in checked(diagnose(host(None, None, engine=old))).findings if f.subject == "Docker engine"]
    assert engine.level == WARNING and "19.03" in engine.message


# --- this machine: the real gather and the CLI ---------------------------------------------------

no_gpu_here = pytest.mark.skipif(nvml_answers() or shutil.which("nvidia-smi") is not None,
                                 reason="this machine has an NVIDIA driver")
# Inside a container without the NVIDIA runtime the host's GPUs are unknown (the runtime would mount the driver's
# libraries): doctor says so instead of "no driver".
IN_CONTAINER = probe_host().container is not None
NO_DRIVER_HERE = UNKNOWN if IN_CONTAINER else NO_DRIVER


@unit
@no_gpu_here
def test_real_gather_here_finds_no_driver_and_no_engine_at_a_dead_socket(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    address = f"unix://{tmp_path}/no-engine.sock"
    monkeypatch.setenv("DOCKER_HOST", address)
    facts = gather_host_facts()
    assert (facts.has_driver, facts.gpus, facts.driver.source) == (False, (), None)
    assert (facts.engine.reachable, facts.engine.address) == (False, address)
    assert facts.python.endswith(".".join(map(str, sys.version_info[:3])))
    report = checked(diagnose(facts, list(spec_targets().values())))
    assert {f.subject for f in report.findings if f.level == MISSING} >= {"Docker engine", "NVIDIA driver"}
    assert set(by_target(report).values()) == {NO_DRIVER_HERE, RUNS}


@unit
@no_gpu_here
def test_cli_doctor_here_exits_0_and_says_what_is_missing(tmp_path: Path) -> None:
    address = f"unix://{tmp_path}/no-engine.sock"
    done = envbuild("doctor", str(SPEC), env={"DOCKER_HOST": address})
    assert done.returncode == 0, done.stderr
    # table cells wrap, so the table is checked for titles and single words, the JSON for sentences
    for words in ("pytorch: targets on this host", "problems", "NVMLError_LibraryNotFound", "nvidia-container-toolkit",
                  "systemctl", "--gpus" if IN_CONTAINER else "580.65.06"):
        assert words in done.stdout
    as_json = envbuild("doctor", str(SPEC), "--json", env={"DOCKER_HOST": address})
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["host"]["engine"]["reachable"] is False and data["host"]["driver"]["source"] is None
    assert {t["target"]: t["verdict"] for t in data["targets"]} == {
        "cuda13.0": NO_DRIVER_HERE, "cuda12.9": NO_DRIVER_HERE, "cuda12.6": NO_DRIVER_HERE,
        "cuda11.8": NO_DRIVER_HERE, "cpu": RUNS}
    assert data["cannot_run"] == []
    missing = {f["subject"]: f for f in data["findings"] if f["level"] == MISSING}
    # the socket's error in words, not the SDK's DockerException(...) repr
    assert missing["Docker engine"]["message"] == f"no Docker engine answers at {address} (no engine socket there)"
    assert "dockerd &" not in missing["Docker engine"]["fix"]
    assert missing["NVIDIA driver"]["message"].startswith(
        "this container has no NVIDIA driver libraries" if IN_CONTAINER else "no NVIDIA driver answered")
    bare = envbuild("doctor", "--json", env={"DOCKER_HOST": address})
    assert bare.returncode == 0 and json.loads(bare.stdout)["targets"] == []


@unit
@needs_no_nvml
def test_cli_doctor_on_a_recorded_535_host_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replay_nvidia_smi(tmp_path / "bin", "classic-535-2gpu.txt", monkeypatch)
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "CUDA_VISIBLE_DEVICES": "1,0"}
    done = envbuild("doctor", str(SPEC), env=env)
    assert done.returncode == 1, done.stderr
    for words in ("GPUs, most free memory first", "NVIDIA A100-SXM4-40GB", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                  "580.65.06", "535.54.03"):
        assert words in done.stdout
    data = json.loads(envbuild("doctor", str(SPEC), "--json", env=env).stdout)
    assert data["cannot_run"] == ["cuda13.0"]
    [newer] = [t for t in data["targets"] if t["verdict"] == NEEDS_NEWER_DRIVER]
    assert newer["findings"][0]["message"].startswith("the driver supports CUDA 12.2, so CUDA 13.0 builds cannot run")
    assert [(g["index"], g["utilization"]) for g in data["host"]["gpus"]] == [(1, 0), (0, 35)]
    assert data["host"]["cuda_visible_devices"] == "1,0"


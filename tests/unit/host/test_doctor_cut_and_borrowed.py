"""doctor on pastes batch 4's dev cases showed it misread: a table cut inside the first GPU row (the name is
there, the rest is not), nvidia-smi's UNIX wording of "couldn't communicate", NVML's stub-library warning, and a
CUDA version a driver reports from forward-compatibility libraries it is too old to have of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.host.doctor import (
    MINOR_COMPAT,
    NEEDS_NEWER_DRIVER,
    RUNS,
    UNKNOWN,
    DoctorReport,
    diagnose,
    gather_host_facts,
)
from smoke.nvsmi import parse_nvidia_smi
from tests.nvidia_replay import needs_no_nvml, replay_host
from tests.unit.host.doctor_helpers import by_target, spec_targets

pytestmark = [pytest.mark.unit, needs_no_nvml]

HEADER = """+---------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}             Driver Version: {driver}   CUDA Version: {cuda}     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
"""
H100_ROW = """|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   27C    P0             69W /  700W |       4MiB /  81559MiB |      0%      Default |
"""
STUB_WARNING = """WARNING:

You should always run with libnvidia-ml.so that is installed with your
NVIDIA Display Driver. By default it's installed in /usr/lib and /usr/lib64.
libnvidia-ml.so in GDK package is a stub library that is attached only for
build purposes (e.g. machine that you build your application doesn't have
to have Display Driver installed).
RuntimeError: nvmlInit() failed:
"""
NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the " \
            "latest NVIDIA driver is installed and running."
WINDOWS_TAIL = " This can also be happening if non-NVIDIA GPU is running as primary display, and NVIDIA GPU is in " \
               "WDDM mode."


@pytest.fixture(autouse=True)
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def doctor_on(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DoctorReport:
    capture = tmp_path / "capture.txt"
    capture.write_text(text, encoding="utf-8")
    probe = replay_host(capture, tmp_path / "bin", monkeypatch)
    return diagnose(gather_host_facts(engine_timeout=1.0, probe=probe), list(spec_targets().values()))


def test_a_table_cut_after_the_first_gpus_name_names_that_gpu() -> None:
    [gpu] = parse_nvidia_smi(HEADER.format(driver="550.90.07", cuda="12.4") + "|   0  GRID T4-16Q\n").gpus
    assert (gpu.index, gpu.name, gpu.bus_id) == (0, "GRID T4-16Q", None)
    # A persistence word the cut left is not part of the name.
    [gpu] = parse_nvidia_smi(HEADER.format(driver="550.90.07", cuda="12.4") + "|   1  Tesla T4    Off\n").gpus
    assert (gpu.index, gpu.name) == (1, "Tesla T4")


def test_a_gpu_like_line_outside_a_table_or_before_more_output_is_no_gpu() -> None:
    assert parse_nvidia_smi("|   0  GRID T4-16Q\n").gpus == []
    cut_then_more = HEADER.format(driver="550.90.07", cuda="12.4") + "|   0  GRID T4-16Q\nsomething else\n"
    assert parse_nvidia_smi(cut_then_more).gpus == []


def test_a_vgpu_type_in_a_cut_row_names_the_guest_and_its_board(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    report = doctor_on(HEADER.format(driver="550.90.07", cuda="12.4") + "|   0  GRID T4-16Q\n", tmp_path,
                       monkeypatch)
    assert report.host.kind.name == "vgpu"
    verdicts = by_target(report)
    # T4 (sm 7.5) on a CUDA 12.4 guest driver: known board, so the verdicts rest on it.
    assert (verdicts["cuda13.0"], verdicts["cuda12.9"], verdicts["cuda12.6"], verdicts["cuda11.8"]) == (
        NEEDS_NEWER_DRIVER, MINOR_COMPAT, MINOR_COMPAT, RUNS)


def test_the_unix_wording_of_couldnt_communicate_tells_a_linux_stack(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert doctor_on(NO_DRIVER + "\n", tmp_path, monkeypatch).host.kind.answer == "linux host or container: not told"


def test_the_windows_wording_is_not_read_as_linux(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "unix-failure-wording" not in parse_nvidia_smi(NO_DRIVER + WINDOWS_TAIL + "\n").signs
    assert doctor_on(NO_DRIVER + WINDOWS_TAIL + "\n", tmp_path, monkeypatch).host.kind.name != "linux"


def test_nvml_stub_library_is_its_own_failure_with_its_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_nvidia_smi(STUB_WARNING).failure == "nvml-stub-library"
    report = doctor_on(STUB_WARNING, tmp_path, monkeypatch)
    assert report.host.kind.answer == "linux host or container: not told"
    verdicts = by_target(report)
    assert {verdicts[key] for key in verdicts if key != "cpu"} == {UNKNOWN}
    cuda12 = next(t for t in report.targets if t.target == "cuda12.9")
    assert any(f.fix and "stubs" in f.fix for f in cuda12.findings)


def test_a_cuda_version_newer_than_the_drivers_own_is_forward_compatibility(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # 560.35.03 is a CUDA 12.6 driver (12.9's first driver is 575.51.03): its "CUDA 12.9" is borrowed.
    verdicts = by_target(doctor_on(HEADER.format(driver="560.35.03", cuda="12.9") + H100_ROW, tmp_path, monkeypatch))
    assert (verdicts["cuda13.0"], verdicts["cuda12.9"], verdicts["cuda12.6"], verdicts["cuda11.8"]) == (
        NEEDS_NEWER_DRIVER, MINOR_COMPAT, RUNS, RUNS)


def test_a_driver_reporting_its_own_cuda_is_taken_at_its_word(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    verdicts = by_target(doctor_on(HEADER.format(driver="575.51.03", cuda="12.9") + H100_ROW, tmp_path, monkeypatch))
    assert (verdicts["cuda13.0"], verdicts["cuda12.9"], verdicts["cuda12.6"]) == (NEEDS_NEWER_DRIVER, RUNS, RUNS)

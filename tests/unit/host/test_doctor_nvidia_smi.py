"""doctor without NVML: nvidia-smi's query first (full names, UUIDs, compute capability, processes),
its table when the query is refused, and its failure lines turned into a fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.host.doctor import ARCH_NOT_IN_BUILD, DRIVER_NOT_LOADED, RUNS, diagnose, gather_host_facts
from smoke.driver import read_driver
from tests import paths
from tests.nvidia_replay import answering_nvidia_smi, fake_nvidia_smi, needs_no_nvml
from tests.unit.host.doctor_helpers import by_target, checked, spec_targets

pytestmark = [pytest.mark.unit, needs_no_nvml]

CORPUS = paths.CORPUS / "nvidia-smi"
# What a V100 host's driver 525 answers to doctor's query (same GPU as the corpus table capture).
V100_QUERY = "0, GPU-5d0c4e8b-3f1a-4c2e-9b7d-2a6f8e1c0b3d, Tesla V100-SXM2-32GB, 00000000:00:09.0, 525.105.17, " \
             "32768, 308, 0, 7.0\n"
V100_APPS = "GPU-5d0c4e8b-3f1a-4c2e-9b7d-2a6f8e1c0b3d, 4242, python, 300\n"


@pytest.fixture(autouse=True)
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def test_query_gives_full_name_capability_and_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answering_nvidia_smi(tmp_path / "bin", monkeypatch, CORPUS / "v100-525-truncated-name.txt",
                         gpu_csv=V100_QUERY, apps_csv=V100_APPS)
    driver = read_driver()
    assert (driver.source, driver.driver_version, driver.cuda) == ("nvidia-smi", "525.105.17", (12, 0))
    [gpu] = driver.smi_gpus
    assert (gpu.name, gpu.compute_capability, gpu.uuid) == (
        "Tesla V100-SXM2-32GB", (7, 0), "GPU-5d0c4e8b-3f1a-4c2e-9b7d-2a6f8e1c0b3d")
    [process] = driver.smi_processes
    assert (process.pid, process.name, process.memory_mib) == (4242, "python", 300)
    facts = gather_host_facts()
    assert facts.gpus[0].sm == "sm_70"
    assert facts.as_dict()["processes"][0]["pid"] == 4242
    report = checked(diagnose(facts, list(spec_targets().values())))
    # The arch verdict runs now that the capability is known; no "capability unknown" note.
    assert not any("compute capability unknown" in f.message for f in report.findings)
    verdicts = by_target(report)
    assert (verdicts["cuda11.8"], verdicts["cpu"]) == (RUNS, RUNS)
    # CUDA 13 builds dropped Volta; driver 525 is also too old for them, but "update your driver"
    # would not help an sm_70 GPU: the verdict is the arch, and no driver update is advised.
    assert verdicts["cuda13.0"] == ARCH_NOT_IN_BUILD
    cuda13 = next(t for t in report.targets if t.target == "cuda13.0")
    assert not any(f.fix and "update the NVIDIA driver" in f.fix for f in cuda13.findings)
    [arch] = [f for f in cuda13.findings if f.subject == "archs"]
    assert arch.fix and arch.fix.startswith("use target cuda12.")


def test_old_driver_refusing_compute_cap_still_gets_query_names(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    answering_nvidia_smi(tmp_path / "bin", monkeypatch, CORPUS / "k80-410-table.txt",
                         gpu_csv="0, GPU-78b84756-65f8-ec6b-851d-3878b541caf4, Tesla K80, 00000000:00:04.0, "
                                 "410.104, 11441, 0, 100\n", refuse_compute_cap=True)
    driver = read_driver()
    [gpu] = driver.smi_gpus
    assert (gpu.name, gpu.uuid, gpu.compute_capability, gpu.memory_total_mib) == (
        "Tesla K80", "GPU-78b84756-65f8-ec6b-851d-3878b541caf4", None, 11441)
    assert any("compute_cap" in note for note in driver.notes)


def test_query_refused_falls_back_to_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answering_nvidia_smi(tmp_path / "bin", monkeypatch, CORPUS / "titanxp-384-processes.txt")
    driver = read_driver()
    assert (driver.driver_version, driver.cuda) == ("384.66", None)
    assert [(g.name, g.memory_total_mib) for g in driver.smi_gpus] == [("TITAN Xp", 12174)]
    assert [p.name for p in driver.smi_processes] == ["/usr/lib/xorg/Xorg", "compton"]


@pytest.mark.parametrize(("capture", "failure", "fix_words"), [
    ("nvml-driver-library-mismatch.txt", "driver-library-mismatch", "reboot"),
    ("wsl-failed-to-communicate.txt", "no-driver", "WSL2"),
    ("no-devices-were-found.txt", "no-devices", "dmesg"),
    ("nvml-insufficient-permissions.txt", "insufficient-permissions", "/dev/nvidia"),
])
def test_failure_lines_become_a_fix(capture: str, failure: str, fix_words: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvidia_smi(tmp_path / "bin", f"cat '{CORPUS / capture}'\nexit 9\n", monkeypatch)
    facts = gather_host_facts()
    assert facts.driver.smi_failure == failure
    assert not facts.has_driver
    [driver_check] = [f for f in diagnose(facts).findings if f.subject == "NVIDIA driver"]
    assert fix_words in (driver_check.fix or "")


def test_an_installed_driver_whose_module_is_not_loaded_is_not_called_no_gpu(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # nvidia-smi runs but cannot reach the kernel module (the usual state after a kernel upgrade without DKMS).
    capture = CORPUS / "wsl-failed-to-communicate.txt"
    fake_nvidia_smi(tmp_path / "bin", f"cat '{capture}'\nexit 9\n", monkeypatch)
    report = diagnose(gather_host_facts(), list(spec_targets().values()))
    cuda_verdicts = {t.verdict for t in report.targets if t.cuda is not None}
    assert cuda_verdicts == {DRIVER_NOT_LOADED}
    [check] = [f for t in report.targets if t.cuda is not None for f in t.findings][:1]
    assert "dkms status" in (check.fix or "") and "modprobe nvidia" in (check.fix or "")


def test_nvml_processes_are_reported() -> None:
    from builder.host.gpuinfo import processes_from_nvml

    snapshot = [{"index": 1, "uuid": b"GPU-9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4",
                 "processes": [{"pid": 31337, "used_memory": 12_000 * 1024 * 1024, "name": b"python3"},
                               {"pid": 4242, "used_memory": None, "name": None}]}]
    [python, unnamed] = processes_from_nvml(snapshot)
    assert (python.gpu, python.pid, python.name, python.memory_mib) == (1, 31337, "python3", 12_000)
    assert (unnamed.pid, unnamed.name, unnamed.memory_mib) == (4242, "", None)

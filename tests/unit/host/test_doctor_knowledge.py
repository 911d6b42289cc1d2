"""doctor never upgrades ignorance: a compute capability comes from the driver, else the model name, else the
architecture, else it is unknown (and so is every arch verdict that needs it); MIG mode is reported with what it
means for the smoke suite; each NVML / nvidia-smi failure gets its own cause and fix from explain's catalogue;
a GPU no current torch build supports is told so, with the last torch and CUDA that did.

Real captures (tests/corpus/nvidia-smi) where one exists; the few fixtures are marked as such."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from builder.host.checks import UNDECIDED
from builder.host.doctor import (
    ARCH_NOT_IN_BUILD,
    DRIVER_MISMATCH,
    MISSING,
    NO_GPU,
    RUNS,
    UNKNOWN,
    diagnose,
    gather_host_facts,
)
from builder.host.gpuinfo import gpus_from_nvml, gpus_from_smi
from builder.specs.cuda import CudaVersion
from smoke.nvsmi import SmiGpu
from tests import paths
from tests.nvidia_replay import answering_nvidia_smi, fake_nvidia_smi, needs_no_nvml
from tests.unit.host.doctor_helpers import K80_BOARD, by_target, checked, host, spec_targets

pytestmark = [pytest.mark.unit, needs_no_nvml]

CORPUS = paths.CORPUS / "nvidia-smi"
FIXTURES = paths.FIXTURES / "nvidia-smi"


@pytest.fixture(autouse=True)
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def doctor_on(table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **answers: object):
    answering_nvidia_smi(tmp_path / "bin", monkeypatch, table, **answers)  # type: ignore[arg-type]
    facts = gather_host_facts()
    return facts, checked(diagnose(facts, list(spec_targets().values())))


# --- capability ------------------------------------------------------------------------------------

def test_b200_from_a_table_is_not_run_by_builds_without_sm_100(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # The case: the table has no compute capability; gpus.yaml says B200 is 10.0.
    facts, report = doctor_on(CORPUS / "b200-kmd-610-2gpu.txt", tmp_path, monkeypatch)
    assert [(gpu.capability, gpu.capability_source) for gpu in facts.gpus] == [((10, 0), "model name")] * 2
    assert by_target(report) == {"cuda13.0": RUNS, "cuda12.9": RUNS, "cuda12.6": ARCH_NOT_IN_BUILD,
                                 "cuda11.8": ARCH_NOT_IN_BUILD, "cpu": RUNS}
    assert "sm_100 (model name)" in report.gpu_rows()[0][2]


@pytest.mark.parametrize("table", ["rtx4070-550-table.txt", "h200-580-table.txt"])
def test_a_table_gpu_gets_its_capability_from_its_name(table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    facts, report = doctor_on(CORPUS / table, tmp_path, monkeypatch)
    assert facts.gpus[0].capability in ((8, 9), (9, 0)) and facts.gpus[0].capability_source == "model name"
    assert UNKNOWN not in by_target(report).values()


def test_an_old_driver_refusing_compute_cap_reads_minus_q_architecture(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    # Fixture (no capture has it): a board gpus.yaml does not name, on a driver that refuses compute_cap; its
    # -q is the real H200 capture (Product Architecture: Hopper) with the name changed.
    q_text = (CORPUS / "h200-q-580.txt").read_text().replace("NVIDIA H200", "NVIDIA Hopper Board X")
    (tmp_path / "q.txt").write_text(q_text)
    table = (CORPUS / "h200-580-table.txt").read_text().replace("NVIDIA H200        ", "NVIDIA Hopper Board X")
    (tmp_path / "table.txt").write_text(table)
    answering_nvidia_smi(tmp_path / "bin", monkeypatch, tmp_path / "table.txt", refuse_compute_cap=True,
                         gpu_csv="0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Hopper Board X, "
                                 "00000000:00:06.0, 580.159.04, 143771, 0, 0\n")
    script = (tmp_path / "bin" / "nvidia-smi").read_text().replace('case "$1" in\n',
                                                                    f'case "$1" in\n  -q) cat \'{tmp_path}/q.txt\';;\n')
    fake_nvidia_smi(tmp_path / "bin", script.removeprefix("#!/bin/sh\n"), monkeypatch)
    facts = gather_host_facts()
    [gpu] = facts.gpus
    assert (gpu.architecture, gpu.capability, gpu.capability_source) == ("Hopper", (9, 0), "architecture Hopper")


def test_an_architecture_with_several_capabilities_decides_only_when_all_agree():
    # Fixture: what -q says of an Ampere or Blackwell board gpus.yaml does not name.
    targets = spec_targets()
    ampere = gpus_from_smi([SmiGpu(0, "NVIDIA Ampere Board X", None, 0, 40960, architecture="Ampere")])
    assert ampere[0].capability is None and ampere[0].candidates == ((8, 0), (8, 6), (8, 7))
    base = host("580.95.05", (13, 0))
    # sm_80 kernels run on 8.6 and 8.7 too (same major): cuda12.6 runs whichever Ampere it is.
    assert by_target(checked(diagnose(replace(base, gpus=tuple(ampere)), [targets["cuda12.6"]]))) == {
        "cuda12.6": RUNS}
    # A build with sm_86 only (made up): 8.6 and 8.7 run, 8.0 does not, so which board it is decides.
    target = targets["cuda12.6"]
    sm86 = replace(target, release=target.release.model_copy(update={"archs": {CudaVersion(12, 6): ["sm_86"]}}))
    report = checked(diagnose(replace(base, gpus=tuple(ampere)), [sm86]))
    assert by_target(report) == {"cuda12.6": UNKNOWN}
    [arch] = [f for t in report.targets for f in t.findings if f.subject == "archs"]
    assert arch.level == UNDECIDED and "compute_cap" in (arch.fix or "")
    blackwell = gpus_from_smi([SmiGpu(0, "NVIDIA Blackwell Board X", None, 0, 1, architecture="Blackwell")])
    report = checked(diagnose(replace(base, gpus=tuple(blackwell)), [targets["cuda12.6"]]))
    assert by_target(report) == {"cuda12.6": ARCH_NOT_IN_BUILD}  # none of 10.x-12.x: decided without knowing


def test_nvml_architecture_number_and_mig_mode():
    # NVML's answers as a lent H200 gave them (nvmlDeviceGetArchitecture 9, nvmlDeviceGetMigMode [0, 0]) on a board
    # whose name gpus.yaml does not hold and whose capability query failed (a fixture of both).
    [gpu] = gpus_from_nvml([{"index": 0, "name": "NVIDIA Hopper Board X", "uuid": None, "pci_bus_id": None,
                             "cuda_compute_capability": None, "memory": None, "utilization_gpu": None,
                             "architecture": 9, "mig_mode": "Disabled"}])
    assert (gpu.architecture, gpu.capability, gpu.capability_source, gpu.mig_mode) == (
        "Hopper", (9, 0), "architecture Hopper", "Disabled")


def test_a_gpu_nothing_tells_is_unknown_never_runs():
    mystery = gpus_from_nvml([{"index": 0, "name": "NVIDIA Mystery GPU", "uuid": None, "pci_bus_id": None,
                               "cuda_compute_capability": None, "memory": None, "utilization_gpu": None}])
    report = checked(diagnose(replace(host("580.95.05", (13, 0)), gpus=tuple(mystery)),
                              list(spec_targets().values())))
    assert set(by_target(report).values()) == {UNKNOWN, RUNS} and by_target(report)["cuda13.0"] == UNKNOWN
    assert by_target(report)["cpu"] == RUNS
    [note] = [f for f in report.findings if f.subject == "GPUs"]
    assert note.level == UNDECIDED and "nvidia-smi --query-gpu=compute_cap" in (note.fix or "")


# --- MIG -------------------------------------------------------------------------------------------

def test_mig_mode_is_read_from_table_minus_q_and_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    facts, report = doctor_on(CORPUS / "h200-580-table.txt", tmp_path, monkeypatch)
    assert facts.gpus[0].mig_mode == "Disabled" and not any(f.subject == "MIG" for f in report.findings)
    # Fixture: an A100 pair, one in MIG mode with two instances (no capture holds a MIG GPU's own rows).
    facts, report = doctor_on(FIXTURES / "a100-mig-enabled-fixture.txt", tmp_path, monkeypatch)
    assert sorted((gpu.index, gpu.mig_mode) for gpu in facts.gpus) == [(0, "Enabled"), (1, "Disabled")]
    [mig] = [f for f in report.findings if f.subject == "MIG"]
    assert "GPU 0 (NVIDIA A100-SXM4-40GB)" in mig.message and "NCCL" in mig.message
    assert "--gpus device=MIG-<uuid>" in (mig.fix or "") and "--require-gpus" in (mig.fix or "")
    assert [row[3] for row in sorted(report.gpu_rows())] == ["on", "off"]
    assert facts.as_dict()["gpus"][0]["mig_mode"] in ("Enabled", "Disabled")


# --- failures --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("capture", "says", "fix_words", "verdict"), [
    # A mismatch stops every CUDA build until module and libraries match; a driver with no device has no GPU to
    # run on; a permission problem leaves the GPUs unknown.
    ("nvml-driver-library-mismatch.txt", "kernel module", "reboot", DRIVER_MISMATCH),
    ("nvml-insufficient-permissions.txt", "device nodes", "nvidia-ctk cdi generate", UNKNOWN),
    ("no-devices-were-found.txt", "initialised no GPU", "dmesg", NO_GPU),
])
def test_each_real_failure_gets_its_cause_and_its_verdict(capture: str, says: str, fix_words: str, verdict: str,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _, report = doctor_on(CORPUS / capture, tmp_path, monkeypatch)
    [driver] = [f for f in report.findings if f.subject == "NVIDIA driver"]
    assert driver.level == MISSING and says in driver.message and not driver.message.startswith("no NVIDIA driver")
    assert fix_words in (driver.fix or "") and "install" not in (driver.fix or "").split(";")[0]
    verdicts = by_target(report)
    assert verdicts.pop("cpu") == RUNS and set(verdicts.values()) == {verdict}


@pytest.mark.parametrize(("line", "says", "fix_words", "verdict"), [
    # Fixtures: the lines as nvidia-smi prints them (no capture of either in the corpus)
    ("Failed to initialize NVML: Unknown Error", "daemon-reload", "restart the container", UNKNOWN),
    ("Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error", "fallen off the bus", "reboot",
     NO_GPU),
])
def test_nvml_unknown_error_and_a_lost_gpu_are_not_a_missing_driver(line: str, says: str, fix_words: str,
                                                                    verdict: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "said.txt").write_text(line + "\n")
    _, report = doctor_on(tmp_path / "said.txt", tmp_path, monkeypatch)
    [driver] = [f for f in report.findings if f.subject == "NVIDIA driver"]
    assert says in driver.message and fix_words in (driver.fix or "")
    assert "reinstall the NVIDIA driver" not in (driver.fix or "") and "install the NVIDIA driver" not in (driver.fix or "")
    assert by_target(report)["cuda12.6"] == verdict


# --- hardware no current build supports -----------------------------------------------------------

def test_kepler_is_told_the_last_build_and_driver_branch():
    report = checked(diagnose(host("470.256.02", (11, 4), K80_BOARD), list(spec_targets().values())))
    [old] = [f for f in report.findings if f.subject == "GPUs" and "too old" in f.message]
    assert "sm_37" in old.message
    assert "torch 2.7.1 with CUDA 11.8" in (old.fix or "") and "driver branch 470" in (old.fix or "")


def test_fermi_is_never_told_to_update_its_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Fixture: the real three-GTX-680 capture with its boards named as a Fermi GTX 580 (driver 331, no CUDA line).
    table = (CORPUS / "gtx680-331-3gpu-util-na.txt").read_text().replace("GeForce GTX 680", "GeForce GTX 580")
    (tmp_path / "fermi.txt").write_text(table)
    facts, report = doctor_on(tmp_path / "fermi.txt", tmp_path, monkeypatch)
    assert {gpu.capability for gpu in facts.gpus} == {(2, 0)}
    verdicts = by_target(report)
    assert verdicts.pop("cpu") == RUNS and set(verdicts.values()) == {ARCH_NOT_IN_BUILD}
    fixes = [f.fix or "" for t in report.targets for f in t.findings]
    assert not any("update the NVIDIA driver" in fix for fix in fixes)
    assert any("Fermi: the last CUDA toolkit for it is 8.0, the last driver branch 390" in fix for fix in fixes)

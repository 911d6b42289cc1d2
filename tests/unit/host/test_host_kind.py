"""doctor names the kind of host (Linux, Windows, WSL2, a container, a vGPU guest, FreeBSD) and its traits (arm64,
MIG, the open kernel module) from real nvidia-smi captures, each with the source that told it, and every failure
line gets its cause. Captures are the dev half of tests/corpus/nvidia-smi-blind and tests/corpus/nvidia-smi."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.host.doctor import (
    DRIVER_MISMATCH,
    FABRIC_NOT_READY,
    MINOR_COMPAT,
    NEEDS_NEWER_DRIVER,
    NO_GPU,
    NO_PLATFORM_BUILD,
    RUNS,
    UNKNOWN,
    diagnose,
    gather_host_facts,
)
from builder.host.hostkind import HostProbe, read_host_kind
from builder.host.mig import check_mig_limit
from smoke.driver import DriverReading
from smoke.nvsmi import parse_nvidia_smi
from tests import paths
from tests.envbuild_cli import envbuild
from tests.nvidia_replay import fake_nvidia_smi, needs_no_nvml, recorded_probe, replay_host
from tests.unit.host.doctor_helpers import H100, by_target, checked, host, spec_targets

pytestmark = [pytest.mark.unit, needs_no_nvml]

BLIND = paths.CORPUS / "nvidia-smi-blind"
CORPUS = paths.CORPUS / "nvidia-smi"
NOTHING_READ = HostProbe()


@pytest.fixture(autouse=True)
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def replayed(capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: HostProbe | None = None):
    recorded = replay_host(capture, tmp_path / "bin", monkeypatch)
    facts = gather_host_facts(engine_timeout=1.0, probe=probe or recorded)
    return facts, checked(diagnose(facts, list(spec_targets().values())))


def kind_of(capture: Path, probe: HostProbe = NOTHING_READ) -> tuple[str, str]:
    reading = parse_nvidia_smi(capture.read_bytes())
    driver = DriverReading("nvidia-smi", None, reading.driver_version, smi_signs=reading.signs,
                           smi_failure=reading.failure)
    kind = read_host_kind(probe, driver, tuple(gpu.name for gpu in reading.gpus))
    return kind.name, kind.source


@pytest.mark.parametrize(("capture", "probe", "kind", "told_by"), [
    # nvidia-smi.exe's table has a Driver-Model (or TCC/WDDM) column instead of Persistence-M.
    (BLIND / "ollama-13536-windows-rtx4050-591-wddm.txt", NOTHING_READ, "windows", "WDDM"),
    (CORPUS / "windows-517-wddm-2gpu.txt", NOTHING_READ, "windows", "WDDM"),
    # WSL2: the Linux nvidia-smi reports the Windows driver (its -a says WDDM), or a version unlike its own.
    (BLIND / "nvidia-container-toolkit-271-wsl2-gtx1650ti-q-510.txt", HostProbe(system="Linux"), "wsl",
     "Windows driver model on Linux"),
    (CORPUS / "wsl2-555-smi-differs-from-driver.txt", NOTHING_READ, "wsl", "smi-differs"),
    (CORPUS / "wsl2-546-cuda-err.txt", NOTHING_READ, "wsl", "cuda-err"),
    (BLIND / "ollama-2012-wsl-nvml-serial-failed.txt", NOTHING_READ, "wsl", "wsl-library"),
    # The UNIX driver's marks: its version form, -q's N/A driver model and device minor, /-paths of processes.
    (BLIND / "tensorflow-62328-gtx1650-535-table.txt", NOTHING_READ, "linux", "unix-driver"),
    (BLIND / "k8s-device-plugin-145-m2090-q-390.txt", NOTHING_READ, "linux", "no-driver-model"),
    (BLIND / "ollama-12770-processes-only.txt", NOTHING_READ, "linux", "unix-processes"),
    (BLIND / "ollama-1413-nvml-driver-library-mismatch-535.txt", NOTHING_READ, "linux", "driver-library-mismatch"),
    # The system's own word wins over nvidia-smi's marks.
    (BLIND / "tensorflow-62328-gtx1650-535-table.txt", HostProbe(system="Linux", container="/.dockerenv"),
     "container", "/.dockerenv"),
    (BLIND / "tensorflow-62328-gtx1650-535-table.txt", HostProbe(system="FreeBSD"), "freebsd", "platform.system"),
    # `nvidia-smi -L` alone says nothing of the host.
    (BLIND / "pytorch-99137-list-quadro-k620.txt", NOTHING_READ, "unknown", "no source"),
])
def test_the_host_kind_and_what_told_it(capture: Path, probe: HostProbe, kind: str, told_by: str) -> None:
    named, source = kind_of(capture, probe)
    assert named == kind and told_by in source


@pytest.mark.parametrize(("capture", "probe", "answer"), [
    # A UNIX driver's table reads the same on a Linux host and in a container there: not told which.
    (BLIND / "tensorflow-62328-gtx1650-535-table.txt", NOTHING_READ, "linux host or container: not told"),
    (BLIND / "k8s-device-plugin-145-m2090-q-390.txt", NOTHING_READ, "linux host or container: not told"),
    # The OS alone is no answer: a container shares its host's. Its container markers looked for: told.
    (BLIND / "tensorflow-62328-gtx1650-535-table.txt", HostProbe(system="Linux"), "linux host or container: not told"),
    (BLIND / "tensorflow-62328-gtx1650-535-table.txt", HostProbe(system="Linux", container_checked=True), "linux"),
    (BLIND / "tensorflow-62328-gtx1650-535-table.txt", HostProbe(container="/.dockerenv"), "container"),
    # Kinds nvidia-smi's own output tells are named, though the system was not read.
    (BLIND / "ollama-13536-windows-rtx4050-591-wddm.txt", NOTHING_READ, "windows"),
    (CORPUS / "wsl2-546-cuda-err.txt", NOTHING_READ, "wsl"),
    # Nothing names any kind.
    (BLIND / "pytorch-99137-list-quadro-k620.txt", NOTHING_READ, "host kind: not told"),
])
def test_a_kind_no_source_tells_apart_is_said_not_told(capture: Path, probe: HostProbe, answer: str) -> None:
    reading = parse_nvidia_smi(capture.read_bytes())
    driver = DriverReading("nvidia-smi", None, reading.driver_version, smi_signs=reading.signs,
                           smi_failure=reading.failure)
    kind = read_host_kind(probe, driver, tuple(gpu.name for gpu in reading.gpus))
    assert kind.answer == answer
    assert (kind.not_told is None) == (answer == kind.name)
    if kind.not_told:
        assert "not told" not in kind.means and "nothing doctor read tells" in kind.means


@pytest.mark.parametrize(("capture", "answer"), [
    # A prompt shows the OS only (batch 3, dev): a test pod's root prompt, a node's `#`.
    ("k8s-dra-425-prompt-l4-535.txt", "linux host or container: not told"),
    ("k8s-dra-889-t4-580-cuda13.txt", "linux host or container: not told"),
    # What only a host does: an ssh login into the node, the vGPU-KVM host driver run through vgpu_unlock.
    ("cudf-9743-ssh-node-v100-396.txt", "linux"),
    ("vgpu-unlock-30-kvm-host-p400-460-cuda-na.txt", "linux"),
    # Inside a container: `docker exec`, and HAMi's in-container library logging through nvidia-smi.
    ("k8s-dra-32-docker-exec-kind-545-header.txt", "container"),
    ("hami-332-hami-core-550-header.txt", "container"),
    ("hami-347-hami-core-v100-q-535.txt", "container"),
    ("hami-248-4pdvgpu-nvml-unknown.txt", "container"),
])
def test_a_pasted_session_tells_the_kind_only_by_what_a_host_or_container_shows(
        capture: str, answer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts, _ = replayed(BLIND / capture, tmp_path, monkeypatch)
    assert facts.kind.answer == answer


def test_a_cuda_field_that_is_no_version_never_makes_a_build_run(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A vGPU-KVM host's manager driver prints `CUDA Version: N/A` (batch 3, dev): its number admits the CUDA 11.8
    build under minor-version compatibility, but it serves no CUDA, so that target is unknown, not "runs"."""
    for capture in ("vgpu-unlock-30-kvm-host-p400-460-cuda-na.txt", "vgpu-unlock-75-gtx105x-460-cuda-na.txt"):
        (tmp_path / capture).mkdir()
        _, report = replayed(BLIND / capture, tmp_path / capture, monkeypatch)
        verdicts = {t.target: t for t in report.targets}
        assert verdicts["cuda11.8"].verdict == UNKNOWN
        assert any("CUDA Version: N/A" in f.message for f in verdicts["cuda11.8"].findings)
        assert verdicts["cuda12.9"].verdict == NEEDS_NEWER_DRIVER
        assert verdicts["cpu"].verdict == RUNS


def test_the_report_says_not_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, report = replayed(BLIND / "tensorflow-62328-gtx1650-535-table.txt", tmp_path, monkeypatch, NOTHING_READ)
    assert report.host.kind.answer == "linux host or container: not told"
    assert any(check.message.startswith("linux host or container: not told") for check in report.findings)
    assert any(row[1].startswith("linux host or container: not told") for row in report.host_rows())


def test_a_vgpu_guest_is_named_and_told_its_licence() -> None:
    # Fixture: the lines a vGPU guest's `nvidia-smi -q` prints (no capture of one in the corpora).
    text = ("Driver Version                            : 535.161.07\n"
            "    GPU Virtualization Mode\n        Virtualization Mode           : VGPU\n"
            "    vGPU Software Licensed Product\n        License Status            : Unlicensed (Restricted)\n")
    reading = parse_nvidia_smi(text)
    assert "vgpu" in reading.signs
    kind = read_host_kind(HostProbe(system="Linux"), DriverReading("nvidia-smi", None, "535.161.07",
                                                                   smi_signs=reading.signs))
    assert kind.name == "vgpu" and "licen" in (kind.fix or "")


def test_a_gpu_named_by_its_vgpu_type_is_a_vgpu_guest() -> None:
    # The table of a vGPU guest names the vGPU type (text-generation-inference#1156, #615), no -q block needed.
    driver = DriverReading("nvidia-smi", (12, 2), "535.104.05", smi_signs=("unix-driver",))
    kind = read_host_kind(HostProbe(), driver, ("GRID A100D-20C",))
    assert (kind.name, kind.source) == ("vgpu", "GPU GRID A100D-20C: a vGPU type's name")
    in_a_pod = read_host_kind(HostProbe(container="/.dockerenv"), driver, ("GRID A100D-20C",))
    assert in_a_pod.name == "container" and in_a_pod.also == ("vgpu",)
    assert read_host_kind(HostProbe(), driver, ("NVIDIA A100-SXM4-80GB",)).name == "linux"


def test_a_cuda_version_from_forward_compatibility_libraries_does_not_count() -> None:
    # Inside an NGC image a 570 driver reports CUDA 13.0 through the image's cuda-compat libraries
    # (TensorRT-LLM#9554); envbuild's images carry none, so the driver's own number decides.
    facts = replace(host("570.148.08", (13, 0), H100), probe=HostProbe(system="Linux"))
    report = checked(diagnose(facts, list(spec_targets().values())))
    assert by_target(report) == {"cuda13.0": NEEDS_NEWER_DRIVER, "cuda12.9": MINOR_COMPAT, "cuda12.6": RUNS,
                                 "cuda11.8": RUNS, "cpu": RUNS}
    [thirteen] = [t for t in report.targets if t.target == "cuda13.0"]
    assert "forward-compatibility libraries" in thirteen.findings[0].message
    # The same CUDA reported by a driver of that major is the driver's own.
    own = replace(host("580.95.05", (13, 0), H100), probe=HostProbe(system="Linux"))
    assert by_target(diagnose(own, [spec_targets()["cuda13.0"]])) == {"cuda13.0": RUNS}


def test_an_arm64_host_runs_only_linux_aarch64_builds() -> None:
    facts = replace(host("580.95.05", (13, 0), H100), probe=HostProbe(system="Linux", machine="aarch64"))
    report = checked(diagnose(facts, list(spec_targets().values())))
    assert facts.kind.has("aarch64")
    # envs/pytorch.yaml builds its CUDA targets for linux-64 only.
    assert by_target(report) == {"cuda13.0": NO_PLATFORM_BUILD, "cuda12.9": NO_PLATFORM_BUILD,
                                 "cuda12.6": NO_PLATFORM_BUILD, "cuda11.8": NO_PLATFORM_BUILD, "cpu": RUNS}
    grace = replace(host("580.95.05", (13, 0), [{**H100[0], "name": "NVIDIA GH200 480GB"}]), probe=NOTHING_READ)
    assert [t.source for t in grace.kind.traits] == ["board NVIDIA GH200 480GB (comes with an arm64 CPU)"]


def test_proc_driver_version_names_the_module_and_the_open_kernel_module(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    facts, report = replayed(BLIND / "open-gpu-kernel-modules-259-proc-version-handle-not-found.txt", tmp_path,
                             monkeypatch)
    kind = facts.kind
    assert (kind.name, kind.kernel_module) == ("linux", "515.43.04")
    assert kind.has("open-kernel-module") and facts.sources()["kernel_module"] == "/proc/driver/nvidia/version"
    # The module is loaded but reached no GPU: 'no GPU here', never 'install the driver'.
    verdicts = by_target(report)
    assert verdicts.pop("cpu") == RUNS and set(verdicts.values()) == {NO_GPU}


def test_mig_instances_are_counted_from_the_table_and_limit_the_suite(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    facts, _ = replayed(CORPUS / "mig-510-processes.txt", tmp_path, monkeypatch)
    assert (facts.mig_instances, facts.smoke_gpu_limit) == (3, 3)
    as_json = facts.as_dict()
    assert (as_json["mig_instances"], as_json["smoke_gpu_limit"]) == (3, 3)
    check_mig_limit(3, facts.smoke_gpu_limit)
    with pytest.raises(UsageError, match="MIG is on and this host lists 3 MIG instance"):
        check_mig_limit(4, facts.smoke_gpu_limit)


@pytest.mark.parametrize(("capture", "verdict", "fix_has", "fix_lacks"), [
    (BLIND / "ollama-1413-nvml-driver-library-mismatch-535.txt", DRIVER_MISMATCH, "reboot", "install the NVIDIA"),
    (BLIND / "open-gpu-kernel-modules-862-no-devices-rtx5090.txt", NO_GPU, "Resizable BAR", "install the NVIDIA"),
    (BLIND / "open-gpu-kernel-modules-246-device-handle-not-found.txt", NO_GPU, "dmesg", "install the NVIDIA"),
    # Inside a container the driver's libraries come from the runtime: the fix is --gpus/CDI, not a driver.
    (BLIND / "k8s-device-plugin-444-plugin-could-not-load-nvml.txt", UNKNOWN, "--gpus all", "install the NVIDIA"),
    (BLIND / "ollama-10026-container-nvml-unknown.txt", UNKNOWN, "restart the container", "install the NVIDIA"),
])
def test_each_failure_line_gets_its_cause(capture: Path, verdict: str, fix_has: str, fix_lacks: str,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inside = "k8s" in capture.name or "10026" in capture.name
    probe = HostProbe(system="Linux", container="/.dockerenv") if inside else None
    _, report = replayed(capture, tmp_path, monkeypatch, probe)
    cuda = [t for t in report.targets if t.cuda is not None]
    assert {t.verdict for t in cuda} == {verdict}
    fix = cuda[0].findings[0].fix or ""
    assert fix_has in fix and fix_lacks not in fix


def test_wsl_that_reaches_no_driver_has_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, report = replayed(CORPUS / "wsl-failed-to-communicate.txt", tmp_path, monkeypatch,
                         HostProbe(system="Linux", wsl="kernel 5.15.153.1-microsoft-standard-WSL2"))
    check = next(t.findings[0] for t in report.targets if t.cuda is not None)
    assert by_target(report)["cuda12.6"] == NO_GPU and "Windows NVIDIA driver" in (check.fix or "")


def test_fabric_manager_not_running_stops_every_cuda_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fixture: the error CUDA and NVML print on an NVSwitch system before nvidia-fabricmanager runs.
    fake_nvidia_smi(tmp_path / "bin", "echo 'CUDA error: system not yet initialized (cudaErrorSystemNotReady)'\n",
                    monkeypatch)
    report = checked(diagnose(gather_host_facts(engine_timeout=1.0, probe=NOTHING_READ),
                              list(spec_targets().values())))
    cuda = [t for t in report.targets if t.cuda is not None]
    assert {t.verdict for t in cuda} == {FABRIC_NOT_READY}
    assert "nvidia-fabricmanager" in (cuda[0].findings[0].fix or "")


def test_a_pasted_session_stands_for_what_its_host_shows() -> None:
    prompt = recorded_probe((BLIND / "ollama-11599-container-v100-470-table.txt").read_text())
    assert prompt.container and prompt.system == "Linux"  # root@<container id>:/# is a POSIX shell
    assert recorded_probe("bash: /usr/bin/nvidia-smi: No such file or directory\n").system == "Linux"
    assert recorded_probe("PS C:\\Users\\me> nvidia-smi\n").system == "Windows"
    # A pod: a log read with kubectl's flags before `logs`, a shell opened by `kubectl exec`/`oc exec`.
    assert recorded_probe("$ kubectl --namespace monitoring logs dcgm-exporter-x\n").container
    assert recorded_probe("$ oc exec -it tgi-7f9-wcg72 -- bash\nroot@tgi-7f9-wcg72:/# nvidia-smi\n").container
    assert not recorded_probe("$ kubectl get pods\n").container
    # text-generation-launcher --env names its image's label inside the image, N/A outside.
    assert recorded_probe("Docker label: sha-630800e\nnvidia-smi:\n").container
    assert not recorded_probe("Docker label: N/A\nnvidia-smi:\n").container


def test_json_carries_the_host_kind_and_each_facts_source(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\ncat '{CORPUS / 'mig-510-processes.txt'}'\n")
    (fake / "nvidia-smi").chmod(0o755)
    done = envbuild("doctor", str(paths.REPO / "envs" / "pytorch.yaml"), "--json",
                    env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "PATH": f"{fake}:/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["host"]
    assert data["kind"]["name"] and data["kind"]["source"]
    assert (data["mig_instances"], data["smoke_gpu_limit"]) == (3, 3)
    assert set(data["sources"]) >= {"driver_version", "gpus", "kind", "kernel_module"}


def test_a_windows_driver_is_held_to_nvidias_windows_numbers() -> None:
    # 451.82 is CUDA 11.0 Update 1's Windows driver: above Linux's 11.x floor (450.80.02), below Windows' (452.39).
    targets = [spec_targets()["cuda11.8"]]
    on_linux = replace(host("451.82", None, H100), probe=HostProbe(system="Linux"))
    assert by_target(diagnose(on_linux, targets)) == {"cuda11.8": MINOR_COMPAT}
    on_wsl = replace(on_linux, probe=HostProbe(system="Linux", wsl="/usr/lib/wsl/lib"))
    report = checked(diagnose(on_wsl, targets))
    assert on_wsl.kind.name == "wsl" and by_target(report) == {"cuda11.8": NEEDS_NEWER_DRIVER}
    assert "452.39" in report.targets[0].findings[0].message
    # CUDA 13 has no Windows number in the data: the Linux one stands in, and the finding says so.
    new = replace(on_wsl, driver=DriverReading("nvml", None, "575.00"))
    report = diagnose(new, [spec_targets()["cuda13.0"]])
    assert "Linux ones stand in" in report.targets[0].findings[0].message


def test_no_driver_on_windows_names_the_windows_floors() -> None:
    # 11.x: Windows' floors are 452.39 (minor-version compatibility) and 520.06 (CUDA 11.8's own driver).
    targets = [spec_targets()["cuda11.8"]]
    bare = replace(host(None, None), probe=HostProbe(system="Linux"))
    [linux] = diagnose(bare, targets).targets[0].findings
    assert "452.39" not in linux.fix and "450.80.02" in linux.fix
    on_windows = replace(bare, probe=HostProbe(system="Windows"))
    [windows] = checked(diagnose(on_windows, targets)).targets[0].findings
    assert on_windows.kind.name == "windows"
    assert "driver >= 452.39 (>= 520.06" in windows.fix, windows.fix

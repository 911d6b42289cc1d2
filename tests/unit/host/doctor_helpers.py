"""Recorded GPU hosts and report checks shared by the doctor, explain and onboard tests (and the doctor's
system test): NVML answers of real boards, a HostFacts made from them, and the one-line-fix check."""

from __future__ import annotations

from builder.host.doctor import NEEDS_FIX, DoctorReport, EngineFacts, HostFacts
from builder.host.gpuinfo import gpus_from_nvml, rank_by_free_memory
from builder.specs.model import load_spec
from builder.specs.target import Target, resolve_targets
from smoke.driver import DriverReading
from tests.paths import REPO

SPEC = REPO / "envs" / "pytorch.yaml"

ENGINE_UP = EngineFacts(address="unix:///var/run/docker.sock", reachable=True, version="24.0.7", api_version="1.43",
                        runtimes=("io.containerd.runc.v2", "nvidia", "runc"), default_runtime="runc")
TOOLKIT = {"nvidia-ctk": "NVIDIA Container Toolkit CLI version 1.14.6", "nvidia-container-cli": "cli-version: 1.14.6"}

# NVML answers in the shape builder.host.gpuinfo.nvml_snapshot() keeps them: older nvidia-ml-py returns
# bytes for names and UUIDs, newer str; a query the GPU does not support is None.
A100_PAIR = [
    {"index": 0, "name": b"NVIDIA A100-SXM4-40GB", "uuid": b"GPU-5b4c1d2e-8f61-2a3b-9c0d-1e2f3a4b5c6d",
     "pci_bus_id": b"00000000:07:00.0", "cuda_compute_capability": (8, 0),
     "memory": {"free": 28_890_365_952, "total": 42_949_672_960}, "utilization_gpu": 35},
    {"index": 1, "name": b"NVIDIA A100-SXM4-40GB", "uuid": b"GPU-9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4",
     "pci_bus_id": b"00000000:0F:00.0", "cuda_compute_capability": (8, 0),
     "memory": {"free": 42_520_805_376, "total": 42_949_672_960}, "utilization_gpu": 0},
]
K80_BOARD = [  # one K80 board shows as two GPUs
    {"index": i, "name": "Tesla K80", "uuid": f"GPU-0d2f6c1e-77a{i}-4b8e-a1c3-5e9b2d4f6a8{i}",
     "pci_bus_id": f"00000000:0{i + 4}:00.0", "cuda_compute_capability": (3, 7),
     "memory": {"free": 11_996_954_624, "total": 12_079_136_768}, "utilization_gpu": 0}
    for i in (0, 1)
]
RTX_5090 = [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "uuid": "GPU-3e1a9b7c-2d4f-6a8b-0c1e-3f5a7b9c1d2e",
             "pci_bus_id": "00000000:01:00.0", "cuda_compute_capability": (12, 0),
             "memory": {"free": 33_285_996_544, "total": 34_190_917_632}, "utilization_gpu": 4}]
H100 = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-7c5e3a1b-9d8f-4e2a-b6c4-d2e0f8a6b4c2",
         "pci_bus_id": "00000000:18:00.0", "cuda_compute_capability": (9, 0),
         "memory": {"free": 84_540_784_640, "total": 85_520_809_984}, "utilization_gpu": 0}]


def spec_targets() -> dict[str, Target]:
    return {target.key: target for target in resolve_targets(load_spec(SPEC))}


def host(driver_version: str | None, cuda: tuple[int, int] | None, snapshot: list[dict] = (), *,
         engine: EngineFacts = ENGINE_UP, toolkit: dict[str, str] | None = None, visible: str | None = None,
         order: str | None = None) -> HostFacts:
    has_driver = driver_version is not None or cuda is not None
    return HostFacts(
        os="Ubuntu 22.04.4 LTS (Linux 5.15.0-105-generic, x86_64)", python="CPython 3.11.9", engine=engine,
        container_toolkit=TOOLKIT if toolkit is None else toolkit,
        driver=DriverReading("nvml" if has_driver else None, cuda, driver_version),
        gpus=tuple(rank_by_free_memory(gpus_from_nvml(snapshot))),
        cuda_visible_devices=visible, cuda_device_order=order,
    )


def checked(report: DoctorReport) -> DoctorReport:
    """Every problem the report shows comes with a one-line fix."""
    findings = [*report.findings, *(f for t in report.targets for f in t.findings)]
    for finding in findings:
        if finding.level in NEEDS_FIX:
            assert finding.fix and "\n" not in finding.fix, finding
    return report


def by_target(report: DoctorReport) -> dict[str, str]:
    return {t.target: t.verdict for t in report.targets}

"""`envbuild doctor`: what this host offers envbuild's images, and whether each CUDA target runs here.

`gather_host_facts()` reads the host once into a `HostFacts` value; `diagnose()` is a pure function
of those facts and the resolved targets, so recorded facts of GPU hosts test every verdict on
machines without a GPU. Every problem it reports carries a one-line fix.
"""

from __future__ import annotations

import os
import platform
import shutil
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from builder import proc
from builder.engine import (
    ENGINE_START_FIX,
    EngineUnreachable,
    docker_client,
    engine_address,
    engine_failures,
    unreachable_reason,
)
from builder.findings import Finding, sort_findings
from builder.gpu_access import GpuAccess, engine_gpu_access
from builder.host.arch_check import arch_findings, at_least, full_driver, indices, unsupported_gpu_findings
from builder.host.capability import WHAT_WOULD_TELL
from builder.host.checks import (
    ARCH_NOT_IN_BUILD,
    DRIVER_MISMATCH,
    DRIVER_NOT_LOADED,
    FABRIC_NOT_READY,
    FAIL,
    INFO,
    MINOR_COMPAT,
    MISSING,
    NEEDS_FIX,
    NEEDS_NEWER_DRIVER,
    NO_DRIVER,
    NO_GPU,
    NO_PLATFORM_BUILD,
    OK,
    RUNS,
    UNDECIDED,
    UNKNOWN,
    VERDICT_LEVEL,
    WARNING,
    HostCheck,
)
from builder.host.driver_failures import container_without_driver, driver_failure, failure_verdict
from builder.host.gpuinfo import GpuInfo, read_host_gpus
from builder.host.hostkind import HostKind, HostProbe, probe_host, read_host_kind
from builder.host.mig import mig_findings, mig_gpu_limit, mig_words
from builder.specs.compat import CompatData, load_compat, parse_version
from builder.specs.cuda import CudaVersion, cuda_json, cuda_or_cpu
from builder.specs.target import Target
from smoke.driver import DriverReading
from smoke.nvsmi import SmiProcess

# The words and levels live in checks.py; they are doctor's vocabulary, so they are importable from here too.
__all__ = ["ARCH_NOT_IN_BUILD", "DRIVER_MISMATCH", "DRIVER_NOT_LOADED", "FABRIC_NOT_READY", "FAIL", "INFO",
           "MINOR_COMPAT", "MISSING", "NEEDS_FIX", "NEEDS_NEWER_DRIVER", "NO_DRIVER", "NO_GPU", "NO_PLATFORM_BUILD",
           "OK", "RUNS", "UNDECIDED", "UNKNOWN", "VERDICT_LEVEL", "WARNING", "DoctorReport", "EngineFacts",
           "HostCheck", "HostFacts", "TargetVerdict", "diagnose", "gather_host_facts", "judge_targets"]

ENGINE_TIMEOUT_S = 10.0
TOOL_TIMEOUT_S = 10.0
# `docker run --gpus` appeared in Docker 19.03.
GPUS_FLAG_ENGINE = (19, 3)
# Any of these means GPU containers can start: Docker's --gpus calls the hook, runtime=nvidia the runtime.
CONTAINER_TOOLKIT = ("nvidia-ctk", "nvidia-container-cli", "nvidia-container-runtime", "nvidia-container-runtime-hook")
TOOLKIT_FIX = (
    "install nvidia-container-toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker` and restart the engine"
)

@dataclass(frozen=True)
class EngineFacts:
    address: str
    reachable: bool
    version: str | None = None
    api_version: str | None = None
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None
    error: str | None = None
    gpu_access: GpuAccess | None = None  # CDI or the `gpu` capability, and why (builder/gpu_access.py)


@dataclass(frozen=True)
class HostFacts:
    os: str
    python: str
    engine: EngineFacts
    container_toolkit: dict[str, str]  # executable found on PATH -> its version line ("" when it gives none)
    driver: DriverReading
    gpus: tuple[GpuInfo, ...]  # most free memory first
    cuda_visible_devices: str | None = None
    cuda_device_order: str | None = None
    processes: tuple[SmiProcess, ...] = ()  # GPU compute processes (NVML, else nvidia-smi)
    probe: HostProbe = field(default_factory=HostProbe)  # what the system said of itself (nothing: not read)

    @property
    def kind(self) -> HostKind:
        """The kind of host, from the probe and what nvidia-smi/NVML printed (builder/host/hostkind.py)."""
        return read_host_kind(self.probe, self.driver, tuple(gpu.name for gpu in self.gpus),
                              mig_on=any(gpu.mig_enabled for gpu in self.gpus))

    @property
    def mig_instances(self) -> int:
        """MIG instances listed (NVML per GPU, else nvidia-smi's MIG devices table); 0: none listed."""
        return sum(gpu.mig_instances or 0 for gpu in self.gpus) or self.driver.smi_mig_devices

    @property
    def smoke_gpu_limit(self) -> int | None:
        """The most GPUs the smoke suite can be asked to require (`--require-gpus`): with MIG on, the MIG
        instances listed (each is one CUDA device); else the GPUs listed. None: none listed."""
        return mig_gpu_limit(self.gpus, self.mig_instances)

    @property
    def has_driver(self) -> bool:
        return self.driver.driver_version is not None or self.driver.cuda is not None

    @property
    def has_container_toolkit(self) -> bool:
        return bool(self.container_toolkit) or "nvidia" in self.engine.runtimes

    def sources(self) -> dict[str, str | None]:
        """Where each fact of the host model came from; None: no source gave it."""
        driver, kind = self.driver, self.kind
        return {"driver_version": driver.source if driver.driver_version else None,
                "driver_cuda": driver.source if driver.cuda else None,
                "kernel_module": "/proc/driver/nvidia/version" if kind.kernel_module else None,
                "gpus": (driver.source or "nvml") if self.gpus else None,
                "capabilities": ", ".join(f"GPU {gpu.index}: {gpu.capability_source or 'unknown'}"
                                          for gpu in self.gpus) or None,
                "failure": f"nvidia-smi: {driver.smi_failure}" if driver.smi_failure else None,
                "kind": kind.source, "device_nodes": "/dev" if self.probe.device_nodes is not None else None}

    def as_dict(self) -> dict[str, Any]:
        driver = self.driver
        return {
            "os": self.os,
            "python": self.python,
            "engine": asdict(self.engine),
            "container_toolkit": {"executables": self.container_toolkit,
                                  "engine_runtimes": list(self.engine.runtimes)},
            "driver": {"source": driver.source, "version": driver.driver_version, "cuda": driver.cuda_text,
                       "nvidia_smi_version": driver.smi_version, "nvidia_smi_failure": driver.smi_failure,
                       "notes": list(driver.notes)},
            "kind": self.kind.as_dict(),
            "probe": self.probe.as_dict(),
            "mig_instances": self.mig_instances,
            "smoke_gpu_limit": self.smoke_gpu_limit,
            "sources": self.sources(),
            "processes": [asdict(process) for process in self.processes],
            "gpus": [gpu.as_dict() for gpu in self.gpus],
            "cuda_visible_devices": self.cuda_visible_devices,
            "cuda_device_order": self.cuda_device_order,
        }


@dataclass(frozen=True)
class TargetVerdict:
    target: str
    torch: str
    cuda: CudaVersion | None
    route: str
    verdict: str
    findings: tuple[HostCheck, ...]

    @property
    def level(self) -> str:
        return VERDICT_LEVEL[self.verdict]

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "torch": self.torch, "cuda": cuda_json(self.cuda), "route": self.route,
                "verdict": self.verdict, "level": self.level, "findings": [f.as_dict() for f in self.findings]}


@dataclass(frozen=True)
class DoctorReport:
    host: HostFacts
    findings: tuple[HostCheck, ...]
    targets: tuple[TargetVerdict, ...] = field(default=())

    @property
    def cannot_run(self) -> list[str]:
        """Targets this host's GPUs cannot run (a missing GPU or engine is not counted)."""
        return [t.target for t in self.targets if t.level == FAIL]

    def problems(self) -> list[Finding]:
        """Every line that needs a fix (host and targets) as shared findings, errors first."""
        checks = [*self.findings, *(check for target in self.targets for check in target.findings)]
        return sort_findings(check.as_finding() for check in checks if check.level in NEEDS_FIX)

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host.as_dict(), "findings": [f.as_dict() for f in self.findings],
                "targets": [t.as_dict() for t in self.targets], "cannot_run": self.cannot_run}

    def host_rows(self) -> list[list[str]]:
        host, driver, engine = self.host, self.host.driver, self.host.engine
        if engine.reachable:
            engine_text = f"{engine.version} (API {engine.api_version}) at {engine.address}; " \
                          f"runtimes: {', '.join(engine.runtimes) or 'none'}"
        else:
            engine_text = f"not reachable at {engine.address}"
        toolkit = [f"{name} {version}".strip() for name, version in host.container_toolkit.items()]
        if "nvidia" in engine.runtimes:
            toolkit.append("engine runtime `nvidia`")
        if host.has_driver:
            driver_text = f"{driver.driver_version or 'version unknown'}, CUDA {driver.cuda_text or 'unknown'} " \
                          f"(via {driver.source})"
        else:
            driver_text = "none"
        kind = host.kind
        traits = "".join(f"; {trait.name} ({trait.source})" for trait in kind.traits)
        return [
            ["OS", host.os],
            ["Host kind", f"{kind.answer} ({kind.source}){traits}"],
            ["Python", host.python],
            ["Docker engine", engine_text],
            ["NVIDIA container toolkit", "; ".join(toolkit) or "none"],
            ["GPU access", engine.gpu_access.reason if engine.gpu_access else "unknown (no engine answered)"],
            ["NVIDIA driver", driver_text],
            ["GPUs", (str(len(host.gpus)) if host.gpus else "none")
             + (f", {host.mig_instances} MIG instance(s)" if host.mig_instances else "")],
            ["CUDA_VISIBLE_DEVICES", _unset_or(host.cuda_visible_devices)],
            ["CUDA_DEVICE_ORDER", _unset_or(host.cuda_device_order, "unset (CUDA numbers GPUs fastest first)")],
        ]

    def gpu_rows(self) -> list[list[str]]:
        return [[str(gpu.index), gpu.name, _arch_words(gpu), mig_words(gpu), _gib(gpu.memory_free),
                 _gib(gpu.memory_total), "?" if gpu.utilization is None else f"{gpu.utilization}%",
                 gpu.uuid or gpu.bus_id or ""]
                for gpu in self.host.gpus]

    def process_rows(self) -> list[list[str]]:
        """GPU compute processes NVML or nvidia-smi listed (none inside most containers: another PID namespace)."""
        return [[str(p.gpu) if p.gpu is not None else (p.gpu_uuid or "?"), str(p.pid), p.name,
                 "?" if p.memory_mib is None else f"{p.memory_mib} MiB"] for p in self.host.processes]

    def problem_rows(self) -> list[list[str]]:
        return [[f.level, f.subject, f.message, f.fix or ""] for f in self.findings if f.level in NEEDS_FIX]

    def target_rows(self) -> list[list[str]]:
        rows = []
        for verdict in self.targets:
            worth = [f for f in verdict.findings if f.level != OK] or list(verdict.findings)
            rows.append([verdict.target, verdict.torch, cuda_or_cpu(verdict.cuda), verdict.route, verdict.verdict,
                         "; ".join(f.message for f in worth),
                         "; ".join(dict.fromkeys(f.fix for f in worth if f.fix))])
        return rows


def _arch_words(gpu: GpuInfo) -> str:
    if gpu.sm is not None:
        return gpu.sm if gpu.capability_source in (None, "driver") else f"{gpu.sm} ({gpu.capability_source})"
    if gpu.candidates:
        return "/".join(f"sm_{major}{minor}" for major, minor in gpu.candidates) + f" ({gpu.capability_source})"
    return "unknown"


def _unset_or(value: str | None, unset: str = "unset") -> str:
    if value is None:
        return unset
    return value or "'' (empty)"


def _gib(size: int | None) -> str:
    return "?" if size is None else f"{size / 1024 ** 3:.1f} GiB"


# --- gathering (the only part that touches the host) --------------------------------------------

def gather_host_facts(engine_timeout: float = ENGINE_TIMEOUT_S, probe: HostProbe | None = None) -> HostFacts:
    """This host's facts; `probe` stands for what the system says of itself (a recorded host's), else it is read."""
    driver, gpus, processes = read_host_gpus()
    return HostFacts(
        os=_os_name(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        engine=_engine_facts(engine_timeout),
        container_toolkit=_container_toolkit(),
        driver=driver,
        gpus=tuple(gpus),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        cuda_device_order=os.environ.get("CUDA_DEVICE_ORDER"),
        processes=tuple(processes),
        probe=probe_host() if probe is None else probe,
    )


def _os_name() -> str:
    try:
        name = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        name = ""
    kernel = f"{platform.system()} {platform.release()}, {platform.machine()}"
    return f"{name} ({kernel})" if name else kernel


def _engine_facts(timeout: float) -> EngineFacts:
    try:
        client = docker_client(timeout=timeout)
    except EngineUnreachable as exc:
        return EngineFacts(address=exc.address, reachable=False, error=exc.reason)
    try:
        version = client.version()
        info = client.info()
    except engine_failures() as exc:  # answered the ping, then went away
        return EngineFacts(address=engine_address(), reachable=False, error=unreachable_reason(exc))
    finally:
        client.close()
    return EngineFacts(
        address=engine_address(),
        reachable=True,
        version=version.get("Version"),
        api_version=version.get("ApiVersion"),
        runtimes=tuple(sorted(info.get("Runtimes") or {})),
        default_runtime=info.get("DefaultRuntime"),
        gpu_access=engine_gpu_access(version, info),
    )


def _container_toolkit() -> dict[str, str]:
    found = {}
    for name in CONTAINER_TOOLKIT:
        path = shutil.which(name)
        if path is None:
            continue
        # The hook is meant to be called by the engine with OCI state on stdin: do not run it.
        found[name] = "" if name.endswith("-hook") else _version_line(path)
    return found


def _version_line(executable: str) -> str:
    try:
        done = proc.run([executable, "--version"], timeout=TOOL_TIMEOUT_S, what=executable)
    except (OSError, proc.ProcessTimeout):
        return ""
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    return lines[0] if lines else ""


# --- verdicts (pure) -----------------------------------------------------------------------------

def diagnose(facts: HostFacts, targets: list[Target] | tuple[Target, ...] = (),
             compat: CompatData | None = None) -> DoctorReport:
    compat = compat or load_compat()
    return DoctorReport(host=facts, findings=tuple(host_findings(facts)),
                        targets=tuple(judge_targets(facts, list(targets), compat)))


def host_findings(facts: HostFacts) -> list[HostCheck]:
    return [*_engine_findings(facts), *_kind_findings(facts.kind), *_driver_findings(facts),
            *unsupported_gpu_findings(facts.gpus, load_compat()), *mig_findings(facts.gpus, facts.mig_instances),
            *_toolkit_findings(facts), *_visibility_findings(facts),
            *[HostCheck(*a.as_check()) for a in [facts.engine.gpu_access] if a]]


def _engine_findings(facts: HostFacts) -> list[HostCheck]:
    engine = facts.engine
    if not engine.reachable:
        return [HostCheck(MISSING, "Docker engine", f"no Docker engine answers at {engine.address} ({engine.error})",
                        ENGINE_START_FIX)]
    if engine.version and parse_version(engine.version).release[:2] < GPUS_FLAG_ENGINE:
        return [HostCheck(WARNING, "Docker engine", f"Docker {engine.version} has no `--gpus` (19.03 added it)",
                        "upgrade the Docker engine to 19.03 or newer")]
    return [HostCheck(OK, "Docker engine", f"Docker {engine.version} answers at {engine.address}")]


def _kind_findings(kind: HostKind) -> list[HostCheck]:
    findings = [HostCheck(INFO, "host kind", f"{kind.answer} (from {kind.source}): {kind.means}", kind.fix)]
    findings += [HostCheck(INFO, "host kind", f"{trait.name} (from {trait.source}): {trait.means}")
                 for trait in kind.traits]
    return findings


def _driver_findings(facts: HostFacts) -> list[HostCheck]:
    driver = facts.driver
    if not facts.has_driver:
        return [container_without_driver(driver, facts.kind) or driver_failure(driver)]
    if driver.cuda is None:
        findings = [HostCheck(INFO, "NVIDIA driver", f"driver {driver.driver_version} does not report its CUDA "
                                                   "version; verdicts use the driver version alone")]
    else:
        findings = [HostCheck(OK, "NVIDIA driver", f"driver {driver.driver_version}, CUDA {driver.cuda_text}")]
    if driver.smi_version and driver.driver_version and driver.smi_version != driver.driver_version:
        findings.append(HostCheck(INFO, "NVIDIA driver", f"nvidia-smi {driver.smi_version} reports driver "
                                                         f"{driver.driver_version} (WSL2: the Windows driver counts)"))
    if not facts.gpus:
        findings.append(HostCheck(MISSING, "GPUs", "the driver answers but lists no GPU",
                                "check `nvidia-smi` (in a container: start it with `--gpus all`)"))
    unknown = [gpu for gpu in facts.gpus if gpu.capability is None and not gpu.candidates]
    if unknown:
        findings.append(HostCheck(UNDECIDED, "GPUs", f"GPU {indices(unknown)}: compute capability unknown (the driver "
                                                   "did not state it, and neither the model name nor an architecture "
                                                   "tells it): arch verdicts are unknown", f"{WHAT_WOULD_TELL} tells"))
    return findings


def _toolkit_findings(facts: HostFacts) -> list[HostCheck]:
    if facts.has_container_toolkit:
        return [HostCheck(OK, "NVIDIA container toolkit", "present")]
    if facts.gpus and facts.engine.reachable:
        message = ("no NVIDIA container toolkit (no `nvidia` engine runtime, none of nvidia-ctk / "
                   "nvidia-container-cli on PATH): `docker run --gpus` fails with 'could not select device driver'")
    else:
        message = "no NVIDIA container toolkit (GPU containers need it; CPU containers do not)"
    return [HostCheck(MISSING, "NVIDIA container toolkit", message, TOOLKIT_FIX)]


def _visibility_findings(facts: HostFacts) -> list[HostCheck]:
    visible = facts.cuda_visible_devices
    if visible is None:
        return []
    entries = [entry.strip() for entry in visible.split(",")]
    if not entries[0] or not _device_entry(entries[0]):
        return [HostCheck(WARNING, "CUDA_VISIBLE_DEVICES",
                          f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from CUDA",
                        "unset CUDA_VISIBLE_DEVICES, or list GPUs by index or UUID (e.g. 0,1)")]
    findings = []
    indices = [int(entry) for entry in entries if entry.isdigit()]
    if facts.gpus and any(index >= len(facts.gpus) for index in indices):
        findings.append(HostCheck(
            WARNING, "CUDA_VISIBLE_DEVICES",
            f"CUDA_VISIBLE_DEVICES={visible} names a GPU past the {len(facts.gpus)} this host has; "
            "CUDA ignores it and every entry after it",
            f"list indices below {len(facts.gpus)}, or GPU UUIDs"))
    if indices and len(facts.gpus) > 1 and facts.cuda_device_order != "PCI_BUS_ID":
        findings.append(HostCheck(
            WARNING, "CUDA_DEVICE_ORDER",
            "CUDA_VISIBLE_DEVICES uses indices while CUDA numbers GPUs fastest first, nvidia-smi and NVML by PCI "
            "bus: the index you pick may not be the GPU nvidia-smi shows under it",
            "export CUDA_DEVICE_ORDER=PCI_BUS_ID (or list GPU UUIDs in CUDA_VISIBLE_DEVICES)"))
    return findings


def _device_entry(entry: str) -> bool:
    return entry.isdigit() or entry.startswith(("GPU-", "MIG-"))


def judge_targets(facts: HostFacts, targets: list[Target], compat: CompatData) -> list[TargetVerdict]:
    windows = _runs_the_windows_driver(facts.kind)
    reported = _reported_cuda(facts.driver, compat, windows)
    drivers = {t.key: _driver_verdict(facts.driver, t, _floors(t, compat, windows), reported)
               for t in targets if t.cuda and facts.has_driver}
    return [_judge_with_gpus(facts, target, targets, drivers, compat) for target in targets]


def _judge_with_gpus(facts: HostFacts, target: Target, targets: list[Target],
                     drivers: dict[str, tuple[str, HostCheck]], compat: CompatData) -> TargetVerdict:
    """`_judge`, except that a driver which lists no GPU, or reports no CUDA version, never makes a CUDA build
    "run": a verdict of "runs" rests on the driver, a CUDA it reports and a GPU."""
    judged = _judge(facts, target, targets, drivers, compat)
    if judged.verdict not in (RUNS, MINOR_COMPAT) or target.cuda is None:
        return judged
    missing = _no_cuda_reported(facts.driver, target) if facts.gpus else _no_gpu_listed(target)
    if missing is None:
        return judged
    return replace(judged, verdict=UNKNOWN, findings=(*judged.findings, missing))


def _no_cuda_reported(driver: DriverReading, target: Target) -> HostCheck | None:
    """nvidia-smi's CUDA field is there but no version ("N/A"): this driver serves no CUDA here (a vGPU host's
    manager driver has none; a container may not reach libcuda), so its number alone proves nothing."""
    if driver.smi_cuda_not_a_version is None:
        return None
    return HostCheck(
        UNDECIDED, "driver", f"nvidia-smi reports CUDA Version: {driver.smi_cuda_not_a_version}, so whether the "
        f"CUDA {target.cuda} build runs here is unknown: a vGPU host's manager driver serves no CUDA (run CUDA in "
        "its guests, on the guest driver), and a container without the driver's libcuda reports none",
        "on a vGPU host run the build in a guest VM; in a container pass the GPU with `--gpus` or CDI")


def _judge(facts: HostFacts, target: Target, targets: list[Target],
           drivers: dict[str, tuple[str, HostCheck]], compat: CompatData) -> TargetVerdict:
    if target.cuda is None:
        return _verdict(target, RUNS, HostCheck(OK, "build", "CPU build: needs no GPU or driver"))
    before = _before_the_driver(facts, target, targets, compat)
    if before is not None:
        return before
    driver_word, driver_finding = drivers[target.key]
    if driver_word == NEEDS_NEWER_DRIVER:
        driver_finding = _with_alternatives(driver_finding, _runnable_alternatives(target, drivers))
    archs = arch_findings(facts.gpus, target, targets, drivers, driver_word, compat, facts.driver)
    return _combined(target, driver_word, driver_finding, archs)


def _verdict(target: Target, word: str, *findings: HostCheck) -> TargetVerdict:
    return TargetVerdict(target.key, target.torch, target.cuda, target.route.value, word, tuple(findings))


def _with_alternatives(finding: HostCheck, alternatives: str) -> HostCheck:
    if not alternatives:
        return finding
    return HostCheck(finding.level, finding.subject, finding.message, f"{finding.fix}, or use target {alternatives}")


def _combined(target: Target, driver_word: str, driver_finding: HostCheck, archs: list[HostCheck]) -> TargetVerdict:
    """The driver's verdict and the GPUs' architecture findings as one verdict."""
    arch_missing = any(f.level == FAIL for f in archs)
    if driver_word == NEEDS_NEWER_DRIVER and arch_missing:
        # A newer driver cannot add kernels the build lacks (a Pascal/Volta GPU and a CUDA 13 build):
        # telling the user to update would send them the wrong way.
        driver_finding = HostCheck(INFO, driver_finding.subject,
                                   f"{driver_finding.message}; a newer driver would not help, the build has no "
                                   "kernels for this GPU")
        return _verdict(target, ARCH_NOT_IN_BUILD, driver_finding, *archs)
    if driver_word == NEEDS_NEWER_DRIVER:
        word = NEEDS_NEWER_DRIVER
    elif arch_missing:
        word = ARCH_NOT_IN_BUILD
    elif any(f.level == UNDECIDED for f in archs):
        word = UNKNOWN  # never "runs" for a GPU whose kernels nobody checked
    else:
        word = driver_word
    return _verdict(target, word, driver_finding, *archs)


def _no_gpu_listed(target: Target) -> HostCheck:
    """A driver number alone is no evidence that a build runs: a vGPU guest or a broken host lists no GPU."""
    return HostCheck(
        UNDECIDED, "GPUs", f"the driver answers but lists no GPU, so whether the CUDA {target.cuda} build runs here "
        "is unknown", "run `nvidia-smi -L`; on a vGPU guest check its licence, in a container pass `--gpus`")


def _before_the_driver(facts: HostFacts, target: Target, targets: list[Target],
                       compat: CompatData) -> TargetVerdict | None:
    """A verdict that needs no driver verdict: no build for this platform, or no driver version read."""
    kind = facts.kind
    if kind.has("aarch64") and "linux-aarch64" not in target.platforms:
        told = next(t.source for t in kind.traits if t.name == "aarch64")
        return TargetVerdict(target.key, target.torch, target.cuda, target.route.value, NO_PLATFORM_BUILD, (HostCheck(
            FAIL, "platform", f"this host is arm64 ({told}) and the target is built for "
            f"{', '.join(target.platforms)} only", "add linux-aarch64 to the target's platforms, or use a target "
            "that has it"),))
    if not facts.has_driver and facts.gpus and not facts.driver.smi_failure:
        return _gpus_without_driver_version(facts, target, targets, compat)
    if not facts.has_driver:
        return _without_driver(facts, target, _floors(target, compat, _runs_the_windows_driver(facts.kind)))
    return None


def _gpus_without_driver_version(facts: HostFacts, target: Target, targets: list[Target],
                                 compat: CompatData) -> TargetVerdict:
    """GPUs are named (`nvidia-smi -L`, a -q excerpt) but no driver version: a build without kernels for them
    does not run whatever the driver; any other verdict waits for the driver's version."""
    archs = arch_findings(facts.gpus, target, targets, {}, UNKNOWN, compat, facts.driver)
    unknown = HostCheck(UNDECIDED, "driver", f"no driver version was read, so whether the CUDA {target.cuda} "
                        "build's runtime starts here is unknown", "run `nvidia-smi` (its header names the driver)")
    word = ARCH_NOT_IN_BUILD if any(f.level == FAIL for f in archs) else UNKNOWN
    return TargetVerdict(target.key, target.torch, target.cuda, target.route.value, word, (unknown, *archs))


def _without_driver(facts: HostFacts, target: Target, floors: DriverFloors) -> TargetVerdict:
    """No driver answered: why decides the verdict (no driver, not loaded, mismatch, no device, unknown).
    The driver floors named are the ones of this host's OS (Windows and WSL2 number their drivers apart)."""
    assert target.cuda is not None
    told = failure_verdict(facts.driver, facts.kind, target)
    if told is not None:
        word, check = told
    elif facts.driver.smi_failure == "no-driver":
        word, check = DRIVER_NOT_LOADED, HostCheck(
            MISSING, "driver", f"nvidia-smi is installed but no NVIDIA kernel module answered: the CUDA {target.cuda} "
            "build runs on the CPU only until it is loaded (after a kernel upgrade the module is often not built "
            "for the running kernel)", "check `lsmod | grep nvidia`, `dkms status` and `sudo modprobe nvidia`; "
            "rebuild the module for this kernel with DKMS (or reinstall the driver), then reboot; WSL2: update "
            "the Windows driver, no Linux driver inside")
    elif facts.driver.smi_failure or facts.driver.smi_ran:
        said = facts.driver.smi_failure or "nothing doctor can read"
        word, check = UNKNOWN, HostCheck(
            UNDECIDED, "driver", f"the driver did not answer (nvidia-smi: {said}), so whether the "
            f"CUDA {target.cuda} build runs here is unknown", "fix the NVIDIA driver problem above, then run "
            "`envbuild doctor` again")
    else:
        word, check = NO_DRIVER, HostCheck(
            MISSING, "driver", f"no NVIDIA driver here: the CUDA {target.cuda} build runs on the CPU only",
            f"run it on a GPU host with driver >= {floors.minimum} (>= {floors.full} "
            f"without minor-version compatibility){floors.note}")
    return TargetVerdict(target.key, target.torch, target.cuda, target.route.value, word, (check,))


@dataclass(frozen=True)
class DriverFloors:
    """The driver numbers a target's runtime needs on this host: Linux's, or NVIDIA's Windows ones."""

    minimum: str | None  # minor-version compatibility
    full: str  # the toolkit release's own driver
    note: str = ""  # said when a Windows number is missing and the Linux one stands in


def _runs_the_windows_driver(kind: HostKind) -> bool:
    """Windows and WSL2 (a container on WSL2 too) report the Windows driver, whose numbers are not Linux's."""
    return kind.name in ("windows", "wsl") or "wsl" in kind.also


def _floors(target: Target, compat: CompatData, windows: bool) -> DriverFloors:
    linux = DriverFloors(target.min_driver, full_driver(target))
    if not windows or target.cuda is None:
        return linux
    minimum = compat.min_windows_driver(target.cuda)
    full = target.toolkit.full_compat_driver_windows if target.toolkit else None
    note = "" if minimum and full else (f"; NVIDIA's Windows driver numbers for CUDA {target.cuda} are not in "
                                        "envbuild's data, so the Linux ones stand in")
    return DriverFloors(minimum or linux.minimum, full or linux.full, note)


@dataclass(frozen=True)
class ReportedCuda:
    """The CUDA version the driver reported, as far as it is the driver's own."""

    version: CudaVersion | None  # None: none reported, or not the driver's (forward compatibility)
    note: str = ""  # why a reported version is set aside


def _reported_cuda(driver: DriverReading, compat: CompatData, windows: bool) -> ReportedCuda:
    """nvidia-smi's CUDA version, unless the driver's own number is older than every driver of that CUDA major:
    then the version comes from forward-compatibility libraries (cuda-compat) of this environment, an NGC image's
    for one, which envbuild's images do not carry, so the driver's number decides."""
    if driver.cuda is None:
        return ReportedCuda(None)
    reported = CudaVersion(*driver.cuda)
    floor = compat.min_windows_driver(reported) if windows else compat.min_driver(reported)
    if not driver.driver_version or not floor or at_least(driver.driver_version, floor):
        return ReportedCuda(reported) if windows else _own_cuda(driver, reported, compat)
    return ReportedCuda(None, f"; its CUDA {driver.cuda_text} comes from forward-compatibility libraries of this "
                        f"environment (driver {driver.driver_version} is older than every CUDA {reported.major}.x "
                        f"driver, >= {floor}), which envbuild's images do not carry")


def _own_cuda(driver: DriverReading, reported: CudaVersion, compat: CompatData) -> ReportedCuda:
    """A Linux driver older than the GA driver of the CUDA it reports has that CUDA from forward-compatibility
    libraries: its own is the newest CUDA whose GA driver it is at least (compat.yaml `ga_driver`)."""
    toolkit = compat.toolkit(reported)
    version = driver.driver_version
    if version is None or toolkit is None or toolkit.ga_driver is None or at_least(version, toolkit.ga_driver):
        return ReportedCuda(reported)
    own = max((cuda for cuda, kit in compat.cuda.items() if kit.ga_driver and at_least(version, kit.ga_driver)),
              default=None)
    said = f"CUDA {own}" if own else "an older CUDA"
    return ReportedCuda(own, f"; its CUDA {driver.cuda_text} comes from forward-compatibility libraries of this "
                        f"environment (driver {version} is older than CUDA {reported}'s first driver, "
                        f"{toolkit.ga_driver}; its own is {said}), which envbuild's images do not carry")


def _driver_verdict(driver: DriverReading, target: Target, floors: DriverFloors,
                    reported: ReportedCuda) -> tuple[str, HostCheck]:
    """Can this driver run the CUDA runtime of `target`? (compat.yaml: min_driver, full_compat_driver)

    The driver runs a runtime fully when it reports that CUDA version or newer, or is at least the
    driver of the target's toolkit release; it runs it under minor-version compatibility when it is at
    least the oldest driver of that CUDA major; otherwise the runtime does not start at all. A CUDA version
    that forward-compatibility libraries report (`_reported_cuda`) does not count.
    """
    cuda = target.cuda
    assert cuda is not None  # a CPU build needs no driver
    full, minimum = floors.full, floors.minimum
    version = driver.driver_version
    says = f"driver {version or '(version unknown)'}" + (f" (CUDA {driver.cuda_text})" if driver.cuda else "")
    says += reported.note
    supported = reported.version
    if (supported is not None and supported >= cuda) or (version and at_least(version, full)):
        return RUNS, HostCheck(OK, "driver", f"{says} runs CUDA {cuda} builds")
    if version and minimum:
        minor_ok = at_least(version, minimum)
    else:
        minor_ok = supported is not None and supported.major == cuda.major
    if minor_ok:
        return MINOR_COMPAT, HostCheck(
            WARNING, "driver",
            f"{says} runs CUDA {cuda} builds only under minor-version compatibility (no PTX JIT, newer CUDA "
            f"APIs may fail){floors.note}",
            f"update the NVIDIA driver to >= {full}")
    if supported is not None:
        cause = f"the driver supports CUDA {driver.cuda_text}, so CUDA {cuda} builds cannot run"
    else:
        cause = (f"driver {version}{reported.note} is older than every CUDA {cuda.major}.x driver, so CUDA {cuda} "
                 "builds cannot run")
    return NEEDS_NEWER_DRIVER, HostCheck(FAIL, "driver", f"{cause} (they need driver >= {minimum}){floors.note}",
                                       f"update the NVIDIA driver to >= {minimum} (>= {full} for full compatibility)")


def _runnable_alternatives(target: Target, drivers: dict[str, tuple[str, HostCheck]]) -> str:
    """The spec's other CUDA targets this driver runs: the newest that runs fully, the newest under minor-version."""
    choices = []
    for wanted, how in ((RUNS, ""), (MINOR_COMPAT, " under minor-version compatibility")):
        keys = [key for key, (word, _) in drivers.items() if word == wanted and key != target.key]
        if keys:
            choices.append(max(keys, key=parse_version) + how)
    return ", or ".join(choices)



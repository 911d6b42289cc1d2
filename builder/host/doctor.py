"""`envbuild doctor`: what this host offers envbuild's images, and whether each CUDA target runs here.

`gather_host_facts()` reads the host once into a `HostFacts` value; `diagnose()` is a pure function
of those facts and the resolved targets, so recorded facts of GPU hosts test every verdict on
machines without a GPU. Every problem it reports carries a one-line fix.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from dataclasses import asdict, dataclass, field
from typing import Any

from builder import proc
from builder.engine import ENGINE_START_FIX, EngineUnreachable, docker_client, engine_address, engine_failures
from builder.findings import Finding, Severity, sort_findings
from builder.gpu_access import GpuAccess, engine_gpu_access
from builder.host.gpuinfo import GpuInfo, read_host_gpus
from builder.specs.compat import CompatData, load_compat, version_tuple
from builder.specs.cuda import CudaVersion, cuda_json, cuda_or_cpu
from builder.specs.target import Target
from smoke.compat import arch_coverage
from smoke.driver import DriverReading
from smoke.nvsmi import SmiProcess

ENGINE_TIMEOUT_S = 10.0
TOOL_TIMEOUT_S = 10.0
# `docker run --gpus` appeared in Docker 19.03.
GPUS_FLAG_ENGINE = (19, 3)
# Any of these means GPU containers can start: Docker's --gpus calls the hook, runtime=nvidia the runtime.
CONTAINER_TOOLKIT = ("nvidia-ctk", "nvidia-container-cli", "nvidia-container-runtime", "nvidia-container-runtime-hook")
TOOLKIT_FIX = (
    "install nvidia-container-toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker` and restart the engine"
)

# Check levels. Only "fail" checks of a target make `envbuild doctor` exit 1.
OK, INFO, WARNING, MISSING, FAIL = "ok", "info", "warning", "missing", "fail"
NEEDS_FIX = (WARNING, MISSING, FAIL)

# Target verdicts, in the words the table prints.
RUNS = "runs"
MINOR_COMPAT = "runs under minor-version compatibility"
NEEDS_NEWER_DRIVER = "needs a newer driver"
ARCH_NOT_IN_BUILD = "GPU architecture not in this build"
NO_GPU = "no GPU here"
UNKNOWN = "unknown"
VERDICT_LEVEL = {RUNS: OK, MINOR_COMPAT: WARNING, NEEDS_NEWER_DRIVER: FAIL, ARCH_NOT_IN_BUILD: FAIL,
                 NO_GPU: MISSING, UNKNOWN: INFO}


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

    @property
    def has_driver(self) -> bool:
        return self.driver.driver_version is not None or self.driver.cuda is not None

    @property
    def has_container_toolkit(self) -> bool:
        return bool(self.container_toolkit) or "nvidia" in self.engine.runtimes

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
            "processes": [asdict(process) for process in self.processes],
            "gpus": [gpu.as_dict() for gpu in self.gpus],
            "cuda_visible_devices": self.cuda_visible_devices,
            "cuda_device_order": self.cuda_device_order,
        }


# Doctor's five levels in the shared severities: "ok" lines are context, a missing part deserves a look.
SEVERITY = {OK: Severity.INFO, INFO: Severity.INFO, WARNING: Severity.WARNING, MISSING: Severity.WARNING,
            FAIL: Severity.ERROR}


@dataclass(frozen=True)
class HostCheck:
    """One line of doctor's report, good news included ("ok"); `as_finding()` is the shared `Finding`."""

    level: str
    subject: str
    message: str
    fix: str | None = None

    @property
    def rule(self) -> str:
        return "doctor." + re.sub(r"[^a-z0-9]+", "-", self.subject.lower()).strip("-")

    @property
    def severity(self) -> Severity:
        return SEVERITY[self.level]

    def as_finding(self) -> Finding:
        return Finding(self.rule, self.severity, self.message, self.fix, details={"level": self.level})

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rule": self.rule, "severity": self.severity.value}


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
        return [
            ["OS", host.os],
            ["Python", host.python],
            ["Docker engine", engine_text],
            ["NVIDIA container toolkit", "; ".join(toolkit) or "none"],
            ["GPU access", engine.gpu_access.reason if engine.gpu_access else "unknown (no engine answered)"],
            ["NVIDIA driver", driver_text],
            ["GPUs", str(len(host.gpus)) if host.gpus else "none"],
            ["CUDA_VISIBLE_DEVICES", _unset_or(host.cuda_visible_devices)],
            ["CUDA_DEVICE_ORDER", _unset_or(host.cuda_device_order, "unset (CUDA numbers GPUs fastest first)")],
        ]

    def gpu_rows(self) -> list[list[str]]:
        return [[str(gpu.index), gpu.name, gpu.sm or "?", _gib(gpu.memory_free), _gib(gpu.memory_total),
                 "?" if gpu.utilization is None else f"{gpu.utilization}%", gpu.uuid or gpu.bus_id or ""]
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


def _unset_or(value: str | None, unset: str = "unset") -> str:
    if value is None:
        return unset
    return value or "'' (empty)"


def _gib(size: int | None) -> str:
    return "?" if size is None else f"{size / 1024 ** 3:.1f} GiB"


# --- gathering (the only part that touches the host) --------------------------------------------

def gather_host_facts(engine_timeout: float = ENGINE_TIMEOUT_S) -> HostFacts:
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
        return EngineFacts(address=engine_address(), reachable=False, error=f"{type(exc).__name__}: {exc}")
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
    return [*_engine_findings(facts), *_driver_findings(facts), *_toolkit_findings(facts),
            *_visibility_findings(facts), *[HostCheck(*a.as_check()) for a in [facts.engine.gpu_access] if a]]


def _engine_findings(facts: HostFacts) -> list[HostCheck]:
    engine = facts.engine
    if not engine.reachable:
        return [HostCheck(MISSING, "Docker engine", f"no Docker engine answers at {engine.address} ({engine.error})",
                        ENGINE_START_FIX)]
    if engine.version and version_tuple(engine.version)[:2] < GPUS_FLAG_ENGINE:
        return [HostCheck(WARNING, "Docker engine", f"Docker {engine.version} has no `--gpus` (19.03 added it)",
                        "upgrade the Docker engine to 19.03 or newer")]
    return [HostCheck(OK, "Docker engine", f"Docker {engine.version} answers at {engine.address}")]


# What to do about each way nvidia-smi says it cannot read the GPUs (smoke.nvsmi.FAILURES).
SMI_FAILURE_FIX = {
    "no-driver": "install the NVIDIA driver (WSL2: the Windows driver only; a container: start it with `--gpus all`)",
    "driver-library-mismatch": "reboot, or reload the nvidia kernel modules, so the module matches the driver's "
                               "libraries",
    "insufficient-permissions": "give this user access to /dev/nvidia* (rootless containers: generate a CDI spec "
                                "with `nvidia-ctk cdi generate`)",
    "no-devices": "see `dmesg | grep NVRM`: the driver initialised no GPU (a GPU this driver does not support, "
                  "BIOS settings, or MIG mode without instances)",
    "nvml-failed": "see `dmesg | grep NVRM` and reinstall the NVIDIA driver",
}


def _driver_findings(facts: HostFacts) -> list[HostCheck]:
    driver = facts.driver
    if not facts.has_driver:
        why = "; ".join(driver.notes) or "neither NVML nor nvidia-smi answered"
        fix = SMI_FAILURE_FIX.get(driver.smi_failure or "",
                                  "CPU targets run here; for CUDA targets install the NVIDIA driver or use a GPU host")
        return [HostCheck(MISSING, "NVIDIA driver", f"no NVIDIA driver answered ({why})", fix)]
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
    unknown = [gpu for gpu in facts.gpus if gpu.capability is None]
    if unknown:
        findings.append(HostCheck(INFO, "GPUs", f"GPU {_indices(unknown)}: compute capability unknown (NVML did not "
                                              "answer; nvidia-smi's table does not show it and drivers before 510 "
                                              "cannot be asked): arch lists not checked"))
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
    drivers = {t.key: _driver_verdict(facts.driver, t) for t in targets if t.cuda and facts.has_driver}
    return [_judge(facts, target, targets, drivers, compat) for target in targets]


def _judge(facts: HostFacts, target: Target, targets: list[Target],
           drivers: dict[str, tuple[str, HostCheck]], compat: CompatData) -> TargetVerdict:
    def verdict(word: str, *findings: HostCheck) -> TargetVerdict:
        return TargetVerdict(target.key, target.torch, target.cuda, target.route.value, word, tuple(findings))

    if target.cuda is None:
        return verdict(RUNS, HostCheck(OK, "build", "CPU build: needs no GPU or driver"))
    if not facts.has_driver:
        return verdict(NO_GPU, HostCheck(
            MISSING, "driver", f"no NVIDIA driver here: the CUDA {target.cuda} build runs on the CPU only",
            f"run it on a GPU host with driver >= {target.min_driver} (>= {_full_driver(target)} "
            "without minor-version compatibility)"))
    driver_word, driver_finding = drivers[target.key]
    if driver_word == NEEDS_NEWER_DRIVER:
        alternatives = _runnable_alternatives(target, drivers)
        if alternatives:
            driver_finding = HostCheck(driver_finding.level, driver_finding.subject, driver_finding.message,
                                     f"{driver_finding.fix}, or use target {alternatives}")
    arch_findings = _arch_findings(facts.gpus, target, targets, drivers, driver_word, compat, facts.driver)
    arch_missing = any(f.level == FAIL for f in arch_findings)
    if driver_word == NEEDS_NEWER_DRIVER and arch_missing:
        # A newer driver cannot add kernels the build lacks (a Pascal/Volta GPU and a CUDA 13 build):
        # telling the user to update would send them the wrong way.
        driver_finding = HostCheck(INFO, driver_finding.subject,
                                   f"{driver_finding.message}; a newer driver would not help, the build has no "
                                   "kernels for this GPU")
        return verdict(ARCH_NOT_IN_BUILD, driver_finding, *arch_findings)
    findings = (driver_finding, *arch_findings)
    if driver_word == NEEDS_NEWER_DRIVER:
        return verdict(NEEDS_NEWER_DRIVER, *findings)
    if any(f.level == FAIL for f in arch_findings):
        return verdict(ARCH_NOT_IN_BUILD, *findings)
    return verdict(driver_word, *findings)


def _full_driver(target: Target) -> str:
    return target.toolkit.full_compat_driver if target.toolkit else "?"


def _driver_verdict(driver: DriverReading, target: Target) -> tuple[str, HostCheck]:
    """Can this driver run the CUDA runtime of `target`? (compat.yaml: min_driver, full_compat_driver)

    The driver runs a runtime fully when it reports that CUDA version or newer, or is at least the
    driver of the target's toolkit release; it runs it under minor-version compatibility when it is at
    least the oldest driver of that CUDA major; otherwise the runtime does not start at all.
    """
    cuda = target.cuda
    assert cuda is not None  # a CPU build needs no driver
    full, minimum = _full_driver(target), target.min_driver
    version = driver.driver_version
    says = f"driver {version or '(version unknown)'}" + (f" (CUDA {driver.cuda_text})" if driver.cuda else "")
    supported = CudaVersion(*driver.cuda) if driver.cuda is not None else None
    if (supported is not None and supported >= cuda) or (version and _at_least(version, full)):
        return RUNS, HostCheck(OK, "driver", f"{says} runs CUDA {cuda} builds")
    if version and minimum:
        minor_ok = _at_least(version, minimum)
    else:
        minor_ok = supported is not None and supported.major == cuda.major
    if minor_ok:
        return MINOR_COMPAT, HostCheck(
            WARNING, "driver",
            f"{says} runs CUDA {cuda} builds only under minor-version compatibility (no PTX JIT, newer CUDA "
            "APIs may fail)",
            f"update the NVIDIA driver to >= {full}")
    if driver.cuda is not None:
        cause = f"the driver supports CUDA {driver.cuda_text}, so CUDA {cuda} builds cannot run"
    else:
        cause = f"driver {version} is older than every CUDA {cuda.major}.x driver, so CUDA {cuda} builds cannot run"
    return NEEDS_NEWER_DRIVER, HostCheck(FAIL, "driver", f"{cause} (they need driver >= {minimum})",
                                       f"update the NVIDIA driver to >= {minimum} (>= {full} for full compatibility)")


def _at_least(version: str, wanted: str) -> bool:
    return version_tuple(version) >= version_tuple(wanted)


def _runnable_alternatives(target: Target, drivers: dict[str, tuple[str, HostCheck]]) -> str:
    """The spec's other CUDA targets this driver runs: the newest that runs fully, the newest under minor-version."""
    choices = []
    for wanted, how in ((RUNS, ""), (MINOR_COMPAT, " under minor-version compatibility")):
        keys = [key for key, (word, _) in drivers.items() if word == wanted and key != target.key]
        if keys:
            choices.append(max(keys, key=version_tuple) + how)
    return ", or ".join(choices)


def _arch_findings(gpus: tuple[GpuInfo, ...], target: Target, targets: list[Target],
                   drivers: dict[str, tuple[str, HostCheck]], driver_word: str, compat: CompatData,
                   driver: DriverReading | None = None) -> list[HostCheck]:
    if not any(gpu.capability for gpu in gpus):
        return []  # no GPU, or none whose capability is known (a host finding says so)
    if not target.archs:
        return [HostCheck(INFO, "archs",
                          f"no arch list for this build in envbuild's data (route {target.route.value}): "
                                       "the image's smoke check gpu.arch_in_build checks it")]
    findings = []
    for (name, capability), group in _same_gpus(gpus).items():
        coverage = arch_coverage(target.archs, capability)
        which = f"GPU {_indices(group)} ({name}, {group[0].sm})"
        if not coverage.covered:
            findings.append(HostCheck(
                FAIL, "archs",
                f"{which} is not in torch {target.torch}'s CUDA {target.cuda} build ({' '.join(target.archs)}): "
                "'no kernel image is available for execution on the device'",
                _arch_fix(capability, group[0].sm or "", target, targets, drivers, compat, driver)))
        elif coverage.how == "ptx-jit" and driver_word == MINOR_COMPAT:
            findings.append(HostCheck(
                FAIL, "archs",
                f"{which} has only {coverage.entry} PTX in this build, and PTX JIT does not work under "
                "minor-version compatibility",
                f"update the NVIDIA driver to >= {_full_driver(target)}"))
        elif coverage.how == "ptx-jit":
            findings.append(HostCheck(INFO, "archs", f"{which}: {coverage.message}"))
        else:
            findings.append(HostCheck(OK, "archs", f"{which}: {coverage.message}"))
    return findings


def _driver_runs(driver: DriverReading | None, cuda: CudaVersion, compat: CompatData) -> bool:
    if driver is None or (driver.cuda is None and driver.driver_version is None):
        return True  # nothing known about the driver: no reason to rule the build out
    if driver.cuda is not None:
        return cuda <= CudaVersion(*driver.cuda)
    toolkit = compat.toolkit(cuda)
    return toolkit is None or _at_least(driver.driver_version or "0", toolkit.full_compat_driver)


def _same_gpus(gpus: tuple[GpuInfo, ...]) -> dict[tuple[str, tuple[int, int]], list[GpuInfo]]:
    groups: dict[tuple[str, tuple[int, int]], list[GpuInfo]] = {}
    for gpu in sorted(gpus, key=lambda g: g.index):
        if gpu.capability is not None:
            groups.setdefault((gpu.name, gpu.capability), []).append(gpu)
    return groups


def _indices(gpus: list[GpuInfo]) -> str:
    return ",".join(str(gpu.index) for gpu in sorted(gpus, key=lambda g: g.index))


def _arch_fix(capability: tuple[int, int], sm: str, target: Target, targets: list[Target],
              drivers: dict[str, tuple[str, HostCheck]], compat: CompatData,
              driver: DriverReading | None = None) -> str:
    """Another target of the spec with kernels for this GPU, else the build in the data that has them."""
    covering = [t.key for t in targets if t.cuda and t.key != target.key and t.archs
                and arch_coverage(t.archs, capability).covered
                and drivers.get(t.key, (RUNS, None))[0] != NEEDS_NEWER_DRIVER]
    if covering:
        return f"use target {covering[0]} (its build has {sm} kernels)"
    # Only released torch (not a projection) and a CUDA this host's driver runs.
    builds = [(release.line, cuda) for release in compat.releases() if release.confidence != "projected"
              for cuda in sorted(release.archs)
              if arch_coverage(release.archs[cuda], capability).covered and _driver_runs(driver, cuda, compat)]
    if not builds:
        return f"no torch build in envbuild's data has {sm} kernels: build torch from source for it"
    same_line = [build for build in builds if build[0] == target.release.line]
    line, cuda = (same_line or builds)[-1]
    return f"add a target with torch {line} and CUDA {cuda} (official wheels with {sm} kernels)"

"""doctor's words: the levels of a check, the verdicts of a target, and `HostCheck`, one line of the report."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from builder.findings import Finding, Severity

# Check levels. Only "fail" checks of a target make `envbuild doctor` exit 1.
# "unknown": a fact a verdict needs is not known here; its fix says what would tell.
OK, INFO, WARNING, MISSING, FAIL, UNDECIDED = "ok", "info", "warning", "missing", "fail", "unknown"
NEEDS_FIX = (WARNING, MISSING, FAIL)

# Target verdicts, in the words the table prints.
RUNS = "runs"
MINOR_COMPAT = "runs under minor-version compatibility"
NEEDS_NEWER_DRIVER = "does not run (needs a newer driver)"
ARCH_NOT_IN_BUILD = "does not run (GPU architecture not in this build)"
NO_GPU = "does not run (no GPU here)"
# nvidia-smi is installed but cannot reach the kernel module: a driver is there, so "no GPU" would mislead.
DRIVER_NOT_LOADED = "does not run (driver not loaded)"
# Neither NVML nor nvidia-smi is here at all: no driver is installed (whether a GPU is, nothing here says).
NO_DRIVER = "does not run (no driver)"
# The kernel module and the user-space driver are two releases (an update without a reboot).
DRIVER_MISMATCH = "does not run (driver/library mismatch)"
# An NVSwitch system whose fabric is not up: CUDA does not start until nvidia-fabricmanager runs.
FABRIC_NOT_READY = "does not run (NVSwitch fabric not ready)"
# An arm64 host and a target built for linux-64 only.
NO_PLATFORM_BUILD = "does not run (no linux-aarch64 build)"
UNKNOWN = "unknown"
VERDICT_LEVEL = {RUNS: OK, MINOR_COMPAT: WARNING, NEEDS_NEWER_DRIVER: FAIL, ARCH_NOT_IN_BUILD: FAIL,
                 NO_GPU: MISSING, DRIVER_NOT_LOADED: MISSING, NO_DRIVER: MISSING, DRIVER_MISMATCH: MISSING,
                 FABRIC_NOT_READY: MISSING, NO_PLATFORM_BUILD: FAIL, UNKNOWN: INFO}


# Doctor's six levels in the shared severities: "ok" lines are context, a missing part deserves a look.
SEVERITY = {OK: Severity.INFO, INFO: Severity.INFO, WARNING: Severity.WARNING, MISSING: Severity.WARNING,
            FAIL: Severity.ERROR, UNDECIDED: Severity.INFO}


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

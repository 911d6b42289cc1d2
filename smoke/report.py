"""The smoke report format: one small module, no torch, so envbuild's runner can parse reports.

JSON shape (see smoke/README.md):
    {"report_version": 1,
     "summary": {"passed": n, "failed": n, "skipped": n},
     "checks": [{"name", "status", "reason", "seconds", "details"}],
     "environment": {...}, "collect_env": "<text>" | null}
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPORT_VERSION = 1
PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
STATUSES = (PASSED, FAILED, SKIPPED)


@dataclass(frozen=True)
class CheckResult:
    """What one check concluded. `reason` is never empty: a pass says what was verified."""

    name: str
    status: str
    reason: str
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name}: status {self.status!r} is not one of {STATUSES}")
        if not self.reason.strip():
            raise ValueError(f"check {self.name}: every result needs a reason")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        return cls(
            name=str(data["name"]),
            status=str(data["status"]),
            reason=str(data["reason"]),
            seconds=float(data.get("seconds", 0.0)),
            details=dict(data.get("details") or {}),
        )


@dataclass(frozen=True)
class Summary:
    passed: int
    failed: int
    skipped: int

    @classmethod
    def of(cls, checks: list[CheckResult]) -> Summary:
        return cls(
            passed=sum(c.status == PASSED for c in checks),
            failed=sum(c.status == FAILED for c in checks),
            skipped=sum(c.status == SKIPPED for c in checks),
        )

    def to_dict(self) -> dict[str, int]:
        return {"passed": self.passed, "failed": self.failed, "skipped": self.skipped}


@dataclass(frozen=True)
class SmokeReport:
    checks: list[CheckResult]
    environment: dict[str, Any] = field(default_factory=dict)
    collect_env: str | None = None

    @property
    def summary(self) -> Summary:
        return Summary.of(self.checks)

    @property
    def ok(self) -> bool:
        return self.summary.failed == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "report_version": REPORT_VERSION,
            "summary": self.summary.to_dict(),
            "checks": [c.to_dict() for c in self.checks],
            "environment": self.environment,
            "collect_env": self.collect_env,
        }

    def to_json(self) -> str:
        # default=str: details may carry values such as torch.dtype or paths; never fail the report.
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=str) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SmokeReport:
        report = cls(
            checks=[CheckResult.from_dict(c) for c in data["checks"]],
            environment=dict(data.get("environment") or {}),
            collect_env=data.get("collect_env"),
        )
        written = data.get("summary")
        if written is not None and written != report.summary.to_dict():
            raise ValueError(f"report summary {written} does not match its checks {report.summary.to_dict()}")
        return report

    @classmethod
    def from_json(cls, text: str) -> SmokeReport:
        return cls.from_dict(json.loads(text))

    def to_junit_xml(self, suite_name: str = "envbuild-smoke") -> str:
        summary = self.summary
        suite = ET.Element(
            "testsuite",
            name=suite_name,
            tests=str(len(self.checks)),
            failures=str(summary.failed),
            errors="0",
            skipped=str(summary.skipped),
            time=f"{sum(c.seconds for c in self.checks):.3f}",
        )
        for check in self.checks:
            group = check.name.split(".", 1)[0]
            case = ET.SubElement(
                suite, "testcase", classname=f"smoke.{group}", name=check.name, time=f"{check.seconds:.3f}"
            )
            if check.status == FAILED:
                ET.SubElement(case, "failure", message=check.reason).text = check.reason
            elif check.status == SKIPPED:
                ET.SubElement(case, "skipped", message=check.reason)
            out = {"reason": check.reason, "details": check.details}
            ET.SubElement(case, "system-out").text = json.dumps(out, indent=1, default=str)
        root = ET.Element("testsuites", name=suite_name, tests=str(len(self.checks)),
                          failures=str(summary.failed), errors="0", skipped=str(summary.skipped))
        root.append(suite)
        ET.indent(root)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

    def write_json(self, path: Path) -> None:
        _write_text(path, self.to_json())

    def write_junit(self, path: Path) -> None:
        _write_text(path, self.to_junit_xml())


def read_report(path: Path) -> SmokeReport:
    """Parse a JSON report written by `python -m smoke --json PATH`."""
    return SmokeReport.from_json(Path(path).read_text(encoding="utf-8"))


def _write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a runner polling the file never reads half a report.
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)

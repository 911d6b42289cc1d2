"""One shape for what envbuild's checkers report: a `Finding` says what is wrong, how bad, and the fix.

lint (a spec), doctor (a host) and explain (an error log) each run rules; every rule has a stable id
such as `explain.cuda.no-kernel-image`, so a user can look one up, silence it, or grep a CI log for
it, and tests can assert which rule fired. Rules register themselves in a `RuleRegistry` with a
decorator, the way the smoke suite registers its checks:

    LINT = RuleRegistry("lint")

    @LINT.rule("lint.channels.nvidia-above-conda-forge", "the nvidia channel outranks conda-forge")
    def nvidia_above_conda_forge(spec) -> Iterable[Finding]: ...

    findings = LINT.run(spec)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar

RULE_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$")


class Severity(str, Enum):
    """How bad: an error stops the job (exit 1), a warning deserves a look, info is context."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Location:
    """Where the finding points: a file and line (logs, specs), and/or a field of a spec."""

    path: str | None = None
    line: int | None = None  # 1-based
    field: str | None = None  # a spec key such as `channels` or `pip`

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in
                (("path", self.path), ("line", self.line), ("field", self.field)) if value is not None}

    def __str__(self) -> str:
        where = self.path or ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        if self.field:
            where = f"{where} ({self.field})" if where else self.field
        return where


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str  # what happened (and why, in the same sentence when it fits)
    fix: str | None = None  # an envbuild command or a code change, ready to act on
    location: Location | None = None
    evidence: str | None = None  # the input line that triggered it, when there is one
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Accept the plain word too ("error"), so data files and callers need not import the enum.
        if not isinstance(self.severity, Severity):
            object.__setattr__(self, "severity", Severity(self.severity))

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"rule": self.rule, "severity": self.severity.value, "message": self.message,
                                "fix": self.fix}
        if self.location is not None:
            data["location"] = self.location.as_dict()
        if self.evidence is not None:
            data["evidence"] = self.evidence
        if self.details:
            data["details"] = dict(self.details)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        location = data.get("location")
        return cls(rule=data["rule"], severity=Severity(data["severity"]), message=data["message"],
                   fix=data.get("fix"), location=Location(**location) if location else None,
                   evidence=data.get("evidence"), details=dict(data.get("details") or {}))


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; the rules' own order within a severity."""
    return sorted(findings, key=lambda finding: finding.severity.rank)


def findings_to_json(findings: Iterable[Finding], **extra: Any) -> str:
    return json.dumps({**extra, "findings": [finding.as_dict() for finding in findings]}, indent=2)


def findings_from_json(text: str) -> list[Finding]:
    return [Finding.from_dict(item) for item in json.loads(text)["findings"]]


Subject = TypeVar("Subject")
RuleFunction = Callable[[Subject], Iterable[Finding]]


@dataclass(frozen=True)
class Rule(Generic[Subject]):
    id: str
    func: Callable[[Subject], Iterable[Finding]]
    summary: str


class RuleRegistry(Generic[Subject]):
    """The rules of one checker, in registration order; each rule takes the checker's subject."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._rules: dict[str, Rule[Subject]] = {}

    def rule(self, rule_id: str, summary: str = "") -> Callable[[RuleFunction], RuleFunction]:
        """Register `fn(subject) -> Iterable[Finding]` under `rule_id` (a dotted, lower-case id)."""

        def register(fn: RuleFunction) -> RuleFunction:
            self.add(rule_id, fn, summary or _first_doc_line(fn))
            return fn

        return register

    def add(self, rule_id: str, fn: Callable[[Subject], Iterable[Finding]], summary: str = "") -> None:
        if not RULE_ID.match(rule_id):
            raise ValueError(f"rule id {rule_id!r} is not dotted lower-case words (e.g. explain.cuda.oom)")
        if rule_id in self._rules:
            raise ValueError(f"rule {rule_id} is registered twice in {self.name}")
        self._rules[rule_id] = Rule(rule_id, fn, summary)

    def __iter__(self) -> Iterator[Rule[Subject]]:
        return iter(list(self._rules.values()))

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self._rules

    def get(self, rule_id: str) -> Rule[Subject]:
        return self._rules[rule_id]

    def ids(self) -> list[str]:
        return list(self._rules)

    def run(self, subject: Subject, only: Iterable[str] = ()) -> list[Finding]:
        """Every rule's findings for `subject`, in rule order (or only the rules named in `only`)."""
        wanted = set(only)
        findings: list[Finding] = []
        for registered in self:
            if not wanted or registered.id in wanted:
                findings.extend(registered.func(subject))
        return findings


def _first_doc_line(fn: Callable[..., Any]) -> str:
    doc = (fn.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""

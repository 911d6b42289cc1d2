"""Checks, their outcomes, and running one check with a timeout. No torch here.

A check is a small function `fn(ctx) -> Outcome` registered with `@check("group.name", gpus=N)`.
It returns `passed(...)`, `failed(...)`, `skipped(...)` or `needs_gpus(...)`, always with a reason.
An exception escaping a check is a failure; so is running past `--timeout-per-check`.
"""

from __future__ import annotations

import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from smoke.compat import CudaExpectation
from smoke.report import FAILED, PASSED, SKIPPED, CheckResult

MAX_WARNINGS_KEPT = 10


@dataclass(frozen=True)
class Outcome:
    status: str
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    # > 0 when the check skipped only because fewer CUDA devices are visible than it needs;
    # `--require-gpus` at or above this number turns the skip into a failure.
    gpus_needed: int = 0


def passed(reason: str, /, **details: Any) -> Outcome:
    return Outcome(PASSED, reason, details)


def failed(reason: str, /, **details: Any) -> Outcome:
    return Outcome(FAILED, reason, details)


def skipped(reason: str, /, **details: Any) -> Outcome:
    return Outcome(SKIPPED, reason, details)


def needs_gpus(count: int, reason: str, /, **details: Any) -> Outcome:
    return Outcome(SKIPPED, reason, details, gpus_needed=count)


def verdict(problems: Sequence[str], ok_reason: str, /, **details: Any) -> Outcome:
    """Failed with every problem joined, or passed with `ok_reason`."""
    if problems:
        return failed("; ".join(problems), **details)
    return passed(ok_reason, **details)


@dataclass(frozen=True)
class Settings:
    """What the command line asked for."""

    expect_torch: str | None = None
    expect_cuda: CudaExpectation | None = None
    expect_archs: tuple[str, ...] | None = None  # the arch list envbuild's data gives the build
    require_gpus: int = 0
    timeout_per_check: float = 120.0
    require_compile: bool = False  # torch.compile must work: a missing compiler fails instead of skipping
    # packages the spec pins with torch (name, version or None for any): missing, unimportable or another
    # version fails
    expect_packages: tuple[tuple[str, str | None], ...] = ()

    def expects(self, package: str) -> bool:
        return package in dict(self.expect_packages)

    def expected_version(self, package: str) -> str | None:
        return dict(self.expect_packages).get(package)


@dataclass
class Context:
    settings: Settings
    gpu_count: int = 0
    # Set when a check's thread outlived its timeout: the process must end without joining it.
    hung_checks: list[str] = field(default_factory=list)


CheckFunction = Callable[[Context], Outcome]


@dataclass(frozen=True)
class Check:
    name: str
    func: CheckFunction
    gpus: int = 0
    description: str = ""
    stands_for: str = ""  # the seed pitfall or upstream release check it catches (`--list`)
    aliases: tuple[str, ...] = ()  # former names, still accepted by --only

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[0]


REGISTRY: list[Check] = []


def check(name: str, *, gpus: int = 0, stands_for: str = "",
          aliases: tuple[str, ...] = ()) -> Callable[[CheckFunction], CheckFunction]:
    """Register `fn` as check `name`; with gpus=N it is skipped unless N CUDA devices are visible.

    `stands_for` names the seed pitfall or upstream release check it catches; `aliases` are former
    names that `--only` still accepts."""

    def register(fn: CheckFunction) -> CheckFunction:
        taken = {n for existing in REGISTRY for n in (existing.name, *existing.aliases)}
        if name in taken or taken & set(aliases):
            raise ValueError(f"check {name} is registered twice")
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        REGISTRY.append(Check(name, fn, gpus, summary, stands_for, tuple(aliases)))
        return fn

    return register


def select_checks(checks: Sequence[Check], only: Sequence[str]) -> list[Check]:
    """Checks named in `only` (full names, former names or group names such as 'amp'), in registry order."""
    if not only:
        return list(checks)
    wanted = {name.strip() for name in only if name.strip()}
    known = {c.name for c in checks} | {c.group for c in checks} | {a for c in checks for a in c.aliases}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"unknown check name(s): {', '.join(unknown)} (see `python -m smoke --list`)")
    return [c for c in checks if c.name in wanted or c.group in wanted or wanted & set(c.aliases)]


def run_check(chosen: Check, ctx: Context) -> CheckResult:
    start = time.perf_counter()
    if ctx.gpu_count < chosen.gpus:
        outcome = needs_gpus(
            chosen.gpus, f"needs {chosen.gpus} CUDA device(s), {ctx.gpu_count} visible", visible_gpus=ctx.gpu_count
        )
    else:
        outcome = _run_with_timeout(chosen, ctx)
    outcome = apply_gpu_requirement(outcome, ctx.settings.require_gpus)
    return CheckResult(
        name=chosen.name,
        status=outcome.status,
        reason=outcome.reason,
        seconds=time.perf_counter() - start,
        details=outcome.details,
    )


def apply_gpu_requirement(outcome: Outcome, require_gpus: int) -> Outcome:
    """A skip for want of GPUs is a failure when the user said that many GPUs must be there."""
    if outcome.status == SKIPPED and outcome.gpus_needed and require_gpus >= outcome.gpus_needed:
        return replace(outcome, status=FAILED, reason=f"--require-gpus {require_gpus}: {outcome.reason}")
    return outcome


def _run_with_timeout(chosen: Check, ctx: Context) -> Outcome:
    box: dict[str, Any] = {}

    def target() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                box["outcome"] = chosen.func(ctx)
            except BaseException as exc:  # a check must never take the suite down  # noqa: BLE001
                box["outcome"] = failed(
                    _one_line(f"{type(exc).__name__}: {exc}"), traceback=traceback.format_exc()
                )
        box["warnings"] = _unique_messages(caught)

    # A thread, not a signal: a check stuck inside CUDA or a DataLoader never returns to Python,
    # and the suite must still report. A thread that outlives its timeout is abandoned.
    worker = threading.Thread(target=target, name=f"smoke:{chosen.name}", daemon=True)
    worker.start()
    worker.join(ctx.settings.timeout_per_check)
    if worker.is_alive():
        ctx.hung_checks.append(chosen.name)
        return failed(f"timed out after {ctx.settings.timeout_per_check:g} s (--timeout-per-check)")
    outcome = box["outcome"]
    if not isinstance(outcome, Outcome):
        return failed(f"check returned {type(outcome).__name__}, not an Outcome (a bug in the suite)")
    if box.get("warnings"):
        outcome = replace(outcome, details={**outcome.details, "warnings": box["warnings"]})
    return outcome


def _unique_messages(caught: list[warnings.WarningMessage]) -> list[str]:
    messages: list[str] = []
    for item in caught:
        text = f"{item.category.__name__}: {_one_line(str(item.message))}"
        if text not in messages:
            messages.append(text)
    return messages[:MAX_WARNINGS_KEPT]


def _one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."

"""`envbuild matrix`: every target of a spec in turn, lock check -> image -> smoke, on this host.

What a GPU runner runs. A target that fails at one stage is recorded with the stage and the reason
and the next target still runs, so one table shows the whole matrix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field

from builder.errors import EnvbuildError
from builder.image.build import BuildOptions
from builder.image.pipeline import LockPolicy, build_target_image, ensure_lock
from builder.image.smoke_run import ContainerOptions, Expected, run_in_image
from builder.lock.targets import check_targets
from builder.specs.cuda import cuda_or_cpu
from builder.specs.target import Target

STAGES = ("lock", "image", "smoke", "done")
Progress = Callable[[str], AbstractContextManager[Callable[[str], None]]]


@dataclass
class MatrixRow:
    target: str
    torch: str
    cuda: str
    lock: str = ""  # fresh / stale / missing, as found before anything ran
    stage: str = "lock"  # the last stage reached: lock, image, smoke, done
    image: str = ""
    image_size: int | None = None
    summary: dict[str, int] = field(default_factory=dict)
    checks: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)  # measured, also for a failed stage

    @property
    def ok(self) -> bool:
        return not self.error and self.stage == "done" and not self.summary.get("failed")

    @property
    def result(self) -> str:
        if self.error:
            return f"{self.stage} failed"
        if self.summary.get("failed"):
            return f"{self.summary['failed']} smoke check(s) failed"
        return "ok" if self.ok else f"stopped at {self.stage}"

    def as_dict(self) -> dict:
        return {
            "target": self.target, "torch": self.torch, "cuda": self.cuda, "lock": self.lock,
            "stage": self.stage, "ok": self.ok, "result": self.result,
            "image": self.image, "image_size": self.image_size,
            "summary": self.summary, "checks": self.checks, "notes": self.notes, "error": self.error,
            "seconds": round(self.seconds, 1),
            "stage_seconds": {stage: round(seconds, 3) for stage, seconds in self.stage_seconds.items()},
        }

    def failed_checks(self) -> list[dict]:
        return [check for check in self.checks if check["status"] == "failed"]

    def junit_cases(self) -> Iterator[dict]:
        """A case per stage (the smoke stage's are its checks), named after the target."""
        reached = STAGES.index(self.stage)
        for index, stage in enumerate(STAGES[:-1]):
            if self.error and stage == self.stage:
                status, reason = "failed", self.error
            elif index < reached:
                status, reason = "passed", ""
            else:
                status, reason = "skipped", f"not reached: the {self.stage} stage failed"
            if stage == "smoke" and status == "passed":
                continue
            yield {"name": f"{self.target}.{stage}", "classname": self.target, "status": status, "reason": reason,
                   "seconds": self.stage_seconds.get(stage, 0.0)}
        for check in self.checks:
            yield {**check, "name": f"{self.target}.{check['name']}", "classname": self.target}


def first_error(rows: Sequence[MatrixRow]) -> MatrixRow | None:
    """The first row that stopped on an error (the one a command's Error line names)."""
    return next((row for row in rows if row.error), None)


def run_matrix(
    targets: Sequence[Target],
    *,
    locks: LockPolicy = LockPolicy(),
    options: BuildOptions = BuildOptions(),
    container: ContainerOptions = ContainerOptions(),
    require_gpus: int = 0,
    timeout: float = 900.0,
    progress: Progress = lambda title: nullcontext(lambda line: None),
) -> list[MatrixRow]:
    statuses = {r.target: r.status for r in check_targets(targets, lock_root=locks.lock_root, solver=locks.solver)}
    rows = []
    for target in targets:
        row = MatrixRow(target.key, target.torch, cuda_or_cpu(target.cuda), lock=statuses[target.key])
        started = time.monotonic()
        try:
            _run_one(row, target, locks=locks, options=options, container=container, require_gpus=require_gpus,
                     timeout=timeout, progress=progress)
        except EnvbuildError as exc:
            row.error = exc.message
        row.seconds = time.monotonic() - started
        rows.append(row)
    return rows


@contextmanager
def _timed(row: MatrixRow, stage: str) -> Iterator[None]:
    """Record how long a stage ran, also when it fails (JUnit shows each stage's time)."""
    row.stage = stage
    started = time.monotonic()
    try:
        yield
    finally:
        row.stage_seconds[stage] = time.monotonic() - started


def _run_one(row: MatrixRow, target: Target, *, locks, options, container, require_gpus, timeout, progress) -> None:
    with _timed(row, "lock"):
        lock_path = ensure_lock(target, locks)
    with _timed(row, "image"), progress(target.tag) as echo:
        image = build_target_image(target, lock_path=lock_path, options=options, echo=echo)
    row.image, row.image_size = image.tags[0], image.size
    with _timed(row, "smoke"):
        report = run_in_image(row.image, container=container, require_gpus=require_gpus,
                              expect=Expected(target.torch, row.cuda), timeout=timeout)
    row.summary, row.checks, row.notes = report.summary, report.checks, report.notes
    row.stage = "done"

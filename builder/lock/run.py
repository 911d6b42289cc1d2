"""How `envbuild lock` runs conda-lock: one forked child per target (conda-lock imported once, in
the parent), each in a clean folder of its own with a log, a timeout and its own process group,
and one solver service for the whole run (builder/lock/solver_shim.py `serve`)."""

from __future__ import annotations

import functools
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import yaml

from builder.errors import EnvbuildError
from builder.events import Event, Progress, to_stderr
from builder.lock.inputs import OWN_SOLVER, LockInputs
from builder.lock.pip_part import previous_pins, with_pip_part, without_pip_entries
from builder.lock.solver_protocol import CACHE_ENV, SERVICE_ENV
from builder.proc import exit_now, kill_group, lead_own_group_dying_with_parent, popen, signals_as_interrupt

LOCK_FILE = "conda-lock.yml"
Result = TypeVar("Result")


def conda_lock_args(work: Path, inputs: LockInputs, solver: Path, update: Sequence[str] = ()) -> list[str]:
    """conda-lock's command line for one target whose inputs `write_conda_lock_inputs` put in `work`.

    The pip part is resolved by builder/lock/pip_part.py, so conda-lock reads no pip section and needs no
    PyPI-to-conda table."""
    args = [
        "lock", "--conda", str(solver), "--no-mamba", "--no-micromamba",
        "-f", str(work / "environment.yml"),
        "--virtual-package-spec", str(work / "target-virtual-packages.yml"),
        "--lockfile", str(work / LOCK_FILE),
        "--log-level", "WARNING",
    ]
    for platform in inputs.target.platforms:
        args += ["-p", platform]
    for package in update:
        args += ["--update", package]
    return args


def write_conda_lock_inputs(work: Path, inputs: LockInputs) -> None:
    """The target's conda part and the explicit virtual packages, in a clean folder."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "environment.yml").write_text(inputs.conda_environment_yml, encoding="utf-8")
    (work / "target-virtual-packages.yml").write_text(inputs.virtual_packages_yml(), encoding="utf-8")


@dataclass(frozen=True)
class Job:
    inputs: LockInputs
    folder: Path
    solver: Path
    update: tuple[str, ...]
    work: Path
    reasons: tuple[str, ...] = ()  # why this target is solved again


def _run_conda_lock(job: Job) -> int:
    """In the forked child: run conda-lock's CLI in-process with output sent to a log file."""
    # Its own group, so a timeout can stop conda-lock and every solver process it started; and the
    # group dies with envbuild (kill -9 included) instead of solving on for minutes.
    lead_own_group_dying_with_parent()
    work = job.work
    os.chdir(work)
    # conda-lock and its solver calls make temporary folders; they go where envbuild removes them.
    private_tmp = work / "tmp"
    private_tmp.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(private_tmp)
    tempfile.tempdir = str(private_tmp)
    log = os.open(work / "conda-lock.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ.setdefault("POETRY_CACHE_DIR", str(work / "poetry-cache"))
    _use_libyaml()
    try:
        return _lock_both_parts(job)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _lock_both_parts(job: Job) -> int:
    """conda-lock solves the conda part, then uv the pip part on top of it (builder/lock/pip_part.py).

    An `--update` of pip names only keeps the conda part as locked; an update leaves every pip
    package it does not name at its locked version. Each state of the lockfile is parsed once and the
    finished lock written once: the pip part is merged into conda-lock's model in memory."""
    from conda_lock.lockfile import parse_conda_lock_file

    lock_path = job.work / LOCK_FILE
    part = job.inputs.pip_part
    pip_names = job.inputs.pip_names()
    conda_update = tuple(name for name in job.update if name.lower() not in pip_names)
    pins = None
    if job.update and part is not None:
        previous = parse_conda_lock_file(lock_path)
        pins = previous_pins(previous, job.update)
        if conda_update:  # conda-lock updates the conda part alone; the pip part is added after it
            _write_lock(without_pip_entries(previous), lock_path)
    if conda_update or not job.update:
        failed = _conda_part(job, conda_update)
        if failed:
            return failed
    if part is None:
        return 0
    try:
        solved = with_pip_part(parse_conda_lock_file(lock_path), part, job.inputs.virtual_packages, job.work, pins)
    except EnvbuildError as exc:
        print(f"envbuild: {exc.message}", file=sys.stderr)
        return 1
    _write_lock(solved, lock_path)
    return 0


def _conda_part(job: Job, conda_update: tuple[str, ...]) -> int:
    """conda-lock's solve of the conda part; its exit code (0: solved)."""
    from conda_lock.conda_lock import main as conda_lock_cli

    try:
        conda_lock_cli.main(args=conda_lock_args(job.work, job.inputs, job.solver, conda_update),
                            standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code) if exc.code else 0
    except BaseException as exc:  # noqa: BLE001 - conda-lock's own errors: the log keeps the explanation
        print(f"envbuild: conda-lock failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def _write_lock(lockfile: object, lock_path: Path) -> None:
    """conda-lock's own writer, so the file stays what conda-lock writes; into a sibling first, then
    renamed, so a kill mid-write never leaves a half-written lock for the check to read."""
    from conda_lock.lockfile import write_conda_lock_file

    partial = lock_path.with_name(lock_path.name + ".partial")
    write_conda_lock_file(lockfile, partial, metadata_choices=None)
    os.replace(partial, lock_path)


def _use_libyaml() -> None:
    """In the forked child only: conda-lock reads and writes lockfiles with PyYAML's pure-Python
    loader and emitter, a third of a target's time for an env of a few hundred packages; libyaml
    writes the same bytes (bench/lock and its test compare with plain conda-lock's) 3x faster."""
    if not yaml.__with_libyaml__:
        return
    yaml.dump = functools.partial(yaml.dump, Dumper=yaml.CDumper)  # type: ignore[assignment]
    yaml.safe_load = functools.partial(yaml.load, Loader=yaml.CSafeLoader)  # type: ignore[assignment]


def _child_main(job: Job, after: Callable[[Job], None] | None) -> None:
    code = 1
    try:
        code = _run_conda_lock(job)
        if code == 0 and after is not None:
            after(job)
    except BaseException as exc:  # noqa: BLE001 - a forked child never returns into the parent's code
        print(f"envbuild: could not run conda-lock: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        exit_now(code)


PROGRESS_EVERY_S = 30.0  # a "still locking" line this often, so a slow solve is never silent


def run_jobs(jobs: list[Job], parallel: int, timeout: float, finish: Callable[[Job, int, float], Result],
             timed_out: Callable[[Job, float], Result], after: Callable[[Job], None] | None = None,
             progress: Progress = to_stderr) -> list[Result]:
    """Run each job's conda-lock in a forked child, `parallel` at a time; `after` runs in the child
    once conda-lock succeeded, `finish` makes a job's result from its exit code in the parent,
    `timed_out` one for a child stopped after `timeout` seconds. `progress` hears when each solve
    starts, and every PROGRESS_EVERY_S that it still runs (the caller says how each ended)."""
    # Imported once here so each forked child starts with conda-lock loaded.
    import conda_lock.conda_lock  # noqa: F401

    context = multiprocessing.get_context("fork")
    pending = list(jobs)
    running: dict[int, tuple[Job, multiprocessing.process.BaseProcess, float]] = {}
    results: dict[str, Result] = {}
    reported: dict[int, int] = {}  # progress lines printed per child
    try:
        with signals_as_interrupt():
            while pending or running:
                while pending and len(running) < parallel:
                    job = pending.pop(0)
                    child: multiprocessing.process.BaseProcess = context.Process(
                        target=_child_main, args=(job, after), daemon=False)
                    child.start()
                    assert child.pid is not None  # started
                    running[child.pid] = (job, child, time.monotonic())
                    progress(Event(job.inputs.target.key, "start",
                                   f"solving {', '.join(job.inputs.target.platforms)} with conda-lock"))
                time.sleep(0.02)
                for pid, (job, process, started) in list(running.items()):
                    elapsed = time.monotonic() - started
                    if process.exitcode is None and int(elapsed / PROGRESS_EVERY_S) > reported.get(pid, 0):
                        reported[pid] = int(elapsed / PROGRESS_EVERY_S)
                        progress(Event(job.inputs.target.key, "update",
                                       f"still solving ({elapsed:.0f} s of at most {timeout:.0f} s)"))
                    if process.exitcode is None and elapsed > timeout:
                        kill_group(pid)
                        process.join()
                        results[job.inputs.target.key] = timed_out(job, elapsed)
                        del running[pid]
                    elif process.exitcode is not None:
                        process.join()
                        results[job.inputs.target.key] = finish(job, process.exitcode, elapsed)
                        del running[pid]
    finally:
        # Ctrl-C or SIGTERM: the children run in process groups of their own, which a terminal's
        # Ctrl-C does not reach; stop them (and their solver processes) before leaving.
        for pid, (_, leftover, _) in running.items():
            kill_group(pid)
            leftover.join()
    return [results[job.inputs.target.key] for job in jobs]


@contextmanager
def solver_service(scratch: Path, solver: Path, needed: bool) -> Iterator[None]:
    """envbuild's own solver answers this run's solves from one process that reads each channel's
    repodata once (builder/lock/solver_shim.py, `serve`); the conda-lock children find it through the
    environment they inherit. Without it (a real conda, or it did not start) nothing changes."""
    if not needed or solver.name != OWN_SOLVER:
        yield
        return
    socket_path = scratch / "solver.sock"
    # Through proc.popen: its own session, and it dies with envbuild (kill -9 included) instead of
    # serving on for nobody.
    service = popen(
        [sys.executable, "-c", f"from builder.lock.solver_shim import serve; serve({str(socket_path)!r})"],
        env={**os.environ, CACHE_ENV: str(scratch / "solver-cache")}, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    previous = os.environ.get(SERVICE_ENV)
    os.environ[SERVICE_ENV] = str(socket_path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(SERVICE_ENV, None)
        else:
            os.environ[SERVICE_ENV] = previous
        service.kill()
        service.wait()

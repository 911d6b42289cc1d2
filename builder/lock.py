"""`envbuild lock`: one conda-lock.yml per CUDA target (all its platforms), cached by input hash.

Each target is locked by real conda-lock in its own forked process (conda-lock's import cost is
paid once, in the parent), with a timeout, in a clean temporary folder (conda-lock silently uses a
`virtual-packages.yml` it finds in its working folder), with the target's virtual packages written
out explicitly. Results are renamed into place only when complete, under a file lock per env.

Layout, next to the spec (`envs/pytorch.yaml`):
    envs/pytorch/locks/<target>/conda-lock.yml      what conda-lock wrote; commit it
    envs/pytorch/locks/<target>/envbuild-lock.json  the input hash and the sources used
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

import filelock
import yaml
from pydantic import BaseModel

from builder import __version__
from builder.errors import EnvbuildError
from builder.lockfile import CondaLock, lockfile_sha256, read_lock
from builder.render import render_target
from builder.spec import default_lock_folder
from builder.target import Target

LOCK_FILE = "conda-lock.yml"
INFO_FILE = "envbuild-lock.json"
SOLVERS = ("micromamba", "mamba", "conda")
OWN_SOLVER = "envbuild-micromamba"
IMAGE_ONLY_SPEC_FIELDS = {"images", "ca_certificates", "user", "labels"}

Status = Literal["locked", "unchanged", "fresh", "stale", "missing", "failed"]


class LockInfo(BaseModel):
    """What a lock was made from; its hash decides whether a solve can be skipped."""

    envbuild_version: str
    input_hash: str
    env: str
    target: str
    torch: str
    cuda: str | None
    platforms: list[str]
    channels: list[str]
    pip_repositories: list[str]
    virtual_packages: dict[str, dict[str, str]]
    solver: str
    # What was written, so an unchanged lock is recognised (and summarised) without parsing it.
    lockfile_sha256: str
    torch_builds: dict[str, str]
    package_counts: dict[str, int]


@dataclass(frozen=True)
class LockInputs:
    target: Target
    environment_yml: str
    virtual_packages: dict[str, dict[str, str]]

    @property
    def input_hash(self) -> str:
        material = {
            "envbuild": __version__,
            # What only the image build reads (bases, CA files, user, labels) stays out: a new
            # base image changes the lock through its glibc (a virtual package), not its name.
            "spec": self.target.spec.model_dump(mode="json", exclude=IMAGE_ONLY_SPEC_FIELDS),
            "target": self.target.key,
            "environment_yml": self.environment_yml,
            "virtual_packages": self.virtual_packages,
            "channels": list(self.target.channels),
            "pip_index": self.target.pip_index,
            "platforms": list(self.target.platforms),
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()

    def virtual_packages_yml(self) -> str:
        subdirs = {p: {"packages": packages} for p, packages in self.virtual_packages.items()}
        return yaml.safe_dump({"subdirs": subdirs}, sort_keys=True)


@dataclass
class LockResult:
    target: str
    status: Status
    path: Path
    seconds: float = 0.0
    input_hash: str = ""
    message: str = ""
    torch_builds: dict[str, str] = field(default_factory=dict)
    package_counts: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "target": self.target, "status": self.status, "path": str(self.path),
            "seconds": round(self.seconds, 2), "input_hash": self.input_hash,
            "message": self.message, "torch_builds": self.torch_builds,
            "package_counts": self.package_counts,
        }


def updatable_packages(inputs: LockInputs) -> list[str]:
    """The names `--update` accepts: the packages the rendered environment.yml asks for by name.

    conda-lock moves only those (a dependency moves with the package that needs it) and fails with
    a bare KeyError on a locked dependency's name."""
    from packaging.requirements import InvalidRequirement, Requirement
    from rattler import MatchSpec

    names: set[str] = set()
    for dependency in yaml.safe_load(inputs.environment_yml).get("dependencies") or []:
        if isinstance(dependency, str):
            name = MatchSpec(dependency, strict=False).name
            if name is not None:
                names.add(name.normalized)
            continue
        for requirement in (dependency or {}).get("pip") or []:
            try:
                names.add(Requirement(requirement).name.lower())
            except InvalidRequirement:
                continue
    return sorted(names)


def check_update_names(update: Sequence[str], inputs: LockInputs) -> None:
    allowed = updatable_packages(inputs)
    unknown = [name for name in update if name.lower() not in allowed]
    if unknown:
        raise EnvbuildError(
            f"--update {unknown[0]}: target {inputs.target.key} does not ask for {unknown[0]} by name "
            f"(a dependency moves with the package that needs it); it can update: {', '.join(allowed)}"
        )


def lock_inputs(target: Target, replaced_pip_index: bool = False) -> LockInputs:
    rendered = render_target(target, sources_replaced_pip=replaced_pip_index)
    virtual = {p: target.virtual_packages(p) for p in target.platforms}
    return LockInputs(target, rendered.environment_yml, virtual)


def default_lock_dir(target: Target, root: Path | None = None) -> Path:
    if root is not None:
        return root / target.key
    return default_lock_folder(target.spec.source, target.spec.name) / target.key


def read_info(folder: Path) -> LockInfo | None:
    try:
        return LockInfo.model_validate_json((folder / INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def lock_status(inputs: LockInputs, folder: Path) -> Status:
    """fresh: the lock exists, was made from these inputs and is as envbuild wrote it; stale:
    inputs changed or the lockfile was edited; missing."""
    if not (folder / LOCK_FILE).is_file():
        return "missing"
    return "fresh" if fresh_info(inputs, folder) is not None else "stale"


def fresh_info(inputs: LockInputs, folder: Path) -> LockInfo | None:
    """The lock's info when the lock is fresh, else None."""
    lockfile = folder / LOCK_FILE
    info = read_info(folder)
    if info is None or info.input_hash != inputs.input_hash or not lockfile.is_file():
        return None
    if lockfile_sha256(lockfile) != info.lockfile_sha256:
        read_lock(lockfile)  # a corrupted lockfile is one clear error, not a silent relock
        return None
    return info


def conda_tool_on_path() -> Path | None:
    """The first real micromamba, mamba or conda on PATH."""
    for name in SOLVERS:
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def find_solver(explicit: str | None = None) -> Path:
    """A real micromamba/mamba/conda when present, else envbuild's rattler-backed one."""
    if explicit:
        found = shutil.which(explicit)
        if not found:
            raise EnvbuildError(f"solver {explicit!r} not found; give a path or a name on PATH")
        return Path(found)
    real = conda_tool_on_path()
    if real:
        return real
    beside = Path(sys.executable).parent / OWN_SOLVER
    if beside.is_file():
        return beside
    found = shutil.which(OWN_SOLVER)
    if found:
        return Path(found)
    raise EnvbuildError(f"no conda solver found and {OWN_SOLVER} is not installed; reinstall envbuild")


def summarize(lock: CondaLock) -> tuple[dict[str, str], dict[str, int]]:
    builds, counts = {}, {}
    for platform in lock.metadata.platforms:
        packages = lock.for_platform(platform)
        counts[platform] = len(packages)
        torch = next((p for p in packages if p.name in ("pytorch", "torch")), None)
        if torch:
            builds[platform] = f"{torch.version} {torch.build or torch.manager}"
    return builds, counts


@contextmanager
def env_file_lock(folder: Path, timeout: float) -> Iterator[None]:
    """One `envbuild lock` per env at a time; a second one waits, then sees the first one's work."""
    folder.mkdir(parents=True, exist_ok=True)
    guard = filelock.FileLock(str(folder / ".envbuild-lock.lock"))
    try:
        guard.acquire(timeout=0)
    except filelock.Timeout:
        print(f"waiting for another envbuild lock on {folder} ...", file=sys.stderr)
        try:
            guard.acquire(timeout=timeout)
        except filelock.Timeout:
            raise EnvbuildError(f"{folder}: another envbuild lock held it for {timeout:.0f} s; try again") from None
    try:
        yield
    finally:
        guard.release()


def _mapping_file() -> str:
    return str(resources.files("builder").joinpath("data/pypi_to_conda.yaml"))


def conda_lock_args(work: Path, inputs: LockInputs, solver: Path, update: Sequence[str] = ()) -> list[str]:
    """conda-lock's command line for one target whose inputs `write_conda_lock_inputs` put in `work`."""
    args = [
        "lock", "--conda", str(solver), "--no-mamba", "--no-micromamba",
        "-f", str(work / "environment.yml"),
        "--virtual-package-spec", str(work / "target-virtual-packages.yml"),
        "--lockfile", str(work / LOCK_FILE),
        "--pypi_to_conda_lookup_file", _mapping_file(),
        "--log-level", "WARNING",
    ]
    for platform in inputs.target.platforms:
        args += ["-p", platform]
    for package in update:
        args += ["--update", package]
    return args


def write_conda_lock_inputs(work: Path, inputs: LockInputs) -> None:
    """The rendered environment.yml and the explicit virtual packages, in a clean folder."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "environment.yml").write_text(inputs.environment_yml, encoding="utf-8")
    (work / "target-virtual-packages.yml").write_text(inputs.virtual_packages_yml(), encoding="utf-8")


@dataclass(frozen=True)
class _Job:
    inputs: LockInputs
    folder: Path
    solver: Path
    update: tuple[str, ...]
    work: Path


def _run_conda_lock(job: _Job) -> int:
    """In the forked child: run conda-lock's CLI in-process with output sent to a log file."""
    os.setpgrp()  # so a timeout can stop conda-lock and every solver process it started
    work = job.work
    os.chdir(work)
    log = os.open(work / "conda-lock.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ.setdefault("POETRY_CACHE_DIR", str(work / "poetry-cache"))
    _use_libyaml()
    from conda_lock.conda_lock import main as conda_lock_cli

    try:
        conda_lock_cli.main(args=conda_lock_args(work, job.inputs, job.solver, job.update), standalone_mode=False)
        return 0
    except SystemExit as exc:
        return int(exc.code or 0)
    except BaseException as exc:  # conda-lock's own errors: the log keeps the explanation
        print(f"envbuild: conda-lock failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _use_libyaml() -> None:
    """In the forked child only: conda-lock reads and writes lockfiles with PyYAML's pure-Python
    loader and emitter, a third of a target's time for an env of a few hundred packages; libyaml
    writes the same bytes (bench/lock and its test compare with plain conda-lock's) 3x faster."""
    if not yaml.__with_libyaml__:
        return
    yaml.dump = functools.partial(yaml.dump, Dumper=yaml.CDumper)  # type: ignore[assignment]
    yaml.safe_load = functools.partial(yaml.load, Loader=yaml.CSafeLoader)  # type: ignore[assignment]


def _child_main(job: _Job) -> None:
    code = 1
    try:
        code = _run_conda_lock(job)
    except BaseException as exc:
        print(f"envbuild: could not run conda-lock: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        sys.stderr.flush()
        os._exit(code)


def _explain_failure(log_text: str) -> str:
    """The lines of conda-lock's output that explain a failure, without traceback noise."""
    lines = [line.rstrip() for line in log_text.splitlines() if line.strip()]
    # conda-lock prints the solver's explanation between these two lines.
    start = next((i for i, line in enumerate(lines) if "Could not lock the environment" in line), None)
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("Command:")), len(lines))
        return "\n".join(lines[start:end][:25])
    marked = [line for line in lines if "envbuild:" in line or "conflict" in line.lower()
              or "cannot be installed" in line.lower() or "unsatisfiable" in line.lower()
              or "nothing provides" in line.lower()]
    keep = marked or [line for line in lines if not line.startswith(("  File ", "Traceback", "    "))]
    # conda-lock's pip solver (poetry) names the environment "-dummy-package-"
    text = "\n".join(keep[-20:]).replace("-dummy-package- depends on", "the environment needs")
    return text or "conda-lock failed without output"


def _pip_hint(target: Target, explanation: str) -> str:
    """Where a pip-side failure points: the index the pip packages were asked from."""
    pip_side = ("SolverProblemError", "ConnectionError", "installation candidates", "PipRepository")
    if not target.pip_index or not any(marker in explanation for marker in pip_side):
        return ""
    return (f"\nhint: the pip packages of this target come from {target.pip_index}; "
            "give --pip-index URL ({tag} allowed) for a reachable index that has them")


def _prepare(job: _Job, existing: Path) -> None:
    write_conda_lock_inputs(job.work, job.inputs)
    if job.update:
        if not existing.is_file():
            raise EnvbuildError(f"{existing}: --update needs an existing lock; run `envbuild lock` first")
        shutil.copyfile(existing, job.work / LOCK_FILE)


def _commit(job: _Job) -> LockResult:
    """Validate the new lockfile, then rename it and its info into place (old lock kept until then)."""
    produced = job.work / LOCK_FILE
    builds, counts = summarize(read_lock(produced))
    target = job.inputs.target
    info = LockInfo(
        envbuild_version=__version__, input_hash=job.inputs.input_hash, env=target.name,
        target=target.key, torch=target.torch, cuda=target.cuda, platforms=list(target.platforms),
        channels=list(target.channels), pip_repositories=[target.pip_index] if target.pip_index else [],
        virtual_packages=job.inputs.virtual_packages, solver=job.solver.name,
        lockfile_sha256=lockfile_sha256(produced), torch_builds=builds, package_counts=counts,
    )
    job.folder.mkdir(parents=True, exist_ok=True)
    staged_lock = job.folder / f".{LOCK_FILE}.{os.getpid()}.tmp"
    staged_info = job.folder / f".{INFO_FILE}.{os.getpid()}.tmp"
    shutil.copyfile(produced, staged_lock)
    staged_info.write_text(info.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(staged_lock, job.folder / LOCK_FILE)
    os.replace(staged_info, job.folder / INFO_FILE)
    return LockResult(target.key, "locked", job.folder / LOCK_FILE, input_hash=info.input_hash,
                      torch_builds=builds, package_counts=counts)


def _run_jobs(jobs: list[_Job], parallel: int, timeout: float) -> list[LockResult]:
    # Imported once here so each forked child starts with conda-lock loaded.
    import conda_lock.conda_lock  # noqa: F401

    context = multiprocessing.get_context("fork")
    pending = list(jobs)
    running: dict[int, tuple[_Job, multiprocessing.process.BaseProcess, float]] = {}
    results: dict[str, LockResult] = {}
    try:
        with _terminate_as_exit():
            while pending or running:
                while pending and len(running) < parallel:
                    job = pending.pop(0)
                    process = context.Process(target=_child_main, args=(job,), daemon=False)
                    process.start()
                    running[process.pid] = (job, process, time.monotonic())
                time.sleep(0.02)
                for pid, (job, process, started) in list(running.items()):
                    elapsed = time.monotonic() - started
                    if process.exitcode is None and elapsed > timeout:
                        kill_group(pid)
                        process.join()
                        results[job.inputs.target.key] = LockResult(
                            job.inputs.target.key, "failed", job.folder / LOCK_FILE, elapsed,
                            message=f"locking took longer than {timeout:.0f} s and was stopped",
                        )
                        del running[pid]
                    elif process.exitcode is not None:
                        process.join()
                        results[job.inputs.target.key] = _finish(job, process.exitcode, elapsed)
                        del running[pid]
    finally:
        # Ctrl-C or SIGTERM: the children run in process groups of their own, which a terminal's
        # Ctrl-C does not reach; stop them (and their solver processes) before leaving.
        for pid, (_, process, _) in running.items():
            kill_group(pid)
            process.join()
    return [results[job.inputs.target.key] for job in jobs]


@contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM leaves through SystemExit, so cleanup runs (only in the main thread, where it can)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def kill_group(pid: int) -> None:
    """SIGKILL a child's whole process group (it started its own session), e.g. a solver it ran."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _finish(job: _Job, exitcode: int, elapsed: float) -> LockResult:
    key = job.inputs.target.key
    log_path = job.work / "conda-lock.log"
    log_text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.is_file() else ""
    if exitcode != 0 or not (job.work / LOCK_FILE).is_file():
        explanation = _explain_failure(log_text)
        return LockResult(key, "failed", job.folder / LOCK_FILE, elapsed,
                          message=explanation + _pip_hint(job.inputs.target, explanation))
    try:
        result = _commit(job)
    except EnvbuildError as exc:
        return LockResult(key, "failed", job.folder / LOCK_FILE, elapsed, message=exc.message)
    result.seconds = elapsed
    return result


def lock_targets(
    targets: Sequence[Target],
    *,
    lock_root: Path | None = None,
    solver: str | None = None,
    update: Sequence[str] = (),
    force: bool = False,
    parallel: int | None = None,
    timeout: float = 600.0,
    replaced_pip_index: bool = False,
) -> list[LockResult]:
    """Lock every target whose inputs changed (all of them with `force` or `update`)."""
    if not targets:
        return []
    env_folder = default_lock_dir(targets[0], lock_root).parent
    with env_file_lock(env_folder, timeout=timeout * max(1, len(targets))):
        results: dict[str, LockResult] = {}
        jobs: list[_Job] = []
        all_inputs = [lock_inputs(target, replaced_pip_index) for target in targets]
        for inputs in all_inputs if update else ():
            check_update_names(update, inputs)
        scratch = Path(tempfile.mkdtemp(prefix="envbuild-lock-"))
        try:
            solver_path = None
            for target, inputs in zip(targets, all_inputs):
                folder = default_lock_dir(target, lock_root)
                try:
                    info = None if force or update else fresh_info(inputs, folder)
                except EnvbuildError as exc:  # a corrupted lockfile fails its target, not the others
                    results[target.key] = LockResult(target.key, "failed", folder / LOCK_FILE, message=exc.message)
                    continue
                if info is not None:
                    results[target.key] = LockResult(target.key, "unchanged", folder / LOCK_FILE,
                                                     input_hash=inputs.input_hash,
                                                     torch_builds=info.torch_builds,
                                                     package_counts=info.package_counts)
                    continue
                solver_path = solver_path or find_solver(solver)
                job = _Job(inputs, folder, solver_path, tuple(update), scratch / target.key)
                _prepare(job, folder / LOCK_FILE)
                jobs.append(job)
            # A target's process waits on its solver calls much of the time: twice the cores keeps
            # them busy (3 targets on 2 cores: 2.4 s with 3 processes, 2.8 s with 2).
            workers = parallel or min(len(jobs), 2 * (os.cpu_count() or 1)) or 1
            for result in _run_jobs(jobs, workers, timeout) if jobs else []:
                results[result.target] = result
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return [results[t.key] for t in targets]


def _shown_path(path: Path) -> str:
    """A path as the user typed it from here: relative to this folder when it is inside it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def relock_hint(target: Target, lock_root: Path | None, folder: Path) -> str:
    """What to run and commit so a CI lock check passes (CI solves nothing: the lock is committed)."""
    spec = _shown_path(target.spec.source) if target.spec.source else "SPEC"
    locks = f" --locks {shlex.quote(_shown_path(lock_root))}" if lock_root else ""
    return f"run `envbuild lock {shlex.quote(spec)}{locks}` and commit {_shown_path(folder)}/"


def check_targets(targets: Sequence[Target], *, lock_root: Path | None = None,
                  replaced_pip_index: bool = False) -> list[LockResult]:
    """For CI: which locks are fresh, stale or missing, without solving anything."""
    results = []
    for target in targets:
        inputs = lock_inputs(target, replaced_pip_index)
        folder = default_lock_dir(target, lock_root)
        try:
            status, message = lock_status(inputs, folder), ""
        except EnvbuildError as exc:  # a corrupted lockfile: stale, with the reason
            status, message = "stale", exc.message
        if status == "missing":
            message = f"no committed lock: {relock_hint(target, lock_root, folder)}"
        elif status == "stale":
            message = (message + "; " if message else "the lock does not match the spec any more: ") \
                + relock_hint(target, lock_root, folder)
        results.append(LockResult(target.key, status, folder / LOCK_FILE, input_hash=inputs.input_hash,
                                  message=message))
    return results

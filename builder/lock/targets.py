"""`envbuild lock`: one conda-lock.yml per CUDA target (all its platforms), cached by input hash.

Each target is locked by real conda-lock in its own forked process (conda-lock's import cost is
paid once, in the parent), with a timeout, in a clean temporary folder (conda-lock silently uses a
`virtual-packages.yml` it finds in its working folder), with the target's virtual packages written
out explicitly. Results are renamed into place only when complete, under a file lock per env.
What a solve reads is builder/lock/inputs.py, how conda-lock runs builder/lock/run.py, how its
failures read builder/lock/failure.py; this module decides what to lock and commits the results.

Layout, next to the spec (`envs/pytorch.yaml`):
    envs/pytorch/locks/<target>/conda-lock.yml      what conda-lock wrote; commit it
    envs/pytorch/locks/<target>/envbuild-lock.json  the input hash and the sources used
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from builder import __version__, envvars
from builder.errors import EnvbuildError
from builder.events import Event, Progress, to_stderr
from builder.formats.conda_lock import CondaLock, LockFile
from builder.lock.content_check import content_problems
from builder.lock.failure import explain_failure, pip_hint
from builder.lock.inputs import (
    OWN_SOLVER,
    LockInputs,
    check_update_names,
    lock_inputs,
    stale_reasons,
)
from builder.lock.location import default_lock_dir
from builder.lock.mixed_cuda import mixed_cuda_builds
from builder.lock.run import LOCK_FILE, Job, run_jobs, solver_service, write_conda_lock_inputs
from builder.proc import (
    owned_name,
    remove_stale_folders,
)
from builder.safe_io.locks import acquire_lock, release_lock
from builder.safe_io.reading import read_bounded
from builder.safe_io.writing import sync_file, write_destination
from builder.specs.cuda import cuda_json
from builder.specs.target import Target

INFO_FILE = "envbuild-lock.json"
GUARD_FILE = ".envbuild-lock.lock"
MAX_INFO_BYTES = 1024 * 1024  # an info file is a few kB
SCRATCH_PREFIX = "envbuild-lock"
STAGED_PREFIX = ".envbuild-staged"
SOLVERS = ("micromamba", "mamba", "conda")

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
    # The solve's inputs field by field (builder/lock/inputs.py): a stale lock says which changed.
    inputs: dict[str, Any] = {}


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
    reasons: list[str] = field(default_factory=list)  # why a lock is stale (or was relocked)
    hint: str = ""  # what to run and commit when a check finds the lock stale or missing

    def as_dict(self) -> dict:
        return {
            "target": self.target, "status": self.status, "path": str(self.path),
            "seconds": round(self.seconds, 2), "input_hash": self.input_hash,
            "message": self.message, "reasons": self.reasons, "hint": self.hint, "torch_builds": self.torch_builds,
            "package_counts": self.package_counts,
        }


def read_info(folder: Path) -> LockInfo | None:
    """The lock's info, or None when it is missing or not one (a lock folder is the user's to edit)."""
    try:
        return LockInfo.model_validate_json(read_bounded(folder / INFO_FILE, MAX_INFO_BYTES, "lock info",
                                                         EnvbuildError))
    except (EnvbuildError, ValueError):
        return None


def lock_status(inputs: LockInputs, folder: Path) -> tuple[Status, list[str]]:
    """fresh: the lock exists, was made from these inputs and is as envbuild wrote it; stale:
    inputs changed or the lockfile was edited (with one reason per change); missing."""
    if not (folder / LOCK_FILE).is_file():
        return "missing", []
    if fresh_info(inputs, folder) is not None:
        return "fresh", []
    return "stale", why_stale(inputs, folder)


def why_stale(inputs: LockInputs, folder: Path) -> list[str]:
    """The inputs that changed since the lock in `folder` was made, or that its file was edited."""
    info = read_info(folder)
    if info is None:
        return [f"no readable {INFO_FILE} beside it (not written by envbuild lock)"]
    reasons = stale_reasons(info.inputs, inputs.material) if info.input_hash != inputs.input_hash else []
    if (folder / LOCK_FILE).is_file():
        lockfile = LockFile.read(folder / LOCK_FILE)
        if lockfile.sha256 != info.lockfile_sha256:
            reasons.append(f"{LOCK_FILE} was edited since envbuild wrote it")
        if not reasons:
            reasons += content_problems(lockfile.lock, inputs)
    return reasons or ["its recorded input hash differs"]


def fresh_info(inputs: LockInputs, folder: Path) -> LockInfo | None:
    """The lock's info when the lock is fresh, else None."""
    info = read_info(folder)
    if info is None or info.input_hash != inputs.input_hash or not (folder / LOCK_FILE).is_file():
        return None
    lockfile = LockFile.read(folder / LOCK_FILE)
    lock = lockfile.lock  # parsed either way: a corrupted lockfile is one clear error, not a silent relock
    if lockfile.sha256 != info.lockfile_sha256:
        return None
    # The sidecar's sha is no proof: whoever edits the lock can refresh it, so the content is checked too.
    if content_problems(lock, inputs):
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
    """One `envbuild lock` per env at a time; a second one waits, then sees the first one's work.

    The guard is a file lock in the env folder itself, so every process that writes this folder meets it
    (another container or host sharing the folder, a path spelled through a link), and a folder it cannot
    write is told before any solve. The guard goes away with its last holder, and folders this run had to
    create go when nothing was written into them: a lock run leaves only locks in the user's folder."""
    created = _missing_ancestors(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        guard = folder / GUARD_FILE
        handle = _acquire_guard(guard, folder, timeout)
    except OSError as exc:
        _remove_empty(created)
        raise EnvbuildError(f"{exc.filename or folder}: cannot write locks there ({exc.strerror or exc}); "
                            "choose a writable folder with --locks, or fix its permissions") from None
    except BaseException:
        _remove_empty(created)
        raise
    try:
        yield
    finally:
        release_lock(guard, handle)
        _remove_empty(created)


def _acquire_guard(path: Path, folder: Path, timeout: float) -> Any:
    def waiting() -> None:
        print(f"waiting for another envbuild lock on {folder} ...", file=sys.stderr)

    return acquire_lock(path, timeout, waiting,
                        lambda: EnvbuildError(f"{folder}: another envbuild lock held it for {timeout:.0f} s; "
                                              "try again"))


def _missing_ancestors(folder: Path) -> list[Path]:
    """`folder` and its parents that do not exist yet, deepest first."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    return missing


def _remove_empty(folders: list[Path]) -> None:
    for candidate in folders:
        try:
            candidate.rmdir()
        except OSError:
            return  # not empty (a lock was written) or already gone


# The cause of a failed lock, as a fix: (what the explanation says, what to do). Checked in order.
# An unreachable index on the pip side (uv's words) is fixed by --pip-index, not by a channel.
PIP_SIDE = ("uv found no pip packages", "uv resolving the pip packages")
PIP_UNREACHABLE_FIX = "check that the pip index is up and reachable (--pip-index URL gives another)"
SHOWN_ABOVE_FIX = "see conda-lock's explanation above"
NOT_SHOWN_FIX = "`envbuild lock SPEC --cuda X.Y` prints conda-lock's whole explanation"
FAILURE_FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("did not answer", "cannot reach", "connection", "timed out while", "urlopen error"),
     "check that the channel is up and reachable (--channel/--mirror give another)"),
    (("longer than",), "raise --timeout, or pin more packages so the solver has less to try"),
    (("no candidates were found", "nothing provides", "does not exist", "installation candidates"),
     "check the package's name and version, or add a channel that has it (--channel)"),
    (("conflict", "cannot be installed", "unsatisfiable", "cannot solve"),
     "relax the pins that conflict, or pin versions the channel has together"),
    (("cannot write", "no space", "read-only"), "free disk space, or lock into a writable folder (--locks)"),
)


def failure_line(message: str, shown_above: bool = False) -> str:
    """A failed lock's explanation as one line: its most telling sentence and a fix. `shown_above`:
    the whole explanation was printed before this line (only then may the fix point at it)."""
    if "\n" not in message and "; " in message:
        return message  # envbuild's own message: already a cause and a fix
    lines = [line.strip() for line in message.splitlines() if line.strip() and not line.startswith("hint:")]
    because = next((line.split("because of:", 1)[1].strip() for line in lines if "because of:" in line), None)
    telling = because or next((line for line in lines if any(
        marker in line.lower() for markers, _ in FAILURE_FIXES for marker in markers)), None)
    cause = (telling or (lines[-1] if lines else "conda-lock failed without output")).rstrip(".;")
    lowered = message.lower()
    fix = next((fix for markers, fix in FAILURE_FIXES if any(m in lowered for m in markers)), None)
    if fix is FAILURE_FIXES[0][1] and any(marker in message for marker in PIP_SIDE):
        fix = PIP_UNREACHABLE_FIX
    if fix is None:
        fix = SHOWN_ABOVE_FIX if shown_above and "\n" in message else NOT_SHOWN_FIX
    hint = next((line.removeprefix("hint: ") for line in message.splitlines() if line.startswith("hint:")), None)
    return f"{cause[:300]}; {hint or fix}"


def _prepare(job: Job, existing: Path) -> None:
    write_conda_lock_inputs(job.work, job.inputs)
    if job.update:
        if not existing.is_file():
            raise EnvbuildError(f"{existing}: --update needs an existing lock; run `envbuild lock` first")
        shutil.copyfile(existing, job.work / LOCK_FILE)


def refuse_mixed_cuda(lock: CondaLock, target: Target) -> None:
    """A lock whose torch, torchvision, ... are not all built for the target's CUDA is refused
    before anything is written: a valid solve, but not an environment that loads one CUDA runtime."""
    expected = {p: target.cuda if target.uses_cuda_on(p) else None for p in lock.metadata.platforms}
    problems = mixed_cuda_builds(lock, expected)
    if problems:
        raise EnvbuildError(f"{target.key}: not one CUDA build, so no lockfile was written: "
                            + "; ".join(problems)
                            + ". Pin those packages' builds in the spec (name=version=cudaXYZ*) or drop them")


def checked_info(job: Job) -> LockInfo:
    """The info of the new lockfile, once it passed the checks (one CUDA build)."""
    produced = LockFile.read(job.work / LOCK_FILE)  # one read: the sha recorded is of the bytes checked
    lock = produced.lock
    target = job.inputs.target
    refuse_mixed_cuda(lock, target)
    builds, counts = summarize(lock)
    return LockInfo(
        envbuild_version=__version__, input_hash=job.inputs.input_hash, env=target.name,
        target=target.key, torch=target.torch, cuda=cuda_json(target.cuda), platforms=list(target.platforms),
        channels=list(target.channels), pip_repositories=[target.pip_index] if target.pip_index else [],
        virtual_packages=job.inputs.virtual_packages, solver=job.solver.name,
        lockfile_sha256=produced.sha256, torch_builds=builds, package_counts=counts,
        inputs=job.inputs.material,
    )


CHECKED_FILE = "checked.json"


def check_in_child(job: Job) -> None:
    """In the target's forked child, right after conda-lock: read and check the new lockfile there,
    so targets are checked side by side instead of one after the other in the parent at the end
    (about 0.1 s each). The parent reads the verdict from CHECKED_FILE."""
    try:
        verdict = {"info": json.loads(checked_info(job).model_dump_json())}
    except EnvbuildError as exc:
        verdict = {"error": exc.message}
    (job.work / CHECKED_FILE).write_text(json.dumps(verdict), encoding="utf-8")


def _checked_in_child(job: Job) -> LockInfo | None:
    path = job.work / CHECKED_FILE
    if not path.is_file():
        return None  # the child did not get that far: the parent checks
    verdict = json.loads(path.read_text(encoding="utf-8"))
    if "error" in verdict:
        raise EnvbuildError(verdict["error"])
    return LockInfo.model_validate(verdict["info"])


def _commit(job: Job) -> LockResult:
    """Rename the checked lockfile and its info into place (the old lock kept until then)."""
    produced = job.work / LOCK_FILE
    target = job.inputs.target
    info = _checked_in_child(job) or checked_info(job)
    builds, counts = info.torch_builds, info.package_counts
    created = not job.folder.exists()
    job.folder.mkdir(parents=True, exist_ok=True)
    remove_stale_folders(job.folder, STAGED_PREFIX)
    staged_lock = job.folder / f"{owned_name(STAGED_PREFIX)}{LOCK_FILE}"
    staged_info = job.folder / f"{owned_name(STAGED_PREFIX)}{INFO_FILE}"
    for name in (LOCK_FILE, INFO_FILE):  # a device or FIFO put there is refused, never renamed over
        write_destination(job.folder / name, "the lock")
    try:
        shutil.copyfile(produced, staged_lock)
        staged_info.write_text(info.model_dump_json(indent=2) + "\n", encoding="utf-8")
        sync_file(staged_lock)
        sync_file(staged_info)
        # Two renames, each atomic: a kill between them leaves the new lockfile beside the old info,
        # whose lockfile_sha256 no longer matches, so the lock reads as stale (never half-written).
        os.replace(staged_lock, job.folder / LOCK_FILE)
        os.replace(staged_info, job.folder / INFO_FILE)
    except OSError as exc:
        raise EnvbuildError(f"{job.folder}: cannot write the lock ({exc.strerror or exc}); the previous lock "
                            "is unchanged; free disk space or fix the folder's permissions") from None
    finally:
        staged_lock.unlink(missing_ok=True)
        staged_info.unlink(missing_ok=True)
        if created:
            _remove_empty([job.folder])
    return LockResult(target.key, "locked", job.folder / LOCK_FILE, input_hash=info.input_hash,
                      torch_builds=builds, package_counts=counts, reasons=list(job.reasons))


def _timed_out(job: Job, elapsed: float, timeout: float) -> LockResult:
    return LockResult(job.inputs.target.key, "failed", job.folder / LOCK_FILE, elapsed,
                      message=f"locking took longer than {timeout:.0f} s and was stopped")


CHANNEL_TIMEOUT_ENV = envvars.CHANNEL_TIMEOUT
CHANNEL_TIMEOUT_S = 30.0


def channel_timeout() -> float:
    return envvars.seconds(CHANNEL_TIMEOUT_ENV, CHANNEL_TIMEOUT_S)


def probe_sources(target: Target, timeout: float | None = None) -> str | None:
    """Why a channel or index of `target` cannot serve a lock, found in seconds rather than after
    conda-lock waited out its own retries; None when every http(s) source answered (any status).

    A server that accepts the connection and then says nothing is the case that kept `lock`
    silent for minutes: its first response has to arrive within the timeout."""
    timeout = timeout or channel_timeout()
    urls = [f"{c.rstrip('/')}/noarch/repodata.json" for c in target.channels if c.startswith(("http://", "https://"))]
    if target.pip_index and target.pip_index.startswith(("http://", "https://")):
        urls.append(target.pip_index)
    for url in urls:
        problem = _probe(url, timeout)
        if problem:
            return problem
    return None


@functools.lru_cache(maxsize=64)
def _probe(url: str, timeout: float) -> str | None:
    shown = url.rsplit("/noarch/", 1)[0]
    silent = (f"{shown} accepted the connection but did not answer within {timeout:g} s "
              f"({CHANNEL_TIMEOUT_ENV} sets the wait)")
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout):
            return None  # the status line and headers arrived: it answers
    except urllib.error.HTTPError:
        return None  # it answered, with a status conda-lock explains if it matters
    except TimeoutError:
        return silent
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            return silent
        return f"cannot reach {shown} ({reason})"


def _finish(job: Job, exitcode: int, elapsed: float) -> LockResult:
    key = job.inputs.target.key
    log_path = job.work / "conda-lock.log"
    log_text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.is_file() else ""
    if exitcode != 0 or not (job.work / LOCK_FILE).is_file():
        explanation = explain_failure(log_text)
        return LockResult(key, "failed", job.folder / LOCK_FILE, elapsed,
                          message=explanation + pip_hint(job.inputs.target, explanation))
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
    progress: Progress = to_stderr,
) -> list[LockResult]:
    """Lock every target whose inputs changed (all of them with `force` or `update`). `progress` hears each
    target's steps: checking its sources, solving, and how it ended."""
    if not targets:
        return []
    if not (force or update):
        unchanged = _all_unchanged(targets, lock_root, solver)
        if unchanged is not None:
            return unchanged
    env_folder = default_lock_dir(targets[0], lock_root).parent
    with env_file_lock(env_folder, timeout=timeout * max(1, len(targets))):
        results: dict[str, LockResult] = {}
        jobs: list[Job] = []
        solver_path = find_solver(solver)
        all_inputs = [lock_inputs(target, solver_path.name) for target in targets]
        for inputs in all_inputs if update else ():
            check_update_names(update, inputs)
        # Named after this process: what a run killed with SIGKILL left, the next run removes.
        remove_stale_folders(Path(tempfile.gettempdir()), SCRATCH_PREFIX)
        scratch = Path(tempfile.mkdtemp(prefix=owned_name(SCRATCH_PREFIX)))
        try:
            for target, inputs in zip(targets, all_inputs, strict=True):
                planned = _plan(target, inputs, default_lock_dir(target, lock_root), force=force, update=update,
                                solver_path=solver_path, scratch=scratch, progress=progress)
                if isinstance(planned, LockResult):
                    results[target.key] = planned
                    progress(result_event(planned))
                else:
                    jobs.append(planned)
            # A target's process waits on its solver calls much of the time: twice the cores keeps
            # them busy (3 targets on 2 cores: 2.4 s with 3 processes, 2.8 s with 2).
            workers = parallel or min(len(jobs), 2 * (os.cpu_count() or 1)) or 1
            with solver_service(scratch, solver_path, bool(jobs)):
                finish = _told(_finish, progress)
                stopped = _told(functools.partial(_timed_out, timeout=timeout), progress)
                for result in run_jobs(jobs, workers, timeout, finish, stopped, check_in_child,
                                       progress) if jobs else []:
                    results[result.target] = result
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return [results[t.key] for t in targets]


def result_event(result: LockResult) -> Event:
    """How a target's lock ended, as its last progress event."""
    if result.status == "failed":
        return Event(result.target, "failed", failure_line(result.message).split("; ", 1)[0])
    if result.status == "unchanged":
        return Event(result.target, "done", "unchanged: its inputs are those of its lock")
    return Event(result.target, "done", f"{result.status} in {result.seconds:.1f} s")


def _told(make: Callable[..., LockResult], progress: Progress) -> Callable[..., LockResult]:
    """`make` (a job's result from its end), telling `progress` how it ended."""
    def told(*args: Any) -> LockResult:
        result = make(*args)
        progress(result_event(result))
        return result
    return told


def _plan(target: Target, inputs: LockInputs, folder: Path, *, force: bool, update: Sequence[str],
          solver_path: Path, scratch: Path, progress: Progress = to_stderr) -> LockResult | Job:
    """What this run does for one target: nothing (its lock is fresh), fail it alone (a corrupted lock, an
    unreachable source), or a solve job."""
    try:
        info = None if force or update else fresh_info(inputs, folder)
    except EnvbuildError as exc:  # a corrupted lockfile fails its target, not the others
        return LockResult(target.key, "failed", folder / LOCK_FILE, message=exc.message)
    if info is not None:
        return LockResult(target.key, "unchanged", folder / LOCK_FILE, input_hash=inputs.input_hash,
                          torch_builds=info.torch_builds, package_counts=info.package_counts)
    progress(Event(target.key, "start", "checking that its channels answer"))
    unreachable = probe_sources(target)
    if unreachable:
        return LockResult(target.key, "failed", folder / LOCK_FILE, message=unreachable)
    reasons = _relock_reasons(inputs, folder, force, update)
    job = Job(inputs, folder, solver_path, tuple(update), scratch / target.key, tuple(reasons))
    _prepare(job, folder / LOCK_FILE)
    return job


def _all_unchanged(targets: Sequence[Target], lock_root: Path | None, solver: str | None) -> list[LockResult] | None:
    """Every target's result when all locks are fresh, else None; read without the env's file lock.

    A lock and its info are each renamed into place whole, and a lock is fresh only when the info
    names this lockfile's sha256, so a half-finished write elsewhere reads as stale (and the caller
    then waits for the file lock), never as fresh. The no-op run neither waits nor imports filelock."""
    solver_name = find_solver(solver).name
    results = []
    for target in targets:
        inputs = lock_inputs(target, solver_name)
        folder = default_lock_dir(target, lock_root)
        try:
            info = fresh_info(inputs, folder)
        except EnvbuildError:
            return None
        if info is None:
            return None
        results.append(LockResult(target.key, "unchanged", folder / LOCK_FILE, input_hash=inputs.input_hash,
                                  torch_builds=info.torch_builds, package_counts=info.package_counts))
    return results


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


def _relock_reasons(inputs: LockInputs, folder: Path, force: bool, update: Sequence[str]) -> list[str]:
    if update:
        return [f"--update {' '.join(update)}"]
    if force:
        return ["--force"]
    if not (folder / LOCK_FILE).is_file():
        return ["no lock yet"]
    return why_stale(inputs, folder)


def check_targets(targets: Sequence[Target], *, lock_root: Path | None = None,
                  solver: str | None = None) -> list[LockResult]:
    """For CI: which locks are fresh, stale (and why) or missing, without solving anything."""
    results = []
    solver_name = find_solver(solver).name
    for target in targets:
        inputs = lock_inputs(target, solver_name)
        folder = default_lock_dir(target, lock_root)
        try:
            status, reasons = lock_status(inputs, folder)
        except EnvbuildError as exc:  # a corrupted lockfile: stale, with the reason
            status, reasons = "stale", [exc.message]
        message = {"stale": f"stale: {'; '.join(reasons)}", "missing": "no committed lock"}.get(status, "")
        hint = relock_hint(target, lock_root, folder) if status in ("stale", "missing") else ""
        results.append(LockResult(target.key, status, folder / LOCK_FILE, input_hash=inputs.input_hash,
                                  message=message, reasons=reasons, hint=hint))
    return results

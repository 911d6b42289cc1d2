"""The main job for one target, stage by stage: lock (if stale) -> build context -> image."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from builder.errors import EnvbuildError
from builder.events import Progress, to_stderr
from builder.image.build import BuildOptions, ImageResult, build_image, push_image
from builder.image.context import make_context
from builder.image.render import checked_ca_files
from builder.lock.location import default_lock_dir
from builder.lock.targets import LOCK_FILE, check_targets, failure_line, lock_targets
from builder.proc import owned_name, remove_stale_folders
from builder.safe_io.oserrors import os_error_reason
from builder.specs.target import Target

CONTEXT_PREFIX = "envbuild-context"


@dataclass(frozen=True)
class LockPolicy:
    """Where a target's lock lives, and what a stale one means: lock it again (with `solver`), or fail (`frozen`)."""

    lock_root: Path | None = None  # default: next to the spec, <env>/locks
    frozen: bool = False
    solver: str | None = None  # micromamba, mamba or conda; default: found on PATH, else envbuild's


def ensure_lock(target: Target, locks: LockPolicy = LockPolicy(), progress: Progress = to_stderr) -> Path:
    """The target's lockfile, fresh for its inputs; locked now when allowed, else a clear error. `progress`
    hears the solve's steps when it locks."""
    checked = check_targets([target], lock_root=locks.lock_root, solver=locks.solver)[0]
    if checked.status == "fresh":
        return default_lock_dir(target, locks.lock_root) / LOCK_FILE
    if locks.frozen:
        why = f" ({'; '.join(checked.reasons)})" if checked.reasons else ""
        raise EnvbuildError(f"{target.key}: the lock is {checked.status}{why}; run `envbuild lock` first "
                            "(or drop --frozen)")
    result = lock_targets([target], lock_root=locks.lock_root, solver=locks.solver, progress=progress)[0]
    if result.status == "failed":
        raise EnvbuildError(f"{target.key}: lock failed: {failure_line(result.message)}")
    return result.path


def build_target_image(
    target: Target,
    *,
    locks: LockPolicy = LockPolicy(),
    options: BuildOptions = BuildOptions(),
    push: str | None = None,
    echo: Callable[[str], None] = lambda line: None,
    lock_path: Path | None = None,
    client=None,
) -> ImageResult:
    """The image of one target; from `lock_path` when the caller already ensured the lock."""
    # Named after this process: a run killed with SIGKILL cannot clean up, the next one does.
    remove_stale_folders(Path(tempfile.gettempdir()), CONTEXT_PREFIX)
    # A CA file that is not a certificate fails in a moment, not after a lock.
    checked_ca_files(target)
    if lock_path is None:
        lock_path = ensure_lock(target, locks)
    try:
        root = Path(tempfile.mkdtemp(prefix=owned_name(CONTEXT_PREFIX) + f"{target.key}-"))
    except OSError as exc:
        raise _context_error(target, exc) from None
    try:
        try:
            context = make_context(target, lock_path, root / "context", options.platform)
        except OSError as exc:
            raise _context_error(target, exc) from None
        result = build_image(context, options, echo=echo, client=client)
        if push:
            pushed = push_image(result, push, echo=echo, client=client)
            result.pushed, result.pushed_by_digest = pushed.references, pushed.by_digest
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _context_error(target: Target, exc: OSError) -> EnvbuildError:
    """The build context is written under TMPDIR: a full or read-only one is said as such, in one line
    (a failed copy of the installer's package names every file it could not copy)."""
    return EnvbuildError(f"{target.key}: cannot write the build context in {tempfile.gettempdir()} "
                         f"({os_error_reason(exc)}); free disk space there, or point TMPDIR at a disk with room")

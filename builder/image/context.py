"""The build context of one target: Dockerfile, the locked install plan, the installer, the smoke suite.

Made from a Target and its lock (never from the spec file): the lock stage's output is the only
source of what gets installed.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import builder
from builder.errors import EnvbuildError
from builder.formats.conda_lock import CondaLock, LockFile
from builder.generated_files import write_owned_folder
from builder.image.layers import BOOTSTRAP, runtime_steps, split_plan
from builder.image.render import LAYER_EPOCH, RenderedEnv, layer_source, render_target, write_context
from builder.lock.install import RUNS_ALONE_WITH, InstallPlan, export_platform_plan
from builder.lock.targets import check_targets
from builder.specs.target import Target

IMAGE_PLATFORM_SUBDIR = {"linux/amd64": "linux-64", "linux/arm64": "linux-aarch64"}


@dataclass(frozen=True)
class BuildContext:
    target: Target
    root: Path
    lock_hash: str  # sha256 of the conda-lock.yml the image installs
    subdir: str
    rendered: RenderedEnv

    @property
    def dockerfile(self) -> str:
        return self.rendered.dockerfile


# builder/__init__.py of the installer copy. A regular package, so no `builder` elsewhere on the image's
# path can take its place; and not envbuild's own __init__.py, whose __version__ would enter the cache key
# of every layer group (the installer is COPYed before them): an upgrade would rebuild the CUDA layers.
INSTALLER_PACKAGE_MARKER = b'"""envbuild\'s installer, run alone: python -m builder.lock.install."""\n'


def installer_sources(destination: Path, source: Path | None = None) -> None:
    """The envbuild files the in-container installer runs with alone, from `source` (this package by
    default) into `destination/builder`: the same bytes for every envbuild version whose installer
    files are the same."""
    source = Path(builder.__file__).parent if source is None else source
    package = destination / "builder"
    for name in RUNS_ALONE_WITH:
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, package / name)
    (package / "__init__.py").write_bytes(INSTALLER_PACKAGE_MARKER)


def _installer_files(destination: Path) -> None:
    """The in-container installer: the envbuild files it runs with alone, and the rattler package.

    The builder image needs only a Python >= 3.10; py-rattler has no dependencies and is abi3.
    rattler goes in as a zip (27 MB instead of 82): the runtime stage's layers keep every byte copied
    into them, and each RUN unpacks it to /tmp and removes it again."""
    import rattler

    installer_sources(destination)
    _zip_package(Path(rattler.__file__).parent, destination / RATTLER_ZIP)


RATTLER_ZIP = "rattler.zip"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def _zip_package(package: Path, archive: Path) -> None:
    """The package folder as a zip with the folder's name at its top; same files, same bytes (fixed
    order, times and modes)."""
    files = sorted(path for path in package.rglob("*")
                   if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc")
    with zipfile.ZipFile(archive, "w") as out:
        for path in files:
            info = zipfile.ZipInfo(f"{package.name}/{path.relative_to(package).as_posix()}", _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            out.writestr(info, path.read_bytes(), compresslevel=1)


def _plan_json(plan: dict[str, Any]) -> bytes:
    return json.dumps(plan, indent=1, sort_keys=True).encode()


def _group_plans(lock: CondaLock, plan: InstallPlan) -> dict[str, InstallPlan]:
    """Each layer group's part of `plan` (builder/data/layers.yaml), in install order, by the
    dependency records of the lock's packages of the plan's platform."""
    dependencies: dict[str, tuple[str, ...]] = {}
    for dep in lock.package:
        if dep.platform == plan.platform:
            dependencies[dep.name] = (*dependencies.get(dep.name, ()), *dep.dependencies)
    return split_plan(plan, dependencies)


def _fix_mtimes(top: Path) -> None:
    """One mtime for everything a `COPY DIR/ /` takes from the context (the folders too), so those
    layers are the same on every build of the same lock."""
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.utime(Path(folder) / name, (LAYER_EPOCH, LAYER_EPOCH), follow_symlinks=False)
    os.utime(top, (LAYER_EPOCH, LAYER_EPOCH))


def make_context(target: Target, lock_path: Path, root: Path, image_platform: str = "linux/amd64") -> BuildContext:
    """The build context under `root`. The lock is read from disk once: the hash the image is labelled with
    and the content that gives the platform check and the install plan are of the same bytes."""
    subdir = IMAGE_PLATFORM_SUBDIR.get(image_platform)
    if subdir is None:
        raise EnvbuildError(f"--platform {image_platform}: envbuild builds linux/amd64 or linux/arm64 images")
    lockfile = LockFile.read(lock_path)
    lock = lockfile.lock
    if subdir not in lock.metadata.platforms:
        raise EnvbuildError(
            f"{lock_path}: locked for {', '.join(lock.metadata.platforms)}, not {subdir}; "
            f"add {subdir} to the target's platforms and run `envbuild lock`"
        )
    lock_hash = lockfile.sha256
    plan = export_platform_plan(lock, subdir, str(lock_path))  # a bad lock: one EnvbuildError line, here
    groups = _group_plans(lock, InstallPlan.from_json_dict(plan, str(lock_path)))
    steps = runtime_steps(groups)
    rendered = render_target(target, lock_hash, steps)
    root.mkdir(parents=True, exist_ok=True)
    plans = {"envbuild/plan.json": _plan_json(plan)}
    for name in (BOOTSTRAP, *(step.group for step in steps)):
        plans[f"{layer_source(name)}/opt/envbuild/plans/{name}.json"] = _plan_json(groups[name].to_json_dict())
    write_context(rendered, root, plans)
    (root / "envbuild" / "conda-lock.yml").write_bytes(lock_path.read_bytes())
    _installer_files(root / layer_source("installer") / "opt" / "envbuild" / "installer")
    _fix_mtimes(root / layer_source(""))
    (root / ".dockerignore").write_text("**/__pycache__\n**/*.pyc\n", encoding="utf-8")
    return BuildContext(target, root, lock_hash, subdir, rendered)


@dataclass(frozen=True)
class RenderedContext:
    """What `envbuild render` wrote for one target: a build context when the lock was fresh."""

    target: str
    path: Path
    buildable: bool
    lockfile: Path | None
    note: str = ""

    def as_dict(self) -> dict:
        return {"target": self.target, "path": str(self.path), "buildable": self.buildable,
                "lockfile": str(self.lockfile) if self.lockfile else None, "note": self.note}


def render_context(target: Target, out: Path, *, lock_root: Path | None = None,
                   image_platform: str = "linux/amd64", solver: str | None = None) -> RenderedContext:
    """The folder a user can hand to `docker build` (any engine): the same context `envbuild image`
    builds, from the target's fresh lock. Without one, only the rendered files, and a note why.

    Written whole or not at all, into a new folder or one envbuild wrote before and nobody changed."""
    checked = check_targets([target], lock_root=lock_root, solver=solver)[0]
    if checked.status == "fresh":
        write_owned_folder(out, lambda staging: make_context(target, checked.path, staging, image_platform),
                           "envbuild render")
        return RenderedContext(target.key, out, True, checked.path)
    rendered = render_target(target)
    write_owned_folder(out, lambda staging: write_context(rendered, staging), "envbuild render")
    why = f" ({'; '.join(checked.reasons)})" if checked.reasons else ""
    return RenderedContext(target.key, out, False, None,
                           f"the lock is {checked.status}{why}: run `envbuild lock`, then render again "
                           "for a folder `docker build` can build")


def render_contexts(targets: Sequence[Target], out: Path | None = None, **options: Any) -> list[RenderedContext]:
    """`render_context` for each target: into `out` for one target, `out/<target>` for several, by
    default build/<env>/<target>."""
    written = []
    for target in targets:
        if out is None:
            folder = Path("build") / target.name / target.key
        elif len(targets) == 1:
            folder = out
        else:
            folder = out / target.key
        written.append(render_context(target, folder, **options))
    return written

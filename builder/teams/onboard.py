"""`envbuild onboard`: a new team member's path from a spec to a working local environment.

target (asked for, or the newest this host runs, by doctor's verdicts) -> a fresh lock -> the
environment, installed from the lock into a prefix -> a Jupyter kernel when the env has ipykernel
-> the smoke suite run by the env's own python -> what to do next. `--image` builds or pulls the
target's image instead and says how to run it.

Environments live in a prefix: `--prefix DIR`, or `--name NAME` under the envs folder
(`$ENVBUILD_ENVS_DIR`, default the user data folder's `envbuild/envs`, from platformdirs:
`~/.local/share/envbuild/envs` on Linux, or `~/.envbuild/envs` where an earlier envbuild made it).
An envbuild environment carries a marker (`conda-meta/envbuild-env`, not `*.json`: conda reads every
`conda-meta/*.json` as a package record), so a second onboarding can tell its own env (replaced, or
kept when the lock is unchanged) from a folder it must not touch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from builder import __version__, envvars, proc
from builder.engine import EngineUnreachable, docker_client
from builder.errors import EnvbuildError, UsageError
from builder.events import Progress, ignore, read_event_line, to_stderr
from builder.formats.conda_lock import lockfile_sha256
from builder.gpu_access import GpuAccess, client_gpu_access, docker_run_gpu_flag
from builder.host.doctor import (
    MINOR_COMPAT,
    NEEDS_FIX,
    RUNS,
    HostFacts,
    TargetVerdict,
    diagnose,
    gather_host_facts,
)
from builder.image.build import BuildOptions
from builder.image.build import pull_image as pull_registry_image
from builder.image.pipeline import LockPolicy, build_target_image, ensure_lock
from builder.image.smoke_run import SmokeRun, run_local
from builder.lock.install import export_platform_plan
from builder.lock.targets import conda_tool_on_path
from builder.safe_io.reading import read_bounded
from builder.safe_io.writing import WriteError, write_file
from builder.specs.cuda import CudaVersion, cuda_json, cuda_or_cpu
from builder.specs.features import compiles
from builder.specs.model import Feature
from builder.specs.target import Target

ENVS_DIR_ENV = envvars.ENVS_DIR
LEGACY_ENVS_DIR = Path("~/.envbuild/envs")  # where envbuild put environments before it asked platformdirs
MARKER = Path("conda-meta") / "envbuild-env"
MAX_MARKER_BYTES = 64 * 1024  # a few hundred bytes of JSON
OWN_INSTALLER = "envbuild"
KERNEL_NAME = re.compile(r"[^A-Za-z0-9._-]+")
INSTALL_TIMEOUT_S = 3600.0
SMOKE_TIMEOUT_S = 900.0
# Only the driver and GPUs decide the target; an absent engine must not hold onboarding up.
ENGINE_TIMEOUT_S = 3.0
# A tool's last lines are enough to say why an install failed.
TAIL_LINES = 5


# --- choosing the target ------------------------------------------------------------------------

@dataclass(frozen=True)
class TargetChoice:
    target: Target
    reason: str
    verdict: str  # doctor's verdict for this target on this host


def choose_target(targets: Sequence[Target], facts: HostFacts, asked: bool, platform: str) -> TargetChoice:
    """The target to onboard: the one asked for, else the newest CUDA target this host runs fully,
    else the newest it runs under minor-version compatibility, else the CPU target."""
    usable = [t for t in targets if platform in t.platforms]
    if not usable:
        listed = ", ".join(f"{t.key} ({' '.join(t.platforms)})" for t in targets)
        raise UsageError(f"no target of {targets[0].name} is made for {platform}: {listed}")
    verdicts = {v.target: v for v in diagnose(facts, usable).targets}
    if asked:
        [target] = usable
        verdict = verdicts[target.key]
        return TargetChoice(target, f"asked for with --cuda; on this host: {_verdict_text(verdict)}", verdict.verdict)
    for wanted in (RUNS, MINOR_COMPAT):
        runnable = {t.cuda: t for t in usable if t.cuda and verdicts[t.key].verdict == wanted}
        if runnable:
            target = runnable[max(runnable)]
            return TargetChoice(target, f"the newest CUDA target this host runs: {_verdict_text(verdicts[target.key])}",
                                wanted)
    cpu = next((t for t in usable if t.cuda is None), None)
    by_verdict: dict[str, list[str]] = {}
    for verdict in verdicts.values():
        if verdict.cuda:
            by_verdict.setdefault(verdict.verdict, []).append(verdict.target)
    why = "; ".join(f"{', '.join(keys)}: {word}" for word, keys in by_verdict.items())
    if cpu is None:
        raise EnvbuildError(f"no target of {targets[0].name} runs on this host and it has no CPU target ({why}); "
                            "name one with --cuda, or run `envbuild doctor` for the fixes")
    reason = "no CUDA target runs here" + (f" ({why}; `envbuild doctor` says why)" if why else "")
    return TargetChoice(cpu, f"{reason}, so the CPU target", verdicts[cpu.key].verdict)


def _verdict_text(verdict: TargetVerdict) -> str:
    """The verdict and its first problem, else its first finding (the driver's, for CUDA targets)."""
    worth = [f for f in verdict.findings if f.level in NEEDS_FIX] or list(verdict.findings)
    if not worth:
        return verdict.verdict
    # "does not run (why)" already carries its brackets: the finding follows after a colon, not a second pair.
    if verdict.verdict.endswith(")"):
        return f"{verdict.verdict}: {worth[0].message}"
    return f"{verdict.verdict} ({worth[0].message})"


def choose_for_this_host(targets: Sequence[Target], asked: bool, platform: str) -> tuple[TargetChoice, int]:
    """The choice on this host's facts, and how many GPUs it has."""
    facts = gather_host_facts(engine_timeout=ENGINE_TIMEOUT_S)
    return choose_target(targets, facts, asked, platform), len(facts.gpus)


def host_platform() -> str:
    import rattler

    return str(rattler.Platform.current())


# --- where the environment goes -----------------------------------------------------------------

def envs_dir() -> Path:
    """$ENVBUILD_ENVS_DIR; else ~/.envbuild/envs when an earlier envbuild made it (its environments stay where
    their kernels and PATH lines point); else this system's user data folder (platformdirs), `envbuild/envs`."""
    explicit = envvars.folder(ENVS_DIR_ENV)
    if explicit is not None:
        return explicit
    legacy = LEGACY_ENVS_DIR.expanduser()
    return legacy if legacy.is_dir() else new_envs_dir()


def new_envs_dir() -> Path:
    from platformdirs import user_data_path

    return user_data_path("envbuild", appauthor=False) / "envs"


def envs_dir_note() -> str | None:
    """Why the environments go to ~/.envbuild/envs, when they do; None otherwise."""
    if envvars.folder(ENVS_DIR_ENV) is not None or envs_dir() != LEGACY_ENVS_DIR.expanduser():
        return None
    return (f"environments stay in {envs_dir()}, where an earlier envbuild put them; without that folder they go to "
            f"{new_envs_dir()} ({ENVS_DIR_ENV} chooses another)")


def choose_prefix(target: Target, prefix: Path | None, name: str | None) -> Path:
    if prefix is not None and name is not None:
        raise UsageError("give --prefix DIR or --name NAME, not both")
    if name is not None and (not name or "/" in name or name in (".", "..")):
        raise UsageError(f"--name {name!r}: a plain folder name, e.g. {target.name}-{target.key}")
    chosen = prefix if prefix is not None else envs_dir() / (name or f"{target.name}-{target.key}")
    chosen = Path(os.path.abspath(chosen.expanduser()))
    _check_writable(chosen)
    return chosen


def _check_writable(prefix: Path) -> None:
    """Before any slow lock: can an environment be made there? (Tried, not guessed from modes:
    root ignores them, a read-only filesystem does not.)"""
    existing = next((p for p in (prefix.parent, *prefix.parent.parents) if p.exists()), Path("/"))
    try:
        probe = tempfile.mkdtemp(prefix=".envbuild-probe-", dir=existing)
        os.rmdir(probe)
    except OSError as exc:
        raise EnvbuildError(f"cannot create the environment at {prefix}: {existing} is not writable "
                            f"({exc.strerror or exc}); choose another --prefix") from None


@dataclass(frozen=True)
class EnvMarker:
    """What envbuild wrote into an environment it made."""

    env: str
    target: str
    torch: str
    cuda: str | None
    lock_sha256: str
    installer: str
    envbuild_version: str = __version__

    @classmethod
    def read(cls, prefix: Path) -> EnvMarker | None:
        try:
            data = json.loads(read_bounded(prefix / MARKER, MAX_MARKER_BYTES, "environment marker", EnvbuildError))
            return cls(**{k: data[k] for k in ("env", "target", "torch", "cuda", "lock_sha256", "installer")})
        except (EnvbuildError, ValueError, KeyError, TypeError):
            return None

    def write(self, prefix: Path) -> None:
        (prefix / MARKER).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")


def prefix_status(prefix: Path, target: Target, lock_sha256: str) -> str:
    """new (absent or empty), unchanged (envbuild's env of this target from this lock) or replace
    (envbuild's env of this target from another lock); anything else is refused."""
    if not prefix.exists():
        return "new"
    if not prefix.is_dir():
        raise EnvbuildError(f"{prefix} is a file, not an environment folder; choose another --prefix")
    if not any(prefix.iterdir()):
        return "new"
    marker = EnvMarker.read(prefix)
    if marker is None:
        raise EnvbuildError(f"{prefix} is not empty and is not an envbuild environment: refusing to overwrite it; "
                            "choose another --prefix or --name, or remove the folder yourself")
    if (marker.env, marker.target) != (target.name, target.key):
        raise EnvbuildError(f"{prefix} holds envbuild environment {marker.env} ({marker.target}), not "
                            f"{target.name} ({target.key}): refusing to overwrite it; "
                            "choose another --prefix or --name")
    return "unchanged" if marker.lock_sha256 == lock_sha256 else "replace"


# --- installing ---------------------------------------------------------------------------------

def find_installer(choice: str = "auto") -> Path | None:
    """A real micromamba, mamba or conda (`auto`: the first on PATH); None: envbuild's verified installer."""
    if choice == OWN_INSTALLER:
        return None
    if choice != "auto":
        found = shutil.which(choice)
        if not found:
            raise UsageError(f"--installer {choice!r}: not found; give a path, a name on PATH, auto or envbuild")
        return Path(found)
    return conda_tool_on_path()


def installer_name(tool: Path | None) -> str:
    return tool.name if tool else OWN_INSTALLER


def install_environment(lock_path: Path, platform: str, prefix: Path, tool: Path | None,
                        marker: EnvMarker, timeout: float = INSTALL_TIMEOUT_S, progress: Progress = ignore) -> None:
    """Install `platform` of the lock into `prefix`; an env already there is replaced only once the
    new one is complete, and a failed install leaves the prefix as it was. `progress` hears envbuild's
    own installer's steps (micromamba and conda show their own)."""
    try:
        _install(lock_path, platform, prefix, tool, marker, timeout, progress)
    except OSError as exc:
        raise EnvbuildError(f"cannot create the environment at {prefix}: {exc.strerror or exc} "
                            f"({exc.filename or prefix}); choose another --prefix") from None


def _install(lock_path: Path, platform: str, prefix: Path, tool: Path | None, marker: EnvMarker,
             timeout: float, progress: Progress = ignore) -> None:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    recover_interrupted(prefix)
    if tool is None:
        # rattler writes the final prefix into the files while it fills a sibling folder, so the
        # new env can be renamed into place whole. The staging env and the installer's downloads
        # share one folder named after this process: what a kill -9 leaves, the next onboard
        # removes whole (recover_interrupted).
        owned = Path(tempfile.mkdtemp(prefix=proc.owned_name(_aside_prefix(prefix, "new")), dir=prefix.parent))
        try:
            staging, work = owned / "env", owned / "work"
            staging.mkdir()
            work.mkdir()
            _run_own_installer(lock_path, platform, prefix, staging, work, timeout, progress=progress)
            marker.write(staging)
            _swap_in(staging, prefix)
        finally:
            shutil.rmtree(owned, ignore_errors=True)
        return
    # micromamba and conda install at the final path: the old env waits beside it until the new one works.
    backup = _move_aside(prefix)
    try:
        _run_tool(tool, lock_path, prefix, timeout)
        marker.write(prefix)
    except BaseException:
        shutil.rmtree(prefix, ignore_errors=True)
        if backup is not None:
            os.rename(backup, prefix)
        raise
    if backup is not None:
        _retire(backup, prefix)


def _aside_prefix(prefix: Path, what: str) -> str:
    return f".{prefix.name}.envbuild-{what}"


def _aside_name(prefix: Path, what: str) -> Path:
    return prefix.parent / (proc.owned_name(_aside_prefix(prefix, what)) + "env")


def recover_interrupted(prefix: Path) -> None:
    """What an onboard killed mid-install left beside the prefix (it could not clean up after kill -9):
    a half-filled staging env is removed; an old env moved aside is put back when no env took its place."""
    proc.remove_stale_folders(prefix.parent, _aside_prefix(prefix, "new"))
    proc.remove_stale_folders(prefix.parent, _aside_prefix(prefix, "done"))
    for backup in proc.stale_folders(prefix.parent, _aside_prefix(prefix, "old")):
        # What the prefix holds is decided before anything is removed: a folder named like a backup
        # proves nothing (anyone can make one), so only envbuild's own moves are undone.
        held = _interrupted_state(prefix, backup)
        if held == "not ours":
            raise EnvbuildError(f"{prefix} is not an envbuild environment, and {backup.name} beside it is a stale "
                                "backup of one: refusing to remove either; move one of them away yourself")
        if held == "complete":  # killed after the new env was whole: the old one is what goes
            _retire(backup, prefix)
            continue
        if held == "half":
            shutil.rmtree(prefix)
        os.rename(backup, prefix)


def _interrupted_state(prefix: Path, backup: Path) -> str:
    """What a killed install left at `prefix` next to its moved-aside `backup`: absent (nothing
    there), complete (a new envbuild env), half (an env the installer was filling) or not ours.
    Only a real folder holding envbuild's marker is a backup envbuild made."""
    if backup.is_symlink() or not backup.is_dir() or EnvMarker.read(backup) is None:
        return "not ours"
    if not os.path.lexists(prefix):
        return "absent"
    if prefix.is_symlink() or not prefix.is_dir():
        return "not ours"
    if EnvMarker.read(prefix) is not None:
        return "complete"
    entries = {entry.name for entry in prefix.iterdir()}
    # micromamba and conda create conda-meta/ first; an empty folder is one they had just made
    return "half" if not entries or "conda-meta" in entries else "not ours"


def _retire(backup: Path, prefix: Path) -> None:
    """The old env, once the new one is complete: renamed first, so a kill while removing it cannot
    make a later run mistake a half-removed old env for one to put back."""
    done = _aside_name(prefix, "done")
    os.rename(backup, done)
    shutil.rmtree(done, ignore_errors=True)


def _move_aside(prefix: Path) -> Path | None:
    if not prefix.exists():
        return None
    backup = _aside_name(prefix, "old")
    os.rename(prefix, backup)
    return backup


def _swap_in(staging: Path, prefix: Path) -> None:
    backup = _move_aside(prefix)
    try:
        os.rename(staging, prefix)
    except OSError:
        if backup is not None:
            os.rename(backup, prefix)
        raise
    if backup is not None:
        _retire(backup, prefix)


def _run_own_installer(lock_path: Path, platform: str, prefix: Path, staging: Path, work: Path,
                       timeout: float, progress: Progress = ignore) -> None:
    """builder.lock.install in a child process: py-rattler can crash at interpreter exit, and that must
    not take this process's report with it (the child leaves through os._exit). `work` holds its plan
    and downloads; its steps come back as event lines on its stderr (--progress)."""
    plan = export_platform_plan(lock_path, platform)
    plan_file = work / "plan.json"
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    command = [sys.executable, "-m", "builder.lock.install", "--plan", str(plan_file), "--prefix", str(prefix),
               "--staging", str(staging), "--cache-dir", str(work / "cache"), "--timeout", str(timeout), "--progress"]
    _run(command, timeout + 60, "envbuild's installer", progress)


def tool_command(tool: Path, lock_path: Path, prefix: Path) -> list[str]:
    """conda-lock's own install: it speaks micromamba's, mamba's and conda's dialects, pip entries included."""
    return [sys.executable, "-m", "conda_lock", "install", "--conda", str(tool), "--prefix", str(prefix),
            "--log-level", "WARNING", str(lock_path)]


def _run_tool(tool: Path, lock_path: Path, prefix: Path, timeout: float) -> None:
    _run(tool_command(tool, lock_path, prefix), timeout, f"conda-lock install with {tool}")


def _run(command: list[str], timeout: float, what: str, progress: Progress = ignore) -> None:
    # Its own session, so a timeout, Ctrl-C or envbuild's death stops what it started too
    # (micromamba, pip): nothing may go on writing into the prefix while the old env is put back.
    def hear(line: str) -> None:
        event = read_event_line(line.strip())
        if event is not None:
            progress(event)
    try:
        done = proc.run(command, timeout=timeout, what=what, stderr_line=hear)
    except proc.ProcessTimeout as exc:
        raise EnvbuildError(f"{exc}; nothing was changed") from None
    if done.returncode != 0:
        tail = " | ".join(done.last_lines(TAIL_LINES)) or f"exit status {done.returncode}"
        raise EnvbuildError(f"{what} failed: {tail}")


# --- Jupyter kernel -----------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelResult:
    name: str
    display_name: str
    path: Path | None  # kernel.json, None when the env has no ipykernel
    hint: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "display_name": self.display_name,
                "path": str(self.path) if self.path else None, "hint": self.hint}


def has_ipykernel(prefix: Path) -> bool:
    """conda-meta records a conda ipykernel; a pip one leaves its dist-info."""
    return (any((prefix / "conda-meta").glob("ipykernel-*.json"))
            or any(prefix.glob("lib/python*/site-packages/ipykernel-*.dist-info")))


def kernels_dir(explicit: Path | None = None) -> Path:
    if explicit is not None:
        return explicit
    try:
        from jupyter_core.paths import jupyter_data_dir
    except ImportError:
        # jupyter_core's own rule with platformdirs (JUPYTER_PLATFORM_DIRS, its coming default); on Linux
        # also its present one: $XDG_DATA_HOME/jupyter, else ~/.local/share/jupyter.
        from platformdirs import user_data_path

        explicit_dir = os.environ.get("JUPYTER_DATA_DIR")
        data_dir = Path(explicit_dir).expanduser() if explicit_dir else user_data_path("jupyter", appauthor=False)
    else:
        data_dir = Path(jupyter_data_dir())
    return data_dir / "kernels"


def display_name(target: Target) -> str:
    runtime = f"CUDA {target.cuda}" if target.cuda else "CPU"
    return f"{target.name} ({runtime}, torch {target.torch})"


def register_kernel(prefix: Path, target: Target, name: str, folder: Path | None = None,
                    spec_path: Path | None = None) -> KernelResult:
    """Write the kernelspec `ipykernel install` would write: it needs no run of the env's python."""
    kernel_name = KERNEL_NAME.sub("-", name).strip("-").lower() or "envbuild"
    title = display_name(target)
    if not has_ipykernel(prefix):
        where = f" of {spec_path}" if spec_path else ""
        return KernelResult(kernel_name, title, None,
                            f"no ipykernel in this environment: add `ipykernel` to the conda list{where} and "
                            "onboard again to get a Jupyter kernel")
    kernel_folder = kernels_dir(folder) / kernel_name
    spec = {
        "argv": [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": title,
        "language": "python",
        "metadata": {"debugger": True,
                     "envbuild": {"env": target.name, "target": target.key, "torch": target.torch,
                                  "cuda": cuda_json(target.cuda), "prefix": str(prefix)}},
    }
    path = kernel_folder / "kernel.json"
    try:
        write_file(path, json.dumps(spec, indent=1) + "\n", overwrite=True, what="the Jupyter kernel",
                   fix="give a writable --kernel-dir")
    except EnvbuildError as exc:
        # The environment is installed and works: a kernels folder we cannot write is a hint, not a failure.
        reason = exc.reason if isinstance(exc, WriteError) else exc.message
        return KernelResult(kernel_name, title, None, f"could not write the Jupyter kernel into {kernel_folder}: "
                                                      f"{reason}; give a writable --kernel-dir")
    return KernelResult(kernel_name, title, path)


# --- the whole path -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LocalEnvOptions:
    """Where the local environment goes, what installs it, and what follows the install."""

    prefix: Path | None = None  # else `name` under the envs folder
    name: str | None = None  # also the Jupyter kernel's name (default <env>-<target>)
    installer: str = "auto"  # auto | envbuild | a micromamba, mamba or conda
    kernel_dir: Path | None = None  # default: <Jupyter data dir>/kernels
    spec_path: Path | None = None  # the spec: named in the kernel's hint and the next steps
    smoke: bool = True
    force: bool = False  # reinstall even when the environment is from the same lock
    progress: Progress = ignore  # hears the install's steps (downloads, link, pip, bytecode) and each smoke check


@dataclass
class OnboardResult:
    env: str
    target: str
    torch: str
    cuda: CudaVersion | None
    reason: str
    tag: str  # the target's image tag
    prefix: Path
    status: str  # created | replaced | unchanged
    installer: str
    lock: Path
    seconds: float = 0.0
    kernel: KernelResult | None = None
    smoke: SmokeRun | None = None
    next_steps: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.smoke and self.smoke.failed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "env": self.env, "target": self.target, "torch": self.torch, "cuda": cuda_json(self.cuda),
            "reason": self.reason,
            "tag": self.tag,
            "prefix": str(self.prefix), "status": self.status, "installer": self.installer, "lock": str(self.lock),
            "seconds": round(self.seconds, 1), "kernel": self.kernel.as_dict() if self.kernel else None,
            "smoke": self.smoke.as_dict() if self.smoke else None, "next_steps": self.next_steps,
            "warnings": self.warnings,
        }


def prefix_warnings(prefix: Path, target: Target) -> list[str]:
    """What the prefix's own path breaks in the env installed there."""
    if not any(char.isspace() for char in str(prefix)) or not compiles(target.torch, target.spec.features):
        return []
    # inductor joins its C++ compiler command into one string and splits it on white space again, so
    # `-L<prefix>/lib` falls apart there and the link fails with "cannot find -ltorch" (seen with torch 2.13).
    return [f"the environment's path {str(prefix)!r} contains white space: torch.compile cannot build its C++ "
            "kernels there; choose a --prefix (or a home folder) without spaces"]


def onboard_local(choice: TargetChoice, lock_path: Path, prefix: Path, *, platform: str, tool: Path | None,
                  gpus_here: int, options: LocalEnvOptions = LocalEnvOptions(),
                  echo: Callable[[str], None] = lambda line: None) -> OnboardResult:
    """Install the locked env into `prefix`, register its kernel, run the smoke suite in it."""
    started = time.monotonic()
    target = choice.target
    digest = lockfile_sha256(lock_path)
    if prefix.parent.is_dir():  # what a killed onboard left goes first, also when nothing is installed now
        try:
            recover_interrupted(prefix)
        except OSError as exc:
            raise EnvbuildError(f"cannot clean up beside {prefix}: {exc.strerror or exc} ({exc.filename or prefix}); "
                                "remove the .envbuild-* folders there yourself") from None
    state = prefix_status(prefix, target, digest)
    if state == "unchanged" and options.force:
        state = "replace"
    if state != "unchanged":
        echo(f"installing {target.key} into {prefix} with {installer_name(tool)} ...")
        install_environment(lock_path, platform, prefix, tool,
                            EnvMarker(target.name, target.key, target.torch, cuda_json(target.cuda), digest,
                                      installer_name(tool)), progress=options.progress)
    marker = EnvMarker.read(prefix) if state == "unchanged" else None
    installed_with = marker.installer if marker else installer_name(tool)
    status = {"new": "created", "replace": "replaced"}.get(state, state)
    result = OnboardResult(target.name, target.key, target.torch, target.cuda, choice.reason, target.tag, prefix,
                           status, installed_with, lock_path, warnings=prefix_warnings(prefix, target))
    for warning in result.warnings:
        echo(f"warning: {warning}")
    result.kernel = register_kernel(prefix, target, options.name or f"{target.name}-{target.key}",
                                    options.kernel_dir, options.spec_path)
    if options.smoke:
        echo(f"running the smoke suite with {prefix / 'bin' / 'python'} ...")
        # A CUDA env picked on a host with GPUs must see one: a silent CPU fallback would pass.
        require = 1 if target.cuda and gpus_here else 0
        result.smoke = run_local(require, target.torch, cuda_or_cpu(target.cuda), timeout=SMOKE_TIMEOUT_S,
                                 python=prefix / "bin" / "python",
                                 require_compile=Feature.COMPILE in target.spec.features, progress=options.progress)
    result.next_steps = next_steps(result, tool, options.spec_path)
    result.seconds = time.monotonic() - started
    return result


def next_steps(result: OnboardResult, tool: Path | None, spec_path: Path | None) -> list[str]:
    prefix = result.prefix
    steps = []
    if tool is not None:
        steps.append(f"activate it: {tool.name} activate {prefix}")
    else:
        steps.append(f"use it: export PATH={prefix}/bin:$PATH (or run {prefix}/bin/python directly)")
    steps.append(f"check torch: {prefix}/bin/python -c 'import torch; print(torch.__version__, "
                 "torch.cuda.is_available())'")
    if result.kernel and result.kernel.path:
        steps.append(f"Jupyter: pick the kernel \"{result.kernel.display_name}\" ({result.kernel.name})")
    elif result.kernel:
        steps.append(result.kernel.hint)
    spec = spec_path or Path(f"envs/{result.env}.yaml")
    cuda = cuda_or_cpu(result.cuda)
    steps.append(f"the same env as an image: envbuild image {spec} --cuda {cuda}, then envbuild smoke {result.tag}")
    steps.append(f"after the spec or its lock changes: envbuild onboard {spec} --cuda {cuda} --prefix {prefix}")
    return steps


# --- the image path -----------------------------------------------------------------------------

@dataclass
class ImageOnboardResult:
    env: str
    target: str
    torch: str
    cuda: CudaVersion | None
    reason: str
    image: str
    how: str  # built | pulled
    run_command: str
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cuda": cuda_json(self.cuda), "seconds": round(self.seconds, 1)}


def docker_run_line(image: str, cuda: CudaVersion | None, access: GpuAccess | None = None) -> str:
    """How to run the image here: GPUs (CUDA builds) the way this engine takes them (`access`): CDI names
    where it reads NVIDIA's CDI specs, else `--gpus all`, which also stands when no engine answered."""
    gpus = docker_run_gpu_flag(access) + " " if cuda else ""
    # DataLoader workers share tensors through /dev/shm; Docker's 64 MB default stalls them.
    return f'docker run --rm -it {gpus}--shm-size 1g -v "$PWD":/work -w /work {image}'


def pull_image(target: Target, registry: str, client=None) -> str:
    try:
        return pull_registry_image(target.tag, registry, client)
    except EnvbuildError as exc:
        raise EnvbuildError(f"{exc.message}; build and push it with "
                            f"`envbuild image ... --cuda {cuda_or_cpu(target.cuda)} --push {registry}`") from None


def gpu_access_here() -> GpuAccess | None:
    """How this host's engine takes GPUs, or None when no engine answers (the run line then says --gpus all)."""
    try:
        client = docker_client(timeout=10)
    except EngineUnreachable:
        return None
    try:
        return client_gpu_access(client)
    except EnvbuildError:
        return None
    finally:
        client.close()


def image_result(choice: TargetChoice, image: str, how: str, seconds: float) -> ImageOnboardResult:
    target = choice.target
    access = gpu_access_here() if target.cuda else None
    return ImageOnboardResult(target.name, target.key, target.torch, target.cuda, choice.reason, image, how,
                              docker_run_line(image, target.cuda, access), seconds)


# --- entry points -------------------------------------------------------------------------------

def onboard(targets: Sequence[Target], *, asked: bool, options: LocalEnvOptions = LocalEnvOptions(),
            locks: LockPolicy = LockPolicy(), echo: Callable[[str], None] = lambda line: None) -> OnboardResult:
    """The local path: choose the target, check where and with what it installs (before any slow
    lock), then lock if stale, install, register the kernel, smoke-test."""
    platform = host_platform()
    choice, gpus_here = choose_for_this_host(targets, asked, platform)
    echo(f"target {choice.target.key}: {choice.reason}")
    where = choose_prefix(choice.target, options.prefix, options.name)
    note = envs_dir_note() if options.prefix is None else None
    if note:
        echo(f"note: {note}")
    tool = find_installer(options.installer)
    lock_path = ensure_lock(choice.target, locks, options.progress if options.progress is not ignore else to_stderr)
    return onboard_local(choice, lock_path, where, platform=platform, tool=tool, gpus_here=gpus_here,
                         options=options, echo=echo)


def onboard_image(targets: Sequence[Target], *, asked: bool, pull: str | None = None,
                  locks: LockPolicy = LockPolicy(), options: BuildOptions | None = None, progress=None,
                  echo: Callable[[str], None] = lambda line: None) -> ImageOnboardResult:
    """The image path: pull the target's image from a registry, or build it; then how to run it."""
    started = time.monotonic()
    choice, _ = choose_for_this_host(targets, asked, "linux-64")
    echo(f"target {choice.target.key}: {choice.reason}")
    if pull:
        return image_result(choice, pull_image(choice.target, pull), "pulled", time.monotonic() - started)
    showing = progress(choice.target.tag) if progress else nullcontext(lambda line: None)
    with showing as on_line:
        built = build_target_image(choice.target, locks=locks, options=options or BuildOptions(), echo=on_line)
    return image_result(choice, built.tags[0], "built", time.monotonic() - started)

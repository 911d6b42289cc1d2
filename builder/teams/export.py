"""`envbuild export pixi|uv SPEC`: the spec's targets as a pixi workspace or a uv project, for a team that
works with pixi or uv day to day and builds its images with envbuild.

pixi: one environment per target (its name the target's, `cuda12-6`, `cpu`), each a feature bound to its
platforms. A CUDA target's platforms are rich platforms (pixi 0.71) that declare the machines it runs on:
the driver floor (`__cuda`: the CUDA X.0 driver that runs any X.Y build, minor-version compatibility, as
the compatibility data's minimum driver says) and the GPU floor (`__cuda_arch`: the lowest GPU the target's
build has kernels for, or the spec's fleet's lowest when that is higher). Each feature pins torch as the
lock does (builder/lock/environment.py): the build of the target's CUDA on conda-forge, the cuXYZ wheel
index on the pip route.

uv: one extra per pip-route target, named by its wheel tag (`cu128`, `cpu`), each taking torch and
torchvision from its PyTorch wheel index, the extras declared as conflicting. Targets of the conda routes
have no uv form; `envbuild export pixi` carries them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import Requirement

from builder import __version__
from builder.errors import UsageError
from builder.formats import pixi_toml, uv_pyproject
from builder.formats.conda_matchspec import parse_conda_line
from builder.formats.environment_yml import EnvironmentFile
from builder.formats.pixi_toml import CondaDependency, CudaFloor, Feature, PixiManifest, PypiDependency, RichPlatform
from builder.formats.uv_pyproject import UvIndex, UvProject, UvSource
from builder.lock.environment import environment_file
from builder.specs.compat import load_platforms
from builder.specs.gpus import parse_capability
from builder.specs.model import EnvSpec, Route
from builder.specs.target import Target

Format = Literal["pixi", "uv"]
# pixi 0.71 reads rich platforms with `cuda = { driver, arch }`
REQUIRES_PIXI = ">=0.71.0"
UV_MARKERS = {
    "linux-64": "sys_platform == 'linux' and platform_machine == 'x86_64'",
    "linux-aarch64": "sys_platform == 'linux' and platform_machine == 'aarch64'",
    "osx-64": "sys_platform == 'darwin' and platform_machine == 'x86_64'",
    "osx-arm64": "sys_platform == 'darwin' and platform_machine == 'arm64'",
    "win-64": "sys_platform == 'win32' and platform_machine == 'AMD64'",
}


@dataclass(frozen=True)
class Export:
    """A written pixi.toml or pyproject.toml: what it holds per target, and what of the spec it could not."""

    format: Format
    path: Path
    text: str
    names: tuple[tuple[str, str], ...]  # (target key, environment or extra name)
    notes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        kind = "environments" if self.format == "pixi" else "extras"
        return {"format": self.format, "path": str(self.path),
                kind: [{"target": key, "name": name} for key, name in self.names], "notes": list(self.notes)}


def default_export_path(fmt: Format, spec_path: Path, spec: EnvSpec) -> Path:
    """Beside the env's lock folder (`<spec folder>/<name>/pixi/pixi.toml`), never over a project's own file."""
    return spec_path.parent / spec.name / fmt / ("pixi.toml" if fmt == "pixi" else "pyproject.toml")


def write_export(fmt: Format, spec: EnvSpec, spec_path: Path, targets: list[Target], out: Path | None = None,
                 force: bool = False) -> Export:
    path = out or default_export_path(fmt, spec_path, spec)
    if fmt == "pixi":
        manifest, names, notes = pixi_manifest(spec, spec_path.name, targets)
        text = pixi_toml.write(path, manifest, force=force)
    else:
        project, names, notes = uv_project(spec, spec_path.name, targets)
        text = uv_pyproject.write(path, project, force=force)
    return Export(fmt, path, text, tuple(names), tuple(notes))


# ---------------------------------------------------------------------------------------------
# pixi


def environment_name(target: Target) -> str:
    """`cuda12-6`, `cpu`: pixi's environment names allow no dots."""
    return target.key.replace(".", "-")


def render_pixi(spec: EnvSpec, spec_file: str, targets: list[Target]) -> tuple[str, list[tuple[str, str]], list[str]]:
    manifest, names, notes = pixi_manifest(spec, spec_file, targets)
    return pixi_toml.dumps(manifest), names, notes


def pixi_manifest(spec: EnvSpec, spec_file: str,
                  targets: list[Target]) -> tuple[PixiManifest, list[tuple[str, str]], list[str]]:
    """The workspace of the spec's targets: a feature and an environment per target (the default the first's),
    the conda lines every target has in the default feature; the (target, environment) names; notes."""
    notes: list[str] = []
    platforms, floors, envs = _pixi_targets(targets, notes)
    common = _common_conda([(target, env) for target, env, _ in envs])
    manifest = PixiManifest(
        name=spec.name, channels=tuple(dict.fromkeys(c for _, env, _ in envs for c in env.channels)),
        platforms=tuple(platforms), requires_pixi=REQUIRES_PIXI, dependencies=_conda_dependencies(common),
        pypi_dependencies=dict(_pypi_entry(line) for line in spec.pip),
        features=tuple(_feature(target, env, own_platforms, common) for target, env, own_platforms in envs),
        environments=_environments(targets), header=_pixi_header(spec_file, floors))
    return manifest, [(t.key, environment_name(t)) for t in targets], notes


def _pixi_targets(targets: list[Target], notes: list[str]) -> tuple[
        list[str | RichPlatform], list[str], list[tuple[Target, EnvironmentFile, tuple[str, ...]]]]:
    """The workspace's platforms (each once), the header's floor lines, and each target with its environment
    on the platforms pixi runs it on and those platforms' names."""
    platforms: list[str | RichPlatform] = []
    floors: list[str] = []
    envs: list[tuple[Target, EnvironmentFile, tuple[str, ...]]] = []
    has_cpu = any(t.cuda is None for t in targets)
    for target in targets:
        own, rich, floor = _target_platforms(target, notes, has_cpu)
        platforms += [p for p in rich if p not in platforms]
        floors += [floor] if floor else []
        envs.append((target, environment_file(replace(target, platforms=own)), tuple(map(_platform_name, rich))))
    return platforms, floors, envs


def _feature(target: Target, env: EnvironmentFile, platforms: tuple[str, ...], common: list[str]) -> Feature:
    """The target's own feature: its platforms, its conda lines beyond the common ones, its torch wheels."""
    shared = set(common)  # a set: a 20,000-line spec is not 20,000 x 20,000 comparisons
    own_lines = (line for line in _conda_lines(target, env) if line not in shared)
    return Feature(environment_name(target), platforms, _conda_dependencies(own_lines), _torch_wheels(target))


def _environments(targets: list[Target]) -> dict[str, tuple[str, ...]]:
    """An environment per target of its own feature; the default is the first target's."""
    environments: dict[str, tuple[str, ...]] = {"default": (environment_name(targets[0]),)}
    environments.update({environment_name(t): (environment_name(t),) for t in targets})
    return environments


def _pixi_header(spec_file: str, floors: list[str]) -> tuple[str, ...]:
    return (f"Written by envbuild {__version__} from {spec_file} (`envbuild export pixi`): one environment per",
            "target (`pixi install -e <target>`; the default is the first). A CUDA target's platform declares",
            "the machines it runs on: `driver`, the oldest CUDA driver (minor-version compatibility), and `arch`,",
            "the lowest GPU its build has kernels for.", *floors)


def _target_platforms(target: Target, notes: list[str],
                      has_cpu: bool) -> tuple[tuple[str, ...], list[str | RichPlatform], str | None]:
    """The target's platforms in pixi: a CUDA target's are rich platforms of the subdirs with CUDA (its
    others are noted); the CPU target's are the plain subdirs."""
    if target.cuda is None:
        return target.platforms, list(target.platforms), None
    own = _cuda_subdirs(target, notes, has_cpu)
    driver = f"{target.cuda.major}.0"
    arch = gpu_floor(target)
    rich: list[str | RichPlatform] = [RichPlatform(f"{subdir}-{environment_name(target)}", subdir,
                                                   CudaFloor(driver, arch)) for subdir in own]
    floor = (f"{target.key}: driver >= {target.min_driver} (CUDA {driver})"
             + (f", GPUs from {arch} (torch {target.torch}, route {target.route.value})" if arch else ""))
    return own, rich, floor


def _cuda_subdirs(target: Target, notes: list[str], has_cpu: bool) -> tuple[str, ...]:
    """The target's platforms with CUDA builds; the others are noted, and none at all is refused."""
    known = load_platforms()
    own = tuple(p for p in target.platforms if known[p].cuda)
    left = [p for p in target.platforms if p not in own]
    if left:
        notes.append(f"target {target.key}: {', '.join(left)} left out of its environment (no CUDA builds there"
                     + ("; the cpu target's environment covers them)" if has_cpu else ")"))
    if not own:
        raise UsageError(f"target {target.key}: none of its platforms ({', '.join(target.platforms)}) has CUDA "
                         "builds, so pixi has no platform to run it on")
    return own


def gpu_floor(target: Target) -> str | None:
    """The lowest compute capability the target runs on: the lowest GPU its build has kernels for, or the
    spec's fleet's lowest when that is higher (the GPUs the team says it runs on)."""
    kernels = [parse_capability(a) for a in target.archs if a.startswith("sm_")]
    fleet = parse_capability(target.cuda_arch) if target.cuda_arch else None
    candidates = [c for c in (min(kernels) if kernels else None, fleet) if c is not None]
    if not candidates:
        return None
    lowest = max(candidates)
    return f"{lowest[0]}.{lowest[1]}"


def _platform_name(platform: str | RichPlatform) -> str:
    return platform.name if isinstance(platform, RichPlatform) else platform


def _common_conda(envs: list[tuple[Target, EnvironmentFile]]) -> list[str]:
    """The conda lines every target has (Python, the spec's extras): the default feature's."""
    lines = [_conda_lines(target, env) for target, env in envs]
    others = [set(other) for other in lines[1:]]
    return [line for line in lines[0] if all(line in other for other in others)]


def _conda_lines(target: Target, env: EnvironmentFile) -> list[str]:
    """The lock's conda lines of the target, less conda's pip: pixi installs pypi dependencies itself."""
    return [line.spec for line in env.conda if line.selector is None
            and (line.spec != "pip" or "pip" in target.spec.conda)]


def _conda_dependencies(lines: Iterable[str]) -> dict[str, CondaDependency]:
    return dict(_conda_entry(line) for line in lines)


def _conda_entry(spec: str) -> tuple[str, CondaDependency]:
    """`pytorch=2.7.1=cuda126*` -> pytorch = { version = "==2.7.1", build = "cuda126*" }; `python=3.11` ->
    python = "3.11.*" (conda's `=X.Y` is X.Y.*); `numpy>=1.26` -> numpy = ">=1.26"."""
    line = parse_conda_line(spec)
    if line is None:  # the spec's patterns admit only lines this reads
        raise RuntimeError(f"cannot write {spec!r} as a pixi dependency")
    version = line.version or "*"
    if version[0].isdigit():
        version = f"=={version}" if re.fullmatch(r"\d+(\.\d+){2,}", version) else f"{version}.*"
    return line.name, CondaDependency(version, line.build or None)


def _pypi_entry(requirement: str) -> tuple[str, PypiDependency]:
    parsed = Requirement(requirement)
    return parsed.name, PypiDependency(str(parsed.specifier) or "*", tuple(sorted(parsed.extras)))


def _torch_wheels(target: Target) -> dict[str, PypiDependency]:
    """A pip-route target's torch and torchvision, each from the target's wheel index."""
    if target.route is not Route.PIP:
        return {}
    wheels = {"torch": PypiDependency(f"=={target.torch}", index=_wheel_index(target))}
    if target.torchvision:
        wheels["torchvision"] = PypiDependency(f"=={target.torchvision}", index=_wheel_index(target))
    return wheels


def _wheel_index(target: Target) -> str:
    if target.pip_index is None:  # resolve_targets gives every pip-route target its wheel index
        raise RuntimeError(f"target {target.key}: route pip without a wheel index")
    return target.pip_index


# ---------------------------------------------------------------------------------------------
# uv


def extra_name(target: Target) -> str:
    return target.pip_tag


def render_uv(spec: EnvSpec, spec_file: str, targets: list[Target]) -> tuple[str, list[tuple[str, str]], list[str]]:
    project, names, notes = uv_project(spec, spec_file, targets)
    return uv_pyproject.dumps(project), names, notes


def uv_project(spec: EnvSpec, spec_file: str,
               targets: list[Target]) -> tuple[UvProject, list[tuple[str, str]], list[str]]:
    """The project of the spec's pip-route targets: an extra per target, each taking torch (and torchvision)
    from its own explicit index, the extras conflicting; the (target, extra) names; notes."""
    wheels, notes = _uv_targets(spec, spec_file, targets)
    platforms = dict.fromkeys(p for t in wheels for p in t.platforms)
    project = UvProject(
        name=spec.name, requires_python=f"=={spec.python}.*", dependencies=tuple(spec.pip),
        optional_dependencies={extra_name(t): _wheel_requirements(t) for t in wheels},
        environments=tuple(UV_MARKERS[p] for p in platforms),
        conflicts=(tuple(extra_name(t) for t in wheels),) if len(wheels) > 1 else (),
        sources=_uv_sources(wheels),
        indexes=tuple(UvIndex(_index_name(t), _wheel_index(t)) for t in wheels),
        # the example names an extra this file has, never a fixed one
        header=(f"Written by envbuild {__version__} from {spec_file} (`envbuild export uv`): one extra per pip-route",
                f"target, each taking torch from its PyTorch wheel index (`uv sync --extra {extra_name(wheels[0])}`)."))
    return project, [(t.key, extra_name(t)) for t in wheels], notes


def _uv_targets(spec: EnvSpec, spec_file: str, targets: list[Target]) -> tuple[list[Target], list[str]]:
    """The targets uv installs (route pip), and notes of what it leaves out; a spec without one is refused."""
    notes = [f"target {t.key} (route {t.route.value}) left out: uv installs from pip indexes; `envbuild export "
             "pixi` carries it" for t in targets if t.route is not Route.PIP]
    wheels = [t for t in targets if t.route is Route.PIP]
    if not wheels:
        raise UsageError(f"{spec_file}: no target on route pip, so there is nothing uv installs; `envbuild export "
                         "pixi` writes the conda routes' targets")
    if spec.conda:
        notes.append(f"conda packages left out ({', '.join(spec.conda)}): uv installs from pip indexes; list their "
                     "pip names under `pip:` to have them in the project")
    return wheels, notes


def _uv_sources(wheels: list[Target]) -> dict[str, tuple[UvSource, ...]]:
    """torch (and torchvision) from each extra's own index."""
    def source(target: Target) -> UvSource:
        return UvSource(_index_name(target), extra_name(target))

    return {"torch": tuple(map(source, wheels)), "torchvision": tuple(source(t) for t in wheels if t.torchvision)}


def _wheel_requirements(target: Target) -> tuple[str, ...]:
    torchvision = (f"torchvision=={target.torchvision}+{target.pip_tag}",) if target.torchvision else ()
    return (f"torch=={target.torch}+{target.pip_tag}", *torchvision)


def _index_name(target: Target) -> str:
    return f"pytorch-{extra_name(target)}"

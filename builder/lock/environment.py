"""The environment.yml of a Target: what conda-lock solves for it, and what `envbuild render` shows.

A pure function of the Target, as an `EnvironmentFile` (builder/formats/environment_yml.py, which writes
it): the conda part with torch pinned to the target's CUDA build per platform, the pip part left to the
lock's pip stage (builder/lock/pip_part.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from builder.formats.environment_yml import CondaEntry, EnvironmentFile, dumps
from builder.lock.cuda_builds import companion_names, package_name, pin_to_cuda_build
from builder.specs.compat import load_platforms
from builder.specs.features import feature_conda_packages
from builder.specs.model import Route
from builder.specs.target import Target


def _torch_conda_lines(target: Target, companions: Sequence[str] = ()) -> list[CondaEntry]:
    """How torch gets its CUDA, per route, per platform (CUDA builds only where CUDA exists).

    `companions`: the spec's conda lines of packages built per CUDA (torchaudio, ...), pinned to
    the target's CUDA build next to torch's on every platform with CUDA."""
    if target.route is Route.CONDA_FORGE:
        return _per_platform(target, lambda cuda: _conda_forge_torch(target, cuda, companions))
    if target.route is Route.PYTORCH_CHANNEL:
        return _per_platform(target, lambda cuda: _pytorch_channel_torch(target, cuda))
    return []


def _per_platform(target: Target, specs_for: Callable[[bool], list[str]]) -> list[CondaEntry]:
    """`specs_for(cuda)` once when every platform has CUDA (or none has); else per platform, behind its selector."""
    flavours = {p: target.uses_cuda_on(p) for p in target.platforms}
    if len(set(flavours.values())) == 1:
        return [CondaEntry(spec) for spec in specs_for(next(iter(flavours.values())))]
    platform_info = load_platforms()
    return [CondaEntry(spec, platform_info[platform].selector)
            for platform, cuda in flavours.items() for spec in specs_for(cuda)]


def _conda_forge_torch(target: Target, cuda: bool, companions: Sequence[str]) -> list[str]:
    # The build string names its CUDA (cuda129_*): `cuda-version` alone also admits older
    # builds (a cuda126 build needs cuda-version >=12.6,<13), which may win the solve.
    build = f"{target.conda_forge_build_prefix}*" if cuda else "cpu*"
    specs = [f"pytorch={target.torch}={build}"]
    if cuda:
        specs.append(f"cuda-version={target.cuda}")
    # torchvision's CUDA builds all accept any cuda-version of their major: without its
    # build pinned, a cuda126 torchvision can sit next to a cuda129 torch.
    if target.torchvision:
        specs.append(f"torchvision={target.torchvision}={build}")
    specs += [pin_to_cuda_build(line, target.route, target.cuda) if cuda and target.cuda else line
              for line in companions]
    return specs


def _pytorch_channel_torch(target: Target, cuda: bool) -> list[str]:
    specs = [f"pytorch={target.torch}", f"pytorch-cuda={target.cuda}" if cuda else "cpuonly"]
    if target.torchvision:
        specs.append(f"torchvision={target.torchvision}")
    return specs


def _torch_wheels(target: Target) -> list[str]:
    """The pip route's torch (and torchvision), each of the target's CUDA build (`torch==2.7.1+cu126`)."""
    if target.route is not Route.PIP:
        return []
    local = f"+{target.pip_tag}"
    torchvision = [f"torchvision=={target.torchvision}{local}"] if target.torchvision else []
    return [f"torch=={target.torch}{local}", *torchvision]


def _conda_entries(target: Target) -> list[CondaEntry]:
    """Python, torch of the target's CUDA build with the companions pinned beside it, the spec's conda lines,
    then what its features add that it does not ask for already."""
    spec = target.spec
    built_per_cuda = set(companion_names(target.route))
    companions = [line for line in spec.conda if package_name(line) in built_per_cuda]
    conda = [CondaEntry(f"python={target.python}")]
    conda += _torch_conda_lines(target, companions)
    conda += [CondaEntry(package) for package in spec.conda if package not in companions]
    asked = {package_name(line.spec) for line in conda}
    return conda + [CondaEntry(package) for package in feature_conda_packages(spec.features) if package not in asked]


def environment_file(target: Target) -> EnvironmentFile:
    spec = target.spec
    conda = _conda_entries(target)
    pip = [*_torch_wheels(target), *spec.pip]
    if pip and not any(line.spec.split("=")[0] == "pip" for line in conda):
        conda.append(CondaEntry("pip"))
    return EnvironmentFile(
        env_name=spec.name, target_key=target.key, channels=tuple(target.channels), conda=tuple(conda),
        pip=tuple(pip), pip_repositories=(target.pip_index,) if target.pip_index else (),
        allow_pypi_requests=target.allow_pypi_requests)


def environment_yml(target: Target) -> str:
    """The whole environment.yml of a target, pip part included: what `envbuild render` writes for
    a team to read (the lock solves its conda part, `LockInputs.conda_environment_yml`, and resolves the
    pip part on its own)."""
    return dumps(environment_file(target))

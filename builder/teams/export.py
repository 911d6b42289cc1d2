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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import Requirement

from builder import __version__
from builder.errors import UsageError
from builder.generated_files import write_new_file
from builder.init.lines import parse_conda_line
from builder.lock.environment import environment_context
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
    render = render_pixi if fmt == "pixi" else render_uv
    text, names, notes = render(spec, spec_path.name, targets)
    path = out or default_export_path(fmt, spec_path, spec)
    write_new_file(path, text, force=force)
    return Export(fmt, path, text, tuple(names), tuple(notes))


# ---------------------------------------------------------------------------------------------
# pixi


def environment_name(target: Target) -> str:
    """`cuda12-6`, `cpu`: pixi's environment names allow no dots."""
    return target.key.replace(".", "-")


def render_pixi(spec: EnvSpec, spec_file: str, targets: list[Target]) -> tuple[str, list[tuple[str, str]], list[str]]:
    notes: list[str] = []
    platforms: list[Any] = []
    floors: list[str] = []
    features: dict[str, dict[str, Any]] = {}
    contexts = []
    has_cpu = any(t.cuda is None for t in targets)
    for target in targets:
        own, rich, floor = _target_platforms(target, notes, has_cpu)
        platforms += [p for p in rich if p not in platforms]
        floors += [floor] if floor else []
        features[environment_name(target)] = {"platforms": [_platform_name(p) for p in rich]}
        contexts.append((target, environment_context(replace(target, platforms=own))))
    common = _common_conda(contexts)
    channels = list(dict.fromkeys(c for _, context in contexts for c in context["channels"]))
    document: list[tuple[str, Any]] = [("workspace", {
        "name": spec.name, "channels": channels, "platforms": platforms, "requires-pixi": REQUIRES_PIXI})]
    document.append(("dependencies", dict(_conda_entry(line) for line in common)))
    pypi = dict(_pypi_entry(line) for line in spec.pip)
    if pypi:
        document.append(("pypi-dependencies", pypi))
    for target, context in contexts:
        name = environment_name(target)
        own_lines = [line for line in _conda_lines(target, context) if line not in common]
        document.append((f"feature.{name}", features[name]))
        document.append((f"feature.{name}.dependencies", dict(_conda_entry(line) for line in own_lines)))
        wheels = _torch_wheels(target)
        if wheels:
            document.append((f"feature.{name}.pypi-dependencies", wheels))
    environments = {"default": [environment_name(targets[0])]}
    environments.update({environment_name(t): [environment_name(t)] for t in targets})
    document.append(("environments", environments))
    header = [f"Written by envbuild {__version__} from {spec_file} (`envbuild export pixi`): one environment per",
              "target (`pixi install -e <target>`; the default is the first). A CUDA target's platform declares",
              "the machines it runs on: `driver`, the oldest CUDA driver (minor-version compatibility), and `arch`,",
              "the lowest GPU its build has kernels for.", *floors]
    text = _toml_text(header, document)
    return text, [(t.key, environment_name(t)) for t in targets], notes


def _target_platforms(target: Target, notes: list[str], has_cpu: bool) -> tuple[tuple[str, ...], list[Any],
                                                                                  str | None]:
    """The target's platforms in pixi: a CUDA target's are rich platforms of the subdirs with CUDA (its
    others are noted); the CPU target's are the plain subdirs."""
    if target.cuda is None:
        return target.platforms, list(target.platforms), None
    known = load_platforms()
    own = tuple(p for p in target.platforms if known[p].cuda)
    left = [p for p in target.platforms if p not in own]
    if left:
        notes.append(f"target {target.key}: {', '.join(left)} left out of its environment (no CUDA builds there"
                     + ("; the cpu target's environment covers them)" if has_cpu else ")"))
    if not own:
        raise UsageError(f"target {target.key}: none of its platforms ({', '.join(target.platforms)}) has CUDA "
                         "builds, so pixi has no platform to run it on")
    driver = f"{target.cuda.major}.0"
    arch = gpu_floor(target)
    cuda: Any = {"driver": driver, "arch": arch} if arch else driver
    rich = [{"name": f"{subdir}-{environment_name(target)}", "platform": subdir, "cuda": cuda} for subdir in own]
    floor = (f"{target.key}: driver >= {target.min_driver} (CUDA {driver})"
             + (f", GPUs from {arch} (torch {target.torch}, route {target.route.value})" if arch else ""))
    return own, rich, floor


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


def _platform_name(platform: Any) -> str:
    return str(platform["name"]) if isinstance(platform, dict) else str(platform)


def _common_conda(contexts: list[tuple[Target, dict[str, Any]]]) -> list[str]:
    """The conda lines every target has (Python, the spec's extras): the default feature's."""
    lines = [_conda_lines(target, context) for target, context in contexts]
    return [line for line in lines[0] if all(line in other for other in lines[1:])]


def _conda_lines(target: Target, context: dict[str, Any]) -> list[str]:
    """The lock's conda lines of the target, less conda's pip: pixi installs pypi dependencies itself."""
    return [line.spec for line in context["conda"] if line.selector is None
            and (line.spec != "pip" or "pip" in target.spec.conda)]


def _conda_entry(spec: str) -> tuple[str, Any]:
    """`pytorch=2.7.1=cuda126*` -> pytorch = { version = "==2.7.1", build = "cuda126*" }; `python=3.11` ->
    python = "3.11.*" (conda's `=X.Y` is X.Y.*); `numpy>=1.26` -> numpy = ">=1.26"."""
    line = parse_conda_line(spec)
    if line is None:  # the spec's patterns admit only lines this reads
        raise RuntimeError(f"cannot write {spec!r} as a pixi dependency")
    version = line.version or "*"
    if version[0].isdigit():
        version = f"=={version}" if re.fullmatch(r"\d+(\.\d+){2,}", version) else f"{version}.*"
    return line.name, {"version": version, "build": line.build} if line.build else version


def _pypi_entry(requirement: str) -> tuple[str, Any]:
    parsed = Requirement(requirement)
    version = str(parsed.specifier) or "*"
    if parsed.extras:
        return parsed.name, {"version": version, "extras": sorted(parsed.extras)}
    return parsed.name, version


def _torch_wheels(target: Target) -> dict[str, Any]:
    """A pip-route target's torch and torchvision, each from the target's wheel index."""
    if target.route is not Route.PIP:
        return {}
    wheels = {"torch": {"version": f"=={target.torch}", "index": target.pip_index}}
    if target.torchvision:
        wheels["torchvision"] = {"version": f"=={target.torchvision}", "index": target.pip_index}
    return wheels


# ---------------------------------------------------------------------------------------------
# uv


def extra_name(target: Target) -> str:
    return target.pip_tag


def render_uv(spec: EnvSpec, spec_file: str, targets: list[Target]) -> tuple[str, list[tuple[str, str]], list[str]]:
    notes = [f"target {t.key} (route {t.route.value}) left out: uv installs from pip indexes; `envbuild export "
             "pixi` carries it" for t in targets if t.route is not Route.PIP]
    wheels = [t for t in targets if t.route is Route.PIP]
    if not wheels:
        raise UsageError(f"{spec_file}: no target on route pip, so there is nothing uv installs; `envbuild export "
                         "pixi` writes the conda routes' targets")
    if spec.conda:
        notes.append(f"conda packages left out ({', '.join(spec.conda)}): uv installs from pip indexes; list their "
                     "pip names under `pip:` to have them in the project")
    extras = {extra_name(t): [f"torch=={t.torch}+{t.pip_tag}"]
              + ([f"torchvision=={t.torchvision}+{t.pip_tag}"] if t.torchvision else []) for t in wheels}
    indexes = [{"name": f"pytorch-{extra_name(t)}", "url": t.pip_index, "explicit": True} for t in wheels]
    sources = {name: [{"index": f"pytorch-{extra_name(t)}", "extra": extra_name(t)} for t in wheels
                      if name == "torch" or t.torchvision] for name in ("torch", "torchvision")}
    platforms = list(dict.fromkeys(p for t in wheels for p in t.platforms))
    uv: dict[str, Any] = {"package": False, "environments": [UV_MARKERS[p] for p in platforms]}
    if len(wheels) > 1:
        uv["conflicts"] = [[{"extra": extra_name(t)} for t in wheels]]
    document: list[tuple[str, Any]] = [
        ("project", {"name": spec.name, "version": "0.0.0", "requires-python": f"=={spec.python}.*",
                     "dependencies": list(spec.pip)}),
        ("project.optional-dependencies", extras),
        ("tool.uv", uv),
        ("tool.uv.sources", {k: v for k, v in sources.items() if v}),
        *(("[tool.uv.index]", index) for index in indexes),
    ]
    # the example names an extra this file has (or says there is none), never a fixed one
    example = (f"`uv sync --extra {extra_name(wheels[0])}`" if wheels
               else "none here: the spec's targets all take torch from conda-forge")
    header = [f"Written by envbuild {__version__} from {spec_file} (`envbuild export uv`): one extra per pip-route",
              f"target, each taking torch from its PyTorch wheel index ({example})."]
    return _toml_text(header, document), [(t.key, extra_name(t)) for t in wheels], notes


# ---------------------------------------------------------------------------------------------
# TOML


def _toml_text(header: list[str], document: list[tuple[str, Any]]) -> str:
    """The document as TOML, by tomlkit: tables in order (a dotted name nests, a name in brackets is an
    array of tables, `[[tool.uv.index]]`), a mapping inside a table inline, `platforms` one per line."""
    import tomlkit

    doc = tomlkit.document()
    for line in header:
        doc.add(tomlkit.comment(line))
    for name, table in document:
        *parents, last = name.strip("[]").split(".")
        node: Any = doc
        for part in parents:
            if part not in node:
                node.add(part, tomlkit.table(is_super_table=True))
            node = node[part]
        body = tomlkit.table()
        for key, value in table.items():
            body.add(key, _toml_item(value, one_per_line=key == "platforms"))
        if name.startswith("["):
            if last not in node:
                node.add(last, tomlkit.aot())
            node[last].append(body)
        else:
            node.add(last, body)
    return tomlkit.dumps(doc)


def _toml_item(value: Any, one_per_line: bool = False) -> Any:
    """A value inside a table: mappings inline (`{ version = "==2.7.1", build = "cuda126*" }`), lists as arrays."""
    import tomlkit

    if isinstance(value, dict):
        inline = tomlkit.inline_table()
        inline.update({key: _toml_item(item) for key, item in value.items()})
        return inline
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(_toml_item(item) for item in value)
        return array.multiline(one_per_line and bool(value))
    return value

"""Reading a pyproject.toml whose torch uv takes from PyTorch's wheel indexes: one variant per extra (or
dependency group) that gets its own torch.

uv's PyTorch setup names the indexes (`[[tool.uv.index]]`), routes torch to one of them per extra, per
group or per environment marker (`[tool.uv.sources] torch = [{ index = "pytorch-cu128", extra = "cu128" }]`)
and declares the extras as conflicting (`[tool.uv] conflicts`). Each extra that installs torch is read as
the project's dependencies plus its own, with the index its torch comes from; a project whose torch has
one source (or none) is one variant. A pyproject.toml with `[tool.pixi]` is a pixi manifest instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.markers import default_environment as marker_environment
from packaging.requirements import InvalidRequirement, Requirement

from builder.formats.conda_matchspec import parse_conda_line
from builder.init.dockerfile_shell import find_install, pip_arguments, shell_commands
from builder.init.lines import cuda_from_tag
from builder.init.pixi_manifest import read_pixi_manifest_data
from builder.init.reading import LINUX_MARKERS, Hint, Reading, read_pip_text
from builder.init.variants import (
    Variant,
    VariantsReading,
    is_pips_default_index,
    is_pytorch_wheel_index,
    other_accelerator,
    python_minor_floor,
    read_index_url,
)


@dataclass(frozen=True)
class Candidate:
    """An extra or a dependency group that may be a CUDA variant (kind "project": the project itself)."""

    kind: str
    name: str
    requirements: tuple[str, ...]

    @property
    def label(self) -> str:
        return "project" if self.kind == "project" else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Project:
    """What of the pyproject.toml every variant reads: [project] and uv's indexes and sources."""

    table: dict[str, Any]
    base: tuple[str, ...]  # [project] dependencies
    indexes: dict[str, dict[str, Any]]  # [[tool.uv.index]] by name
    sources: dict[str, Any]  # [tool.uv.sources]
    uv: dict[str, Any]
    hatch: tuple[Candidate, ...] = ()  # [tool.hatch.envs.*]: what each env's dependencies and scripts install

    @property
    def torch_sources(self) -> list[dict[str, Any]]:
        return _source_list(self.sources.get("torch"))


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def read_pyproject_data(data: dict[str, Any], source: str) -> VariantsReading:
    tool = _table(data.get("tool"))
    table = _table(data.get("project"))
    if isinstance(tool.get("pixi"), dict):
        return read_pixi_manifest_data(tool["pixi"], source, kind="pyproject.toml", project=table)
    reading = VariantsReading(source, kind="pyproject.toml")
    uv = _table(tool.get("uv"))
    hatch = _hatch_envs(_table(_table(tool.get("hatch")).get("envs")))
    candidates = _candidates(table, data.get("dependency-groups")) + list(hatch)
    base = _base_requirements(reading, table, candidates, _table(data.get("build-system")))
    project = Project(table, base, _indexes(uv), _table(uv.get("sources")), uv, hatch)
    reading.name = str(table.get("name") or "") or None
    per_variant = any(_conditional(s) for s in project.torch_sources)
    for candidate in candidates if per_variant else [Candidate("project", "", ())]:
        _add_variant(reading, candidate, project)
    _note_unread(reading, candidates, per_variant, uv)
    reading.summarise()
    return reading


def _base_requirements(reading: Reading, table: dict[str, Any], candidates: list[Candidate],
                       build: dict[str, Any]) -> tuple[str, ...]:
    """[project] dependencies; where neither they nor an extra, group or hatch env name torch, the
    [build-system] requires that do: a project whose build imports torch (a CUDA extension's setup.py) builds
    against that torch, and `pip install --no-build-isolation .` needs it installed first."""
    base = _strings(table.get("dependencies"))
    if _has_torch(base) or any(_has_torch(c.requirements) for c in candidates):
        return base
    requires = _strings(build.get("requires"))
    if not _has_torch(requires):
        raise reading.fail("no torch in it (in [project] dependencies, its extras, dependency groups or "
                           "[build-system] requires); envbuild builds PyTorch environments")
    reading.note("[build-system] requires", "derived", "torch only in the build requirements: the project "
                 "builds against it, so the spec installs them with its own dependencies")
    return base + requires


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _candidates(table: dict[str, Any], groups: Any) -> list[Candidate]:
    extras = _table(table.get("optional-dependencies"))
    found = [Candidate("extra", str(name), _strings(deps)) for name, deps in extras.items()]
    found += [Candidate("group", str(name), _group(_table(groups), str(name), set())) for name in _table(groups)]
    return found


def _hatch_envs(envs: dict[str, Any]) -> tuple[Candidate, ...]:
    """Each hatch environment as what it installs: its `dependencies` and the packages and index options of
    the `pip install` commands its scripts run (a script is a command or a list of them, run by a shell)."""
    found = []
    for name, env in envs.items():
        env = _table(env)
        installs = list(_strings(env.get("dependencies")))
        for script in _table(env.get("scripts")).values():
            for command in _strings(script) if isinstance(script, list) else (str(script),):
                for words in shell_commands(command):
                    install = find_install(words, command)
                    if install is not None and install.tool == "pip":
                        options, packages = pip_arguments(install.words)
                        installs += [*options, *packages]
        found.append(Candidate("hatch env", str(name), tuple(installs)))
    return tuple(found)


def _group(groups: dict[str, Any], name: str, seen: set[str]) -> tuple[str, ...]:
    """A dependency group's requirements, its `{ include-group = ... }` entries expanded (PEP 735)."""
    seen.add(name)
    requirements: list[str] = []
    for item in groups.get(name) or []:
        if isinstance(item, dict) and item.get("include-group") and item["include-group"] not in seen:
            requirements += _group(groups, str(item["include-group"]), seen)
        elif isinstance(item, str):
            requirements.append(item)
    return tuple(requirements)


def _name_of(requirement: str) -> str | None:
    try:
        return Requirement(requirement).name.lower().replace("_", "-")
    except InvalidRequirement:
        return None


def _has_torch(requirements: tuple[str, ...]) -> bool:
    return any(_name_of(r) == "torch" for r in requirements)


def _indexes(uv: dict[str, Any]) -> dict[str, dict[str, Any]]:
    indexes = {}
    for entry in uv.get("index") or []:
        if isinstance(entry, dict) and entry.get("url"):
            indexes[str(entry.get("name") or entry["url"])] = entry
    return indexes


def _source_list(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value]
    return [s for s in value if isinstance(s, dict)] if isinstance(value, list) else []


def _conditional(source: dict[str, Any]) -> bool:
    marker = str(source.get("marker") or "")
    return bool(source.get("extra") or source.get("group") or "extra" in marker or "group" in marker)


def _marker_holds(marker: str, candidate: Candidate) -> bool:
    """An environment marker as it reads on Linux x86-64, for this extra or group."""
    environment: dict[str, str] = {key: str(value) for key, value in marker_environment().items()}
    environment.update(LINUX_MARKERS, extra=candidate.name if candidate.kind == "extra" else "")
    try:
        return Marker(marker.replace("group ==", "extra ==").replace("group !=", "extra !=")).evaluate(
            environment if candidate.kind != "group" else {**environment, "extra": candidate.name})
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return False


def _source_for(sources: list[dict[str, Any]], candidate: Candidate) -> dict[str, Any] | None:
    """The first source that applies to the candidate on Linux."""
    for source in sources:
        if source.get("extra") and (candidate.kind != "extra" or source["extra"] != candidate.name):
            continue
        if source.get("group") and (candidate.kind != "group" or source["group"] != candidate.name):
            continue
        if source.get("marker") and not _marker_holds(str(source["marker"]), candidate):
            continue
        return source
    return None


def _add_variant(reading: VariantsReading, candidate: Candidate, project: Project) -> None:
    """The candidate as a variant: the project's requirements and its own, torch from the index its source
    names. An extra or group without torch or a torch source of its own is no variant (noted later)."""
    source = _source_for(project.torch_sources, candidate)
    if candidate.kind != "project" and not _has_torch(candidate.requirements) and source is None:
        return
    index_url = str(project.indexes.get(str(source.get("index")), {}).get("url") or "") if source else ""
    accelerator = other_accelerator(index_url) if index_url else None
    if accelerator:
        reading.note(candidate.label, "dropped", f"its torch comes from {index_url}, a {accelerator} build; "
                                                 "envbuild builds NVIDIA CUDA and CPU targets")
        return
    variant_reading = Reading(reading.source, kind=reading.kind, name=reading.name)
    read_requires_python(variant_reading, project.table.get("requires-python"))
    variant_reading.has_pip_section = True
    requirements = project.base + candidate.requirements
    if candidate.kind == "project":
        requirements += _torch_extras(variant_reading, project)
    _read_requirements(variant_reading, requirements, project)
    if source and source.get("index"):
        _read_torch_index(variant_reading, candidate, str(source["index"]), index_url)
    elif not source:
        _read_default_index(variant_reading, candidate, project)
    reading.variants.append(Variant(candidate.label, variant_reading))


def _torch_extras(reading: Reading, project: Project) -> tuple[str, ...]:
    """The one variant's share of the extras, groups and hatch envs that install torch: their packages; and
    their torch only where [project] dependencies have none (an optional extra's pin is not the project's
    torch: `pip install .[dev]` would move torch to it, and the extra is named)."""
    requirements: list[str] = []
    for candidate in (*_candidates(project.table, None), *project.hatch):
        if not _has_torch(candidate.requirements):
            continue
        for requirement in candidate.requirements:
            if _name_of(requirement) == "torch" and _has_torch(project.base):
                reading.torch_in_extras.append(f"{candidate.label}: {requirement}")
                reading.note(f"{candidate.label}: {requirement}", "dropped",
                             "an optional extra's torch, not the project's; the spec keeps [project] "
                             "dependencies' torch (installing the extra would move torch to this pin)")
            else:
                requirements.append(requirement)
    return tuple(requirements)


def read_requires_python(reading: Reading, requires: Any) -> None:
    """`requires-python = ">=3.11"`: the Python versions the project allows, read as the spec's python line."""
    if not requires:
        return
    line = parse_conda_line(python_minor_floor(f"python{str(requires).replace(' ', '')}"))
    if line is not None:
        reading.python = replace(line, text=f"requires-python = {requires}")


def _read_requirements(reading: Reading, requirements: tuple[str, ...], project: Project) -> None:
    """Each requirement as a pip line; torch's several lines (the project's and the extra's) as one."""
    torch = [r for r in requirements if _name_of(r) == "torch"]
    if torch:
        merged = _merged_torch(torch)
        if len(torch) > 1:
            reading.note(merged, "derived", f"torch as {', '.join(repr(t) for t in torch)} allow it together")
        read_pip_text(reading, merged)
    for requirement in dict.fromkeys(requirements):
        name = _name_of(requirement)
        if name == "torch" or (name and not _from_an_index(reading, requirement, name, project)):
            continue
        read_pip_text(reading, requirement)


def _merged_torch(lines: list[str]) -> str:
    specifiers = [str(Requirement(line).specifier) for line in lines]
    joined = ",".join(s for s in dict.fromkeys(specifiers) if s)
    return f"torch{joined}" if len(set(lines)) > 1 else lines[0]


def _from_an_index(reading: Reading, requirement: str, name: str, project: Project) -> bool:
    """Whether uv takes the package from an index the spec can use (PyPI, PyTorch's); a folder, git or URL
    source, or another index, is noted and the package left out."""
    source = _source_list(project.sources.get(name) or project.sources.get(name.replace("-", "_")))
    first = source[0] if source else {}
    if any(key in first for key in ("path", "git", "url", "workspace")):
        kind = next(key for key in ("path", "git", "url", "workspace") if key in first)
        reading.note(requirement, "unmapped", f"uv takes it from a {kind} ([tool.uv.sources]); publish it to an "
                                              "index and pin it by version")
        return False
    url = str(project.indexes.get(str(first.get("index")), {}).get("url") or "")
    if url and not (is_pytorch_wheel_index(url) or is_pips_default_index(url)):
        reading.note(requirement, "unmapped", f"uv takes it from {url}, an index a spec cannot carry; install it "
                                              "in your job or mirror it into your own index")
        return False
    return True


def _read_torch_index(reading: Reading, candidate: Candidate, name: str, url: str) -> None:
    if not url:
        reading.note(f"{candidate.label}: index {name}", "unmapped", "no [[tool.uv.index]] of that name")
        return
    read_index_url(reading, f"index {name} ({url})", url)


def _read_default_index(reading: Reading, candidate: Candidate, project: Project) -> None:
    """Torch without a source of its own: from the first index uv searches that is not explicit (a PyTorch
    index listed there serves torch), else from PyPI, whose wheel's CUDA the project does not name; an
    extra named like a wheel index tag (`cu124`) is read as meaning that CUDA."""
    searched = [entry for entry in project.indexes.values() if not entry.get("explicit")]
    legacy = [project.uv.get("index-url"), *(project.uv.get("extra-index-url") or [])]  # uv's older settings
    urls = [str(e["url"]) for e in searched] + [str(u) for u in legacy if u]
    pytorch = next((url for url in urls if is_pytorch_wheel_index(url)), None)
    if pytorch:
        read_index_url(reading, f"index {pytorch}", pytorch)
        return
    cuda = cuda_from_tag(candidate.name)
    if cuda is not None:
        reading.hints.append(Hint(candidate.label, cuda))
        reading.note(candidate.label, "assumed", f"{'CPU' if cuda == 'cpu' else 'CUDA ' + cuda}, as its name "
                                                 "says: [tool.uv.sources] gives its torch no index, so uv takes "
                                                 "it from PyPI, whose wheel carries the CUDA its version decides")


def _note_unread(reading: VariantsReading, candidates: list[Candidate], per_variant: bool, uv: dict[str, Any]) -> None:
    variants = {v.label for v in reading.variants}
    dropped = {n.entry for n in reading.notes}
    for candidate in candidates:
        if per_variant and candidate.label not in variants and candidate.label not in dropped:
            reading.note(candidate.label, "dropped", "installs no torch of its own, so it is no CUDA variant; add "
                                                     "its packages to `pip:` if the image needs them")
    if uv.get("dev-dependencies"):
        reading.note("[tool.uv] dev-dependencies", "dropped", "developer tools; add them to `pip:` if the image "
                                                             "needs them")

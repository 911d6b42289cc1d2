"""Reading a pixi manifest (pixi.toml, or the `[tool.pixi]` tables of a pyproject.toml): one variant per
environment, on its Linux platform.

An environment is the default feature (the top-level tables) plus the features it lists; its platforms are
those its features allow. A platform may declare its machines' CUDA driver and GPU (`cuda = "12.0"`, or
since pixi 0.71 `cuda = { driver = "12.0", arch = "8.6" }` on a rich platform; `[system-requirements]
cuda` before that), which decides whether conda-forge's pytorch is a CUDA build there. Conda dependencies
are read as conda lines, pypi dependencies as pip lines, each with the outcome noted as for any file.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from packaging.specifiers import SpecifierSet

from builder.init.lines import SOME_CUDA
from builder.init.reading import Hint, Reading, read_channel_list, read_conda_text, read_pip_text
from builder.init.variants import (
    Variant,
    VariantsReading,
    declare_driver,
    declare_no_cuda,
    is_pips_default_index,
    is_pytorch_wheel_index,
    other_accelerator,
    python_minor_floor,
    read_index_url,
)
from builder.yamlio import load_data

# The top-level keys of pixi's manifest schema (pixi 0.81.0, tests/fixtures/pixi-schema): anything else is
# not a pixi table, and pixi itself refuses the file.
PIXI_TABLES = frozenset({
    "$schema", "activation", "build-dependencies", "constraints", "dependencies", "dev", "environments",
    "exclude-newer", "feature", "host-dependencies", "package", "project", "pypi-dependencies",
    "pypi-exclude-newer", "pypi-options", "system-requirements", "target", "tasks", "tool", "workspace",
})
# Tables of a manifest (or a feature) that say nothing about the environment's packages.
NOT_READ = {
    "tasks": "tasks run commands in the environment; run them in your job once the env exists",
    "activation": "activation scripts and variables; set them in your job or image",
    "host-dependencies": "build inputs of a pixi package, not of the environment",
    "build-dependencies": "build inputs of a pixi package, not of the environment",
    "package": "a pixi package's build; envbuild builds environments",
    "dev": "source packages pixi builds; publish them and pin them by version",
    "constraints": "constraints without packages; the spec pins what it installs",
    "exclude-newer": "a date cut-off for the solve; envbuild's lock records what it solved instead",
    "pypi-exclude-newer": "a date cut-off for the solve; envbuild's lock records what it solved instead",
}
LINUX = ("linux-64", "linux-aarch64")
KNOWN_PLATFORMS = ("linux-64", "linux-aarch64", "osx-64", "osx-arm64", "win-64")
FAMILIES = {"linux": ("linux-",), "unix": ("linux-", "osx-"), "osx": ("osx-",), "win": ("win-",)}


@dataclass(frozen=True)
class Platform:
    """A workspace platform: a conda subdir, and what it declares of the machines (`__cuda`, `__cuda_arch`)."""

    name: str
    subdir: str
    driver: str | None = None
    arch: str | None = None
    entry: str = ""


@dataclass
class EnvironmentEntry:
    name: str
    features: list[str]
    platforms: list[Platform] = field(default_factory=list)


TOML_TYPES: dict[str, type | tuple[type, ...]] = {"table": dict, "list": list, "string": str, "number": (int, float)}
TYPE_WORDS = {dict: "a table", list: "a list", str: "a string", bool: "true/false", int: "a number", float: "a number"}


@lru_cache(maxsize=1)
def manifest_types() -> dict[tuple[str, ...], tuple[str, ...]]:
    """data/pixi_manifest_types.yaml: the type of each value read, by its dotted path (`*`: any key)."""
    return {tuple(path.split(".")): tuple(types) for path, types in load_data("pixi_manifest_types.yaml").items()}


def _values_at(data: Any, path: tuple[str, ...], seen: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """Each value of `data` at `path` (a `*` part matches every key of a table) with its dotted name."""
    if not path:
        yield ".".join(seen), data
        return
    if not isinstance(data, dict):
        return
    keys = list(data) if path[0] == "*" else [path[0]] if path[0] in data else []
    for key in keys:
        yield from _values_at(data[key], path[1:], (*seen, str(key)))


def wrong_type(data: dict[str, Any]) -> str | None:
    """Why the manifest is not one pixi reads (the first value, in the types file's order, of another type than
    pixi's schema gives it), or None."""
    for path, types in manifest_types().items():
        for name, value in _values_at(data, path):
            # bool is an int to Python; TOML's true/false is no number
            if isinstance(value, bool) or not any(isinstance(value, TOML_TYPES[kind]) for kind in types):
                found = TYPE_WORDS.get(type(value), type(value).__name__)
                wanted = " or ".join(f"a {kind}" for kind in types)
                return f"{name} is {found} where pixi's manifest has {wanted} (pixi refuses the file too); fix it"
    return None


def read_pixi_manifest_data(data: dict[str, Any], source: str, kind: str = "pixi.toml",
                            project: dict[str, Any] | None = None) -> VariantsReading:
    """A pixi manifest's tables (`project`: the pyproject.toml's [project] table, when the manifest is its
    [tool.pixi]) as one reading per environment."""
    reading = VariantsReading(source, kind=kind)
    unknown = [key for key in data if key not in PIXI_TABLES]
    if unknown:
        raise reading.fail(f"[{unknown[0]}] is not a table of pixi's manifest (pixi refuses the file too); "
                           f"its tables are {', '.join(sorted(PIXI_TABLES - {'$schema'}))}")
    wrong = wrong_type(data)
    if wrong:
        raise reading.fail(wrong)
    workspace = data.get("workspace") or data.get("project")
    if not isinstance(workspace, dict):
        raise reading.fail("no [workspace] table (or [project], its older name), so it is no pixi manifest")
    reading.name = str(workspace.get("name") or (project or {}).get("name") or "") or None
    _note_workspace(reading, workspace)
    platforms = _platforms(reading, workspace.get("platforms"))
    _note_other_platforms(reading, platforms)
    features = _features(reading, data, project or {})
    for environment in _environments(reading, data, features, platforms):
        _add_variants(reading, environment, features, workspace)
    reading.summarise()
    return reading


def _note_other_platforms(reading: Reading, platforms: list[Platform]) -> None:
    """The workspace's platforms other than Linux: envbuild builds Linux images, so the spec gives them
    nothing (macOS has no CUDA; a Windows machine runs the Linux image under WSL2)."""
    others = [p.subdir for p in platforms if not p.subdir.startswith("linux-")]
    if others:
        reading.note(f"platforms = {others}", "dropped",
                     "envbuild builds Linux images: these platforms get no environment from the spec (macOS has "
                     "no CUDA; on Windows the Linux image runs under WSL2); keep pixi for them")


def _note_workspace(reading: Reading, workspace: dict[str, Any]) -> None:
    for key in ("conda-pypi-map", "channel-priority", "solve-strategy", "build-variants"):
        if key in workspace:
            reading.note(f"[workspace] {key}", "unmapped", "a pixi solver setting a spec does not carry")
    for table, reason in NOT_READ.items():
        if table in workspace:
            reading.note(f"[workspace] {table}", "dropped", reason)


def _platforms(reading: Reading, entries: Any) -> list[Platform]:
    """`"linux-64"`, or a rich platform `{ name, platform, cuda = "12.0" | { driver, arch }, glibc, ... }`."""
    platforms: list[Platform] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str):
            platforms.append(Platform(entry, entry))
        elif isinstance(entry, dict):
            platforms.append(_rich_platform(reading, entry))
    if not platforms:
        raise reading.fail("no `platforms` in [workspace]; pixi needs them too (e.g. platforms = [\"linux-64\"])")
    return platforms


def _rich_platform(reading: Reading, entry: dict[str, Any]) -> Platform:
    subdir = str(entry.get("platform") or entry.get("name") or "")
    cuda = entry.get("cuda", entry.get("__cuda"))
    driver = arch = None
    if isinstance(cuda, dict):
        driver, arch = cuda.get("driver"), cuda.get("arch")
    elif cuda is not None:
        driver, arch = cuda, entry.get("__cuda_arch")
    # pixi names an unnamed entry after its subdir and what it declares (`linux-64-cuda-12-0`)
    name = str(entry.get("name") or (f"{subdir}-cuda-{str(driver).replace('.', '-')}" if driver else subdir))
    declared = ", ".join(f"{key} = {toml_inline(value)}" for key, value in entry.items()
                         if key not in ("name", "platform"))
    text = f"platform {name} ({subdir}{': ' + declared if declared else ''})"
    for key in entry:
        if key in ("glibc", "linux", "libc", "__glibc", "__linux"):
            reading.note(text, "dropped", f"{key}: the runtime image's glibc and the host's kernel decide (the "
                                          "spec's images.runtime)")
        elif key in ("macos", "osx", "windows", "archspec", "__osx", "__win", "__archspec"):
            reading.note(text, "dropped", f"{key}: envbuild builds Linux images for the CPU the platform names")
    return Platform(name, subdir, str(driver) if driver is not None else None,
                    str(arch) if arch is not None else None, text)


@dataclass
class Feature:
    name: str
    tables: dict[str, Any]

    @property
    def platforms(self) -> list[str] | None:
        value = self.tables.get("platforms")
        return [str(p) for p in value] if isinstance(value, list) else None


def _features(reading: Reading, data: dict[str, Any], project: dict[str, Any]) -> dict[str, Feature]:
    """The default feature (top-level tables, and a pyproject's [project] dependencies and Python) and the
    named ones."""
    default: dict[str, Any] = {key: data[key] for key in ("dependencies", "pypi-dependencies", "system-requirements",
                                                          "target", "pypi-options") if key in data}
    if project.get("dependencies"):
        default["project-dependencies"] = project["dependencies"]
    if project.get("requires-python"):
        default["requires-python"] = project["requires-python"]
    features = {"default": Feature("default", default)}
    for name, tables in (data.get("feature") or {}).items():
        if isinstance(tables, dict):
            features[str(name)] = Feature(str(name), tables)
    for name, feature in features.items():
        prefix = "" if name == "default" else f"feature.{name}."
        for table, reason in NOT_READ.items():
            if table in (data if name == "default" else feature.tables):
                reading.note(f"[{prefix}{table}]", "dropped", reason)
    return features


def _environments(reading: Reading, data: dict[str, Any], features: dict[str, Feature],
                  platforms: list[Platform]) -> list[EnvironmentEntry]:
    """`[environments]` in file order, after the default environment when the file does not redefine it."""
    declared = data.get("environments") or {}
    environments: list[EnvironmentEntry] = []
    if "default" not in declared:
        environments.append(EnvironmentEntry("default", ["default"]))
    for name, value in declared.items():
        listed = value.get("features", []) if isinstance(value, dict) else value
        no_default = isinstance(value, dict) and bool(value.get("no-default-feature"))
        names = ([] if no_default else ["default"]) + [str(f) for f in listed or [] if f != "default"]
        if "default" in (listed or []) and no_default:
            names.insert(0, "default")
        missing = [n for n in names if n not in features]
        for feature in missing:
            reading.note(f"environment {name}", "unmapped", f"feature {feature!r} is not defined in the file")
        environments.append(EnvironmentEntry(str(name), [n for n in names if n in features]))
    for environment in environments:
        environment.platforms = _environment_platforms(environment, features, platforms)
    return _distinct(reading, environments)


def _distinct(reading: Reading, environments: list[EnvironmentEntry]) -> list[EnvironmentEntry]:
    """`default = ["cuda"]` next to `cuda = ["cuda"]` is one environment under two names: read it once, by
    its own name."""
    distinct: list[EnvironmentEntry] = []
    for environment in environments:
        twin = next((e for e in environments if e is not environment and e.features == environment.features), None)
        if twin is not None and environment.name == "default":
            reading.note("environment default", "assumed", f"the same features as environment {twin.name}")
            continue
        distinct.append(environment)
    return distinct


def _environment_platforms(environment: EnvironmentEntry, features: dict[str, Feature],
                           platforms: list[Platform]) -> list[Platform]:
    """The workspace platforms every feature of the environment allows (a feature without `platforms`
    allows all); a feature names a platform by its name or by its conda subdir."""
    allowed = list(platforms)
    for name in environment.features:
        listed = features[name].platforms
        if listed is not None:
            allowed = [p for p in allowed if p.name in listed or (p.name == p.subdir and p.subdir in listed)]
    return allowed


def _add_variants(reading: VariantsReading, environment: EnvironmentEntry, features: dict[str, Feature],
                  workspace: dict[str, Any]) -> None:
    """One variant per platform the environment is read on: its Linux platforms of one subdir (linux-64
    first), each rich platform a variant of its own; without a Linux platform, its first platform."""
    subdirs = [p.subdir for p in environment.platforms]
    linux = next((s for s in LINUX if s in subdirs), None)
    chosen = [p for p in environment.platforms if p.subdir == (linux or (subdirs[0] if subdirs else None))]
    if not chosen:
        reading.note(f"environment {environment.name}", "dropped", "none of the workspace's platforms is left to "
                                                                   "it (its features' `platforms` exclude them all)")
        return
    variants = []
    for platform in chosen:
        label = f"environment {environment.name}" + (f" on {platform.name}" if len(chosen) > 1 else "")
        variants.append(_read_variant(reading, label, environment, platform, features, workspace))
    with_torch = [v for v in variants if v.reading.conda_torch is not None or v.reading.pip_torch is not None]
    if not with_torch:
        reading.note(f"environment {environment.name}", "dropped", "no torch in it (pytorch in its dependencies or "
                                                                   "torch in its pypi-dependencies)")
    for variant in variants:
        if variant not in with_torch:
            reading.note(variant.label, "dropped", "no torch on this platform")
    reading.variants += with_torch


def _read_variant(parent: Reading, label: str, environment: EnvironmentEntry, platform: Platform,
                  features: dict[str, Feature], workspace: dict[str, Any]) -> Variant:
    reading = Reading(parent.source, kind=parent.kind, name=parent.name)
    known = [p.subdir for p in environment.platforms if p.subdir in KNOWN_PLATFORMS]
    reading.platforms = list(dict.fromkeys(known)) or None
    channels = list(workspace.get("channels") or [])
    for name in environment.features:
        channels += [c for c in features[name].tables.get("channels") or [] if c not in channels]
    read_channel_list(reading, [c.get("channel") if isinstance(c, dict) else c for c in channels])
    variant = Variant(label, reading, platform.driver, platform.entry, platform.arch, platform.entry)
    for name in environment.features:
        _read_feature(reading, features[name], platform, variant)
    if variant.driver:
        declare_driver(reading, variant.driver_entry, variant.driver)
    else:
        declare_no_cuda(reading, f"platform {platform.name}: no cuda declared")
    return variant


def _read_feature(reading: Reading, feature: Feature, platform: Platform, variant: Variant) -> None:
    prefix = "" if feature.name == "default" else f"feature.{feature.name}."
    tables = feature.tables
    if "requires-python" in tables:
        read_conda_text(reading, python_minor_floor(f"python{str(tables['requires-python']).replace(' ', '')}"))
    _read_requirements(reading, f"[{prefix}system-requirements]", tables.get("system-requirements"), variant)
    _read_conda(reading, tables.get("dependencies"))
    for requirement in tables.get("project-dependencies") or []:
        read_pip_text(reading, str(requirement))
    _read_pypi(reading, tables.get("pypi-dependencies"))
    for selector, target in (tables.get("target") or {}).items():
        if isinstance(target, dict) and _selects(str(selector), platform):
            _read_conda(reading, target.get("dependencies"))
            _read_pypi(reading, target.get("pypi-dependencies"))
    _read_pypi_options(reading, f"[{prefix}pypi-options]", tables.get("pypi-options"))


def _selects(selector: str, platform: Platform) -> bool:
    """Whether `[target.<selector>]` applies on the platform: its name, its subdir, a family (`linux`,
    `unix`) or a wildcard (`*-cuda`)."""
    if selector in (platform.name, platform.subdir):
        return True
    if selector in FAMILIES:
        return platform.subdir.startswith(FAMILIES[selector])
    return "*" in selector and (fnmatch.fnmatchcase(platform.name, selector)
                                or fnmatch.fnmatchcase(platform.subdir, selector))


def _read_requirements(reading: Reading, entry: str, table: Any, variant: Variant) -> None:
    """`[system-requirements]` (deprecated since pixi 0.71 for the platform form): `cuda` is the driver floor
    when the platform declares none; glibc, kernel and macOS versions are the image's business."""
    if not isinstance(table, dict):
        return
    for key, value in table.items():
        text = f"{entry} {key} = {toml_inline(value)}"
        if key == "cuda" and variant.driver is None:
            variant.driver, variant.driver_entry = str(value), text
        elif key != "cuda":
            reading.note(text, "dropped", "the runtime image's glibc and the host's kernel decide (the spec's "
                                          "images.runtime); envbuild builds Linux images")


def toml_inline(value: Any) -> str:
    """A value as the manifest writes it: `"12.0"`, `{ driver = "12.0", arch = "8.6" }`."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_inline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_inline(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return f'"{value}"' if isinstance(value, str) else str(value)


def _read_conda(reading: Reading, table: Any) -> None:
    for name, value in (table or {}).items():
        text = conda_text(str(name), value)
        if text is None:
            reading.note(f"{name} = {toml_inline(value)}", "unmapped", "a conda package from a path, a URL or git; "
                                                                       "publish it to a channel and pin it by version")
        elif name == "pytorch-cuda" and text.split("::")[-1] == "pytorch-cuda":
            reading.hints.append(Hint(text, SOME_CUDA))  # any pytorch-cuda: some CUDA build of the legacy channel
            reading.legacy_markers.append(text)
        elif name == "python":
            read_conda_text(reading, python_minor_floor(text))
            if reading.python is not None:  # the notes name the line as written
                reading.python = replace(reading.python, text=text)
        elif name == "cuda-version" and re.fullmatch(r"\d+\.\*", str(value)):
            _read_cuda_major(reading, text, int(str(value).split(".")[0]))
        else:
            read_conda_text(reading, text)


def _read_cuda_major(reading: Reading, text: str, major: int) -> None:
    """`cuda-version = "12.*"`: any CUDA of that major."""
    reading.conda_lines += 1
    reading.conda_names.append("cuda-version")
    reading.cuda_ranges.append((text, SpecifierSet(f">={major}.0,<{major + 1}")))


def conda_text(name: str, value: Any) -> str | None:
    """A pixi conda dependency as a conda line: `"*"` -> `name`, `">=2.8,<3"` -> `name>=2.8,<3`, `"3.10.*"`
    -> `name=3.10.*`, `{ version, build, channel }` -> `channel::name=version=build`; None for a
    path, URL or git source."""
    if isinstance(value, dict):
        if any(key in value for key in ("path", "url", "git")):
            return None
        text = conda_text(name, value.get("version", "*")) or name
        build = value.get("build")
        if build:
            text += f"={build}" if any(op in text for op in "<>=!~") else f"=*={build}"
        return f"{value['channel']}::{text}" if value.get("channel") else text
    version = str(value).replace(" ", "")
    if version in ("", "*"):
        return name
    return f"{name}{version}" if version[0] in "<>=!~" else f"{name}={version}"


def _read_pypi(reading: Reading, table: Any) -> None:
    reading.has_pip_section = reading.has_pip_section or bool(table)
    for name, value in (table or {}).items():
        text, index = pip_text(str(name), value)
        if text is None:
            _note_unpinned_source(reading, str(name), value)
        elif index is None or _read_pypi_index(reading, str(name), text, index):
            read_pip_text(reading, text)


def _note_unpinned_source(reading: Reading, name: str, value: Any) -> None:
    if name.lower() == "torch":
        raise reading.fail(f"torch = {toml_inline(value)} takes torch from a URL, a folder or git; pin it by "
                           "version (with a cuXYZ index) so envbuild can pick the wheel per target")
    reading.note(f"{name} = {toml_inline(value)}", "unmapped",
                 "a package from a folder, a URL or git; publish it to an index and pin it by version")


def _read_pypi_index(reading: Reading, name: str, text: str, index: str) -> bool:
    """A pypi dependency's own `index`: torch's names the target's CUDA; another package is kept when its
    index is PyPI or PyTorch's. False (noted) when the package is left out."""
    accelerator = other_accelerator(index)
    if accelerator and name.lower() in ("torch", "torchvision"):
        reading.note(text, "dropped", f"a {accelerator} build; envbuild builds NVIDIA CUDA and CPU targets")
        return False
    if name.lower() == "torch":
        read_index_url(reading, f"{name} index {index}", index)
        return True
    if is_pytorch_wheel_index(index) or is_pips_default_index(index):
        return True
    read_index_url(reading, f"{text} (index {index})", index, for_torch=False)
    return False


def pip_text(name: str, value: Any) -> tuple[str | None, str | None]:
    """A pixi pypi dependency as a pip requirement and its index: `">=2.5"` -> `name>=2.5`,
    `{ version, extras, index }` -> `name[extras]version`; None for a path, URL or git source."""
    if isinstance(value, dict):
        if any(key in value for key in ("path", "url", "git")):
            return None, None
        extras = value.get("extras") or []
        requirement, _ = pip_text(name + (f"[{','.join(extras)}]" if extras else ""), value.get("version", "*"))
        return requirement, value.get("index")
    version = str(value).strip()
    if version in ("", "*"):
        return name, None
    return (f"{name}{version}" if version[0] in "<>=!~" else f"{name}=={version}"), None


def _read_pypi_options(reading: Reading, entry: str, options: Any) -> None:
    """`index-url` and `extra-index-urls`: a PyTorch index names the CUDA; other options are the resolver's."""
    if not isinstance(options, dict):
        return
    urls = ([options["index-url"]] if options.get("index-url") else []) + list(options.get("extra-index-urls") or [])
    for url in urls:
        read_index_url(reading, f"{entry} {url}", str(url))
    for key in options:
        if key not in ("index-url", "extra-index-urls"):
            reading.note(f"{entry} {key}", "dropped", "a resolver option; envbuild's lock resolves the pip part "
                                                      "with uv against the target's index")

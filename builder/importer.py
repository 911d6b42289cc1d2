"""`envbuild init`: an existing environment.yml (hand-written or `conda env export`) to a spec.

The environment.yml says how torch gets its CUDA in one of the ways teams have used over the years:
the legacy pytorch channel with `pytorch-cuda=X.Y` (or `cpuonly`), the older `cudatoolkit=X.Y`,
conda-forge's `cuda-version`, `pytorch-gpu`/`pytorch-cpu` and `cudaXYZ_*` builds, or a pip section
with a cuXYZ wheel index or `torch==V+cuXYZ`. Those lines become the spec's torch, route and target;
the rest become extra packages. Every line that is not kept as written is reported with the reason,
and the result is checked like any spec (load, resolve against the compatibility data, lint) before
a byte is written.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from builder.compat import CompatData, TorchRelease, load_compat, version_tuple
from builder.errors import UsageError
from builder.generated_files import write_new_file
from builder.lint import Finding, lint_spec
from builder.spec import (
    CHANNEL_PATTERN,
    CUDA_PATTERN,
    DEFAULT_CHANNELS,
    NAME_PATTERN,
    PACKAGE_PATTERN,
    URL_PATTERN,
    EnvSpec,
    Route,
    parse_spec,
    read_yaml_file,
)
from builder.target import Target, default_pip_index, resolve_targets
from builder.templates import render_template

Outcome = Literal["derived", "assumed", "unpinned", "dropped", "unmapped"]
CPU = "cpu"
SOME_CUDA = "cuda"  # a CUDA build without a version (`pytorch-gpu`, `pytorch=*=cuda*`)

CONDA_TORCH = {"pytorch", "torch"}
CONDA_TORCH_FLAVOURS = {"pytorch-gpu": SOME_CUDA, "pytorch-cpu": CPU}
OPERATORS = ("==", ">=", "<=", "!=", "~=", ">", "<")
TOP_LEVEL_READ = {"name", "channels", "dependencies", "prefix", "platforms"}


@dataclass(frozen=True)
class Note:
    """What happened to one line of the environment.yml, when it was not simply kept."""

    entry: str
    outcome: Outcome
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"entry": self.entry, "outcome": self.outcome, "reason": self.reason}


@dataclass(frozen=True)
class SpecDraft:
    """The spec about to be written: its data (what the file must read back as) and its notes."""

    data: dict[str, Any]
    notes: tuple[Note, ...] = ()
    source: Path | None = None


@dataclass(frozen=True)
class InitResult:
    path: Path
    spec: EnvSpec
    targets: list[Target]
    notes: tuple[Note, ...]
    findings: tuple[Finding, ...]
    source: Path | None

    @property
    def unmapped(self) -> list[Note]:
        return [n for n in self.notes if n.outcome == "unmapped"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "source": str(self.source) if self.source else None,
            "name": self.spec.name,
            "python": self.spec.python,
            "torch": self.spec.torch,
            "torchvision": self.spec.torchvision,
            "route": self.spec.route.value,
            "targets": [t.key for t in self.targets],
            "conda": list(self.spec.conda),
            "pip": list(self.spec.pip),
            "notes": [n.as_dict() for n in self.notes],
            "unmapped": [n.as_dict() for n in self.unmapped],
            "lint": [f.as_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class Rule:
    section: Literal["conda", "pip"]
    names: tuple[str, ...]
    action: Literal["keep", "unpin", "drop"]
    reason: str = ""


@dataclass(frozen=True)
class ImportRules:
    default_python: str
    rules: tuple[Rule, ...]

    def rule_for(self, section: str, name: str) -> Rule | None:
        for rule in self.rules:
            if rule.section == section and any(fnmatch.fnmatchcase(name, p) for p in rule.names):
                return rule
        return None


@lru_cache(maxsize=1)
def load_import_rules() -> ImportRules:
    text = resources.files("builder").joinpath("data/import_rules.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    rules = tuple(
        Rule(r["section"], tuple(r["names"]), r["action"], r.get("reason", "")) for r in raw["rules"]
    )
    return ImportRules(str(raw["default_python"]), rules)


# ---------------------------------------------------------------------------------------------
# Reading the lines


@dataclass(frozen=True)
class CondaLine:
    text: str
    name: str
    version: str | None  # "2.1.0", "2.1.*", ">=2.0,<2.2"; None when unpinned
    build: str | None
    channel: str | None  # `pytorch::pytorch` -> "pytorch"

    def spec(self, with_version: bool = True) -> str:
        if not with_version or not self.version:
            return self.name
        if self.version.startswith(OPERATORS):
            return f"{self.name}{self.version}"
        return f"{self.name}={self.version}"


def parse_conda_line(text: str) -> CondaLine | None:
    """A conda MatchSpec as environment.yml files write it; None when it has a form envbuild cannot read."""
    channel = None
    body = text.strip()
    if "::" in body:
        channel, _, body = body.partition("::")
    match = re.fullmatch(r"([A-Za-z0-9_][A-Za-z0-9_.\-]*)\s*(.*)", body.strip())
    if not match or "[" in match[2] or "|" in match[2]:
        return None
    name, rest = match[1].lower(), match[2].strip()
    version = build = None
    if rest.startswith("=") and not rest.startswith("=="):
        version, _, build = rest[1:].partition("=")
    elif rest:
        parts = rest.split()
        if len(parts) > 1 and parts[0] in OPERATORS:
            parts = [parts[0] + parts[1], *parts[2:]]
        if len(parts) > 2:
            return None
        version = parts[0]
        build = parts[1] if len(parts) == 2 else None
        exact_with_build = re.fullmatch(r"==([^=<>!~,]+)=(.+)", version)
        if exact_with_build:
            version, build = f"=={exact_with_build[1]}", exact_with_build[2]
    return CondaLine(text, name, version or None, build or None, channel or None)


def cuda_from_tag(tag: str) -> str | None:
    """`cu121` -> `12.1`, `cu118` -> `11.8`, `cpu` -> `cpu`: the wheel index and local-version tags."""
    if tag == CPU:
        return CPU
    match = re.fullmatch(r"cu(\d+)(\d)", tag)
    return f"{int(match[1])}.{match[2]}" if match else None


def cuda_from_build(build: str) -> tuple[str | None, Route | None]:
    """The CUDA a torch build string names, and the channel family the string's form belongs to.

    Legacy pytorch channel: `py3.11_cuda12.1_cudnn8.9.2_0`, `py3.11_cpu_0`. conda-forge:
    `cuda126_mkl_py311h...`, `cpu_mkl_py311h...`, and match patterns such as `cuda*` or `cuda129*`.
    """
    legacy = re.search(r"cuda(\d+\.\d+)", build)
    if legacy:
        return legacy[1], Route.PYTORCH_CHANNEL
    if re.match(r"py\d\.\d+_cpu", build):
        return CPU, Route.PYTORCH_CHANNEL
    compact = re.match(r"cuda(\d\d)(\d)", build)
    if compact:
        return f"{int(compact[1])}.{compact[2]}", Route.CONDA_FORGE
    if re.match(r"cuda(\*|_|$)", build):
        return SOME_CUDA, Route.CONDA_FORGE
    if re.match(r"cpu(\*|_|$)", build):
        return CPU, Route.CONDA_FORGE
    return None, None


def cuda_from_version(version: str | None) -> str | None:
    """`12.1`, `=12.1`, `12.1.105` -> `12.1` (pytorch-cuda, cudatoolkit and cuda-version pins)."""
    match = re.fullmatch(r"=*(\d+)\.(\d+)(\.[0-9.*]+)?\*?", version or "")
    return f"{match[1]}.{match[2]}" if match else None


def _exact_version(version: str | None) -> str | None:
    match = re.fullmatch(r"=*(\d+\.\d+\.\d+)(\+[A-Za-z0-9.]+)?", version or "")
    return match[1] if match else None


def _version_specifier(version: str | None) -> SpecifierSet | None:
    """A conda or pip version constraint as a PEP 440 set; None when it cannot be read."""
    if not version:
        return SpecifierSet()
    text = version.lstrip("=") if not version.startswith(OPERATORS[1:]) else version
    if re.fullmatch(r"\d+(\.\d+)*(\.\*)?", text):
        return SpecifierSet(f"=={text}" if text.endswith("*") else f"=={text}.*")
    try:
        return SpecifierSet(version.replace(" ", ""))
    except InvalidSpecifier:
        return None


def _python_minor(version: str | None) -> str | None:
    match = re.fullmatch(r"=*(3)\.(\d+)(\.[0-9*]+)*\*?", version or "")
    return f"{match[1]}.{match[2]}" if match else None


@dataclass
class Hint:
    """One line's word on the CUDA target: a version, `cpu`, or `cuda` (some CUDA build)."""

    entry: str
    cuda: str


@dataclass
class Reading:
    """What the lines say, gathered in file order before anything is decided."""

    source: str
    name: str | None = None
    channels: list[str] = field(default_factory=list)
    platforms: list[str] | None = None
    python: CondaLine | None = None
    conda_torch: CondaLine | None = None
    pip_torch: Requirement | None = None
    pip_torch_text: str | None = None
    conda_torchvision: CondaLine | None = None
    pip_torchvision: Requirement | None = None
    pip_torchvision_text: str | None = None
    hints: list[Hint] = field(default_factory=list)
    pip_index_hints: list[Hint] = field(default_factory=list)
    pip_index_urls: list[str] = field(default_factory=list)
    legacy_markers: list[str] = field(default_factory=list)
    conda_forge_markers: list[str] = field(default_factory=list)
    conda: list[str] = field(default_factory=list)
    pip: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    with_builds: int = 0
    conda_lines: int = 0
    exported: bool = False
    nodefaults: bool = False

    def note(self, entry: str, outcome: Outcome, reason: str) -> None:
        self.notes.append(Note(entry, outcome, reason))

    def fail(self, reason: str) -> UsageError:
        return UsageError(f"{self.source}: {reason}")


def read_environment(path: Path) -> Reading:
    return read_environment_data(read_yaml_file(path, "environment.yml"), str(path))


def read_environment_data(data: Any, source: str) -> Reading:
    reading = Reading(source)
    if not isinstance(data, dict):
        raise reading.fail("an environment.yml is a YAML mapping with `dependencies:` (and usually name, channels)")
    dependencies = data.get("dependencies")
    if not isinstance(dependencies, list) or not dependencies:
        raise reading.fail("no `dependencies:` list, so there is nothing to import")
    if isinstance(data.get("name"), str):
        reading.name = data["name"]
    if "prefix" in data:
        reading.exported = True
        reading.note("prefix:", "dropped", "a folder on the machine that exported the env")
    _read_channels(reading, data.get("channels"))
    platforms = data.get("platforms")
    if isinstance(platforms, list) and all(isinstance(p, str) for p in platforms):
        reading.platforms = list(platforms)
    elif platforms is not None:
        reading.note(f"platforms: {platforms}", "unmapped", "not a list of conda platforms (e.g. linux-64)")
    for key in data:
        if key not in TOP_LEVEL_READ:
            reason = ("envbuild specs set no environment variables; set them in your job or image"
                      if key == "variables" else "not a key envbuild reads from an environment.yml")
            reading.note(f"{key}:", "unmapped", reason)
    for item in dependencies:
        if isinstance(item, str):
            _read_conda(reading, item)
        elif isinstance(item, dict) and set(item) == {"pip"} and isinstance(item["pip"], list):
            for line in item["pip"]:
                _read_pip(reading, str(line))
        else:
            reading.note(str(item), "unmapped", "not a package line or a `pip:` list")
    if reading.conda_lines and reading.with_builds * 2 >= reading.conda_lines:
        reading.exported = True
    return reading


def _read_channels(reading: Reading, channels: Any) -> None:
    if channels is None:
        return
    if not isinstance(channels, list):
        reading.note(f"channels: {channels}", "unmapped", "not a list of channels")
        return
    for channel in channels:
        text = str(channel)
        if text == "defaults":
            reading.note("channels: defaults", "dropped",
                         "Anaconda's channel set (its terms of service bind organisations); conda-forge "
                         "carries the same packages")
        elif text == "nodefaults":
            reading.nodefaults = True
        elif not re.fullmatch(CHANNEL_PATTERN, text) or len(text) > 300:
            reading.note(f"channels: {text}", "unmapped", "not a channel name or URL envbuild accepts")
        elif text not in reading.channels:
            reading.channels.append(text)


def _read_conda(reading: Reading, text: str) -> None:
    line = parse_conda_line(text)
    if line is None:
        reading.note(text, "unmapped", "not a conda package form envbuild reads (name, =version, =build)")
        return
    reading.conda_lines += 1
    reading.with_builds += line.build is not None
    name = line.name
    if line.channel == "pytorch":
        reading.legacy_markers.append(text)
    if name == "python":
        reading.python = line
    elif name in CONDA_TORCH or name in CONDA_TORCH_FLAVOURS:
        _read_conda_torch(reading, line)
    elif name == "torchvision":
        reading.conda_torchvision = line
    elif name == "pytorch-cuda":
        cuda = cuda_from_version(line.version)
        if cuda is None:
            reading.note(text, "unmapped", "pytorch-cuda without a X.Y version")
        else:
            reading.hints.append(Hint(text, cuda))
        reading.legacy_markers.append(text)
    elif name == "cpuonly":
        reading.hints.append(Hint(text, CPU))
        reading.legacy_markers.append(text)
    elif name in ("cudatoolkit", "cuda-version"):
        cuda = cuda_from_version(line.version)
        if cuda is not None:
            reading.hints.append(Hint(text, cuda))
        elif name == "cudatoolkit":
            reading.note(text, "dropped", "cudatoolkit without a version names no CUDA; the target pins CUDA")
        else:
            reading.note(text, "unmapped", "cuda-version without a X.Y version")
    else:
        _keep(reading, "conda", line.name, text, line.spec(), line.spec(with_version=False), line)


def _read_conda_torch(reading: Reading, line: CondaLine) -> None:
    if reading.conda_torch is not None:
        reading.note(line.text, "dropped", f"torch is already given by {reading.conda_torch.text!r}")
        return
    reading.conda_torch = line
    flavour = CONDA_TORCH_FLAVOURS.get(line.name)
    if flavour:
        reading.hints.append(Hint(line.text, flavour))
        reading.conda_forge_markers.append(line.text)
    if line.build:
        cuda, family = cuda_from_build(line.build)
        if cuda:
            reading.hints.append(Hint(line.text, cuda))
        if family is Route.PYTORCH_CHANNEL:
            reading.legacy_markers.append(line.text)
        elif family is Route.CONDA_FORGE:
            reading.conda_forge_markers.append(line.text)
    if line.channel == "conda-forge":
        reading.conda_forge_markers.append(line.text)


def _keep(reading: Reading, section: Literal["conda", "pip"], name: str, text: str, pinned: str,
          unpinned: str, line: CondaLine | None = None) -> None:
    rule = load_import_rules().rule_for(section, name)
    chosen = pinned
    if rule is not None and rule.action == "drop":
        reading.note(text, "dropped", rule.reason)
        return
    if rule is not None and rule.action == "unpin" and pinned != unpinned:
        reading.note(text, "unpinned", rule.reason)
        chosen = unpinned
    if not re.fullmatch(PACKAGE_PATTERN, chosen) or len(chosen) > 200:
        reading.note(text, "unmapped", "not a package form an envbuild spec accepts")
        return
    if line is not None and line.channel and line.channel != "pytorch":
        reading.note(text, "assumed", f"`{line.channel}::` left out: the spec's channels decide where it comes from")
    target = reading.conda if section == "conda" else reading.pip
    if chosen not in target:
        target.append(chosen)


def _read_pip(reading: Reading, text: str) -> None:
    line = text.strip()
    option = re.fullmatch(r"(--index-url|--extra-index-url|-i|--find-links|-f)[\s=]+(\S+)", line)
    if option and option[1] in ("--find-links", "-f"):
        reading.note(text, "dropped", "a find-links page; torch comes from the wheel index of the target's CUDA")
        return
    if option:
        _read_pip_index(reading, text, option[2])
        return
    if re.match(r"(-e|--editable)\b", line):
        reading.note(text, "unmapped", "an editable install of a folder; run it in your job once the env exists")
        return
    if re.match(r"(-r|--requirement|-c|--constraint)\b", line):
        reading.note(text, "unmapped", "a requirements or constraints file; list its packages here instead")
        return
    if line.startswith("-"):
        reading.note(text, "unmapped", "pip options other than an index URL have no place in a spec")
        return
    if re.match(r"(git\+|hg\+|svn\+|bzr\+|https?://|file:|\.|/)", line):
        reading.note(text, "unmapped", "a package from a URL or a folder; publish it to an index and pin it by version")
        return
    try:
        requirement = Requirement(line)
    except InvalidRequirement:
        reading.note(text, "unmapped", "not a pip requirement")
        return
    if requirement.url:
        reading.note(text, "unmapped",
                     "a package from a URL (name @ url); publish it to an index and pin it by version")
        return
    if requirement.marker is not None:
        reading.note(text, "unmapped", "environment markers (`; ...`) have no place in a spec's pip list")
        return
    name = requirement.name.lower().replace("_", "-")
    if name == "torch":
        if reading.pip_torch is None:
            reading.pip_torch, reading.pip_torch_text = requirement, text
            local = _local_tag(requirement)
            if local:
                cuda = cuda_from_tag(local)
                if cuda:
                    reading.hints.append(Hint(text, cuda))
        return
    if name == "torchvision":
        reading.pip_torchvision, reading.pip_torchvision_text = requirement, text
        return
    compact = line.replace(" ", "")
    without_local = re.sub(r"\+(cu\d+|cpu|rocm[0-9.]+)(?=$|,)", "", compact)
    if without_local != compact:
        reading.note(text, "unpinned", "the local tag is left out: the target's wheel index supplies the build")
    _keep(reading, "pip", name, text, without_local, requirement.name)


def _local_tag(requirement: Requirement) -> str | None:
    for specifier in requirement.specifier:
        if "+" in specifier.version:
            return specifier.version.split("+", 1)[1]
    return None


def _read_pip_index(reading: Reading, text: str, url: str) -> None:
    tag = url.rstrip("/").rsplit("/", 1)[-1]
    cuda = cuda_from_tag(tag)
    if cuda is None:
        reading.note(text, "unmapped",
                     "not a PyTorch wheel index (no /cuXYZ or /cpu at its end); an index mirror for every "
                     "package is pip's own configuration (PIP_INDEX_URL), not the spec's")
        return
    reading.pip_index_hints.append(Hint(text, cuda))
    reading.pip_index_urls.append(url)


# ---------------------------------------------------------------------------------------------
# Deciding: route, CUDA target, torch, python, torchvision


def _route(reading: Reading) -> Route:
    if reading.conda_torch and reading.pip_torch:
        raise reading.fail(
            f"torch comes from both conda ({reading.conda_torch.text!r}) and pip ({reading.pip_torch_text!r}); "
            "one copy overwrites the other. Keep one of them and run `envbuild init` again")
    if reading.pip_torch:
        return Route.PIP
    if reading.conda_torch is None:
        raise reading.fail(
            "no torch in it (pytorch in conda or torch in pip); envbuild builds PyTorch environments. "
            "Add torch, or run `envbuild init` without --from for a starter spec")
    if reading.legacy_markers and reading.conda_forge_markers:
        raise reading.fail(
            f"it mixes the legacy pytorch channel ({reading.legacy_markers[0]!r}) with conda-forge's torch "
            f"({reading.conda_forge_markers[0]!r}); keep one of them and run `envbuild init` again")
    if reading.legacy_markers or (not reading.conda_forge_markers and "pytorch" in reading.channels):
        return Route.PYTORCH_CHANNEL
    return Route.CONDA_FORGE


def _cuda_hint(reading: Reading, route: Route) -> tuple[str | None, list[Hint]]:
    """The one CUDA version (or cpu) the lines agree on; `cuda` when they only ask for some CUDA build,
    None when no line says anything about CUDA."""
    hints = list(reading.hints)
    if route is Route.PIP:
        hints += reading.pip_index_hints
    concrete = {h.cuda for h in hints if h.cuda != SOME_CUDA}
    if CPU in concrete and any(h.cuda == SOME_CUDA for h in hints):
        concrete.add(SOME_CUDA)
    if len(concrete) > 1:
        meaning = {CPU: "CPU", SOME_CUDA: "a CUDA build"}
        said = ", ".join(f"{h.entry!r} says {meaning.get(h.cuda, 'CUDA ' + h.cuda)}" for h in hints)
        raise reading.fail(f"conflicting CUDA hints: {said}; keep the one you mean and run `envbuild init` again")
    if concrete:
        return concrete.pop(), hints
    return (SOME_CUDA if hints else None), hints


def _python_wish(reading: Reading) -> tuple[str | None, SpecifierSet]:
    line = reading.python
    if line is None:
        return None, SpecifierSet()
    exact = _python_minor(line.version)
    if exact:
        return exact, SpecifierSet()
    wanted = _version_specifier(line.version)
    if wanted is None:
        raise reading.fail(f"cannot read the Python version in {line.text!r}")
    return None, wanted


def _torch_wish(reading: Reading) -> tuple[str, str | None, SpecifierSet]:
    """(the line as written, its exact version or None, the versions it allows)."""
    if reading.pip_torch is not None:
        text = reading.pip_torch_text or "torch"
        specifiers = [s for s in reading.pip_torch.specifier]
        if len(specifiers) == 1 and specifiers[0].operator in ("==", "===") and "*" not in specifiers[0].version:
            exact = _exact_version(specifiers[0].version)
            if exact:
                return text, exact, SpecifierSet()
        version = str(reading.pip_torch.specifier)
    else:
        line = reading.conda_torch
        assert line is not None
        text = line.text
        exact = _exact_version(line.version)
        if exact:
            return text, exact, SpecifierSet()
        version = line.version or ""
    wanted = _version_specifier(re.sub(r"\+[A-Za-z0-9.]+", "", version))
    if wanted is None:
        raise reading.fail(f"cannot read the torch version in {text!r}")
    return text, None, wanted


def _fits(release: TorchRelease, route: Route, cuda: str | None, python: str | None) -> bool:
    variants = release.cuda_variants(route)
    if python and not release.python.contains(python):
        return False
    if cuda in (None, SOME_CUDA):
        return bool(variants)
    if cuda == CPU:
        return route is not Route.PYTORCH_CHANNEL or bool(variants)
    return cuda in variants


def _choose_release(reading: Reading, compat: CompatData, route: Route, cuda: str | None,
                    python: str | None) -> tuple[str, TorchRelease | None]:
    text, exact, wanted = _torch_wish(reading)
    if exact:
        return exact, compat.release(exact)
    candidates = [r for r in compat.releases()
                  if r.confidence != "projected" and wanted.contains(r.latest) and _fits(r, route, cuda, python)]
    conditions = [f"route {route.value}"]
    if cuda not in (None, SOME_CUDA):
        conditions.append("CPU" if cuda == CPU else f"CUDA {cuda}")
    if python:
        conditions.append(f"Python {python}")
    if not candidates:
        known = ", ".join(r.line for r in compat.releases())
        raise reading.fail(
            f"no torch release in envbuild's compatibility data fits {text!r} with {', '.join(conditions)} "
            f"(known: {known})")
    chosen = candidates[-1]
    reading.note(text, "assumed", f"torch {chosen.latest}: the newest release that fits {', '.join(conditions)}")
    return chosen.latest, chosen


def _choose_cuda(reading: Reading, compat: CompatData, route: Route, cuda: str | None, hints: list[Hint],
                 release: TorchRelease | None) -> str:
    for hint in hints:
        if hint.entry != _torch_entry(reading):  # the torch line gets one note, with the torch it gives
            reading.note(hint.entry, "derived", f"{_hint_meaning(hint)} (route {route.value})")
    if cuda not in (None, SOME_CUDA):
        if not re.fullmatch(CUDA_PATTERN, cuda):
            known = ", ".join(sorted(compat.cuda, key=version_tuple))
            raise reading.fail(f"CUDA {cuda} is older than any CUDA envbuild builds for (known: {known})")
        return cuda
    variants = release.cuda_variants(route) if release else []
    if release is None or not variants:
        return CPU  # the target is refused with its reason when the spec is resolved
    chosen = variants[-1]
    why = ("it asks for a CUDA build without a version" if cuda == SOME_CUDA
           else "no line names a CUDA version (pytorch-cuda, cuda-version, cudatoolkit, +cuXYZ, a cuXYZ index)")
    reading.note(_torch_entry(reading), "assumed",
                 f"target cuda{chosen}: {why}; it is the newest CUDA of torch {release.line} on route "
                 f"{route.value} (add targets for others)")
    return chosen


def _hint_meaning(hint: Hint) -> str:
    return {CPU: "the CPU target", SOME_CUDA: "a CUDA target"}.get(hint.cuda, f"target cuda{hint.cuda}")


def _torch_entry(reading: Reading) -> str:
    return (reading.conda_torch.text if reading.conda_torch else reading.pip_torch_text) or "torch"


def _choose_python(reading: Reading, release: TorchRelease | None, exact: str | None,
                   wanted: SpecifierSet) -> str:
    if exact:
        return exact
    default = load_import_rules().default_python
    if release is None:
        return default
    low, high = version_tuple(release.python.min), version_tuple(release.python.max)
    supported = [f"3.{minor}" for minor in range(low[1], high[1] + 1)]
    allowed = [v for v in supported if wanted.contains(f"{v}.0")]
    if not allowed:
        raise reading.fail(
            f"torch {release.line} supports Python {release.python.min} to {release.python.max}, and none of "
            f"them fits {reading.python.text if reading.python else 'python'!r}")
    chosen = default if default in allowed else allowed[-1]
    entry = reading.python.text if reading.python else "python (not listed)"
    reading.note(entry, "assumed", f"Python {chosen}, supported by torch {release.line}")
    return chosen


def _choose_torchvision(reading: Reading, release: TorchRelease | None) -> str | None:
    if reading.pip_torchvision is not None:
        text = reading.pip_torchvision_text or "torchvision"
        versions = [s.version for s in reading.pip_torchvision.specifier if s.operator in ("==", "===")]
        exact = _exact_version(versions[0]) if versions else None
    elif reading.conda_torchvision is not None:
        text = reading.conda_torchvision.text
        exact = _exact_version(reading.conda_torchvision.version)
    else:
        return None
    if exact:
        reading.note(text, "derived", f"torchvision {exact}")
        return exact
    if release is None or not release.torchvision_latest:
        return None
    reading.note(text, "assumed", f"torchvision {release.torchvision_latest}, the pair of torch {release.line}")
    return release.torchvision_latest


def _pip_index(reading: Reading, route: Route) -> str | None:
    """A custom wheel index (a mirror) for the spec; the public PyTorch index is envbuild's default."""
    if route is not Route.PIP:
        for url in reading.pip_index_urls:
            reading.note(url, "unmapped", "a PyTorch wheel index, but torch comes from conda here")
        return None
    if not reading.pip_index_urls:
        return None
    url = reading.pip_index_urls[0]
    public = default_pip_index().split("{tag}", 1)[0]
    if url.startswith(public):
        return None
    if not re.fullmatch(URL_PATTERN, url) or len(url) > 300:
        reading.note(url, "unmapped", "not a URL an envbuild spec accepts")
        return None
    reading.note(url, "assumed", "pip_index: this mirror serves one CUDA tag; every pip target of the spec uses it")
    return url


def _name(reading: Reading, name: str | None) -> str:
    wanted = name or reading.name or Path.cwd().name
    chosen = spec_name(wanted, reading.source)
    if chosen != wanted:
        where = "name:" if not name and reading.name else "--name" if name else "this folder's name"
        reading.note(f"{where} {wanted}", "assumed", f"name {chosen}: env names are lower case, without spaces")
    return chosen


def spec_name(wanted: str, source: str) -> str:
    """A name the spec accepts: lower case, other characters as `-`."""
    name = re.sub(r"[^a-z0-9_.\-]+", "-", wanted.lower()).strip("-_.")[:63]
    if not re.fullmatch(NAME_PATTERN, name):
        raise UsageError(f"{source}: cannot make an env name from {wanted!r}; pass --name")
    return name


def _channels(reading: Reading, route: Route) -> list[str] | None:
    channels = list(reading.channels)
    if not channels:
        return None
    if not reading.nodefaults and "conda-forge" not in channels:
        # conda adds its default channels to these unless `nodefaults` is listed; so does envbuild,
        # with conda-forge in their place.
        channels.append("conda-forge")
        reading.note("channels:", "assumed", "conda-forge added where conda would add its defaults")
    if tuple(channels) == DEFAULT_CHANNELS[route]:
        return None
    return channels


def draft_from_environment(reading: Reading, name: str | None = None,
                           compat: CompatData | None = None) -> SpecDraft:
    """The spec data an environment.yml reading leads to, with the notes of every decision."""
    compat = compat or load_compat()
    route = _route(reading)
    cuda, hints = _cuda_hint(reading, route)
    python_exact, python_wanted = _python_wish(reading)
    torch, release = _choose_release(reading, compat, route, cuda, python_exact)
    target = _choose_cuda(reading, compat, route, cuda, hints, release)
    python = _choose_python(reading, release, python_exact, python_wanted)
    torchvision = _choose_torchvision(reading, release)
    if reading.python and python_exact:
        reading.note(reading.python.text, "derived", f"python: {python}")
    torch_entry = _torch_entry(reading)
    if not any(n.entry == torch_entry and n.outcome == "assumed" and n.reason.startswith("torch ")
               for n in reading.notes):
        said = [_hint_meaning(h) for h in hints if h.entry == torch_entry]
        reading.note(torch_entry, "derived", ", ".join([f"torch {torch}", f"route {route.value}", *said]))
    if reading.exported:
        reading.note("(the whole file)", "assumed",
                     f"a `conda env export`: all {reading.conda_lines} installed packages were pinned there, so "
                     "every dependency is now an extra; keep in `conda:` only what you asked for")
    data: dict[str, Any] = {
        "name": _name(reading, name),
        "description": f"imported from {Path(reading.source).name} by envbuild init",
        "python": python,
        "torch": torch,
    }
    if torchvision:
        data["torchvision"] = torchvision
    data["route"] = route.value
    if reading.platforms:
        data["platforms"] = reading.platforms
    channels = _channels(reading, route)
    if channels:
        data["channels"] = channels
    pip_index = _pip_index(reading, route)
    if pip_index:
        data["pip_index"] = pip_index
    data["targets"] = [{"cuda": target}]
    data["conda"] = list(reading.conda)
    data["pip"] = list(reading.pip)
    if not re.fullmatch(r"[^\x00-\x1f\x7f]*", data["description"]) or len(data["description"]) > 500:
        data["description"] = "imported by envbuild init"
    return SpecDraft(data, tuple(reading.notes), Path(reading.source))


def starter_draft(name: str | None = None, compat: CompatData | None = None) -> SpecDraft:
    """A spec for a team that has no environment.yml: the newest verified torch on conda-forge."""
    compat = compat or load_compat()
    releases = [r for r in compat.releases()
                if r.confidence != "projected" and r.cuda_variants(Route.CONDA_FORGE)]
    release = releases[-1]
    python = _choose_python(Reading("starter"), release, None, SpecifierSet())
    data = {
        "name": spec_name(name or Path.cwd().name, "envbuild init"),
        "python": python,
        "torch": release.latest,
        "torchvision": release.torchvision_latest,
        "route": Route.CONDA_FORGE.value,
        "targets": [{"cuda": release.cuda_variants(Route.CONDA_FORGE)[-1]}, {"cuda": CPU}],
        "conda": ["numpy"],
        "pip": [],
    }
    return SpecDraft(data)


# ---------------------------------------------------------------------------------------------
# Checking and writing


def render_spec(draft: SpecDraft) -> str:
    return render_template("spec.yaml.j2", spec=draft.data, notes=draft.notes,
                           source=draft.source.name if draft.source else None)


def check_draft(draft: SpecDraft, text: str) -> tuple[EnvSpec, list[Target]]:
    """The text must read back as the draft's data, load as a spec and resolve against the compat data."""
    source = str(draft.source) if draft.source else "envbuild init"
    if yaml.safe_load(text) != draft.data:
        raise RuntimeError("the spec template did not reproduce the spec's data")  # a bug, not an input
    spec = parse_spec(draft.data, source)
    spec._source = draft.source
    return spec, resolve_targets(spec)


def init_spec(source: Path | None = None, name: str | None = None, out: Path | None = None,
              force: bool = False) -> InitResult:
    """`envbuild init`: read, decide, check, then write atomically (nothing is written on any error)."""
    draft = draft_from_environment(read_environment(source), name) if source else starter_draft(name)
    text = render_spec(draft)
    spec, targets = check_draft(draft, text)
    path = out or Path("envs") / f"{spec.name}.yaml"
    write_new_file(path, text, force=force)
    spec._source = path
    return InitResult(path, spec, targets, draft.notes, tuple(lint_spec(spec)), source)

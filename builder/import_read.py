"""Reading an environment file into a `Reading`: what its lines say, in file order, before anything is decided.

environment.yml files are read key by key; requirements.txt, conda-lock.yml and Dockerfiles are read
into the same `Reading`, so one set of decisions (`builder.import_choose`) serves every format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement

from builder.errors import UsageError
from builder.import_lines import (
    CONDA_TORCH,
    CONDA_TORCH_FLAVOURS,
    CPU,
    CondaLine,
    Note,
    Outcome,
    cuda_from_build,
    cuda_from_tag,
    cuda_from_version,
    load_import_rules,
    parse_conda_line,
)
from builder.spec import CHANNEL_PATTERN, PACKAGE_PATTERN, Route, read_yaml_file

TOP_LEVEL_READ = {"name", "channels", "dependencies", "prefix", "platforms"}


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
        reading.note(text, "unmapped", "a package from a URL (name @ url); publish it to an index and pin it by version")
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


"""The `Reading` every reader of an environment file fills, and the readers of its lines.

A conda line, a pip line (requirement or option) and a channel list read the same way wherever they
stand: in an environment.yml, a requirements.txt, a conda-lock.yml (builder/init/read.py) or a
Dockerfile's install commands (builder/init/dockerfile.py).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from builder.errors import UsageError
from builder.formats.conda_matchspec import CondaLine, parse_conda_line
from builder.init.base_images import ImageTorch
from builder.init.lines import (
    CONDA_TORCH,
    CONDA_TORCH_FLAVOURS,
    CPU,
    CREDENTIALS_NOTE,
    Note,
    Outcome,
    cuda_from_build,
    cuda_from_tag,
    cuda_from_version,
    is_pips_default_index,
    load_import_rules,
    without_credentials,
)
from builder.init.wheels import WheelFile, read_wheel, wheel_location
from builder.safe_io.text import MAX_NUMBER_DIGITS, escape_unsafe, overlong_number
from builder.specs.model import CHANNEL_PATTERN, PACKAGE_PATTERN, Route
from builder.userfile import MAX_SPEC_BYTES, decode, read_capped


@dataclass
class Hint:
    """One line's word on the CUDA target: a version, `cpu`, or `cuda` (some CUDA build).

    `floor`: a conda-forge build string's CUDA (`cuda120_*`), which is the CUDA the package was built
    against: it runs with any `cuda-version` of the same major at or above it (its run dependency is
    `cuda-version >=12.0,<13`), so a line naming such a CUDA settles it instead of contradicting it."""

    entry: str
    cuda: str
    floor: bool = False


def settled_hints(hints: list[Hint]) -> list[Hint]:
    """The hints without the build floors that another hint meets (`cuda120_*` beside `cuda-version 12.6`)."""
    exact = [h.cuda for h in hints if not h.floor and re.fullmatch(r"\d+\.\d+", h.cuda)]
    return [h for h in hints if not (h.floor and any(_meets(cuda, h.cuda) for cuda in exact))]


def _meets(cuda: str, floor: str) -> bool:
    (major, minor), (floor_major, floor_minor) = (map(int, v.split(".")) for v in (cuda, floor))
    return major == floor_major and minor >= floor_minor


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
    kind: str = "environment.yml"
    # the base image a Dockerfile's torch comes from, when the image's tag states no torch version
    torch_image: ImageTorch | None = None
    base_images: list[str] = field(default_factory=list)  # a Dockerfile's FROM images, as written
    # Weaker than `hints`: a base image's CUDA (`FROM nvidia/cuda:12.1.0-...`) counts only when no line
    # of the file says otherwise, because the torch wheel brings its own CUDA libraries.
    weak_hints: list[Hint] = field(default_factory=list)
    # `nvidia-nccl-cu12`, `cuml-cu11`: a CUDA major and nothing finer.
    cuda_majors: list[tuple[str, str]] = field(default_factory=list)
    # `cuda-version>=12.0`: a range the target's CUDA must fall in.
    cuda_ranges: list[tuple[str, SpecifierSet]] = field(default_factory=list)
    pip_requirements_seen: int = 0
    pip_lines_seen: int = 0
    # What lint reads about the file as written, before anything is dropped or added.
    raw_channels: list[str] = field(default_factory=list)
    conda_names: list[str] = field(default_factory=list)
    pip_names: list[str] = field(default_factory=list)
    has_pip_section: bool = False
    unpinned: list[str] = field(default_factory=list)
    locked_cuda: list[tuple[str, str]] = field(default_factory=list)  # (package, CUDA) from a lock's builds
    pip_requirement_lines: list[str] = field(default_factory=list)  # every pip requirement as read (markers settled)
    rejected_lines: list[tuple[str, str]] = field(default_factory=list)  # (line, why pip stops there)
    ignored_options: list[tuple[str, str]] = field(default_factory=list)  # (line, an option pip ignores there)
    # `extra dev: torch==2.7.1`: a pin of torch in an optional extra next to the project's own torch
    torch_in_extras: list[str] = field(default_factory=list)

    def note(self, entry: str, outcome: Outcome, reason: str) -> None:
        if Note(entry, outcome, reason) not in self.notes:  # the same index line on every requirement
            self.notes.append(Note(entry, outcome, reason))

    def fail(self, reason: str) -> UsageError:
        # A reason may quote the file (a version, a key): a U+2028 there would break the one-line message.
        return UsageError(escape_unsafe(f"{self.source}: {reason}"))


def read_text_file(path: Path, kind: str) -> str:
    """A file `init --from` reads, size-capped and as UTF-8 text, or one UsageError naming why not."""
    data = read_capped(path, MAX_SPEC_BYTES, kind, UsageError)
    text = decode(data, path, kind, UsageError, "save it as UTF-8")
    overlong = overlong_number(text)
    if overlong:
        raise UsageError(f"{path}: line {overlong[0]}: a number of {overlong[1]} digits (more than "
                         f"{MAX_NUMBER_DIGITS}); no version or value in a {kind} is that long")
    return text


def _channel_text(reading: Reading, channel: str) -> str:
    """A channel as read, its credentials (`user:token@`, `?token=`) taken out and noted."""
    text, removed = without_credentials(channel)
    if removed:
        reading.note(f"channels: {text}", "dropped", CREDENTIALS_NOTE)
    return text


def read_channel_list(reading: Reading, channels: Any) -> None:
    if channels is None:
        return
    if not isinstance(channels, list):
        reading.note(f"channels: {channels}", "unmapped", "not a list of channels")
        return
    for channel in channels:
        text = _channel_text(reading, str(channel))
        reading.raw_channels.append(text)
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


# what pip's environment markers read on the machines envbuild builds for
LINUX_MARKERS = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "platform_machine": "x86_64"}
PLACEHOLDER = re.compile(r"@[A-Za-z_][A-Za-z0-9_]*@|\$\{?[A-Za-z_][A-Za-z0-9_]*|\{\{")
# packages whose version decides the torch stack and its CUDA build: unpinned, each solve may differ
ML_PACKAGES = {"pytorch", "torch", "torchvision", "torchaudio", "pytorch-gpu", "pytorch-cpu", "pytorch-cuda",
               "cuda-version", "cudatoolkit", "xformers", "flash-attn", "tensorflow", "jax", "jaxlib", "cupy",
               "transformers", "lightning", "pytorch-lightning"}


def read_conda_text(reading: Reading, text: str) -> None:
    """One conda package line, wherever it stands: an environment.yml dependency, a `conda list` line,
    a package of `conda install`."""
    placeholder = PLACEHOLDER.search(text)
    if placeholder:
        _note_placeholder(reading, text, placeholder[0])
        return
    line = parse_conda_line(text)
    if line is None:
        reading.note(text, "unmapped", "not a conda package form envbuild reads (name, =version, =build)")
        return
    _count_conda_line(reading, line, text)
    _read_conda_package(reading, line, text)


def _note_placeholder(reading: Reading, text: str, placeholder: str) -> None:
    """A template's line (`pytorch-gpu @PYTORCH_VERSION@`): left out, or refused when it is torch's."""
    name = text.strip().split()[0].split("::")[-1].lower() if text.strip() else text
    reason = (f"{placeholder!r} is a template placeholder that a generator fills in; run `envbuild init` "
              "on the generated file")
    if name in CONDA_TORCH or name in CONDA_TORCH_FLAVOURS:
        raise reading.fail(f"the torch line {text.strip()!r}: {reason}")
    reading.note(text, "unmapped", reason)


def _count_conda_line(reading: Reading, line: CondaLine, text: str) -> None:
    """What every conda line adds, whatever its package: the counts, the unpinned, the legacy channels."""
    reading.conda_lines += 1
    reading.with_builds += line.build is not None
    reading.conda_names.append(line.name)
    if line.version is None and line.name in ML_PACKAGES:
        reading.unpinned.append(text)
    if line.channel == "pytorch" or (line.channel == "nvidia" and line.name == "pytorch-cuda"):
        reading.legacy_markers.append(text)


def _read_conda_package(reading: Reading, line: CondaLine, text: str) -> None:
    name = line.name
    if name == "python":
        reading.python = line
    elif name in CONDA_TORCH or name in CONDA_TORCH_FLAVOURS:
        _read_conda_torch(reading, line)
    elif name == "torchvision":
        _read_conda_torchvision(reading, line, text)
    elif name == "pytorch-cuda":
        _read_pytorch_cuda(reading, line, text)
    elif name == "cpuonly":
        reading.hints.append(Hint(text, CPU))
        reading.legacy_markers.append(text)
    elif name in ("cudatoolkit", "cuda-version"):
        _read_conda_cuda(reading, line, text)
    else:
        _keep(reading, "conda", line.name, text, line.spec(), line.spec(with_version=False), line)


def _read_conda_torchvision(reading: Reading, line: CondaLine, text: str) -> None:
    reading.conda_torchvision = line
    build_cuda, family = cuda_from_build(line.build) if line.build else (None, None)
    if build_cuda:
        reading.hints.append(_build_hint(text, build_cuda, family))


def _build_hint(text: str, cuda: str, family: Route | None) -> Hint:
    """A build string's CUDA: a floor on conda-forge (`cuda120_*`), the CUDA itself on the legacy channel."""
    return Hint(text, cuda, floor=family is Route.CONDA_FORGE and bool(re.fullmatch(r"\d+\.\d+", cuda)))


def _read_pytorch_cuda(reading: Reading, line: CondaLine, text: str) -> None:
    cuda = cuda_from_version(line.version)
    if cuda is None:
        reading.note(text, "unmapped", "pytorch-cuda without a X.Y version")
    else:
        reading.hints.append(Hint(text, cuda))
    reading.legacy_markers.append(text)


def _read_conda_cuda(reading: Reading, line: CondaLine, text: str) -> None:
    """`cudatoolkit=11.8`, `cuda-version=12.4`: the CUDA; `cuda-version>=12.0`: a range it must fall in."""
    cuda = cuda_from_version(line.version)
    wanted = _cuda_range(line.version)
    if cuda is not None:
        reading.hints.append(Hint(text, cuda))
    elif wanted is not None:
        reading.cuda_ranges.append((text, wanted))
    elif line.name == "cudatoolkit":
        reading.note(text, "dropped", "cudatoolkit without a version names no CUDA; the target pins CUDA")
    else:
        reading.note(text, "unmapped", "cuda-version without a X.Y version")


def _cuda_range(version: str | None) -> SpecifierSet | None:
    """`>=12.0`, `>=11.8,<13`: the CUDA versions a range allows; None when it is no range."""
    if not version or not version.startswith(("<", ">", "!", "~")):
        return None
    try:
        return SpecifierSet(version.replace(" ", ""))
    except InvalidSpecifier:
        return None


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
            reading.hints.append(_build_hint(line.text, cuda, family))
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
    line = re.sub(r"\s+#.*$", "", text.strip())
    reading.pip_lines_seen += 1
    if _read_pip_option(reading, text, line):
        return
    requirement = _pip_requirement(reading, text, line)
    if requirement is None:
        return
    if requirement.marker is not None:
        on_linux = _on_linux(reading, text, line, requirement.marker)
        if on_linux is None:
            return
        line, requirement = on_linux
    _read_pip_requirement(reading, text, line, requirement)


def _read_pip_option(reading: Reading, text: str, line: str) -> bool:
    """A pip line that is no requirement by name (an option, an editable folder, a URL): read, or noted
    as what a spec cannot carry. False for a requirement."""
    option = re.fullmatch(r"(--index-url|--extra-index-url|-i|--find-links|-f)[\s=]+(\S+)", line)
    location = wheel_location(line) if not line.startswith("-") else None
    wheel = read_wheel(location) if location else None
    if wheel:
        _read_wheel(reading, text, wheel)
    elif option and option[1] in ("--find-links", "-f"):
        _read_find_links(reading, text, option[2])
    elif option:
        _read_pip_index(reading, text, option[2])
    elif re.match(r"(-e|--editable)\b", line):
        reading.note(text, "unmapped", "an editable install of a folder; run it in your job once the env exists")
    elif re.match(r"(-r|--requirement|-c|--constraint)\b", line):
        reading.note(text, "unmapped", "a requirements or constraints file; list its packages here instead")
    elif line.startswith("-"):
        reading.note(text, "unmapped", "pip options other than an index URL have no place in a spec")
    elif re.match(r"(git\+|hg\+|svn\+|bzr\+|https?://|file:|\.|/|[\w.-]+/)", line):
        reading.note(text, "unmapped", "a package from a URL or a folder; publish it to an index and pin it by version")
    else:
        return False
    return True


def _read_wheel(reading: Reading, text: str, wheel: WheelFile) -> None:
    """A wheel installed by its file: its CPython (a cpXY wheel runs on that one only) is the file's Python
    unless a line names one; torch and torchvision are read as their release (the spec takes that release's
    wheel for the target's CUDA from the PyTorch index); any other wheel is named, as a spec cannot carry it."""
    if wheel.python and reading.python is None:
        reading.python = CondaLine(text, "python", wheel.python, None, None)
    if wheel.name not in ("torch", "torchvision"):
        reading.note(text, "unmapped", f"the wheel file of {wheel.name} {wheel.version}; publish it to an index "
                                       "and pin it by version")
        return
    cuda_tag = wheel.local if wheel.local and cuda_from_tag(wheel.local) else None
    pinned = f"{wheel.name}=={wheel.release}" + (f"+{cuda_tag}" if cuda_tag else "")
    reading.note(text, "assumed", f"{wheel.name} {wheel.release}, the release of the wheel file's {wheel.version} "
                                  f"(for {wheel.platform}); the spec takes that release's wheel from the PyTorch index")
    read_pip_text(reading, pinned, entry=text)
    if wheel.name == "torchvision" and reading.pip_torchvision_text == pinned:
        reading.pip_torchvision_text = text


def _pip_requirement(reading: Reading, text: str, line: str) -> Requirement | None:
    """The line as a requirement by name and version; None (noted) when it is not one."""
    try:
        requirement = Requirement(line)
    except InvalidRequirement:
        reading.note(text, "unmapped", "not a pip requirement")
        return None
    if requirement.url and requirement.name.lower() == "torch":
        raise reading.fail(f"{text.strip()!r} takes torch from a URL; pin it by version instead (torch==X.Y.Z, with "
                           "a cuXYZ index or +cuXYZ tag for its CUDA) so envbuild can pick the wheel per target")
    if requirement.url:
        reading.note(text, "unmapped",
                     "a package from a URL (name @ url); publish it to an index and pin it by version")
        return None
    return requirement


def _on_linux(reading: Reading, text: str, line: str, markers: Marker) -> tuple[str, Requirement] | None:
    """A requirement with environment markers, as it reads on Linux: without them (noted), or None when
    the markers leave it out there or read what a spec cannot carry."""
    marker = str(markers)
    variables = set(re.findall(r"[a-z_]+", re.sub(r"\"[^\"]*\"|'[^']*'", "", marker))) - {"and", "or", "in", "not"}
    if variables - set(LINUX_MARKERS):
        reading.note(text, "unmapped", "environment markers on the Python version or implementation (`; ...`) "
                                       "have no place in a spec's pip list; pin what this env needs")
        return None
    if not markers.evaluate(LINUX_MARKERS):
        reading.note(text, "dropped", f"`{marker}` is false on Linux, where envbuild builds")
        return None
    line = line.split(";", 1)[0].strip()
    requirement = Requirement(line)
    reading.note(text, "assumed", f"`{marker}` holds on Linux, where envbuild builds: kept without it")
    return line, requirement


def _read_pip_requirement(reading: Reading, text: str, line: str, requirement: Requirement) -> None:
    name = requirement.name.lower().replace("_", "-")
    reading.pip_names.append(name)
    reading.pip_requirement_lines.append(line)
    reading.pip_requirements_seen += 1
    if not requirement.specifier and name in ML_PACKAGES:
        reading.unpinned.append(text)
    _read_cuda_wheel(reading, name, text, requirement)
    if name == "torch":
        _read_pip_torch(reading, text, requirement)
    elif name == "torchvision":
        reading.pip_torchvision, reading.pip_torchvision_text = requirement, text
    else:
        _keep_pip_extra(reading, text, name, line, requirement)


def _read_pip_torch(reading: Reading, text: str, requirement: Requirement) -> None:
    if reading.pip_torch is not None:
        if str(requirement.specifier) != str(reading.pip_torch.specifier):
            reading.note(text, "dropped", f"a second torch pin; torch is read from {reading.pip_torch_text!r} "
                                          "(two pins of one package fight: keep one)")
        return
    reading.pip_torch, reading.pip_torch_text = requirement, text
    local = _local_tag(requirement)
    cuda = cuda_from_tag(local) if local else None
    if cuda:
        reading.hints.append(Hint(text, cuda))


def _keep_pip_extra(reading: Reading, text: str, name: str, line: str, requirement: Requirement) -> None:
    built_for = BUILD_CUDA.search(_local_tag(requirement) or "")
    if built_for:  # `colossalai==0.2.0+torch1.12cu11.3`: a build for that CUDA, weaker than torch's own
        reading.weak_hints.append(Hint(text, f"{int(built_for[1])}.{built_for[2]}"))
    compact = line.replace(" ", "")
    without_local = re.sub(r"\+(cu\d+|cpu|rocm[0-9.]+)(?=$|,)", "", compact)
    if without_local != compact:
        reading.note(text, "unpinned", "the local tag is left out: the target's wheel index supplies the build")
    _keep(reading, "pip", name, text, without_local, requirement.name)


# the CUDA in an extension's local tag: `cu11.3`, `cu113`, `cu121` (after a `torch1.12` part or alone)
BUILD_CUDA = re.compile(r"(?:^|[^a-z])cu(\d{1,2})\.?(\d)$")


def _local_tag(requirement: Requirement) -> str | None:
    for specifier in requirement.specifier:
        if "+" in specifier.version:
            return specifier.version.split("+", 1)[1]
    return None


def _read_cuda_wheel(reading: Reading, name: str, text: str, requirement: Requirement) -> None:
    """NVIDIA's CUDA wheels name the CUDA they carry: `nvidia-cuda-runtime-cu12==12.1.105` is CUDA 12.1, and
    any `*-cu12` wheel (nvidia-nccl-cu12, cuml-cu11, tensorrt-cu12) pins the CUDA major."""
    major = re.search(r"-cu(\d{2})$", name)
    if not major:
        return
    runtime = re.fullmatch(r"nvidia-cuda-(runtime|nvrtc|cupti)-cu\d{2}", name)
    pins = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
    toolkit = cuda_from_version(pins[0]) if runtime and pins else None
    if toolkit and toolkit.split(".")[0] == major[1]:
        reading.hints.append(Hint(text, toolkit))
    else:
        reading.cuda_majors.append((text, major[1]))


def find_links_cuda(url: str) -> str | None:
    """The CUDA of a PyTorch find-links page, as its path names it like an index URL: the page of one
    CUDA's wheels (`/whl/cu130`), of one package there (`/whl/nightly/cu130/torch`) or the old list
    (`/whl/cu111/torch_stable.html`); None for a page that names no CUDA folder (`/whl/torch_stable.html`)."""
    segments = [s for s in urllib.parse.urlsplit(url).path.split("/") if s]
    for segment in segments[-2:][::-1]:
        cuda = cuda_from_tag(segment)
        if cuda is not None:
            return cuda
    return None


def _read_find_links(reading: Reading, text: str, url: str) -> None:
    """`--find-links PAGE`: pip looks for wheels there as in an index; a PyTorch page of one CUDA names it."""
    cuda = find_links_cuda(url)
    if cuda is None:
        reading.note(text, "dropped", "a find-links page; torch comes from the wheel index of the target's CUDA")
        return
    reading.pip_index_hints.append(Hint(text, cuda))
    reading.note(text, "dropped", f"a find-links page of {'CPU' if cuda == CPU else 'CUDA ' + cuda} wheels, read "
                                  "as that CUDA; the spec takes torch from the wheel index of the target's CUDA")


def _read_pip_index(reading: Reading, text: str, url: str) -> None:
    clean, removed = without_credentials(url)
    if removed:
        text, url = text.replace(url, clean), clean
        reading.note(text, "dropped", CREDENTIALS_NOTE)
    tag = url.rstrip("/").rsplit("/", 1)[-1]
    cuda = cuda_from_tag(tag)
    # pip's index options apply to the whole file (or command), not to the lines after them: the packages
    # stay, and the index is named
    if cuda is None and is_pips_default_index(url):
        reading.note(text, "dropped", "pip's default index, which every environment installs from already")
    elif cuda is None and reading.pip_lines_seen == 1 and reading.kind != "Dockerfile":
        reading.note(text, "unmapped",
                     "not a PyTorch wheel index (no /cuXYZ or /cpu at its end); an index for every package is "
                     "pip's own configuration (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL), not the spec's")
    elif cuda is None:
        reading.note(text, "dropped",
                     "not a PyTorch wheel index, and a spec carries no other index; the packages are kept, and any "
                     "that only this index serves needs it in your job (`pip install --extra-index-url ...`) or a "
                     "mirror in your own index")
    if cuda is None:
        return
    reading.pip_index_hints.append(Hint(text, cuda))
    reading.pip_index_urls.append(url)


def read_pip_text(reading: Reading, text: str, entry: str | None = None) -> None:
    """One pip line; `entry` names where it came from when that is not the line itself (a base image)."""
    _read_pip(reading, text)
    if entry and reading.pip_torch is not None and reading.pip_torch_text == text:
        reading.pip_torch_text = entry
        reading.hints = [Hint(entry, h.cuda) if h.entry == text else h for h in reading.hints]


def read_environment_dependency(reading: Reading, item: Any,
                                include: Callable[[Reading, str], bool] | None = None) -> None:
    """One item of an environment.yml's `dependencies:`: a conda line or a `pip:` list; `include` reads a
    `-r FILE` line's file in its place (True when it did)."""
    if isinstance(item, str):
        read_conda_text(reading, item)
    elif isinstance(item, dict) and set(item) == {"pip"} and isinstance(item["pip"], list):
        reading.has_pip_section = True
        for line in item["pip"]:
            if include is None or not include(reading, str(line)):
                read_pip_text(reading, str(line))
    else:
        reading.note(str(item), "unmapped", "not a package line or a `pip:` list")

"""Files that declare several CUDA variants at once (pixi environments, uv extras), read into one spec.

A pixi.toml, a pixi.lock or a uv pyproject.toml names one environment per CUDA variant (`cuda`, `cpu`,
`cu126`, `cu128`): each is read into a `Reading` of its own, as if it were a file of its own, and decided
like every other file (`builder.init.choose`). The drafts then become one spec: one target per variant,
a target's own torch or route where its variant differs from the first, and the driver and GPU floors the
file declared kept (the GPU floor as a `fleet:` entry, whose lowest capability every CUDA lock solves for).
"""

from __future__ import annotations

import copy
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from builder.errors import UsageError
from builder.init.choose import TORCH_PAIRS, SpecDraft, draft_from_environment
from builder.init.lines import (
    CREDENTIALS_NOTE,
    SOME_CUDA,
    Note,
    cuda_from_tag,
    is_pips_default_index,
    without_credentials,
)
from builder.init.reading import Hint, Reading, read_text_file
from builder.specs.compat import CompatData, load_compat
from builder.specs.cuda import CPU, CudaVersion
from builder.specs.gpus import parse_capability
from builder.specs.model import Route
from builder.specs.target import default_pip_index

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# PyTorch's wheel indexes for accelerators envbuild does not build for (AMD ROCm, Intel XPU).
OTHER_ACCELERATORS = {"rocm": "ROCm", "xpu": "XPU"}


@dataclass
class Variant:
    """One CUDA variant of the file: its lines as a Reading, and what its platform declares of the machine."""

    label: str  # how the file names it: `environment cuda`, `extra cu128`
    reading: Reading
    driver: str | None = None  # the CUDA version the machines' driver runs at least (`__cuda`)
    driver_entry: str = ""
    arch: str | None = None  # the lowest GPU compute capability (`__cuda_arch`)
    arch_entry: str = ""


@dataclass
class VariantsReading(Reading):
    """A file of several variants. Its own fields hold what lint reads of the whole file (the first
    variant's torch, every variant's names); its notes are the file's own (tables envbuild does not read,
    variants left out)."""

    variants: list[Variant] = field(default_factory=list)

    def summarise(self) -> None:
        """Fill the file-wide fields lint reads from the variants (call once they are all read)."""
        if not self.variants:
            return
        first = self.variants[0].reading
        for name in ("conda_torch", "pip_torch", "pip_torch_text", "python", "conda_torchvision",
                     "pip_torchvision", "pip_torchvision_text"):
            setattr(self, name, getattr(first, name))
        for variant in self.variants:
            reading = variant.reading
            for name in ("raw_channels", "conda_names", "pip_names", "unpinned", "legacy_markers",
                         "conda_forge_markers", "hints", "pip_index_hints", "locked_cuda", "channels",
                         "torch_in_extras"):
                merged = getattr(self, name)
                merged.extend(item for item in getattr(reading, name) if item not in merged)
            self.has_pip_section = self.has_pip_section or reading.has_pip_section


def python_minor_floor(constraint: str) -> str:
    """`>=3.12.13,<3.13` -> `>=3.12,<3.13`: pixi and uv write Python's floor with a patch release, and a spec
    names a minor (whose newest patch the solve picks)."""
    return re.sub(r">=\s*(3\.\d+)\.\d+", r">=\1", constraint)


def read_toml_file(path: Path, kind: str) -> dict[str, Any]:
    """A TOML file as data (size-capped, UTF-8), or one UsageError line naming the syntax error."""
    text = read_text_file(path, kind)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the file and run `envbuild init` again") from None
    except ValueError as exc:  # an integer past Python's digit limit (4300) is not a TOMLDecodeError
        raise UsageError(f"{path}: not a {kind} envbuild reads ({exc}); fix the file") from None
    except RecursionError:
        raise UsageError(f"{path}: not a {kind} envbuild reads (its values nest too deeply)") from None


def other_accelerator(url: str) -> str | None:
    """`ROCm` for .../whl/rocm6.2, `XPU` for .../whl/xpu: a torch index for hardware envbuild does not build for."""
    tag = url.rstrip("/").rsplit("/", 1)[-1].lower()
    for prefix, name in OTHER_ACCELERATORS.items():
        if tag.startswith(prefix):
            return name
    return None


def read_index_url(reading: Reading, entry: str, url: str, for_torch: bool = True) -> None:
    """An index URL a file gives pip: a PyTorch wheel index names the target's CUDA; PyPI is pip's default;
    any other index is one a spec cannot carry. Credentials in it are taken out first (and noted)."""
    clean, removed = without_credentials(url)
    if removed:
        entry, url = entry.replace(url, clean), clean
        reading.note(entry, "dropped", CREDENTIALS_NOTE)
    cuda = cuda_from_tag(url.rstrip("/").rsplit("/", 1)[-1])
    if cuda is not None:
        if for_torch:
            reading.pip_index_hints.append(Hint(entry, cuda))
            reading.pip_index_urls.append(url)
    elif is_pips_default_index(url):
        reading.note(entry, "dropped", "PyPI, pip's default index")
    else:
        reading.note(entry, "unmapped", "not a PyTorch wheel index, and a spec carries no other index; install "
                                        "what needs it in your job, or mirror it into your own index")


def is_pytorch_wheel_index(url: str) -> bool:
    """Whether `url` is under PyTorch's wheel index (builder/data/sources.yaml), by http or https."""
    prefix = default_pip_index().split("{tag}")[0]
    return url.partition("://")[2].startswith(prefix.partition("://")[2])


def declare_driver(reading: Reading, entry: str, driver: str) -> None:
    """A platform that declares `__cuda` (its machines' driver runs CUDA `driver`): a conda torch there is a
    CUDA build, one the driver runs (its major at most the driver's, under minor-version compatibility)."""
    major = driver.split(".")[0]
    if major.isdigit():
        reading.cuda_ranges.append((entry, SpecifierSet(f"<{int(major) + 1}")))
    if reading.conda_torch is not None:
        # weak: the file's own CUDA lines (pytorch-cpu, cuda-version) decide first
        reading.weak_hints.append(Hint(entry, SOME_CUDA))


def declare_no_cuda(reading: Reading, entry: str) -> None:
    """A platform without `__cuda`: conda-forge's pytorch solves to its CPU build there (pixi's rule); the
    legacy pytorch channel picks its build by pytorch-cuda instead, and pip's torch ignores `__cuda`."""
    line = reading.conda_torch
    if line is not None and not reading.legacy_markers and line.channel != "pytorch" \
            and "pytorch" not in reading.channels:
        reading.weak_hints.append(Hint(entry, CPU))


# ---------------------------------------------------------------------------------------------
# From variants to one spec


def draft_from_reading(reading: Reading, name: str | None = None, compat: CompatData | None = None,
                       upgrade: bool = False) -> SpecDraft:
    """The spec a reading leads to: one target for a file of one environment, one per variant otherwise."""
    if not isinstance(reading, VariantsReading):
        return draft_from_environment(reading, name, compat, upgrade)
    return _merged_draft(reading, name, compat or load_compat(), upgrade)


@dataclass
class _Drafted:
    variant: Variant
    draft: SpecDraft

    @property
    def target(self) -> str:
        return str(self.draft.data["targets"][0]["cuda"])


def _merged_draft(reading: VariantsReading, name: str | None, compat: CompatData, upgrade: bool) -> SpecDraft:
    drafted = _draft_each(reading, name, compat, upgrade)
    first = drafted[0].draft
    data = dict(first.data)
    targets: list[dict[str, Any]] = []
    fleet: list[str] = []
    notes = list(reading.notes)
    kept: list[_Drafted] = []
    for item in drafted:
        notes += [n for n in _own_notes(item, drafted) if n not in notes]
        target = _target_of(item, data, kept, notes)
        if target is None:
            continue
        kept.append(item)
        targets.append(target)
        _keep_floors(item, compat, fleet, notes)
    data["targets"] = targets
    _merge_lists(data, [item.draft.data for item in kept], notes)
    for item, target in zip(kept, targets, strict=True):
        _own_platforms(item, target, data.get("platforms"))
    if fleet:
        data["fleet"] = [{"gpu": gpu} for gpu in fleet]
    return SpecDraft(_ordered(data), tuple(notes), Path(reading.source))


def _own_notes(item: _Drafted, drafted: list[_Drafted]) -> list[Note]:
    """The variant's notes; with several variants, one that not every variant shares names its variant."""
    if len(drafted) == 1:
        return list(item.draft.notes)
    label = item.variant.label
    return [note if note.entry == label or all(note in other.draft.notes for other in drafted)
            else Note(f"{label}: {note.entry}", note.outcome, note.reason) for note in item.draft.notes]


def _draft_each(reading: VariantsReading, name: str | None, compat: CompatData, upgrade: bool) -> list[_Drafted]:
    """Each variant decided on its own; one that cannot be (no torch, an older torch without --upgrade is
    refused for the whole file) is left out with the reason, unless none can."""
    drafted: list[_Drafted] = []
    failures: list[UsageError] = []
    for variant in reading.variants:
        try:
            draft = draft_from_environment(copy.deepcopy(variant.reading), name, compat, upgrade=True)
        except UsageError as error:
            failures.append(error)
            reading.note(variant.label, "dropped", error.message.split(": ", 1)[-1])
            continue
        if not upgrade and any(n.outcome == "upgraded" for n in draft.notes):
            draft_from_environment(variant.reading, name, compat, upgrade=False)  # raises the refusal
        drafted.append(_Drafted(variant, draft))
    if not drafted:
        if failures:
            raise failures[0]
        raise reading.fail("no environment in it installs torch; envbuild builds PyTorch environments")
    return drafted


def _target_of(item: _Drafted, spec: dict[str, Any], kept: list[_Drafted],
               notes: list[Note]) -> dict[str, Any] | None:
    """The variant's target, with its own torch or route where they differ from the spec's; None (noted)
    when an earlier variant already gave that target."""
    data = item.draft.data
    label = item.variant.label
    key = CPU if item.target == CPU else CudaVersion.parse(item.target).key
    earlier = next((k for k in kept if k.target == item.target), None)
    if earlier is not None:
        _add(notes, _same_target(label, key, earlier, data))
        return None
    target: dict[str, Any] = {"cuda": item.target}
    if data["route"] != spec["route"]:
        target["route"] = data["route"]
    if data["torch"] != spec["torch"]:
        target["torch"] = data["torch"]
        if data.get("torchvision"):
            target["torchvision"] = data["torchvision"]
    elif data.get("torchvision") and data.get("torchvision") != spec.get("torchvision"):
        target["torchvision"] = data["torchvision"]
    own = [f"{k} {target[k]}" for k in ("torch", "route") if k in target]
    _add(notes, Note(label, "derived", f"target {key}" + (f" ({', '.join(own)})" if own else "")))
    return target


def _own_platforms(item: _Drafted, target: dict[str, Any], merged: list[str] | None) -> None:
    """A pip-route CUDA target keeps its own platforms when the spec's (every variant's) add one without
    CUDA wheels (the CPU variant's osx-arm64): the wheel index has no CUDA torch there."""
    own = item.draft.data.get("platforms")
    if own and merged and own != merged and item.target != CPU and item.draft.data["route"] == Route.PIP.value:
        target["platforms"] = list(own)


def _same_target(label: str, key: str, earlier: _Drafted, data: dict[str, Any]) -> Note:
    """A variant whose target an earlier one already gives: what of it the spec cannot keep."""
    given = earlier.draft.data
    lost = [f"{field} {data[field]}" for field in ("torch", "route", "python") if data.get(field) != given.get(field)]
    if not lost:
        return Note(label, "assumed", f"target {key}, as {earlier.variant.label} gives it")
    return Note(label, "dropped", f"target {key} comes from {earlier.variant.label}; a spec has one target per "
                                  f"CUDA and one Python, so this one's {', '.join(lost)} is left out")


def _keep_floors(item: _Drafted, compat: CompatData, fleet: list[str], notes: list[Note]) -> None:
    variant = item.variant
    cuda = None if item.target == CPU else CudaVersion.parse(item.target)
    if variant.driver:
        _add(notes, _driver_note(variant, cuda, compat))
    if variant.arch and cuda is not None:
        note, gpu = _arch_note(item, cuda, compat)
        _add(notes, note)
        if gpu and gpu not in fleet:
            fleet.append(gpu)


def _driver_note(variant: Variant, cuda: CudaVersion | None, compat: CompatData) -> Note:
    """What the declared driver floor means for the target: enough, or older than it needs."""
    declared = variant.driver or ""
    major = int(declared.split(".")[0]) if declared.split(".")[0].isdigit() else 0
    floor = compat.min_driver(CudaVersion(major, 0)) if major else None
    said = f"driver floor CUDA {declared}" + (f" (driver >= {floor})" if floor else "")
    if cuda is None:
        return Note(variant.driver_entry, "dropped", f"{said}: the CPU target needs no driver")
    if major < cuda.major:
        return Note(variant.driver_entry, "assumed",
                    f"{said} is older than target {cuda.key} needs (a CUDA {cuda.major} driver, >= "
                    f"{compat.min_driver(cuda)}); the target keeps CUDA {cuda}")
    return Note(variant.driver_entry, "derived",
                f"{said}: runs target {cuda.key} (its minimum driver, minor-version compatibility: "
                f"{compat.min_driver(cuda)})")


def _arch_note(item: _Drafted, cuda: CudaVersion, compat: CompatData) -> tuple[Note, str | None]:
    """The declared GPU floor against the lowest GPU the target's build has kernels for: a floor above that
    is kept as a fleet entry (so every CUDA lock solves for it); one below is kept too, for lint to report."""
    variant = item.variant
    declared = variant.arch or ""
    try:
        wanted = parse_capability(declared)
    except ValueError:
        return Note(variant.arch_entry, "unmapped", f"{declared!r} is not a compute capability like 8.6"), None
    release = compat.release(str(item.draft.data["torch"]))
    archs = release.archs_for(Route(item.draft.data["route"]), cuda) if release else []
    lowest = min((parse_capability(a) for a in archs if a.startswith("sm_")), default=None)
    if lowest == wanted:
        return Note(variant.arch_entry, "derived",
                    f"GPU floor {declared}: the lowest GPU the target {cuda.key} build has kernels for"), None
    if lowest is not None and wanted < lowest:
        return Note(variant.arch_entry, "assumed",
                    f"fleet: gpu {declared}; the target {cuda.key} build has no kernels below "
                    f"sm_{lowest[0]}{lowest[1]} (`envbuild lint` reports it)"), declared
    return Note(variant.arch_entry, "derived",
                f"fleet: gpu {declared} (the GPU floor; its lowest capability is every CUDA lock's __cuda_arch)"), \
        declared


def _merge_lists(data: dict[str, Any], others: list[dict[str, Any]], notes: list[Note]) -> None:
    """Packages, platforms and channels of every variant, in file order; Python and the index are the first
    variant's (a spec has one of each), another variant's differing one noted."""
    torches = {str(other["torch"]) for other in others}
    for key in ("conda", "pip"):
        data[key] = _merged_packages(key, others, torches, notes)
    for key in ("platforms", "channels"):
        merged: list[str] = []
        for other in others:
            merged += [item for item in other.get(key) or () if item not in merged]
        if merged:
            data[key] = merged
    for key in ("python", "pip_index"):
        values = [other.get(key) for other in others]
        differing = [v for v in values if v and v != data.get(key)]
        if differing:
            _add(notes, Note(f"{key}: {differing[0]}", "assumed",
                             f"{key} {data.get(key)}, the first variant's: a spec has one"))


def _merged_packages(section: str, others: list[dict[str, Any]], torches: set[str], notes: list[Note]) -> list[str]:
    """Every variant's packages, one line per package (the first variant's pin); a pin of a package released
    with torch is left out when the targets build different torch releases."""
    merged: dict[str, str] = {}
    for other in others:
        for line in other.get(section) or ():
            name = re.split(r"[=<>!~\s\[]", line, maxsplit=1)[0].lower()
            if name in TORCH_PAIRS and len(torches) > 1 and name != line:
                _add(notes, Note(line, "unpinned", f"{name}'s pin pairs with one torch release, and the targets "
                                                   f"build torch {', '.join(sorted(torches))}"))
                line = name
            if name not in merged:
                merged[name] = line
            elif merged[name] != line:
                _add(notes, Note(line, "dropped", f"a spec has one line per package: {merged[name]!r}, from an "
                                                  "earlier variant, is kept"))
    return list(merged.values())


def _ordered(data: dict[str, Any]) -> dict[str, Any]:
    """The keys in the order the spec template writes them."""
    order = ("name", "description", "python", "torch", "torchvision", "route", "platforms", "channels",
             "pip_index", "targets", "fleet", "conda", "pip")
    return {key: data[key] for key in order if key in data}


def _add(notes: list[Note], note: Note) -> None:
    if note not in notes:
        notes.append(note)

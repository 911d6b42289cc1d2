"""Deciding a spec from a `Reading`: route, CUDA target, torch, Python, torchvision, channels, name.

Every decision that is not a plain copy of a line leaves a `Note` saying what was derived, assumed,
left out or upgraded, so `envbuild init` can print it and the written spec can carry it as comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from builder.compat import CompatData, TorchRelease, load_compat, version_tuple
from builder.errors import UsageError
from builder.import_lines import (
    CPU,
    SOME_CUDA,
    Note,
    exact_version,
    load_import_rules,
    python_minor,
    version_specifier,
)
from builder.import_read import Hint, Reading
from builder.spec import CUDA_PATTERN, DEFAULT_CHANNELS, NAME_PATTERN, URL_PATTERN, Route
from builder.target import default_pip_index

@dataclass(frozen=True)
class SpecDraft:
    """The spec about to be written: its data (what the file must read back as) and its notes."""

    data: dict[str, Any]
    notes: tuple[Note, ...] = ()
    source: Path | None = None




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
    exact = python_minor(line.version)
    if exact:
        return exact, SpecifierSet()
    wanted = version_specifier(line.version)
    if wanted is None:
        raise reading.fail(f"cannot read the Python version in {line.text!r}")
    return None, wanted


def _torch_wish(reading: Reading) -> tuple[str, str | None, SpecifierSet]:
    """(the line as written, its exact version or None, the versions it allows)."""
    if reading.pip_torch is not None:
        text = reading.pip_torch_text or "torch"
        specifiers = [s for s in reading.pip_torch.specifier]
        if len(specifiers) == 1 and specifiers[0].operator in ("==", "===") and "*" not in specifiers[0].version:
            exact = exact_version(specifiers[0].version)
            if exact:
                return text, exact, SpecifierSet()
        version = str(reading.pip_torch.specifier)
    else:
        line = reading.conda_torch
        assert line is not None
        text = line.text
        exact = exact_version(line.version)
        if exact:
            return text, exact, SpecifierSet()
        version = line.version or ""
    wanted = version_specifier(re.sub(r"\+[A-Za-z0-9.]+", "", version))
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
        exact = exact_version(versions[0]) if versions else None
    elif reading.conda_torchvision is not None:
        text = reading.conda_torchvision.text
        exact = exact_version(reading.conda_torchvision.version)
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

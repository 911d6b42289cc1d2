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

from builder.errors import UsageError
from builder.init.lines import (
    CPU,
    SOME_CUDA,
    Note,
    exact_version,
    load_import_rules,
    python_minor,
    version_specifier,
)
from builder.init.reading import Hint, Reading, settled_hints
from builder.specs.compat import CompatData, TorchRelease, load_compat, paired_torchvision, parse_version
from builder.specs.model import DEFAULT_CHANNELS, NAME_PATTERN, URL_PATTERN, Route
from builder.specs.target import default_pip_index


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
    if reading.conda_torch is None and reading.torch_image:
        image = reading.torch_image
        raise reading.fail(f"torch comes from the base image {image.image} ({image.why}); pin it with `RUN pip install "
                           "torch==X.Y.Z --index-url .../whl/cuXYZ`, or give envbuild the image's environment file")
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


@dataclass(frozen=True)
class CudaWish:
    """What the file says about the target's CUDA: one version or `cpu` (`exact`), only "some CUDA build",
    or nothing; plus the majors (`*-cu12` wheels) and ranges (`cuda-version>=12.0`) it must fall in."""

    exact: str | None
    hints: tuple[Hint, ...]
    majors: tuple[str, ...] = ()
    ranges: tuple[SpecifierSet, ...] = ()

    def allows(self, cuda: str) -> bool:
        return ((not self.majors or cuda.split(".")[0] in self.majors)
                and all(r.contains(f"{cuda}.0") or r.contains(cuda) for r in self.ranges))


def _cuda_hint(reading: Reading, route: Route) -> CudaWish:
    """The one CUDA version (or cpu) the lines agree on; `cuda` when they only ask for some CUDA build,
    None when no line says anything about CUDA. A base image's CUDA counts only when no line speaks."""
    hints = list(reading.hints)
    if route is Route.PIP:
        hints += reading.pip_index_hints
    if not [h for h in hints if h.cuda != SOME_CUDA]:
        hints += reading.weak_hints
    concrete = {h.cuda for h in settled_hints(hints) if h.cuda != SOME_CUDA}
    if CPU in concrete and any(h.cuda == SOME_CUDA for h in hints):
        concrete.add(SOME_CUDA)
    meaning = {CPU: "CPU", SOME_CUDA: "a CUDA build"}
    hints, concrete = _torch_build_decides(reading, hints, concrete)
    if len(concrete) > 1:
        said = ", ".join(f"{h.entry!r} says {meaning.get(h.cuda, 'CUDA ' + h.cuda)}" for h in hints)
        raise reading.fail(f"conflicting CUDA hints: {said}; keep the one you mean and run `envbuild init` again")
    majors = tuple(sorted({major for _, major in reading.cuda_majors}))
    exact = concrete.pop() if concrete else (SOME_CUDA if hints or majors or reading.cuda_ranges else None)
    if len(majors) > 1 or (majors and exact not in (None, SOME_CUDA, CPU) and exact.split(".")[0] not in majors):
        claims = [f"{entry!r} says CUDA {major}" for entry, major in reading.cuda_majors]
        claims += [f"{h.entry!r} says {meaning.get(h.cuda, 'CUDA ' + h.cuda)}" for h in hints if h.cuda == exact]
        raise reading.fail(f"conflicting CUDA majors: {', '.join(claims)}; keep the one you mean and run "
                           "`envbuild init` again")
    if exact == CPU and majors:
        raise reading.fail(f"{reading.cuda_majors[0][0]!r} is a CUDA {majors[0]} wheel, but the file asks for CPU "
                           "torch; drop one of them")
    return CudaWish(exact, tuple(hints), majors, tuple(r for _, r in reading.cuda_ranges))


NVIDIA_CUDA_WHEEL = re.compile(r"nvidia-[a-z-]+-cu\d{2}\b")  # nvidia-cublas-cu12, nvidia-cuda-runtime-cu11


def _torch_build_decides(reading: Reading, hints: list[Hint], concrete: set[str]) -> tuple[list[Hint], set[str]]:
    """torch's own build (`torch==2.1.0+cu118`, a legacy build string) names the CUDA it runs on: NVIDIA's CUDA
    library wheels of another CUDA (`nvidia-cublas-cu11` next to a +cu121 torch, as an export of a twice-
    upgraded env lists them) are the file's stray lines, named, not a conflict. A floor (conda-forge's
    `cuda120_*`) decides nothing, and other packages built for another CUDA still conflict."""
    entry = _torch_entry(reading)
    own = {h.cuda for h in hints if h.entry == entry and h.cuda not in (SOME_CUDA, CPU) and not h.floor}
    if len(own) != 1:
        return hints, concrete
    cuda = own.pop()
    stray = [h for h in hints if h.cuda not in (cuda, SOME_CUDA) and NVIDIA_CUDA_WHEEL.match(h.entry)]
    majors = [(e, major) for e, major in reading.cuda_majors
              if major != cuda.split(".")[0] and NVIDIA_CUDA_WHEEL.match(e)]
    for named, says in [*((h.entry, f"CUDA {h.cuda}") for h in stray), *((e, f"CUDA {m}") for e, m in majors)]:
        reading.note(named, "dropped", f"it says {says}, but torch's own build ({entry!r}) is for CUDA {cuda}, "
                                       "which decides; this line is left out")
    reading.cuda_majors = [item for item in reading.cuda_majors if item not in majors]
    kept = [h for h in hints if h not in stray]
    return kept, {h.cuda for h in settled_hints(kept) if h.cuda != SOME_CUDA} | (concrete & {SOME_CUDA})


def _cuda_variants(release: TorchRelease, route: Route) -> list[str]:
    """The release's CUDA builds on a route as text, as the file's CUDA hints are written."""
    return [str(cuda) for cuda in release.cuda_variants(route)]


def _variant(release: TorchRelease, route: Route, wish: CudaWish) -> str | None:
    """The CUDA variant of `release` on `route` that the wish leads to; None when it has none."""
    variants = _cuda_variants(release, route)
    if wish.exact == CPU:
        return CPU if route is not Route.PYTORCH_CHANNEL or variants else None
    if wish.exact not in (None, SOME_CUDA):
        if wish.exact in variants:
            return wish.exact
        if route is Route.CONDA_FORGE:
            # conda-forge's cuda-version pins the CUDA libraries; its torch builds for an older minor of
            # the same major run with them (CUDA minor-version compatibility).
            older = [v for v in variants if v.split(".")[0] == wish.exact.split(".")[0]
                     and parse_version(v) <= parse_version(wish.exact)]
            return older[-1] if older else None
        return None
    allowed = [v for v in variants if wish.allows(v)]
    return allowed[-1] if allowed else None


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
            if re.fullmatch(r"\d+\.\d+(\+[A-Za-z0-9.]+)?", specifiers[0].version):  # `torch==1.5+cu101`
                return text, specifiers[0].version.split("+")[0] + ".0", SpecifierSet()
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


def _fits(release: TorchRelease, route: Route, wish: CudaWish, python: str | None) -> bool:
    if python and not release.python.contains(python):
        return False
    return _variant(release, route, wish) is not None


def _conditions(route: Route, wish: CudaWish, python: str | None) -> str:
    conditions = [f"route {route.value}"]
    if wish.exact not in (None, SOME_CUDA):
        conditions.append("CPU" if wish.exact == CPU else f"CUDA {wish.exact}")
    conditions += [f"CUDA {major}.x" for major in wish.majors]
    conditions += [f"CUDA {r}" for r in wish.ranges]
    if python:
        conditions.append(f"Python {python}")
    return ", ".join(conditions)


def _choose_release(reading: Reading, compat: CompatData, route: Route, wish: CudaWish,
                    python: str | None) -> tuple[str, TorchRelease]:
    text, exact, wanted = _torch_wish(reading)
    usable = [r for r in compat.releases() if r.confidence != "projected" and r.cuda_variants(route)]
    if exact:
        release = compat.release(exact)
        if release is not None:
            return exact, release
        oldest = usable[0]
        if parse_version(exact) > parse_version(usable[-1].latest):
            raise reading.fail(f"torch {exact} ({text!r}) is newer than envbuild's compatibility data "
                               f"(newest: {usable[-1].latest}); pin a release it knows")
        reading.note(text, "upgraded", f"torch {exact} -> {oldest.latest}: {exact} is older than envbuild's "
                                       f"compatibility data; {oldest.line} is the oldest release it builds")
        return oldest.latest, oldest
    candidates = [r for r in usable if wanted.contains(r.latest) and _fits(r, route, wish, python)]
    if candidates:
        chosen = _newest_fit(reading, text, candidates, _conditions(route, wish, python))
        return chosen.latest, chosen
    allowed = [r for r in usable if wanted.contains(r.latest)]
    if not allowed and _below(wanted, usable[0].latest):
        oldest = usable[0]
        reading.note(text, "upgraded", f"torch {oldest.latest}: {text!r} allows only releases older than "
                                       f"envbuild's compatibility data; {oldest.line} is the oldest it builds")
        return oldest.latest, oldest
    cuda_too_old = wish.exact not in (None, SOME_CUDA, CPU) and allowed and all(
        parse_version(wish.exact) < parse_version(_cuda_variants(r, route)[0]) for r in allowed)
    python_too_old = python is not None and allowed and all(
        parse_version(python) < parse_version(r.python.min) for r in allowed)
    if cuda_too_old or python_too_old:
        # The newest torch the file allows, its CUDA and Python moved up to what it supports (written only
        # with --upgrade).
        chosen = allowed[-1]
        reading.note(text, "upgraded", f"torch {chosen.latest}: no release envbuild knows fits "
                                       f"{_conditions(route, wish, python)}; {chosen.line} is the newest "
                                       "the line allows")
        return chosen.latest, chosen
    known_cuda = [str(cuda) for cuda in sorted(compat.cuda)]
    if wish.exact not in (None, SOME_CUDA, CPU) and wish.exact not in known_cuda \
            and parse_version(wish.exact) > max(parse_version(c) for c in known_cuda):
        raise reading.fail(f"{_cuda_entry(reading, wish)!r} names CUDA {wish.exact}, newer than any CUDA release "
                           f"envbuild knows ({', '.join(known_cuda)}); fix the version and run `envbuild init` again")
    known = ", ".join(r.line for r in compat.releases())
    raise reading.fail(f"no torch release in envbuild's compatibility data fits {text!r} with "
                       f"{_conditions(route, wish, python)} (known: {known})")


def _newest_fit(reading: Reading, text: str, candidates: list[TorchRelease], conditions: str) -> TorchRelease:
    """The newest release that fits; with torch left open and torchvision pinned, the one it pairs with."""
    torchvision = _pinned_torchvision(reading)
    paired = [r for r in candidates if torchvision and paired_torchvision(r, torchvision)]
    if paired:
        reading.note(text, "assumed", f"torch {paired[-1].latest}: the release torchvision {torchvision} pairs "
                                      f"with that fits {conditions}")
        return paired[-1]
    reading.note(text, "assumed", f"torch {candidates[-1].latest}: the newest release that fits {conditions}")
    return candidates[-1]


def _pinned_torchvision(reading: Reading) -> str | None:
    """The one torchvision version the file pins (`torchvision==0.20.0`, `torchvision=0.20.0`), if any."""
    if reading.pip_torchvision is not None:
        pins = [s.version for s in reading.pip_torchvision.specifier if s.operator in ("==", "===")]
        return exact_version(pins[0]) if len(pins) == 1 else None
    return exact_version(reading.conda_torchvision.version) if reading.conda_torchvision else None


def _below(wanted: SpecifierSet, oldest: str) -> bool:
    """Whether a version constraint only allows releases older than `oldest` (`1.12.*`, `<2`, `==1.13.1`)."""
    for specifier in wanted:
        base = specifier.version.rstrip(".*")
        if specifier.operator in ("<", "<=", "==", "~=", "===") and parse_version(base) < parse_version(oldest):
            return True
    return False


def _choose_cuda(reading: Reading, route: Route, wish: CudaWish, release: TorchRelease) -> str:
    position = len(reading.notes)
    chosen = _pick_cuda(reading, route, wish, release)
    derived = [Note(h.entry, "derived", f"{_hint_meaning(h)} (route {route.value})") for h in wish.hints
               # the torch line gets one note, with the torch it gives; a CUDA moved to another build has
               # its own note saying so
               if h.entry != _torch_entry(reading) and (h.cuda != wish.exact or chosen == wish.exact)]
    derived += [Note(entry, "derived", f"CUDA {major}.x (a CUDA {major} wheel)")
                for entry, major in reading.cuda_majors]
    reading.notes[position:position] = [n for i, n in enumerate(derived) if n not in derived[:i]]
    return chosen


def _pick_cuda(reading: Reading, route: Route, wish: CudaWish, release: TorchRelease) -> str:
    variant = _variant(release, route, wish)
    variants = _cuda_variants(release, route)
    if variant is None and wish.exact not in (None, SOME_CUDA, CPU):
        if parse_version(wish.exact) >= parse_version(variants[0]):
            return _image_cuda_build(reading, route, wish, release) or wish.exact
        variant = variants[0] if route is not Route.CONDA_FORGE else \
            next(v for v in variants if parse_version(v) >= parse_version(wish.exact))
        reading.note(_cuda_entry(reading, wish), "upgraded",
                     f"target cuda{wish.exact} -> cuda{variant}: CUDA {wish.exact} is older than any torch "
                     f"{release.line} build on route {route.value} ({', '.join(variants)})")
        return variant
    if variant is None:
        variant = variants[-1]
        reading.note(_torch_entry(reading), "upgraded",
                     f"target cuda{variant}: torch {release.line} on route {route.value} has no build for "
                     f"{_conditions(route, wish, None)}")
        return variant
    if wish.exact not in (None, SOME_CUDA) and variant != wish.exact:
        reading.note(_cuda_entry(reading, wish), "assumed",
                     f"target cuda{variant}: conda-forge has no torch {release.line} build for CUDA {wish.exact}; "
                     f"its cuda{variant.replace('.', '')} builds run on CUDA {wish.exact.split('.')[0]}.x libraries "
                     f"(the spec pins cuda-version {variant})")
    elif wish.exact in (None, SOME_CUDA):
        if wish.exact == SOME_CUDA and (wish.majors or wish.ranges):
            why = f"the file allows {_conditions(route, wish, None).split(', ', 1)[1]}"
        elif wish.exact == SOME_CUDA:
            why = "it asks for a CUDA build without a version"
        else:
            why = "no line names a CUDA version (pytorch-cuda, cuda-version, cudatoolkit, +cuXYZ, a cuXYZ index)"
        reading.note(_torch_entry(reading), "assumed",
                     f"target cuda{variant}: {why}; it is the newest CUDA of torch {release.line} on route "
                     f"{route.value} that fits (add targets for others)")
    return variant


def _image_cuda_build(reading: Reading, route: Route, wish: CudaWish, release: TorchRelease) -> str | None:
    """A base image's CUDA that its torch release has no wheel for (NGC builds torch for the image's own
    CUDA): the release's newest build of the same CUDA major, older than the image's, which runs there
    (CUDA minor-version compatibility). None for a CUDA a line of the file names (refused, with the reason,
    when the spec is resolved)."""
    entry = _cuda_entry(reading, wish)
    assert wish.exact is not None
    same_major = [v for v in _cuda_variants(release, route) if v.split(".")[0] == wish.exact.split(".")[0]
                  and parse_version(v) < parse_version(wish.exact)]
    if not entry.startswith("FROM ") or not same_major:
        return None
    reading.note(entry, "upgraded", f"target cuda{wish.exact} -> cuda{same_major[-1]}: torch {release.line} has no "
                                    f"route {route.value} build for the image's CUDA {wish.exact}; its "
                                    f"cuda{same_major[-1]} build runs on CUDA {wish.exact.split('.')[0]}.x")
    return same_major[-1]


def _cuda_entry(reading: Reading, wish: CudaWish) -> str:
    named = [h.entry for h in wish.hints if h.cuda == wish.exact]
    return named[0] if named else _torch_entry(reading)


def _hint_meaning(hint: Hint) -> str:
    return {CPU: "the CPU target", SOME_CUDA: "a CUDA target"}.get(hint.cuda, f"target cuda{hint.cuda}")


def _torch_entry(reading: Reading) -> str:
    return (reading.conda_torch.text if reading.conda_torch else reading.pip_torch_text) or "torch"


def _choose_python(reading: Reading, release: TorchRelease | None, exact: str | None,
                   wanted: SpecifierSet, may_upgrade: bool = False) -> str:
    default = load_import_rules().default_python
    if release is None:
        return exact or default
    low, high = parse_version(release.python.min), parse_version(release.python.max)
    supported = [f"3.{minor}" for minor in range(low.minor, high.minor + 1)]
    entry = reading.python.text if reading.python else "python (not listed)"
    if exact:
        if exact in supported or not may_upgrade:
            return exact  # an unsupported one is refused with the reason when the spec is resolved
        nearest = supported[0] if parse_version(exact) < low else supported[-1]
        reading.note(entry, "upgraded", f"python {exact} -> {nearest}: torch {release.line} supports Python "
                                        f"{release.python.min} to {release.python.max}")
        return nearest
    allowed = [v for v in supported if wanted.contains(f"{v}.0")]
    if not allowed:
        raise reading.fail(
            f"torch {release.line} supports Python {release.python.min} to {release.python.max}, and none of "
            f"them fits {reading.python.text if reading.python else 'python'!r}")
    chosen = default if default in allowed else allowed[-1]
    reading.note(entry, "assumed", f"Python {chosen}, supported by torch {release.line}")
    return chosen


def _choose_torchvision(reading: Reading, release: TorchRelease | None, torch_upgraded: bool,
                        own_pairs: bool = False) -> str | None:
    """The spec's torchvision. One that does not pair with the chosen torch is re-paired (an `upgraded`
    note), also where the file's channel paired it its own way (`own_pairs`: conda-forge builds
    torchvision against the pytorch its depends name, which the spec model, pairing by PyPI's table,
    cannot hold)."""
    if reading.pip_torchvision is not None:
        text = reading.pip_torchvision_text or "torchvision"
        versions = [s.version for s in reading.pip_torchvision.specifier if s.operator in ("==", "===")]
        exact = exact_version(versions[0]) if versions else None
    elif reading.conda_torchvision is not None:
        text = reading.conda_torchvision.text
        exact = exact_version(reading.conda_torchvision.version)
    else:
        return None
    if exact and release is not None and (torch_upgraded or own_pairs) \
            and not paired_torchvision(release, exact) and release.torchvision_latest:
        why = "" if torch_upgraded else (f" (the file's channel built torchvision {exact} for torch "
                                         f"{release.line}; a spec pairs torchvision by PyPI's releases)")
        reading.note(text, "upgraded", f"torchvision {exact} -> {release.torchvision_latest}, the pair of "
                                       f"torch {release.line}{why}")
        return release.torchvision_latest
    if exact:
        reading.note(text, "derived", f"torchvision {exact}")
        return exact
    if release is None or not release.torchvision_latest:
        return None
    written = reading.pip_torchvision.specifier if reading.pip_torchvision is not None else None
    if written and not written.contains(release.torchvision_latest, prereleases=True):
        reading.note(text, "upgraded", f"torchvision {written} -> {release.torchvision_latest}, the pair of torch "
                                       f"{release.line} (the file's range does not hold it)")
        return release.torchvision_latest
    reading.note(text, "assumed", f"torchvision {release.torchvision_latest}, the pair of torch {release.line}")
    return release.torchvision_latest


TORCH_PAIRS = ("torchaudio", "torchtext", "torchdata")  # released in step with torch, each pin fits one torch


def _unpin_torch_pairs(reading: Reading, release: TorchRelease, only_unpaired: bool, repair: bool) -> None:
    """torchaudio, torchtext, torchdata pins, each built for one torch: left out once torch moved, or (torch
    as the file pins it) where the pin is torchaudio's of another release (its 2.x numbering is torch's)."""
    for extras in (reading.conda, reading.pip):
        for index, package in enumerate(extras):
            name = re.split(r"[=<>!~\s\[]", package, maxsplit=1)[0]
            unpaired = _other_torchaudio(name, package, release)
            if only_unpaired and not (repair and unpaired):
                continue
            if name.lower() in TORCH_PAIRS and name != package:
                extras[index] = name
                why = f"torch moved to {release.line}" if not only_unpaired else \
                    f"it is the pin of another torch release than {release.line}"
                reading.note(package, "upgraded", f"{name}'s pin is left out: it pairs with one torch release, "
                                                  f"and {why}")


# an extension's local tag naming the torch it was built for: `+torch1.12cu11.3`, `+pt21cu118`
BUILT_FOR_TORCH = re.compile(r"\+(?:.*[^a-z])?(?:torch|pt)(\d)\.?(\d+)")


def _other_torchaudio(name: str, package: str, release: TorchRelease) -> bool:
    """A torchaudio pin of a 2.x release other than torch's (`torchaudio==2.0.2` next to torch 2.1)."""
    pinned = re.fullmatch(r"torchaudio\s*={1,2}\s*(2\.\d+)(\.[\d.*]+)?", package.strip(), re.IGNORECASE)
    return name.lower() == "torchaudio" and pinned is not None and pinned[1] != release.line


def _unpin_other_torch_builds(reading: Reading, release: TorchRelease) -> None:
    """A pin whose local tag names the torch it was built for, another than the spec's: its pin is left out
    (the build loads only into that torch), with the reason."""
    for index, package in enumerate(reading.pip):
        built = BUILT_FOR_TORCH.search(package)
        if built and f"{built[1]}.{built[2]}" != release.line:
            name = re.split(r"[=<>!~\s\[]", package, maxsplit=1)[0]
            reading.pip[index] = name
            reading.note(package, "upgraded", f"{name}'s pin is left out: its build is for torch "
                                              f"{built[1]}.{built[2]}, and the spec's torch is {release.line}")


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


def _channels(reading: Reading, route: Route, target: str) -> list[str] | None:
    channels = list(reading.channels)
    if not channels:
        return None
    if route is Route.PYTORCH_CHANNEL:
        # `pytorch::pytorch` and `nvidia::pytorch-cuda` name channels the list may lack; without them
        # pytorch-cuda cannot solve, so they go first, as the legacy install instructions list them.
        needed = ["pytorch"] + (["nvidia"] if target != CPU else [])
        missing = [c for c in needed if c not in channels]
        if missing:
            channels = needed + [c for c in channels if c not in needed]
            reading.note("channels:", "assumed", f"{', '.join(missing)} added first: route pytorch-channel takes "
                                                 "pytorch and pytorch-cuda from them")
    if not reading.nodefaults and "conda-forge" not in channels:
        # conda adds its default channels to these unless `nodefaults` is listed; so does envbuild,
        # with conda-forge in their place.
        channels.append("conda-forge")
        reading.note("channels:", "assumed", "conda-forge added where conda would add its defaults")
    if tuple(channels) == DEFAULT_CHANNELS[route]:
        return None
    return channels


def _note_torch_choice(reading: Reading, torch: str, route: Route, wish: CudaWish) -> None:
    """What the torch line led to, unless an assumption or an upgrade of torch already says so."""
    torch_entry = _torch_entry(reading)
    if any(n.entry == torch_entry and n.outcome in ("assumed", "upgraded") and n.reason.startswith("torch ")
           for n in reading.notes):
        return
    said = [_hint_meaning(h) if not h.floor or h.cuda == wish.exact
            else f"a CUDA {h.cuda.split('.')[0]}.x build (built for {h.cuda}, runs with {wish.exact})"
            for h in wish.hints if h.entry == torch_entry]
    reading.note(torch_entry, "derived", ", ".join([f"torch {torch}", f"route {route.value}", *said]))


def _refuse_upgrades(reading: Reading, route: Route) -> None:
    """A file older than what envbuild builds, refused with the nearest set it builds (which --upgrade writes)."""
    upgrades = [n for n in reading.notes if n.outcome == "upgraded"]
    if upgrades:
        changes = "; ".join(re.split(r"[:,]", n.reason)[0] for n in upgrades)
        raise reading.fail(
            f"{upgrades[0].entry!r} is older than what envbuild builds; the nearest set it builds is {changes} "
            f"(route {route.value}). Run `envbuild init --from {reading.source} --upgrade` to write that, each "
            "change listed")


def draft_from_environment(reading: Reading, name: str | None = None, compat: CompatData | None = None,
                           upgrade: bool = False) -> SpecDraft:
    """The spec data a reading leads to, with the notes of every decision. A file whose torch, CUDA or
    Python is older than the compatibility data is refused with the nearest supported set, which
    `upgrade=True` writes instead (each change an `upgraded` note)."""
    compat = compat or load_compat()
    route = _route(reading)
    wish = _cuda_hint(reading, route)
    python_exact, python_wanted = _python_wish(reading)
    torch, release = _choose_release(reading, compat, route, wish, python_exact)
    target = _choose_cuda(reading, route, wish, release)
    torch_upgraded = any(n.outcome == "upgraded" and n.reason.startswith("torch ") for n in reading.notes)
    python = _choose_python(reading, release, python_exact, python_wanted, may_upgrade=torch_upgraded)
    # a companion of another torch release is re-paired (written with --upgrade), except on conda-forge,
    # whose builds pair by their own depends (a lock's pair is right by construction)
    repair = torch_upgraded or route is not Route.CONDA_FORGE
    locked = reading.kind in ("pixi.lock", "conda-lock.yml", "conda list")  # pairs solved by the channel
    torchvision = _choose_torchvision(reading, release, repair, own_pairs=locked and route is Route.CONDA_FORGE)
    _unpin_torch_pairs(reading, release, only_unpaired=not torch_upgraded, repair=repair)
    _unpin_other_torch_builds(reading, release)
    if reading.python and python_exact and python == python_exact:
        reading.note(reading.python.text, "derived", f"python: {python}")
    _note_torch_choice(reading, torch, route, wish)
    if not upgrade:
        _refuse_upgrades(reading, route)
    if reading.exported:
        reading.note("(the whole file)", "assumed",
                     f"a `conda env export`: all {reading.conda_lines} installed packages were pinned there, so "
                     "every dependency is now an extra; keep in `conda:` only what you asked for")
    data = _spec_data(reading, _name(reading, name), python, torch, torchvision, route, target)
    return SpecDraft(data, tuple(reading.notes), Path(reading.source))


def _spec_data(reading: Reading, name: str, python: str, torch: str, torchvision: str | None, route: Route,
               target: str) -> dict[str, Any]:
    """The spec's fields in the order a reader expects them; optional ones only when the file set them."""
    description = f"imported from {Path(reading.source).name} by envbuild init"
    if not re.fullmatch(r"[^\x00-\x1f\x7f]*", description) or len(description) > 500:
        description = "imported by envbuild init"
    optional_head = {"torchvision": torchvision}
    optional_tail = {"platforms": reading.platforms, "channels": _channels(reading, route, target),
                     "pip_index": _pip_index(reading, route)}
    return {
        "name": name, "description": description, "python": python, "torch": torch,
        **{key: value for key, value in optional_head.items() if value},
        "route": route.value,
        **{key: value for key, value in optional_tail.items() if value},
        "targets": [{"cuda": target}],
        "conda": list(reading.conda),
        "pip": list(reading.pip),
    }


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
        "targets": [{"cuda": str(release.cuda_variants(Route.CONDA_FORGE)[-1])}, {"cuda": CPU}],
        "conda": ["numpy"],
        "pip": [],
    }
    return SpecDraft(data)

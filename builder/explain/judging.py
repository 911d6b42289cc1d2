"""A judgement per finding from the log's facts: the phase it was printed in, the versions, index URLs,
channels and library names it states, checked against envbuild's data (compat.yaml; explain_judgements.yaml:
phases, PyTorch's published wheel indexes, which channel carries which CUDA package, cuDNN's majors, what a
build step can see). A judgement gives the cause with the facts it rests on (and their lines) and the fix for
those facts; where none applies, the family's general fix stands and says so."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from packaging.version import Version

from builder.errors import UsageError
from builder.explain.conflict_report import USER, Conflict, Requirement, conflict, newest_meeting, read_report
from builder.explain.context import ExplainContext
from builder.explain.matching import Hit
from builder.explain.refining import Refined
from builder.specs.compat import Route
from builder.specs.cuda import CudaVersion
from builder.yamlio import load_data

FACT_CHARS = 160  # characters of a log line quoted as a fact
PHASE_HEADER_CHARS = 400  # a phase header's line holds its needle this far from the line's start at most
MISSING_LIST_CHARS = 4000  # a solver's list of missing packages, read from the hit on


@dataclass(frozen=True)
class UsedFact:
    name: str
    value: str
    line: int

    def as_dict(self) -> dict[str, Any]:
        return {"fact": self.name, "value": self.value, "line": self.line}


@dataclass(frozen=True)
class Judgement:
    cause: str
    fix: str
    facts: tuple[UsedFact, ...]


Judge = Callable[[Hit, ExplainContext, Refined], "Judgement | None"]
JUDGES: list[Judge] = []


def _judge(fn: Judge) -> Judge:
    JUDGES.append(fn)
    return fn


@lru_cache(maxsize=1)
def judgement_data() -> dict[str, Any]:
    data: dict[str, Any] = load_data("explain_judgements.yaml")
    return data


def judge(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    """The first judgement whose facts are in the log, in the order they are defined here."""
    for fn in JUDGES:
        judged = fn(hit, context, said)
        if judged is not None:
            return judged
    return None


def _applies(section: str, hit: Hit) -> bool:
    return hit.family.id in judgement_data()[section]["families"]


def _line_at(context: ExplainContext, at: int) -> int:
    return context.log.line_of(at)


# --- the phase ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    kind: str
    how: str
    detail: str
    line: int


def phase_at(context: ExplainContext, at: int) -> Phase | None:
    """The phase a log position was printed in: the last phase header above it (a docker build step, a pytest
    test), else the torchrun rank its line was prefixed with, or None."""
    best: tuple[int, Phase] | None = None
    text = context.log.text
    for kind, phase in judgement_data()["phases"].items():
        first = context.log.first_at(phase["needle"])
        if first == -1 or first > at:
            continue
        for header in phase["headers"]:
            for found in _multiline(header["re"]).finditer(text, max(0, first - PHASE_HEADER_CHARS), at):
                if best is None or found.start() > best[0]:
                    best = (found.start(), Phase(kind, header["how"], found.group(1).strip()[:FACT_CHARS],
                                                 _line_at(context, found.start())))
    if best is not None:
        return best[1]
    index = context.log.text.count("\n", 0, at)
    rank = context.ranks[index] if index < len(context.ranks) else None
    if rank is None:
        return None
    return Phase("torchrun-rank", "torchrun rank's output", f"rank {rank}", _line_at(context, at))


@lru_cache(maxsize=64)
def _multiline(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


@_judge
def _gpu_at_build_time(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("gpu_at_build_time", hit):
        return None
    phase = phase_at(context, hit.at)
    if phase is None or phase.kind != "docker-build":
        return None
    data = judgement_data()["gpu_at_build_time"]
    cause = data["cause"].format(how=phase.how, line=phase.line, step=phase.detail, hit_line=hit.line,
                                 evidence=hit.evidence[:FACT_CHARS])
    return Judgement(cause, data["fix"],
                     (UsedFact("phase", f"{phase.how}: {phase.detail}", phase.line),))


# --- PyTorch's wheel indexes and the Pythons a torch supports ------------------------------------------------


def published_wheel_cudas(context: ExplainContext) -> list[CudaVersion]:
    """Every CUDA PyTorch published a wheel index for (compat.yaml's pip routes and the older ones)."""
    cudas = {cuda for release in context.compat.releases() for cuda in release.cuda_variants(Route.PIP)}
    cudas.update(CudaVersion.parse(older) for older in judgement_data()["wheel_index"]["older"])
    return sorted(cudas)


@_judge
def _unpublished_wheel_index(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("wheel_index", hit):
        return None
    data = judgement_data()["wheel_index"]
    published = published_wheel_cudas(context)
    for found in _multiline(data["index_re"]).finditer(context.log.text):
        cuda = _index_cuda(found.group(2))
        if cuda is None or cuda in published:
            continue
        nearest = min(published, key=lambda have: (abs(have.major * 100 + have.minor - cuda.major * 100 - cuda.minor),
                                                   have > cuda))
        url, line = found.group(0), _line_at(context, found.start())
        cause = (f"{said.message}: the index {url} (line {line}) does not exist: PyTorch published no wheels for "
                 f"CUDA {cuda}, so pip finds no torch there (`from versions: none`) whatever the Python")
        fix = (f"use an index that exists: {found.group(1)}{nearest.tag} (CUDA {nearest}, the "
               f"nearest published; indexes exist for CUDA {', '.join(str(c) for c in published if c.major >= 11)})"
               "; a driver runs any CUDA up to its own, so an older index works on a newer driver")
        return Judgement(cause, fix, (UsedFact("index_url", url, line),))
    return None


@_judge
def _placeholder_versions_only(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    """pip was offered only torch's placeholder uploads: no real wheel fits this interpreter."""
    if not _applies("pip_placeholder", hit):
        return None
    data = judgement_data()["pip_placeholder"]
    found = _multiline(data["offered_re"]).search(context.log.text)
    if found is None:
        return None
    offered = [version for version in re.split(r"[,\s]+", found.group(1)) if version]
    if not offered or not set(offered) <= set(data["placeholders"]):
        return None
    line = _line_at(context, found.start())
    wanted = re.search(r"torch\s*={2,3}\s*(\d+\.\d+(?:\.\d+)?)", context.log.text)
    release = context.compat.release(wanted.group(1)) if wanted else None
    pythons = f" (Python {release.python.min} to {release.python.max})" if release else ""
    cause = data["cause"].format(message=said.message, offered=", ".join(offered), line=line)
    fix = data["fix"].format(wanted=f" {wanted.group(1)}" if wanted else "", pythons=pythons)
    return Judgement(cause, fix, (UsedFact("pip_offered", ", ".join(offered), line),))


@_judge
def _torch_too_old_for_python(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("torch_python", hit):
        return None
    python = context.facts.facts.get("python")
    found = _multiline(judgement_data()["torch_python"]["requirement_re"]).search(context.log.text)
    if python is None or found is None:
        return None
    wanted = found.group(1)
    release = context.compat.release(wanted)
    minor = ".".join(python.value.split(".")[:2])  # the ranges name minors: 3.12.1 is in "up to 3.12"
    if release is None or release.python.contains(minor):
        return None
    fits = [r for r in context.compat.releases() if r.python.contains(minor)]
    line = _line_at(context, found.start())
    cause = (f"{said.message}: torch {wanted} (line {line}) supports Python {release.python.min} to "
             f"{release.python.max}, and this Python is {python.value} (line {python.line}): no wheel of it exists "
             "for this interpreter")
    fix = f"use Python {release.python.min} to {release.python.max} for torch {wanted}"
    if fits:
        fix += (f", or a torch that supports Python {python.value}: {fits[0].line} to {fits[-1].line} "
                f"(`pip install torch=={fits[-1].latest}`)")
    return Judgement(cause, fix, (UsedFact("torch", wanted, line), UsedFact("python", python.value, python.line)))


@_judge
def _no_torch_for_this_python(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    """`from versions: none` for torch, and the log states a Python: which releases have wheels for it."""
    if not _applies("python_wheels", hit):
        return None
    python = context.facts.facts.get("python")
    found = _multiline(judgement_data()["python_wheels"]["none_re"]).search(context.log.text)
    if python is None or found is None:
        return None
    minor = ".".join(python.value.split(".")[:2])
    releases = context.compat.releases()
    fits = [release for release in releases if release.python.contains(minor)]
    older = _previous_minor(minor)
    elder = [release for release in releases if older and release.python.contains(older)]
    line = _line_at(context, found.start())
    if fits and fits[0] is releases[0]:
        return None  # every release envbuild knows has wheels for this Python: the index is the question
    if fits:
        cause = (f"{said.message}: the log's Python is {python.value} (line {python.line}), and torch has wheels for "
                 f"Python {minor} only from {fits[0].line} on: an index (or a day) without torch {fits[0].line} or "
                 f"newer offers none for it (line {line})")
        fix = f"ask for a torch that has Python {minor} wheels (`pip install \"torch>={fits[0].line}\"`)"
    else:
        newest = releases[-1]
        cause = (f"{said.message}: the log's Python is {python.value} (line {python.line}), and no torch release "
                 f"envbuild knows has wheels for Python {minor} (the newest, {newest.line}, goes up to "
                 f"{newest.python.max}) (line {line})")
        fix = f"use Python {newest.python.max} or older for torch {newest.line}"
    if elder:
        fix += (f", or use Python {older}, which torch {elder[0].line} to {elder[-1].line} have wheels for (a new "
                "venv or conda env with that Python)")
    return Judgement(cause, fix, (UsedFact("python", python.value, python.line),))


def _previous_minor(minor: str) -> str | None:
    major, _, rest = minor.partition(".")
    return f"{major}.{int(rest) - 1}" if rest.isdigit() and int(rest) > 0 else None


@_judge
def _extension_toolkit_other_than_nvcc(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    """The build found one CUDA (CUDA_HOME) and the log's nvcc --version shows another: make the pair from
    the toolkit the user has, with the torch build PyTorch published for it."""
    if not _applies("extension_toolkits", hit):
        return None
    toolkit = context.facts.facts.get("toolkit")
    found, torch_cuda = hit.fields.get("found"), hit.fields.get("torch_cuda")
    if toolkit is None or not found or not torch_cuda or toolkit.value in (found, torch_cuda):
        return None
    have = CudaVersion.parse(toolkit.value)
    tag = f"cu{have.major}{have.minor}"
    published = have in published_wheel_cudas(context)
    cause = (f"{said.message}; the log's nvcc --version shows CUDA {toolkit.value} (line {toolkit.line}), not the "
             f"CUDA {found} the build found: an extension build takes the toolkit at CUDA_HOME (else "
             "/usr/local/cuda), not the nvcc first on PATH")
    if published:
        fix = (f"pair torch with the CUDA {toolkit.value} toolkit you have: install torch's build for it (`pip install "
               f"torch --index-url https://download.pytorch.org/whl/{tag}`) and `export CUDA_HOME=<that toolkit's "
               f"root>` (`$CONDA_PREFIX` for a conda cuda-nvcc); or point CUDA_HOME at a CUDA {torch_cuda} toolkit")
    else:
        fix = (f"point CUDA_HOME at a CUDA {torch_cuda} toolkit for this torch (PyTorch published no build for "
               f"CUDA {toolkit.value}); `nvcc --version` and torch.version.cuda must agree")
    return Judgement(cause, fix, (UsedFact("toolkit", toolkit.value, toolkit.line),
                                  UsedFact("toolkit_found", found, hit.line),
                                  UsedFact("torch_cuda", torch_cuda, hit.line)))


# --- channels ------------------------------------------------------------------------------------------------


@_judge
def _package_on_another_channel(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("channel_packages", hit):
        return None
    data = judgement_data()["channel_packages"]
    text = context.log.text
    given = {found.group(1) for found in _multiline(data["channels_re"]).finditer(text)}
    given |= set(re.findall(r"(?:^|\s)(?:-c|--channel)[ =]([\w.-]+)", text))
    # The packages the solver says are missing: the hit's line and the list under it, up to the channels.
    start = text.rfind("\n", 0, hit.at) + 1
    end = text.find("Current channels", hit.at)
    end = min(end if end != -1 else len(text), hit.at + MISSING_LIST_CHARS)
    for package in data["packages"]:
        found = _multiline(package["re"]).search(text, start, end)
        if found is None or given & set(package["channels"]):
            continue
        name, line = found.group(0).strip(), _line_at(context, found.start())
        channels_said = f"the channels given: {', '.join(sorted(given))}" if given else "the log lists no channels"
        cause = f"{said.message}: {name} (line {line}) is on none of {channels_said}; {package['says']}"
        add = " ".join(f"-c {channel}" for channel in package["channels"][:1])
        fix = (f"add the channel that carries it: `{add}` (in environment.yml: `channels: [{package['channels'][0]}, "
               "...]`), keeping one source for torch's CUDA; `envbuild lock` picks the channels per target")
        facts = [UsedFact("package", name, line)]
        if given:
            facts.append(UsedFact("channels", ", ".join(sorted(given)), line))
        return Judgement(cause, fix, tuple(facts))
    return None


# --- libraries and pairs ------------------------------------------------------------------------------------


@_judge
def _cudnn_major_mismatch(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("cudnn_majors", hit):
        return None
    data = judgement_data()["cudnn_majors"]
    wanted = re.search(data["wanted_re"], hit.evidence) or re.search(data["wanted_re"], context.log.text)
    if wanted is None:
        return None
    major = wanted.group(2) or wanted.group(3)
    present = {found.group(2): found for found in _multiline(data["present_re"]).finditer(context.log.text)}
    if not present or major in present:
        return None
    other, listed = sorted(present.items())[-1]
    wanted_line, listed_line = hit.line, _line_at(context, listed.start())
    cause = (f"{said.message}: the program asks for cuDNN {major} ({wanted.group(1)}, line {wanted_line}) and this "
             f"machine has cuDNN {other} ({listed.group(1)}, line {listed_line}): cuDNN {other} does not stand in "
             f"for {major} (other library names, no shared ABI)")
    pip_name = "nvidia-cudnn-cu11==8.*" if major == "8" else f"nvidia-cudnn-cu12=={major}.*"
    fix = (f"install cuDNN {major} beside cuDNN {other} (`pip install {pip_name}`, or the system's libcudnn{major}) "
           f"and put its lib folder on LD_LIBRARY_PATH, or use a build of the program made for cuDNN {other}")
    return Judgement(cause, fix, (UsedFact("cudnn_wanted", wanted.group(1), wanted_line),
                                  UsedFact("cudnn_present", listed.group(1), listed_line)))


@_judge
def _torchvision_pair(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("torchvision_pair", hit):
        return None
    torch = context.facts.facts.get("torch")
    found = _multiline(judgement_data()["torchvision_pair"]["torchvision_re"]).search(context.log.text)
    if torch is None or found is None:
        return None
    vision, vision_line = found.group(1), _line_at(context, found.start())
    have = torch.value.split("+")[0]
    pair = companion_of(have, "torchvision")
    if pair is None:
        return None
    if pair == vision.split("+")[0]:
        return None
    own = torch_of("torchvision", vision)
    cause = (f"{said.message}: torchvision {vision} (line {vision_line}) is not the pair of torch {torch.value} "
             f"(line {torch.line}); torch {have} pairs with torchvision {pair}")
    fix = f"install the pair from one index: `pip install torch=={have} torchvision=={pair}`"
    if own is not None:
        fix += f", or keep torchvision {vision} with its own torch {own}"
    return Judgement(cause, fix, (UsedFact("torch", torch.value, torch.line),
                                  UsedFact("torchvision", vision, vision_line)))


@_judge
def _extension_built_for_other_torch(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("extension_torch_abi", hit):
        return None
    data = judgement_data()["extension_torch_abi"]
    torch = context.facts.facts.get("torch")
    symbol = hit.fields.get("symbol", "")
    package = re.search(data["package_re"], hit.fields.get("library") or hit.evidence)
    # the family's reader names the package (its site-packages folder, lib<package>.so, the traceback's
    # package) where the library is a bare module (_torch_sox.so) or has no path
    name = hit.fields.get("package") or (package.group(1) if package else None)
    if torch is None or name is None or re.match(data["symbol_re"], symbol) is None:
        return None
    have = torch.value
    distribution = data["distributions"]["modules"].get(name, name)
    cause = (f"undefined symbol {symbol} in {name}'s compiled extension (line {hit.line}): torch {have} "
             f"(line {torch.line}) does not provide this torch symbol, so {name} was built against another torch "
             "version (or C++ ABI) than the one installed")
    fix = (f"reinstall {distribution}'s build that matches torch {have} (the projects that publish prebuilt wheels "
           f"publish one per torch and CUDA), or rebuild {distribution} from a clean tree against this torch (remove "
           f"its build/ folder and compiled .so files first): "
           f"`pip install --no-build-isolation --no-cache-dir {distribution}`")
    return Judgement(cause, fix, (UsedFact("torch", have, torch.line),
                                  UsedFact("extension", name, hit.line)))


def torch_of(package: str, version: str) -> str | None:
    """The torch release a companion release was built for (torchvision 0.15.2 -> torch 2.0.1)."""
    public = version.split("+")[0]
    return next((torch for torch, row in torch_companions().items() if row.get(package) == public), None)


@lru_cache(maxsize=1)
def torch_companions() -> dict[str, dict[str, str]]:
    """torch release -> its torchvision and torchaudio (torch_companions.yaml)."""
    releases: dict[str, dict[str, str]] = load_data("torch_companions.yaml")["releases"]
    return releases


def companion_of(torch: str, package: str) -> str | None:
    """The `package` release built for `torch` (1.10.2 -> torchvision 0.11.3); a release line alone takes its .0."""
    public = torch.split("+")[0]
    table = torch_companions()
    row = table.get(public) or table.get(f"{public}.0")
    return row.get(package) if row else None


@_judge
def _companion_pinned_to_another_torch(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("companion_pins", hit):
        return None
    data = judgement_data()["companion_pins"]
    text = context.log.text
    companion = _multiline(data["companion_re"]).search(text)
    torch = next((found for pattern in data["torch_res"] if (found := _multiline(pattern).search(text))), None)
    if companion is None or torch is None:
        return None
    package, version, needs = companion.groups()
    have = torch.group(1)
    if needs.split("+")[0] == have.split("+")[0]:
        return None
    pair = companion_of(have, package)
    if pair is None:
        return None
    companion_line, torch_line = _line_at(context, companion.start()), _line_at(context, torch.start())
    cause = (f"{said.message}: {package} {version} (line {companion_line}) is built for torch {needs}, and torch "
             f"{have} is the one wanted (line {torch_line}); torch {have.split('+')[0]}'s {package} is {pair}")
    local = f"+{have.split('+')[1]}" if "+" in have else ""
    index = f" from the same index (PyTorch's {local[1:]} index)" if local else ""
    public = have.split("+")[0]
    if hit.family.id in data["poetry_families"]:
        fix = (f"pin the pair in pyproject.toml (`poetry add torch=={public} {package}=={pair}`), "
               f"or keep {package} {version} with torch {needs}")
    else:
        fix = (f"install the pair: `pip install torch=={public} {package}=={pair}`{index}, "
               f"or keep {package} {version} with torch {needs}")
    return Judgement(cause, fix, (UsedFact(package, version, companion_line), UsedFact("torch", have, torch_line)))


@_judge
def _resolver_conflict(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    """A resolver's conflict report read line by line: the pair of requirements on one package that no release
    meets names the cause, and the fix moves the side that is behind (the compatibility data names the
    companion release where it has one)."""
    if not _applies("resolver_conflicts", hit) or (hit.cause is not None and hit.cause.when):
        return None  # a known cause the log tells (a musl system) says more than any pair of lines
    requirements = read_report(context.log.text, hit.at, context.log.line_of)
    if not requirements:
        return None
    message = hit.text(hit.family.message)
    used = tuple(UsedFact(f"requires {each.name}", f"{each.who}: {each.text}", each.line) for each in requirements)
    pair = conflict(requirements, {"torch": _torch_releases(context)})
    if pair is None:
        read = "; ".join(f"{each.who} needs {each.text} (line {each.line})" for each in requirements[:6])
        cause = f"{message}: the report's requirement lines: {read}"
        fix = (f"loosen or drop the pins these lines name ({', '.join(sorted({each.wanted for each in requirements}))})"
               ", or install the packages in one command so the resolver sees them together")
        return Judgement(cause, fix, used)
    return Judgement(_conflict_cause(message, pair), _conflict_fix(pair, context), used)


def _said_requirement(requirement: Requirement) -> str:
    return f"{requirement.who} needs {requirement.text} (line {requirement.line})"


def _conflict_cause(message: str, pair: Conflict) -> str:
    name = pair.first.name
    if pair.apart:
        return (f"{message}: {_said_requirement(pair.first)} while {_said_requirement(pair.second)}: no {name} "
                "release meets both")
    return (f"{message}: {_said_requirement(pair.first)} and {_said_requirement(pair.second)}; with the other "
            "lines of the report no release of them fits together")


def _conflict_fix(pair: Conflict, context: ExplainContext) -> str:
    behind, ahead = _behind_and_ahead(pair, context)
    name = behind.name
    if behind.parent == USER:
        fix = f"change your requirement {behind.text} to one that {ahead.who} allows ({ahead.wanted})"
    else:
        fix = (f"upgrade {behind.parent} (or relax its pin): {behind.parent} {behind.parent_version} pins "
               f"{behind.wanted}, so take a release of {behind.parent} built for {ahead.wanted}")
        fix += _companion_fits(behind, ahead, context)
    other = ahead.parent if ahead.parent != USER else f"your {name} requirement"
    return fix + f"; or keep {behind.wanted} and use {other} at a version that allows it"


def _companion_fits(behind: Requirement, ahead: Requirement, context: ExplainContext) -> str:
    """The companion release the compatibility data pairs with the newest torch `ahead` admits."""
    if behind.name != "torch" or behind.parent not in ("torchvision", "torchaudio"):
        return ""
    torch = newest_meeting(ahead.spec, tuple(_torch_releases(context)))
    pair = companion_of(torch, behind.parent) if torch else None
    if pair is None:
        return ""
    return f" (`pip install torch=={torch} {behind.parent}=={pair}`: the pair from torch_companions.yaml)"


def _behind_and_ahead(pair: Conflict, context: ExplainContext) -> tuple[Requirement, Requirement]:
    """The requirement that admits only older releases first (the one to move), the other second."""
    releases = tuple(_torch_releases(context)) if pair.first.name == "torch" else ()
    first, second = (_newest_admitted(each, releases) for each in (pair.first, pair.second))
    if first is None or second is None or first == second:
        return (pair.first, pair.second) if "==" in pair.first.spec else (pair.second, pair.first)
    return (pair.first, pair.second) if first < second else (pair.second, pair.first)


def _newest_admitted(requirement: Requirement, releases: tuple[str, ...]) -> Version | None:
    named = tuple(dict.fromkeys((*re.findall(r"\d+(?:\.\d+)*", requirement.spec), *releases)))
    candidates = (*named, *(f"{each}.99999" for each in named), "99999")
    found = newest_meeting(requirement.spec, candidates)
    return Version(found) if found else None


def _torch_releases(context: ExplainContext) -> list[str]:
    releases = {release.latest for release in context.compat.releases()} | set(torch_companions())
    return sorted(releases, key=Version)


@_judge
def _gpu_memory_held_by_processes(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("gpu_processes", hit):
        return None
    data = judgement_data()["gpu_processes"]
    rows = [(found, int(found.group(5))) for found in _multiline(data["row_re"]).finditer(context.log.text)]
    held = sorted((row for row in rows if row[1] >= data["min_mib"]), key=lambda row: -row[1])
    if not held:
        return None
    said_rows = [f"pid {found.group(2)} {found.group(4).rsplit('/', 1)[-1]} {mib} MiB on GPU {found.group(1)} "
                 f"(line {_line_at(context, found.start())})" for found, mib in held[:3]]
    cause = (f"{said.message}; the log's nvidia-smi shows processes holding GPU memory: {', '.join(said_rows)}: "
             "what they hold is not free for this one")
    fix = (f"free the GPU first: stop or move {', '.join('pid ' + found.group(2) for found, _ in held[:3])} (a "
           "finished notebook kernel or a stale training run keeps its memory until it exits), or run on another GPU "
           "(CUDA_VISIBLE_DEVICES); then " + (said.fix[0].lower() + said.fix[1:] if said.fix else "run again"))
    return Judgement(cause, fix, tuple(UsedFact("gpu_process", f"pid {found.group(2)} {mib} MiB",
                                                _line_at(context, found.start())) for found, mib in held[:3]))


@_judge
def _pytorch_builds_of_two_variants(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("pytorch_builds", hit):
        return None
    seen: dict[str, tuple[str, str, str, int]] = {}
    for found in _multiline(judgement_data()["pytorch_builds"]["build_re"]).finditer(context.log.text):
        package, version, build = found.groups()
        variant = _variant(build)
        seen.setdefault(variant, (package, version, build, _line_at(context, found.start())))
    if len(seen) < 2:
        return None
    (first_variant, first), (second_variant, second) = list(seen.items())[:2]
    cause = (f"{said.message}: two builds of different variants are asked for together: {first[0]} {first[1]} "
             f"{first[2]} (line {first[3]}) is {first_variant}, {second[0]} {second[1]} {second[2]} (line {second[3]}) "
             f"is {second_variant}; conda-forge's torch companions are built per variant and share none")
    pin = first_variant if first_variant != "cpu" else second_variant
    fix = (f"pin pytorch and its companions to one variant: `pytorch=*=*{pin}*` with `torchvision=*=*{pin}*` "
           f"(and `cuda-version` of that CUDA), or drop the build-string pins and let the solver pair them; "
           "`envbuild lock` pins one variant per target")
    return Judgement(cause, fix, (UsedFact(first[0], f"{first[1]} {first[2]}", first[3]),
                                  UsedFact(second[0], f"{second[1]} {second[2]}", second[3])))


def _index_cuda(folder: str) -> CudaVersion | None:
    """A wheel index folder's CUDA (`cu121` -> 12.1, `cu1210` -> 12.10); None for `cpu`, `rocm6.1` or no CUDA's tag."""
    try:
        return CudaVersion.from_tag(folder)
    except UsageError:
        return None


def _variant(build: str) -> str:
    """`cuda118_py310h...` -> cuda118, `py3.9_cuda11.1_cudnn8.0.5_0` -> cuda111, `cpu_...` -> cpu."""
    if build.startswith("cpu"):
        return "cpu"
    try:
        cuda = CudaVersion.from_build(build)
    except UsageError:
        cuda = None
    return cuda.build_prefix if cuda is not None else "cuda"


@_judge
def _cuda_pins_that_disagree(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("cuda_pins", hit):
        return None
    pins: dict[str, tuple[str, str, int]] = {}  # CUDA X.Y -> the first package pinning it, its line
    for found in _multiline(judgement_data()["cuda_pins"]["pin_re"]).finditer(context.log.text):
        pins.setdefault(found.group(2), (found.group(1), found.group(0).strip(), _line_at(context, found.start())))
    if len(pins) < 2:
        return None
    said_pins = [f"`{spec}` (line {line})" for _, spec, line in pins.values()]
    cause = (f"{said.message}: the specs pin more than one CUDA: {', '.join(said_pins)}; every CUDA package of one "
             "environment must agree on one cuda-version")
    cudas = list(pins)
    fix = (f"pin one CUDA for all of them: either cuda-version={cudas[0]} with the {cudas[0]} packages, or "
           f"cuda-version={cudas[1]} and drop the {cudas[0]} pins (leaving cudatoolkit/cuda-* unpinned lets "
           "cuda-version choose them); `envbuild lint SPEC` finds mixed CUDA pins")
    return Judgement(cause, fix, tuple(UsedFact(package, cuda, line) for cuda, (package, _, line) in pins.items()))


@_judge
def _missing_packages_named(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    """Last of the solver's judgements: no channel or platform fact narrows the fix, but the cause names what
    the solver could not find."""
    if not _applies("missing_packages", hit):
        return None
    data = judgement_data()["missing_packages"]
    text = context.log.text
    start = text.rfind("\n", 0, hit.at) + 1
    end = text.find("Current channels", hit.at)
    end = min(end if end != -1 else len(text), hit.at + MISSING_LIST_CHARS)
    found = list(_multiline(data["inline_re"]).finditer(text, start, end))
    found += list(_multiline(data["list_re"]).finditer(text, start, end))
    if not found:
        return None
    named = [(each.group(1).strip(), _line_at(context, each.start())) for each in found[:4]]
    cause = (f"{said.message} (line {hit.line}: `{hit.evidence[:FACT_CHARS]}`): not found: "
             f"{', '.join(f'{spec} (line {line})' for spec, line in named)}")
    return Judgement(cause, said.fix, tuple(UsedFact("missing", spec, line) for spec, line in named))


@_judge
def _device_mismatch_in_replica(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("replica_device", hit):
        return None
    data = judgement_data()["replica_device"]
    found = _multiline(data["replica_re"]).search(context.log.text)
    if found is None:
        return None
    line = _line_at(context, found.start())
    evidence = context.log.line_text(found.start())[:FACT_CHARS]
    cause = f"{said.message}; " + data["cause"].format(evidence=evidence, line=line)
    return Judgement(cause, data["fix"], (UsedFact("phase", f"DataParallel replica: {evidence}", line),))


@_judge
def _driver_init_code(hit: Hit, context: ExplainContext, said: Refined) -> Judgement | None:
    if not _applies("driver_init_codes", hit):
        return None
    code = hit.fields.get("code", "")
    known = judgement_data()["driver_init_codes"]["codes"].get(code)
    if known is None:
        return None
    cause = (f"{said.message}: {code} is {known['name']}: {known['why']} "
             f"(line {hit.line}: `{hit.evidence[:FACT_CHARS]}`)")
    used = [UsedFact("code", code, hit.line)]
    for name, words in (("gpu", "GPU"), ("driver", "driver")):
        fact = context.facts.facts.get(name)
        if fact is not None:
            cause += f"; the log's {words} is {fact.value} (line {fact.line})"
            used.append(UsedFact(name, fact.value, fact.line))
    return Judgement(cause, known["fix"], tuple(used))


def facts_of_hit(hit: Hit) -> tuple[UsedFact, ...]:
    """The values the message itself states (its placeholders), each on the hit's line."""
    return tuple(UsedFact(name, value, hit.line) for name, value in hit.fields.items()
                 if value and not name.startswith("_") and name not in ("meaning", "error", "name", "code"))


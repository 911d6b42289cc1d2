"""`envbuild lint`: advice on a spec, or on an environment file a team already has.

Every rule is registered once, in `LINT`, with a stable id (`lint.channels.nvidia-above-conda-forge`),
and returns `Finding`s with a severity, a message and a fix. A rule looks at a `LintSubject`: an
envbuild spec, or the reading of an environment.yml, requirements.txt, conda-lock.yml or Dockerfile
(the same reading `envbuild init --from` uses, taken before anything is dropped or added). Rules that
only make sense for one of the two return nothing for the other.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from builder.errors import UsageError
from builder.findings import Finding, Location, RuleRegistry, Severity, sort_findings
from builder.formats.conda_matchspec import parse_conda_line
from builder.host.fleet import fleet_problems, spec_hosts
from builder.init.choose import draft_from_environment
from builder.init.cuda_bound import cuda_bound
from builder.init.facts import stated_cuda
from builder.init.lines import python_minor
from builder.init.read import read_source
from builder.init.reading import ML_PACKAGES, Reading
from builder.lock.location import default_lock_folder
from builder.lock.run import LOCK_FILE
from builder.specs.cuda import CPU
from builder.specs.model import EnvSpec, Route, load_spec, read_yaml_file
from builder.specs.target import resolve_targets
from builder.yamlio import data_text

VAGUE_NAME = re.compile(r"^(env|environment|test|tmp|temp|myenv|new|base|default|foo|bar|venv)[-_]?\d*$")
TORCH_CONDA_NAMES = {"pytorch", "torch", "pytorch-gpu", "pytorch-cpu", "pytorch-cuda", "libtorch"}
TORCH_PIP_NAMES = {"torch"}
# pip wheels built against PyPI's torch: next to a conda torch they pull a second torch or load
# binaries built for another one
TORCH_DEPENDENT_WHEELS = {"xformers", "flash-attn", "torchaudio", "torchvision", "diffusers[torch]", "torchtext",
                          "torch-scatter", "torch-sparse", "torch-geometric", "bitsandbytes", "deepspeed"}
ANACONDA_CHANNELS = {"defaults", "anaconda", "main", "r", "msys2"}


@dataclass(frozen=True)
class LintSubject:
    """What lint looks at: an envbuild spec, or the reading of a foreign environment file."""

    path: str
    spec: EnvSpec | None = None
    reading: Reading | None = None

    @property
    def kind(self) -> str:
        return "spec" if self.spec is not None else (self.reading.kind if self.reading else "file")

    def at(self, field: str | None = None) -> Location:
        return Location(path=self.path, field=field)


LINT: RuleRegistry[LintSubject] = RuleRegistry("lint")


def finding(subject: LintSubject, rule: str, severity: str, message: str, fix: str, field: str | None = None,
            evidence: str | None = None) -> Finding:
    return Finding(rule, Severity(severity), message, fix, subject.at(field), evidence)


def package_name(requirement: str) -> str:
    """A pip requirement's name (PEP 503 spelling), read as pip reads it where it parses."""
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        name = requirement.split("::")[-1]
        return canonicalize_name(re.split(r"[=<>!~\[\s;@]", name, maxsplit=1)[0])


def conda_package(line: str) -> tuple[str, bool]:
    """A conda line's package name and whether it pins a version, as conda's MatchSpec grammar reads it."""
    parsed = parse_conda_line(line)
    if parsed is None:
        return package_name(line), bool(re.search(r"[=<>~!@]", line.split("::")[-1]))
    return parsed.name, parsed.version is not None


def _pip_pinned(requirement: str) -> bool:
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return bool(re.search(r"[=<>~!@]", requirement))
    return bool(parsed.specifier) or parsed.url is not None


# ---------------------------------------------------------------------------------------------
# Spec rules


def _spec_torch(spec: EnvSpec) -> tuple[list[str], list[str]]:
    return ([p for p in spec.conda if conda_package(p)[0] in TORCH_CONDA_NAMES],
            [p for p in spec.pip if package_name(p) in TORCH_PIP_NAMES])


@LINT.rule("lint.torch.conda-and-pip", "torch installed by both conda and pip")
def torch_in_both(subject: LintSubject) -> Iterator[Finding]:
    spec, reading = subject.spec, subject.reading
    if reading is not None and reading.conda_torch and reading.pip_torch:
        yield finding(subject, "lint.torch.conda-and-pip", "error",
                      f"torch comes from both conda ({reading.conda_torch.text!r}) and pip "
                      f"({reading.pip_torch_text!r}): one copy overwrites the other's files and CUDA libraries",
                      "keep one of the two lines", evidence=reading.pip_torch_text)
    if spec is None:
        return
    conda_torch, pip_torch = _spec_torch(spec)
    if (spec.route is not Route.PIP or conda_torch) and (spec.route is Route.PIP or pip_torch):
        where = "pip" if pip_torch else "conda"
        yield finding(subject, "lint.torch.conda-and-pip", "error",
                      "torch comes from both conda and pip: two copies fight over site-packages and CUDA libraries",
                      f"let route {spec.route.value} install it and remove it from `{where}`", where)


@LINT.rule("lint.torch.pinned-in-extras", "torch listed among a spec's conda extras or a project's optional extras")
def torch_in_extras(subject: LintSubject) -> Iterator[Finding]:
    if subject.reading is not None:
        for entry in subject.reading.torch_in_extras:
            yield finding(subject, "lint.torch.pinned-in-extras", "warning",
                          f"{entry!r} pins torch in an optional extra: installing the extra moves the project's "
                          "torch to that pin", "pin torch once, in the project's dependencies",
                          "optional-dependencies", entry)
    spec = subject.spec
    if spec is None or spec.route is Route.PIP:
        return
    conda_torch, pip_torch = _spec_torch(spec)
    if conda_torch and not pip_torch:
        yield finding(subject, "lint.torch.pinned-in-extras", "warning",
                      f"{conda_torch[0]!r} is pinned by envbuild from `torch` and the target",
                      "remove it from `conda`", "conda", conda_torch[0])


@LINT.rule("lint.channels.legacy-with-conda-forge", "the legacy pytorch channel mixed with conda-forge's torch")
def legacy_with_conda_forge(subject: LintSubject) -> Iterator[Finding]:
    spec = subject.spec
    if spec is None:
        return
    channels = list(spec.effective_channels)
    if spec.route is Route.CONDA_FORGE and "pytorch" in channels:
        yield finding(subject, "lint.channels.legacy-with-conda-forge", "warning",
                      "the legacy pytorch channel next to conda-forge's pytorch mixes two builds of torch and "
                      "their CUDA libraries", "drop `pytorch` from channels or use route pytorch-channel",
                      "channels")
    if spec.route is Route.PYTORCH_CHANNEL and "conda-forge" in channels and "pytorch" in channels \
            and channels.index("conda-forge") < channels.index("pytorch"):
        yield finding(subject, "lint.channels.legacy-with-conda-forge", "warning",
                      "conda-forge is listed before pytorch, so conda-forge's pytorch can win over the "
                      "legacy channel's", "list pytorch and nvidia first", "channels")


@LINT.rule("lint.channels.nvidia-above-conda-forge", "the nvidia channel outranks conda-forge")
def nvidia_above_conda_forge(subject: LintSubject) -> Iterator[Finding]:
    if subject.spec is not None:
        channels = list(subject.spec.effective_channels)
        applies = subject.spec.route is Route.CONDA_FORGE
    elif subject.reading is not None:
        channels = subject.reading.raw_channels
        # the legacy route's own instructions list nvidia first for pytorch-cuda; it is conda-forge's torch
        # (and everything else conda-forge builds) that the nvidia channel's CUDA packages break
        applies = not subject.reading.legacy_markers and "pytorch" not in channels
    else:
        return
    if applies and "nvidia" in channels and "conda-forge" in channels \
            and channels.index("nvidia") < channels.index("conda-forge"):
        yield finding(subject, "lint.channels.nvidia-above-conda-forge", "warning",
                      "the nvidia channel is listed above conda-forge, so its cuda-* packages replace conda-forge's "
                      "for every package built against them (cupy, conda-forge's pytorch, ...)",
                      "list conda-forge first, or drop nvidia: conda-forge carries the CUDA libraries itself",
                      "channels", "channels: " + ", ".join(channels))


@LINT.rule("lint.channels.defaults-with-conda-forge", "Anaconda's defaults channels mixed with conda-forge")
def defaults_with_conda_forge(subject: LintSubject) -> Iterator[Finding]:
    channels = (list(subject.spec.effective_channels) if subject.spec is not None
                else subject.reading.raw_channels if subject.reading is not None else [])
    anaconda = [c for c in channels if c in ANACONDA_CHANNELS or "repo.anaconda.com" in c]
    if anaconda and "conda-forge" in channels:
        yield finding(subject, "lint.channels.defaults-with-conda-forge", "warning",
                      f"{', '.join(anaconda)} mixed with conda-forge: the two build against different libraries, "
                      "so a solve can pair binaries that do not load together (and Anaconda's terms bind "
                      "organisations)", "drop them and list `nodefaults`; conda-forge carries the same packages",
                      "channels", "channels: " + ", ".join(channels))


@LINT.rule("lint.name.vague", "an env name that says nothing about what it is for")
def vague_name(subject: LintSubject) -> Iterator[Finding]:
    if subject.spec is not None and VAGUE_NAME.match(subject.spec.name):
        yield finding(subject, "lint.name.vague", "warning",
                      f"the env name {subject.spec.name!r} says nothing about what it is for",
                      "name it after the project or the stack (e.g. `vision-train`)", "name")


@LINT.rule("lint.cuda.cudatoolkit-era", "cudatoolkit / cudatoolkit-dev: the pre-2023 way to get CUDA from conda")
def cudatoolkit_era(subject: LintSubject) -> Iterator[Finding]:
    names = ([conda_package(p)[0] for p in subject.spec.conda] if subject.spec is not None
             else subject.reading.conda_names if subject.reading is not None else [])
    old = [n for n in names if n in ("cudatoolkit", "cudatoolkit-dev")]
    if old:
        yield finding(subject, "lint.cuda.cudatoolkit-era", "warning",
                      f"`{old[0]}` is the pre-2023 way to get CUDA from conda; today's torch builds take CUDA "
                      "from cuda-version (conda-forge) or pytorch-cuda (legacy channel)",
                      "remove it: envbuild pins the target's CUDA (run `envbuild init --from FILE` to convert)",
                      "conda", old[0])


@LINT.rule("lint.images.unpinned", "base images not pinned by digest")
def unpinned_images(subject: LintSubject) -> Iterator[Finding]:
    spec = subject.spec
    if spec is None:
        stages = set()
        for image in subject.reading.base_images if subject.reading else []:
            if "@sha256:" not in image and image.lower() != "scratch" and image not in stages and "$" not in image:
                stages.add(image)
                yield finding(subject, "lint.images.unpinned", "warning",
                              f"FROM {image} is not pinned by digest: a rebuild can pick up a different base",
                              f"write `FROM {image}@sha256:...` (`docker buildx imagetools inspect {image}` shows "
                              "it)", "FROM", f"FROM {image}")
        return
    # A tag is what a spec starts with (envbuild's own defaults are tags): it matters once the env is
    # locked, when the lock promises the same image from a rebuild and only the base can still move.
    locked = has_committed_lock(spec)
    for role, ref in (("runtime", spec.images.runtime), ("builder", spec.images.builder)):
        if ref.digest is None and not ref.image.startswith("local/"):
            when = ("the env is locked, so a rebuild of the same lock can start from a different base" if locked
                    else "each build takes the tag's image of the day; this becomes a warning once the env is "
                         "locked, when a rebuild of the same lock could start from a different base")
            yield finding(subject, "lint.images.unpinned", "warning" if locked else "info",
                          f"{ref.image} is not pinned by digest: {when}",
                          f"add `digest:` (`docker buildx imagetools inspect {ref.image}` shows it)", f"images.{role}")


def has_committed_lock(spec: EnvSpec) -> bool:
    """Whether a lock of the spec's env lies in its lock folder (`<spec folder>/<env>/locks/<target>/`)."""
    if spec.source is None:
        return False
    return any(default_lock_folder(Path(spec.source), spec.name).glob(f"*/{LOCK_FILE}"))


@LINT.rule("lint.targets.unresolvable", "a target the compatibility data has no build for")
def unresolvable_target(subject: LintSubject) -> Iterator[Finding]:
    """A spec can be well formed and still name a torch/CUDA pair no channel builds (`cuda: 12.65`)."""
    if subject.spec is None:
        return
    try:
        resolve_targets(subject.spec)
    except UsageError as exc:
        yield finding(subject, "lint.targets.unresolvable", "error", str(exc).removeprefix(f"{subject.path}: "),
                      "use a CUDA version listed in the message", "targets")


@LINT.rule("lint.fleet.arch-not-covered", "a target without kernels for a GPU of the spec's fleet")
def fleet_not_covered(subject: LintSubject) -> Iterator[Finding]:
    """A build without kernels for a fleet GPU installs cleanly, then fails at its first kernel."""
    spec = subject.spec
    if spec is None or not spec.fleet:
        return
    try:
        targets = resolve_targets(spec)
    except UsageError:
        return  # `envbuild targets` says why the targets do not resolve
    for message, fix in fleet_problems(targets, spec_hosts(spec)):
        yield finding(subject, "lint.fleet.arch-not-covered", "warning", message,
                      fix or "see `envbuild doctor SPEC --fleet HOSTS` for the matrix", "fleet")


@LINT.rule("lint.packages.ml-unpinned", "ML packages without a version")
def ml_unpinned(subject: LintSubject) -> Iterator[Finding]:
    if subject.spec is not None:
        loose = [p for p in subject.spec.conda if conda_package(p)[0] in ML_PACKAGES and not conda_package(p)[1]]
        loose += [p for p in subject.spec.pip if package_name(p) in ML_PACKAGES and not _pip_pinned(p)]
    elif subject.reading is not None:
        loose = list(subject.reading.unpinned)
    else:
        return
    if loose:
        yield finding(subject, "lint.packages.ml-unpinned", "warning",
                      f"{', '.join(repr(p.strip()) for p in loose[:4])}{' and more' if len(loose) > 4 else ''} "
                      "carry no version: each solve can bring a different torch stack and CUDA build",
                      "pin them (`envbuild init --from FILE` pins torch and its pair for you)", "packages", loose[0])


@LINT.rule("lint.python.end-of-life", "a Python release past its end of life")
def python_end_of_life(subject: LintSubject) -> Iterator[Finding]:
    python: str | None
    if subject.spec is not None:
        python = subject.spec.python
    elif subject.reading is not None and subject.reading.python is not None:
        python = python_minor(subject.reading.python.version)
    else:
        return
    ended = python_eol().get(python or "")
    if ended and ended <= date.today():
        yield finding(subject, "lint.python.end-of-life", "warning",
                      f"Python {python} reached its end of life on {ended.isoformat()}: no security fixes, and "
                      "new torch releases no longer build for it", "move to a supported Python (3.11 or newer)",
                      "python", subject.reading.python.text if subject.reading and subject.reading.python else None)


@lru_cache(maxsize=1)
def python_eol() -> dict[str, date]:
    text = data_text("python_eol.yaml")
    return {str(minor): date.fromisoformat(str(day)) for minor, day in yaml.safe_load(text)["end_of_life"].items()}


# ---------------------------------------------------------------------------------------------
# Rules for the files teams bring (environment.yml, requirements.txt, conda-lock.yml, Dockerfile)


@LINT.rule("lint.cuda.conda-forge-without-cuda-version", "conda-forge's CUDA torch with no cuda-version pin")
def conda_forge_without_cuda_version(subject: LintSubject) -> Iterator[Finding]:
    reading = subject.reading
    if reading is None or reading.kind == "conda-lock.yml" or reading.conda_torch is None or reading.legacy_markers:
        return
    if "pytorch" in reading.raw_channels and not reading.conda_forge_markers:
        return  # torch comes from the legacy pytorch channel, which has no cuda-version
    wants_cuda = any(h.cuda != CPU for h in reading.hints) or "cudatoolkit" in reading.conda_names
    if wants_cuda and "cuda-version" not in reading.conda_names:
        yield finding(subject, "lint.cuda.conda-forge-without-cuda-version", "warning",
                      f"{reading.conda_torch.text!r} asks conda-forge for a CUDA build but nothing pins "
                      "cuda-version, so the solver picks the CUDA (and the driver it needs) for you",
                      "add `cuda-version=X.Y` for the CUDA your driver runs (envbuild pins it per target)",
                      "conda", reading.conda_torch.text)


@LINT.rule("lint.pip.torch-without-cuda-index", "torch from pip with no CUDA wheel index or +cuXYZ tag")
def torch_without_cuda_index(subject: LintSubject) -> Iterator[Finding]:
    reading = subject.reading
    if reading is None or reading.pip_torch is None or reading.pip_index_hints:
        return
    if any(h.entry == reading.pip_torch_text for h in reading.hints):  # `torch==2.1.0+cu121`
        return
    yield finding(subject, "lint.pip.torch-without-cuda-index", "warning",
                  f"{reading.pip_torch_text!r} comes from PyPI's default build, whose CUDA changes from release "
                  "to release (and is CPU-only on some platforms)",
                  "add `--index-url https://download.pytorch.org/whl/cuXYZ` for the CUDA you mean",
                  "pip", reading.pip_torch_text)


@LINT.rule("lint.pip.torch-wheels-next-to-conda-torch", "torch-dependent pip wheels next to a conda torch")
def torch_wheels_next_to_conda_torch(subject: LintSubject) -> Iterator[Finding]:
    if subject.spec is not None:
        conda_torch = subject.spec.route is not Route.PIP
        pip_names = [package_name(p) if "[" not in p else p.split("==")[0].lower() for p in subject.spec.pip]
    elif subject.reading is not None:
        conda_torch = subject.reading.conda_torch is not None
        pip_names = subject.reading.pip_names
    else:
        return
    wheels = sorted({n for n in pip_names if n in TORCH_DEPENDENT_WHEELS or n.startswith("diffusers[torch")})
    if conda_torch and wheels:
        yield finding(subject, "lint.pip.torch-wheels-next-to-conda-torch", "warning",
                      f"pip wheels built against PyPI's torch ({', '.join(wheels)}) next to a conda torch: pip can "
                      "pull a second torch over conda's, or load binaries built for another torch",
                      "take them from conda (conda-forge has xformers, torchaudio, torchvision) or move torch to "
                      "pip (route pip)", "pip", wheels[0])


@LINT.rule("lint.pip.line-pip-rejects", "a requirements line pip stops at")
def line_pip_rejects(subject: LintSubject) -> Iterator[Finding]:
    reading = subject.reading
    for line, reason in reading.rejected_lines if reading is not None else []:
        fix = ("put each requirement on a line of its own, and an index option on a line of its own"
               if "on one line" in reason else "write it as `name==version` (PEP 508), or remove it")
        yield finding(subject, "lint.pip.line-pip-rejects", "error",
                      f"pip stops at {line[:120]!r}: {reason}", fix, "pip", line)


@LINT.rule("lint.pip.ignored-line-option", "an index option that pip ignores on a requirement's line")
def ignored_line_option(subject: LintSubject) -> Iterator[Finding]:
    reading = subject.reading
    ignored = reading.ignored_options if reading is not None else []
    if ignored:
        line, option = ignored[0]
        more = f" (and {len(ignored) - 1} more)" if len(ignored) > 1 else ""
        yield finding(subject, "lint.pip.ignored-line-option", "warning",
                      f"pip ignores `{option}` on {line[:120]!r}{more}: on a requirement's line only --hash, "
                      "--global-option and --config-settings take effect, so the package comes from the default "
                      "index", f"move `{option}` to a line of its own (it then applies to the whole file)",
                      "pip", line)


@LINT.rule("lint.cuda.package-cuda-mismatch", "a pip package built for another CUDA major than the target's")
def package_cuda_mismatch(subject: LintSubject) -> Iterator[Finding]:
    """A CUDA-bound wheel (cupy-cuda11x, jax[cuda12], onnxruntime-gpu 1.16, +cu118) for another CUDA major than
    torch's cannot load beside it, or brings a second CUDA stack (data/cuda_bound_packages.yaml)."""
    if subject.spec is not None:
        targets = [(str(t.cuda), "the target") for t in subject.spec.targets if t.cuda is not None]
        lines: list[str] = list(subject.spec.pip)
    elif subject.reading is not None:
        target = _reading_target_cuda(subject.reading)
        targets, lines = ([target] if target else []), subject.reading.pip_requirement_lines
    else:
        return
    bound = [b for text in lines if (b := cuda_bound(text)) is not None and b.name != "torch"]
    for cuda, whose in targets:
        other = [b for b in bound if b.major != cuda.split(".")[0]]
        if other:
            said = "; ".join(f"{b.text!r} is built for CUDA {b.cuda} ({b.how})" for b in other[:3])
            yield finding(subject, "lint.cuda.package-cuda-mismatch", "error",
                          f"{said}, but {whose} is {cuda}: a CUDA {other[0].major} build cannot load its "
                          "libraries beside it", f"take the CUDA {cuda.split('.')[0]} build of "
                          f"{', '.join(sorted({b.name for b in other}))}, or move torch to its CUDA major",
                          "pip", other[0].text)


def _reading_target_cuda(reading: Reading) -> tuple[str, str] | None:
    """The CUDA torch is on: the one the file states, else the target `envbuild init` would pick for it."""
    stated = stated_cuda(reading)
    if stated is not None:
        return (stated, "torch's CUDA") if stated != CPU else None
    try:
        draft = draft_from_environment(copy.deepcopy(reading), "lint", upgrade=True)
    except UsageError:
        return None
    cuda = str(draft.data["targets"][0]["cuda"])
    return (cuda, f"the CUDA `envbuild init` picks for torch {draft.data['torch']}") if cuda != CPU else None


@LINT.rule("lint.pip.section-without-pip", "a `pip:` section without `pip` in the conda dependencies")
def pip_section_without_pip(subject: LintSubject) -> Iterator[Finding]:
    reading = subject.reading
    if reading is None or reading.kind != "environment.yml" or not reading.has_pip_section:
        return
    if "pip" not in reading.conda_names:
        yield finding(subject, "lint.pip.section-without-pip", "warning",
                      "the file has a `pip:` section but no `pip` among its conda dependencies: conda warns and "
                      "uses whatever pip it finds, conda-lock refuses", "add `- pip` to dependencies",
                      "dependencies")


@LINT.rule("lint.lock.mixed-cuda-majors", "packages locked for different CUDA majors in one lockfile")
def mixed_cuda_majors(subject: LintSubject) -> Iterator[Finding]:
    reading = subject.reading
    if reading is None or reading.kind != "conda-lock.yml":
        return
    majors: dict[str, list[str]] = {}
    for name, cuda in reading.locked_cuda:
        majors.setdefault(cuda.split(".")[0], []).append(f"{name} ({cuda})")
    if len(majors) > 1:
        said = "; ".join(f"CUDA {major}: {', '.join(names[:3])}" for major, names in sorted(majors.items()))
        yield finding(subject, "lint.lock.mixed-cuda-majors", "error",
                      f"the lock mixes CUDA majors ({said}): their libraries cannot load in one process",
                      "lock again with one cuda-version pin (`envbuild lock` pins it per target)", "package")


# ---------------------------------------------------------------------------------------------


def lint_spec(spec: EnvSpec, only: Iterable[str] = ()) -> list[Finding]:
    return sort_findings(LINT.run(LintSubject(str(spec.source or "spec"), spec=spec), only))


def lint_reading(reading: Reading, only: Iterable[str] = ()) -> list[Finding]:
    return sort_findings(LINT.run(LintSubject(reading.source, reading=reading), only))


def lint_path(path: Path, only: Iterable[str] = (), allow_outside: bool = False) -> list[Finding]:
    """An envbuild spec (a mapping with `torch` and `targets`) or any file `envbuild init --from` reads;
    `only` names the rules to run (an unknown one is a UsageError); `allow_outside`: a requirements file may
    include one outside its folder."""
    only = tuple(only)
    unknown = [rule for rule in only if rule not in LINT]
    if unknown:
        raise UsageError(f"--rule {unknown[0]}: no such rule; `envbuild lint --rules` lists them")
    if is_spec_file(path):
        return lint_spec(load_spec(path), only)
    return lint_reading(read_source(path, allow_outside), only)


def is_spec_file(path: Path) -> bool:
    if path.suffix.lower() not in (".yml",
                                   ".yaml") or path.name.lower().endswith(("conda-lock.yml", "conda-lock.yaml")):
        return False
    try:
        data = read_yaml_file(path, "spec")  # capped: depth, size and alias expansion
    except UsageError:
        return True  # let the spec loader give its one-line reason
    return isinstance(data, dict) and "torch" in data and "targets" in data and "dependencies" not in data

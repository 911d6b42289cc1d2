"""What a lock holds, checked against what it was made from, not only against its sidecar's sha.

The sidecar (lock-info.json) records the lockfile's sha256, but anyone who edits the lock in a pull
request can refresh that sha too. So `lock --check` (and every reuse of a committed lock) also reads
the lock's packages and refuses what no solve of these inputs can produce: two entries for one name
on one platform (which one would the installer take?), a platform the target does not lock, a
version or build the inputs' own specs do not allow (a swapped torch), and a package URL that is not
under one of the target's channels (as --channel/--mirror replaced them) and its entry's platform folder
(or noarch), or whose file name is more than one path component (`%2F`, `..`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from fnmatch import fnmatchcase
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion
from rattler import Channel, MatchSpec, Version, VersionSpec
from rattler.exceptions import InvalidVersionError

from builder.formats.conda_lock import CondaLock, LockedPackage
from builder.lock.inputs import LockInputs
from builder.safe_io.text import escape_unsafe, has_unsafe_characters
from builder.specs.compat import load_platforms


def _name(package_name: str) -> str:
    return canonicalize_name(package_name)


def duplicate_entries(lock: CondaLock) -> list[str]:
    counts = Counter((_name(p.name), p.platform) for p in lock.package)
    return [f"{name} is locked {count} times on {platform}" for (name, platform), count in sorted(counts.items())
            if count > 1]


def foreign_platforms(lock: CondaLock, inputs: LockInputs) -> list[str]:
    wanted = set(inputs.target.platforms)
    found = sorted({p.platform for p in lock.package} - wanted)
    return [f"packages for {platform}, which this target does not lock" for platform in found]


def _conda_specs(inputs: LockInputs) -> Iterator[tuple[MatchSpec, set[str]]]:
    """Each conda line of the inputs with the platforms it applies to (a selector narrows them)."""
    platforms = load_platforms()
    for line in inputs.environment.conda:
        applies = {p for p in inputs.target.platforms
                   if line.selector is None or platforms[p].selector == line.selector}
        yield MatchSpec(line.spec), applies


def _conda_problem(spec: MatchSpec, package: LockedPackage) -> str | None:
    if spec.version is not None:
        try:
            allowed = VersionSpec(str(spec.version)).matches(Version(package.version))
        except InvalidVersionError:
            allowed = False
        if not allowed:
            return f"{package.name} {package.version} on {package.platform} is not {spec.version} as the inputs ask"
    build = package.build
    if spec.build is not None and build is not None and not _glob_matches(str(spec.build), build):
        return f"{package.name} build {build} on {package.platform} is not {spec.build} as the inputs ask"
    return None


def _glob_matches(pattern: str, text: str) -> bool:
    return fnmatchcase(text, pattern)


def _pip_problem(requirement: Requirement, package: LockedPackage) -> str | None:
    try:
        allowed = requirement.specifier.contains(package.version, prereleases=True)
    except InvalidVersion:
        allowed = False
    if allowed:
        return None
    return f"{package.name} {package.version} on {package.platform} is not {requirement.specifier} as the inputs ask"


def version_problems(lock: CondaLock, inputs: LockInputs) -> list[str]:
    return _conda_version_problems(lock, inputs) + _pip_version_problems(lock, inputs)


def _conda_version_problems(lock: CondaLock, inputs: LockInputs) -> list[str]:
    conda = [p for p in lock.package if p.manager == "conda"]
    problems = []
    for spec, applies in _conda_specs(inputs):
        name = spec.name.normalized if spec.name is not None else None
        found = (_conda_problem(spec, p) for p in conda if p.name == name and p.platform in applies)
        problems += [problem for problem in found if problem]
    return problems


def _pip_version_problems(lock: CondaLock, inputs: LockInputs) -> list[str]:
    pip = [p for p in lock.package if p.manager == "pip"]
    problems = []
    for line in (inputs.pip_part.requirements if inputs.pip_part else ()):
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue  # the spec reader refuses these; nothing to compare against
        found = (_pip_problem(requirement, p) for p in pip if _name(p.name) == _name(requirement.name))
        problems += [problem for problem in found if problem]
    return problems


@lru_cache(maxsize=64)
def channel_base(channel: str) -> str:
    """Where a channel's packages live, as the solver names them (a name under conda's channel alias, a URL
    as given), ending in `/`."""
    return str(Channel(channel).base_url).rstrip("/") + "/"


def single_file_name(name: str) -> bool:
    """Whether `name` (a URL's last path segment, percent-decoded) is one file name and nothing else."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name \
        and not has_unsafe_characters(name)


def _shown(package: LockedPackage) -> str:
    return escape_unsafe(f"{package.name} {package.version} on {package.platform}")


def _url_problem(package: LockedPackage, bases: tuple[str, ...]) -> str | None:
    url = package.url.split("#", 1)[0]
    segment = urlsplit(url).path.rsplit("/", 1)[-1]
    if not single_file_name(unquote(segment)):
        return (f"{_shown(package)}: its file name {escape_unsafe(segment)!r} is not a single file name "
                "(an encoded / or ..)")
    if package.manager != "conda":
        return None
    folders = (package.platform, "noarch")
    if not any(url == f"{base}{folder}/{segment}" for base in bases for folder in folders):
        return (f"{_shown(package)}: its URL {escape_unsafe(url)} is not under one of the target's channels "
                f"({', '.join(bases)}) in {package.platform}/ or noarch/")
    return None


def url_problems(lock: CondaLock, inputs: LockInputs) -> list[str]:
    """Each package whose URL the target's channels cannot have given: a lock is data, not a list of places to
    fetch from."""
    bases = tuple(channel_base(channel) for channel in inputs.target.channels)
    return [problem for problem in (_url_problem(p, bases) for p in lock.package) if problem]


def content_problems(lock: CondaLock, inputs: LockInputs) -> list[str]:
    """Why this lock cannot be a solve of these inputs; empty when it can."""
    return (duplicate_entries(lock) + foreign_platforms(lock, inputs) + version_problems(lock, inputs)
            + url_problems(lock, inputs))

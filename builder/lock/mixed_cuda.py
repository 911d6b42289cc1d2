"""The lock's guard for one CUDA build per target: a locked package built for another CUDA than the
target's on its platform is named, and the lock is refused (the data: builder/data/cuda_builds.yaml).
"""

from __future__ import annotations

import re

from builder.lock.cuda_builds import load_cuda_builds
from builder.lock.lockfile import CondaLock, LockedPackage
from builder.specs.cuda import CudaVersion


def _without_dot(version: str) -> str:
    """`12.9` -> `129`, as build strings write the CUDA of a locked package (read from its files, not parsed)."""
    return version.replace(".", "")


def cuda_of(package: LockedPackage) -> str | None:
    """The CUDA a locked package was built for, without its dot (`129`), or None (CPU, or not one
    of the packages built per CUDA)."""
    data = load_cuda_builds().checked
    if package.name in data.version_packages:
        return _without_dot(".".join(package.version.split(".")[:2]))
    if package.name not in data.packages:
        return None
    if package.manager == "pip":
        subject, patterns = package.version, data.pip_version_patterns
    else:
        subject, patterns = package.build or "", data.conda_build_patterns
    for pattern in patterns:
        found = re.search(pattern, subject)
        if found:
            return _without_dot(found.group(1))
    return None


def mixed_cuda_builds(lock: CondaLock, expected: dict[str, CudaVersion | None]) -> list[str]:
    """The locked packages whose CUDA is not the target's on their platform (`expected`: platform ->
    the target's CUDA there, None where it has none), one line per platform."""
    problems = []
    for platform in lock.metadata.platforms:
        want = expected.get(platform)
        wrong = []
        for package in lock.for_platform(platform):
            found = cuda_of(package)
            if found is not None and found != (want.digits if want else None):
                wrong.append(f"{package.name} {package.version} {package.build or ''}".rstrip()
                             + f" (CUDA {_dotted(found)})")
        if wrong:
            wanted = f"CUDA {want}" if want else "no CUDA build"
            problems.append(f"{platform}: the target needs {wanted}, but locked {', '.join(wrong)}")
    return problems


def _dotted(cuda_digits: str) -> str:
    """`129` -> `12.9`, `1210` -> `12.10`, `92` -> `9.2`: CUDA majors from 10 on have two digits, so with three
    or more digits the major is the first two (splitting off the last digit showed 12.10 as 121.0)."""
    if len(cuda_digits) < 2:
        return cuda_digits
    major = 2 if len(cuda_digits) >= 3 else 1
    return f"{cuda_digits[:major]}.{cuda_digits[major:]}"

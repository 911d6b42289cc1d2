"""The lock's guard for one CUDA build per target: a locked package built for another CUDA than the
target's on its platform is named, and the lock is refused (the data: builder/data/cuda_builds.yaml).
"""

from __future__ import annotations

import re

from builder.formats.conda_lock import CondaLock, LockedPackage
from builder.lock.cuda_builds import load_cuda_builds
from builder.specs.cuda import CudaVersion


def _read(written: str) -> CudaVersion:
    """A build string's CUDA as the data's patterns capture it: dotted (`12.1`) or digits only (`129`)."""
    return CudaVersion.parse(written) if "." in written else CudaVersion.from_digits(written)


def cuda_of(package: LockedPackage) -> CudaVersion | None:
    """The CUDA a locked package was built for, or None (CPU, or not one of the packages built per CUDA)."""
    data = load_cuda_builds().checked
    if package.name in data.version_packages:
        return CudaVersion.from_release(package.version)
    if package.name not in data.packages:
        return None
    if package.manager == "pip":
        subject, patterns = package.version, data.pip_version_patterns
    else:
        subject, patterns = package.build or "", data.conda_build_patterns
    for pattern in patterns:
        found = re.search(pattern, subject)
        if found:
            return _read(found.group(1))
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
            if found is not None and found != want:
                wrong.append(f"{package.name} {package.version} {package.build or ''}".rstrip() + f" (CUDA {found})")
        if wrong:
            wanted = f"CUDA {want}" if want else "no CUDA build"
            problems.append(f"{platform}: the target needs {wanted}, but locked {', '.join(wrong)}")
    return problems


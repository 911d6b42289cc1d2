"""`__cuda_arch` (conda CEP 46) decides the solve: conda-lock through envbuild's solver on a small channel
where a newer pytorch build needs `__cuda_arch >=8.0` picks it only when the fleet's lowest capability allows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.conda_lock_helpers import (
    build_of,
    lock_with_conda_lock,
    locked_packages,
    make_channel,
    small_package,
    small_world,
)
from tests.world.channel.packages import serve_directory


@pytest.mark.world
@pytest.mark.parametrize(("cuda_arch", "build"), [("7.0", "cuda118_py311_1"), ("9.0", "cuda118_sm80_py311_2"),
                                                  (None, "cuda118_py311_1")])
def test_cuda_arch_decides_the_build(tmp_path: Path, cuda_arch: str | None, build: str) -> None:
    py311 = "python >=3.11,<3.12"
    packages = small_world() + [small_package("pytorch", "2.1.0", "cuda118_sm80_py311_2", "linux-64",
                                              (py311, "numpy >=1.21", "__cuda >=11.8", "__cuda_arch >=8.0"), build_number=2)]
    root = make_channel(tmp_path / "channel", packages)
    spec = tmp_path / "virtual-packages.yml"
    arch = f"\n      __cuda_arch: '{cuda_arch}'" if cuda_arch else ""
    spec.write_text("subdirs:\n  linux-64:\n    packages:\n      __cuda: '11.8'\n      __glibc: '2.28'\n"
                    f"      __unix: '0'\n      __linux: '5.10'{arch}\n")
    with serve_directory(root) as url:
        done, lockfile = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "--virtual-package-spec", str(spec))
    assert done.returncode == 0, done.stderr[-3000:]
    # no fleet, no __cuda_arch: a build that requires one is never chosen
    assert build_of(locked_packages(lockfile)["linux-64", "pytorch"]) == build

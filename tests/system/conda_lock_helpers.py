"""The small world the conda-lock tests lock against (python, numpy, pytorch with a CPU and a CUDA 11.8 build,
filelock), written with tests/world/channel/packages.py, and conda-lock run through envbuild-micromamba on it:
shared by the system tests of the solver shim, of __cuda_arch and of the installer.

The shim and rattler always run in child processes (py-rattler can crash at interpreter exit).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.unit.lock.install_helpers import index_in_child
from tests.unit.lock.solver_shim_helpers import BIN, SHIM, clean_env
from tests.world.channel.packages import CondaPackage, PackageFile, write_package

CONDA_LOCK = BIN / "conda-lock"
SUBDIRS = ("linux-64", "osx-arm64")

ENVIRONMENT = """\
channels:
  - {channel}
dependencies:
  - python 3.11.*
  - pytorch 2.1.*{build}
  - numpy >=1.21
  - filelock
{pip}"""


def small_package(name: str, version: str, build: str, subdir: str, depends: tuple[str, ...] = (), **kw: Any) -> CondaPackage:
    text = f"{name} {version} {build} {subdir}\n".encode()
    return CondaPackage(name, version, build, subdir=subdir, depends=depends,
                        files=(PackageFile(f"share/{name}/{version}-{build}.txt", text),), **kw)  # fmt: skip


def venv_python_package(subdir: str) -> CondaPackage:
    """A `python` whose bin/python is a copy of this machine's base interpreter run as a venv rooted at
    the prefix (pyvenv.cfg, as `venv --copies`): pip then installs into the prefix; the base's pip is
    visible to it. A copy, not a link: the installer refuses a package whose link leads out of the prefix."""
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    cfg = f"home = {base.parent}\ninclude-system-site-packages = true\nversion = {sys.version.split()[0]}\n"
    return CondaPackage("python", "3.11.7", "h0_0", subdir=subdir,
                        files=(PackageFile("bin/python", base.read_bytes(), mode=0o755), PackageFile("pyvenv.cfg", cfg.encode())))  # fmt: skip


def small_world(*, newer: bool = False, real_python: bool = False) -> list[CondaPackage]:
    """python, numpy, pytorch (a CPU build everywhere, a CUDA 11.8 build with a higher build number
    on linux-64) and filelock; `newer` adds numpy 1.26.4 and filelock 3.13.0."""
    py311 = "python >=3.11,<3.12"
    packages = [small_package("filelock", "3.12.0", "pyhd8ed1ab_0", "noarch", ("python >=3.8",), noarch="generic")]
    for subdir in SUBDIRS:
        python = venv_python_package(subdir) if real_python and subdir == "linux-64" else small_package("python", "3.11.7", "h0_0", subdir)
        packages += [
            python,
            small_package("numpy", "1.26.0", "py311_0", subdir, (py311,)),
            small_package("pytorch", "2.1.0", "cpu_py311_0", subdir, (py311, "numpy >=1.21")),
        ]
    packages.append(
        small_package("pytorch", "2.1.0", "cuda118_py311_1", "linux-64",
                 (py311, "numpy >=1.21", "__cuda >=11.8", "__glibc >=2.17"), build_number=1)  # fmt: skip
    )
    if newer:
        packages.append(small_package("filelock", "3.13.0", "pyhd8ed1ab_0", "noarch", ("python >=3.8",), noarch="generic"))
        packages += [small_package("numpy", "1.26.4", "py311_0", subdir, (py311,)) for subdir in SUBDIRS]
    return packages


def make_channel(root: Path, packages: list[CondaPackage]) -> Path:
    for package in packages:
        write_package(root, package)
    index_in_child(root)
    return root


def run_conda_lock(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    lookup = cwd.parent / "pypi-to-conda.yml"
    lookup.write_text("torch: {conda_name: pytorch, pypi_name: torch}\n")
    # --pypi_to_conda_lookup_file: otherwise conda-lock fetches its name mapping from the internet
    command = [str(CONDA_LOCK), *args]
    if args[0] == "lock":
        command += ["--pypi_to_conda_lookup_file", str(lookup)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def lock_with_conda_lock(tmp: Path, channel_url: str, *options: str, conda: Path = SHIM, build: str = "", name: str = "run",
          record: Path | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:  # fmt: skip
    workdir = tmp / name
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "environment.yml").write_text(ENVIRONMENT.format(channel=channel_url, build=build, pip=""))
    extra = {"ENVBUILD_RECORD_DIR": str(record), "ENVBUILD_RECORD_FORWARD": str(SHIM)} if record else {}
    args = ["lock", "--conda", str(conda), "-f", "environment.yml", *options]
    return run_conda_lock(args, workdir, clean_env(tmp, **extra)), workdir / "conda-lock.yml"


def locked_packages(lockfile: Path) -> dict[tuple[str, str], dict[str, Any]]:
    document = yaml.safe_load(lockfile.read_text())
    return {(p["platform"], p["name"]): p for p in document["package"]}


def build_of(entry: dict[str, Any]) -> str:
    return entry["url"].rsplit("/", 1)[-1].removesuffix(".tar.bz2").rsplit("-", 1)[-1]

"""envbuild-micromamba run the way conda-lock runs it: a child process with a clean environment. What the
solver shim's unit and system tests share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
SHIM = BIN / "envbuild-micromamba"


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """This process's environment without conda/mamba settings, temp files under `tmp`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA_", "MAMBA_", "ENVBUILD_"))}
    (tmp / "tmp").mkdir(exist_ok=True)
    env.update(TMPDIR=str(tmp / "tmp"), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", **extra)
    return env


def run_shim(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SHIM), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def dry_run_args(channel_url: str, subdir: str = "linux-64") -> tuple[list[str], dict[str, str]]:
    """The dry-run solve conda-lock asks for, and the variables it sets for it."""
    args = ["create", "--prefix", "/tmp/never-created", "--dry-run", "--json", "--override-channels",
            "--channel", channel_url, "python 3.11.*", "numpy >=1.21", "filelock"]
    return args, {"CONDA_SUBDIR": subdir, "CONDA_OVERRIDE_GLIBC": "2.36", "CONDA_OVERRIDE_CUDA": ""}

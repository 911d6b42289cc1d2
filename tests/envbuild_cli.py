"""envbuild run the way a user runs it, in a child process, for tests that judge the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO


def envbuild(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
             timeout: float = 900) -> subprocess.CompletedProcess:
    """The envbuild command as a user runs it (plain output: CI=true)."""
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=cwd or REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "CI": "true", **(env or {})})

"""Outside clients the tests run on envbuild's outputs (hadolint, container-structure-test): found beside
this interpreter, where the test extras put them, or on PATH."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def outside_tool(name: str) -> str:
    found = BIN / name if (BIN / name).is_file() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: it comes with the test extras (make setup)")
    return str(found)

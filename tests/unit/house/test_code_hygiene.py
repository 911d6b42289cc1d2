"""The code base itself passes its gates: ruff with the rule set in pyproject.toml (pyflakes, pycodestyle,
import order, bugbear, blind except, too many arguments, complexity, ...) everywhere, mypy over the product
(builder/ and smoke/), so a stale import, a typo in a rarely taken branch or a None where a value is
needed fails CI, not a user; and import-linter's contracts (pyproject.toml [tool.importlinter]), so the
stages keep importing only downwards and no import circle comes back."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.unit



def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", "builder", "smoke", "tests", "bench")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_no_pyflakes_errors() -> None:
    # The floor that must hold whatever the configured rule set says.
    done = _run("ruff", "check", "--no-cache", "--isolated", "--select", "F,E9", "builder", "smoke", "tests", "bench")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_finds_nothing() -> None:
    # Configured in pyproject.toml ([tool.mypy]: files, missing stubs); mypy is in the test extras.
    done = _run("mypy")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    # The console script beside this interpreter: import-linter has no `python -m` entry point.
    lint_imports = Path(sys.executable).parent / "lint-imports"
    return subprocess.run([str(lint_imports), "--no-cache", "--no-logo"], cwd=root, capture_output=True, text=True,
                          timeout=300, env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(root)})


def test_import_contracts_hold() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout, done.stdout[-2000:]


def test_an_import_against_the_layers_breaks_the_contract(tmp_path: Path) -> None:
    # The gate can fail: the spec stage reaching up into the CLI is caught, by name.
    for name in ("builder", "smoke"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "builder/specs/model.py"
    model.write_text(model.read_text(encoding="utf-8") + "\nimport builder.cli.commands  # noqa: E402\n",
                     encoding="utf-8")
    done = _lint_imports(tmp_path)
    assert done.returncode != 0
    assert "builder.specs is not allowed to import builder.cli" in done.stdout, done.stdout[-3000:]


def test_shell_scripts_pass_shellcheck() -> None:
    # The world's and CI's scripts start and stop services for everyone: a quoting slip there costs a CI run.
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (Debian package shellcheck; the world installs it)")
    scripts = sorted(str(p.relative_to(REPO)) for p in [REPO / ".ci" / "run", *REPO.glob("tests/**/*.sh")])
    done = subprocess.run(["shellcheck", "--severity=warning", "--external-sources", *scripts], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

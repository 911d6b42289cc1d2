"""Shell completion as a person meets it: a real bash in tmux, `envbuild lo<TAB>` becomes `envbuild lock`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.unit


def _envbuild(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env}, timeout=60, check=False)


def test_clicks_completion_protocol_runs_through_the_checked_stdout() -> None:
    done = _envbuild(_ENVBUILD_COMPLETE="bash_source")
    assert done.returncode == 0, done.stderr
    assert "_envbuild_completion()" in done.stdout
    assert "internal error" not in done.stderr


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o nosort -F _envbuild_completion envbuild"),
                                                ("zsh", "#compdef envbuild"),
                                                ("fish", "complete --no-files --command envbuild")])
def test_completion_prints_the_script_for_each_shell(shell: str, marker: str) -> None:
    done = _envbuild("completion", shell)
    assert done.returncode == 0, done.stderr
    assert marker in done.stdout


@pytest.mark.skipif(not (shutil.which("tmux") and shutil.which("bash")), reason="needs tmux and bash")
def test_tab_in_a_real_bash_completes_lo_to_lock(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "envbuild"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m builder "$@"\n')
    wrapper.chmod(0o755)
    rc = tmp_path / "bashrc"
    rc.write_text(f'export PATH="{bin_dir}:$PATH"\nPS1="$ "\neval "$(envbuild completion bash)"\n')
    session = f"envbuild-completion-{os.getpid()}"
    tmux = ["tmux", "-L", session, "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "200", "-y", "20",
                    f"bash --noprofile --rcfile {rc} -i"], check=True)
    try:
        pane = ""
        for _ in range(100):  # the rc file's eval runs envbuild once: wait for the prompt
            pane = subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True,
                                  text=True, check=True).stdout
            if pane.rstrip().endswith("$"):
                break
            time.sleep(0.1)
        subprocess.run([*tmux, "send-keys", "-t", session, "envbuild lo", "Tab"], check=True)
        for _ in range(150):
            pane = subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True,
                                  text=True, check=True).stdout
            if "envbuild lock" in pane:
                break
            time.sleep(0.1)
        assert "$ envbuild lock" in pane, pane
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)


def test_version_names_the_tools_whose_versions_enter_the_lock_hash() -> None:
    from importlib import metadata

    done = _envbuild("--version")
    assert done.returncode == 0, done.stderr
    for name in ("conda-lock", "py-rattler", "uv"):
        assert f"{name} {metadata.version(name)}" in done.stdout

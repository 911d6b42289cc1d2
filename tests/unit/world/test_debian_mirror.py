"""The mirror tests/world/base_images.sh hands debootstrap, read from apt's sources (no engine needed): the
first usable Debian source, or one clear error saying how to name one (ENVBUILD_DEBIAN_MIRROR)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.paths import TESTS

WORLD_SCRIPTS = TESTS / "world"


def mirror_for(tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    apt_etc = tmp_path / "apt"
    for name, text in files.items():
        path = apt_etc / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    env = {
        **os.environ,
        "ENVBUILD_APT_ETC": str(apt_etc),
        "ENVBUILD_WORLD_DIR": str(tmp_path / "world"),
    }
    env.pop("ENVBUILD_DEBIAN_MIRROR", None)
    return subprocess.run(
        ["bash", WORLD_SCRIPTS / "base_images.sh", "mirror"], env=env, capture_output=True, text=True, timeout=30
    )


DEB822_SECURITY_FIRST = """\
Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://security.mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://src.mirror.example/debian
Suites: bookworm
Components: main

Types: deb
Enabled: no
URIs: http://disabled.mirror.example/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://main.mirror.example/debian/
 http://second.mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
"""


@pytest.mark.unit
def test_mirror_skips_security_source_disabled_and_commented_entries(tmp_path: Path) -> None:
    result = mirror_for(tmp_path, {"sources.list.d/debian.sources": DEB822_SECURITY_FIRST})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "http://main.mirror.example/debian\n"


@pytest.mark.unit
def test_mirror_reads_one_line_sources_with_options_first(tmp_path: Path) -> None:
    result = mirror_for(
        tmp_path,
        {
            "sources.list": "# deb http://commented.example/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://one.mirror.example/debian bookworm main\n",
            "sources.list.d/debian.sources": DEB822_SECURITY_FIRST,
        },
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "http://one.mirror.example/debian\n"


@pytest.mark.unit
def test_mirror_missing_or_unusable_is_a_clear_error(tmp_path: Path) -> None:
    nothing = mirror_for(tmp_path / "a", {"sources.list.d/other.list": "deb http://x.example/debian trixie main\n"})
    assert nothing.returncode == 1
    assert "ENVBUILD_DEBIAN_MIRROR" in nothing.stderr
    mirror_plus = mirror_for(
        tmp_path / "b", {"sources.list": "deb mirror+file:/etc/apt/mirrors.txt bookworm main\n"}
    )
    assert mirror_plus.returncode == 1
    assert "cannot use the apt source 'mirror+file:/etc/apt/mirrors.txt'" in mirror_plus.stderr

"""A small channel written with tests/world/channel/packages.py, conda-lock lockfiles for it written by hand,
and builder.lock.install run on them in a child process: what the installer's unit and system tests share.

Every rattler call runs in a child process that prints one JSON line and leaves with os._exit: py-rattler
can crash at interpreter exit and would take pytest along, so the tests judge the printed line, not the
exit code alone.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

from tests.paths import REPO
from tests.world.channel.packages import CondaPackage, PackageFile, write_package

PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
PLATFORM = "linux-64"

# Runs one builder.lock.install function in a child process: argv[1] is a JSON call, the last stdout line
# is {"result": ...} or {"error": "...", "type": "..."}.
_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    call = json.loads(sys.argv[1])
    try:
        import builder.lock.install as inst
        kwargs = {k: (Path(v) if k in ("staging", "cache_dir") and v else v) for k, v in call["kwargs"].items()}
        if call["function"] == "install_lock":
            result = inst.install_lock(Path(call["lockfile"]), call["platform"], Path(call["prefix"]), **kwargs)
            out = {"result": result.to_json_dict()}
        elif call["function"] == "export_platform_plan":
            out = {"result": inst.export_platform_plan(Path(call["lockfile"]), call["platform"])}
        elif call["function"] == "read_explicit":
            out = {"result": inst.read_explicit(Path(call["lockfile"])).to_json_dict()}
        else:
            raise SystemExit("unknown function")
    except Exception as exc:
        out = {"error": str(exc), "type": type(exc).__name__}
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)
    """
)


# ---------------------------------------------------------------- channel and lock helpers


def index_in_child(channel: Path) -> None:
    """repodata.json for every subdir of the channel, written by rattler in a child process."""
    code = (
        "import os, sys; from pathlib import Path; from tests.world.channel.packages import index_channel; "
        "index_channel(Path(sys.argv[1])); sys.stdout.flush(); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code, str(channel)], cwd=REPO, check=False, timeout=120)
    assert (channel / "noarch" / "repodata.json").is_file(), "indexing the test channel failed"


def sample_packages() -> list[CondaPackage]:
    return [
        CondaPackage("libfoo", "1.2", "h0_0", subdir=PLATFORM, files=(PackageFile("lib/libfoo.txt", b"foo\n"),)),
        CondaPackage(
            "hello", "1.0", "h1_0", subdir=PLATFORM, depends=("libfoo >=1",),
            files=(
                PackageFile("bin/hello", f"#!/bin/sh\necho {PLACEHOLDER}\n".encode(), 0o755, prefix_placeholder=PLACEHOLDER),
                PackageFile("share/hello/data.bin", bytes(range(256)) * 8),
            ),
        ),  # fmt: skip
        CondaPackage("notes", "2.0", "0", noarch="generic", files=(PackageFile("share/notes.txt", b"notes\n"),)),
    ]


def channel_files(root: Path, packages: list[CondaPackage]) -> dict[str, Path]:
    files = {pkg.name: write_package(root, pkg) for pkg in packages}
    index_in_child(root)
    return files


def hashes(path: Path) -> dict[str, str]:
    data = path.read_bytes()
    return {"md5": hashlib.md5(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest()}


def lock_document(base_url: str, files: dict[str, Path], pip: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """A conda-lock v1 lockfile (what conda-lock writes) for the given package files."""
    packages = []
    for name, path in sorted(files.items()):
        subdir = path.parent.name
        version = path.name.split("-")[-2]
        packages.append({
            "name": name, "version": version, "manager": "conda", "platform": PLATFORM, "dependencies": {},
            "url": f"{base_url}/{subdir}/{path.name}", "hash": hashes(path), "category": "main", "optional": False,
        })  # fmt: skip
    packages.extend(pip)
    return {
        "version": 1,
        "metadata": {
            "content_hash": {PLATFORM: "0" * 64},
            "channels": [{"url": base_url, "used_env_vars": []}],
            "platforms": [PLATFORM],
            "sources": ["environment.yml"],
        },
        "package": packages,
    }


def write_lock(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def call_installer(function: str, lockfile: Path, platform: str = PLATFORM, prefix: Path | None = None, **kwargs: Any) -> dict:
    call = {
        "function": function, "lockfile": str(lockfile), "platform": platform, "prefix": str(prefix),
        "kwargs": {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()},
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(call)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"driver printed nothing (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(lines[-1])


def sample_channel(root: Path) -> tuple[Path, dict[str, Path]]:
    """The sample packages written and indexed under `root`: the folder and each package's file."""
    return root, channel_files(root, sample_packages())


def sample_lockfile(folder: Path, channel: tuple[Path, dict[str, Path]]) -> Path:
    """folder/conda-lock.yml locking every package of the channel by its file: URL."""
    root, files = channel
    return write_lock(folder / "conda-lock.yml", lock_document(root.as_uri(), files))

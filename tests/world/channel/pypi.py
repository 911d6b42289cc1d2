"""A local PEP 503 simple index of the world's wheels, with PEP 658 metadata files.

Layout under the index root: `simple/index.html`, `simple/<name>/index.html`, `files/<wheel>` and
`files/<wheel>.metadata`. Links carry `#sha256=` (without it conda-lock records `hash: {}`) and
advertise the metadata file with both `data-dist-info-metadata` (PEP 658's name, which older pip
reads) and `data-core-metadata` (PEP 714's): a resolver then reads 10 kB instead of downloading the
183 MB torch wheel. It must be served over http: conda-lock refuses `file://` repositories.
"""

from __future__ import annotations

import hashlib
import html
import os
import shutil
import urllib.parse
from pathlib import Path

from .wheels import WheelInfo, wheel_core_metadata


def build_index(wheels: list[WheelInfo], index_root: Path) -> None:
    """(Re)write the index for exactly `wheels`; files of wheels no longer listed are removed."""
    files = index_root / "files"
    simple = index_root / "simple"
    files.mkdir(parents=True, exist_ok=True)
    simple.mkdir(parents=True, exist_ok=True)
    wanted: set[str] = set()
    by_project: dict[str, list[tuple[WheelInfo, str]]] = {}
    for wheel in sorted(wheels, key=lambda w: w.filename):
        _place(wheel.path, files / wheel.filename)
        metadata = wheel_core_metadata(wheel.path)
        _write_if_changed(files / f"{wheel.filename}.metadata", metadata)
        wanted |= {wheel.filename, f"{wheel.filename}.metadata"}
        by_project.setdefault(wheel.name, []).append((wheel, hashlib.sha256(metadata).hexdigest()))
    for stale in files.iterdir():
        if stale.name not in wanted:
            stale.unlink()
    for project, entries in by_project.items():
        (simple / project).mkdir(exist_ok=True)
        _write_if_changed(simple / project / "index.html", _project_page(project, entries).encode())
    for folder in simple.iterdir():
        if folder.is_dir() and folder.name not in by_project:
            shutil.rmtree(folder)
    _write_if_changed(simple / "index.html", _root_page(sorted(by_project)).encode())


def _project_page(project: str, entries: list[tuple[WheelInfo, str]]) -> str:
    links = []
    for wheel, metadata_sha in entries:
        href = f"../../files/{urllib.parse.quote(wheel.filename)}#sha256={wheel.sha256}"
        attrs = [f'href="{html.escape(href)}"']
        if wheel.requires_python:
            attrs.append(f'data-requires-python="{html.escape(wheel.requires_python)}"')
        attrs += [f'data-dist-info-metadata="sha256={metadata_sha}"', f'data-core-metadata="sha256={metadata_sha}"']
        links.append(f"    <a {' '.join(attrs)}>{html.escape(wheel.filename)}</a><br/>")
    return _page(f"Links for {project}", links)


def _root_page(projects: list[str]) -> str:
    return _page("Simple index", [f'    <a href="{p}/">{p}</a><br/>' for p in projects])


def _page(title: str, lines: list[str]) -> str:
    body = "\n".join(lines)
    return (
        "<!DOCTYPE html>\n<html>\n  <head>\n"
        '    <meta name="pypi:repository-version" content="1.1">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
        f"{body}\n  </body>\n</html>\n"
    )


def _place(source: Path, target: Path) -> None:
    """Hard-link the cached wheel into the index (no second 190 MB copy); copy across filesystems."""
    if target.exists() and os.path.samefile(source, target):
        return
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _write_if_changed(target: Path, data: bytes) -> None:
    if target.is_file() and target.read_bytes() == data:
        return
    tmp = target.with_name(f".{target.name}.part")
    tmp.write_bytes(data)
    os.replace(tmp, target)

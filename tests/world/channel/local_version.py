"""A wheel served under a local version (`torch 2.14.1` as `2.14.1+cu130`), as the PyTorch wheel index
names the very same builds that the package index serves without a suffix (world.yaml `pip_index:`).

Only the version changes: the `.dist-info` folder is renamed, METADATA's `Version:` and RECORD follow,
every other member keeps its bytes. The result is cached, keyed by the source's sha256, so a warm world
build does not rewrite 550 MB.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

from builder.errors import EnvbuildError

from .wheels import WheelInfo, read_wheel

_CHUNK = 1 << 20


def with_local_version(wheel: WheelInfo, local: str, dest: Path) -> WheelInfo:
    """`wheel` re-versioned as `<version>+<local>` under `dest` (made once per source wheel)."""
    if "+" in wheel.version:
        raise EnvbuildError(f"{wheel.filename} already has a local version; world.yaml asks for +{local}")
    if not re.fullmatch(r"[a-z0-9]+(\.[a-z0-9]+)*", local):
        raise EnvbuildError(f"world.yaml: local version {local!r} must be letters and digits like cu130")
    version = f"{wheel.version}+{local}"
    name_part, _, tags = wheel.filename.removesuffix(".whl").partition(f"-{wheel.version}-")
    return _cached(wheel, dest / f"{name_part}-{version}-{tags}.whl",
                   lambda metadata: _metadata_with_version(metadata, version), version)


def _cached(wheel: WheelInfo, target: Path, change: Callable[[bytes], bytes], version: str) -> WheelInfo:
    key = target.with_name(f"{target.name}.source-sha256")
    if target.is_file() and key.is_file() and key.read_text() == wheel.sha256:
        return read_wheel(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.part")
    try:
        _rewrite(wheel, version, change, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    key.write_text(wheel.sha256)
    return read_wheel(target)


def _rewrite(wheel: WheelInfo, version: str, change: Callable[[bytes], bytes], out: Path) -> None:
    old_info = wheel.dist_info
    new_info = f"{old_info.removesuffix('.dist-info').rsplit('-', 1)[0]}-{version}.dist-info"
    record_name = f"{new_info}/RECORD"
    rows: list[list[str]] = []
    with zipfile.ZipFile(wheel.path) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            name = _renamed(member.filename, old_info, new_info)
            if name == record_name:
                continue  # written last, from the rows collected here
            info = zipfile.ZipInfo(name, date_time=member.date_time)
            info.external_attr = member.external_attr
            info.compress_type = member.compress_type
            # Level 1: the members are mostly shared libraries; a faster level costs a few per cent
            # of size and saves most of the minute the default level takes on 1.1 GB.
            info._compresslevel = 1  # type: ignore[attr-defined]  # ZipInfo has no public setter before 3.13
            if member.is_dir():
                target.writestr(info, b"")
                continue
            digest = hashlib.sha256()
            size = 0
            if name == f"{new_info}/METADATA":
                data = change(source.read(member))
                digest.update(data)
                size = len(data)
                target.writestr(info, data)
            else:
                with source.open(member) as src, target.open(info, "w", force_zip64=member.file_size > 1 << 30) as dst:
                    for chunk in iter(lambda: src.read(_CHUNK), b""):
                        digest.update(chunk)
                        size += len(chunk)
                        dst.write(chunk)
            rows.append([name, "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode(), str(size)])
        rows.append([record_name, "", ""])
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(rows)
        target.writestr(zipfile.ZipInfo(record_name, date_time=(1980, 1, 1, 0, 0, 0)), text.getvalue().encode())


def _renamed(name: str, old_info: str, new_info: str) -> str:
    return new_info + name[len(old_info):] if name == old_info or name.startswith(old_info + "/") else name


def _metadata_with_version(metadata: bytes, version: str) -> bytes:
    lines = metadata.split(b"\n")
    for index, line in enumerate(lines):
        if line.startswith(b"Version:"):
            lines[index] = f"Version: {version}".encode()
            return b"\n".join(lines)
        if not line.strip():
            break  # the headers ended without a Version line
    raise EnvbuildError("wheel METADATA has no Version header")

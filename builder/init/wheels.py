"""A wheel a pip line installs by its file (a URL, a path, `name @ URL`), read from the file's name.

The name is read by `packaging.utils.parse_wheel_filename` (the wheel spec's `name-version(-build)?-python-abi-
platform.whl`): the package and version, and from its tags the one CPython it runs on (`cp38-cp38`; an `abi3` or
`py3` wheel names none) and its platform. A URL's file name is percent-decoded first (`%2Bcu118` is `+cu118`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

WHEEL_LINE = re.compile(r"(?:(?P<name>[A-Za-z0-9][\w.-]*)\s*(?:\[[^\]]*\])?\s*@\s*)?(?P<location>\S+\.whl)(?:#\S*)?")


@dataclass(frozen=True)
class WheelFile:
    name: str  # canonical: torch, torchvision, onnxruntime-gpu
    version: Version
    python: str | None  # "3.8" for a cp38-cp38 wheel; None when it runs on several
    platform: str  # the first platform tag: linux_x86_64, linux_aarch64, any

    @property
    def release(self) -> str:
        """The release the build belongs to: `1.11.0a0+gitbc2c6ed` -> 1.11.0, `2.1.0+cu118` -> 2.1.0."""
        return self.version.base_version

    @property
    def local(self) -> str | None:
        return self.version.local


def wheel_location(line: str) -> str | None:
    """The wheel file a pip line installs (a URL, a path or `name @ URL`); None when it installs none."""
    match = WHEEL_LINE.fullmatch(line.split(";", 1)[0].strip())
    return match["location"] if match else None


def read_wheel(location: str) -> WheelFile | None:
    """The wheel's name, version, Python and platform from its file name; None when it is no wheel name."""
    filename = unquote(urlsplit(location).path.rsplit("/", 1)[-1])
    try:
        name, version, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    pythons = {f"{t.interpreter[2]}.{t.interpreter[3:]}" for t in tags
               if re.fullmatch(r"cp\d{2,3}", t.interpreter) and t.abi != "abi3"}
    platform = sorted(t.platform for t in tags)[0]
    return WheelFile(str(name), version, pythons.pop() if len(pythons) == 1 else None, platform)

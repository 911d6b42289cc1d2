"""The conda platform a foreign file is for, where the file says so without a `platforms:` key.

Read, strongest first: conda's own header in a `conda list` export (`# platform: linux-aarch64`); the
platforms that conda-build style selectors name on the file's lines (`# [linux and aarch64]`, `# [osx and
arm64]`; the selector vocabulary is conda-build's `metadata.py` namespace, the tokens of
data/platforms.yaml's `selector:`); packages built for one platform by name (`gcc_linux-aarch64`,
`sysroot_linux-aarch64`, `clang_osx-arm64`: conda-forge's `<tool>_<platform>` compiler packages); the file's
name (`environment_arch-aarch64.yaml`, `env-osx-arm64.yml`). A platform that only an operating system names
(`# [linux]`, `# [win]`) says nothing about the architecture and is not read.
"""

from __future__ import annotations

import re

from builder.init.reading import Reading
from builder.specs.compat import load_platforms

HEADER = re.compile(r"^#\s*platform:\s*(\S+)\s*$", re.MULTILINE)
SELECTOR = re.compile(r"#\s*\[([^\]]+)\]\s*$", re.MULTILINE)
# selector tokens that name an architecture on Linux, beside each platform's own selector token
LINUX_ARCH_TOKENS = {"aarch64": "linux-aarch64", "linux64": "linux-64", "x86_64": "linux-64"}
OSX_ARCH_TOKENS = {"arm64": "osx-arm64", "osx64": "osx-64"}


def keep_file_platform(reading: Reading, text: str | None, file_name: str) -> None:
    """Set `reading.platforms` from what the file says, with a note naming where; a `platforms:` key wins."""
    if reading.platforms:
        return
    known = set(load_platforms())
    found = [(platforms, why) for platforms, why in (
        (_header(text or "", known), "the file's `# platform:` header"),
        (_selectors(text or ""), "its selectors name only this platform's architecture"),
        (_packages(reading.conda_names, known), "its packages are built for this platform by name"),
        (_file_name(file_name, known), "the file's name names the platform"),
    ) if platforms]
    if found:
        platforms, why = found[0]
        reading.platforms = platforms
        reading.note("platforms:", "assumed", f"{', '.join(platforms)}: {why}")


def _header(text: str, known: set[str]) -> list[str]:
    match = HEADER.search(text)
    return [match[1]] if match and match[1] in known else []


def _selectors(text: str) -> list[str]:
    named: list[str] = []
    for selector in SELECTOR.findall(text):
        words = re.findall(r"[a-z0-9_]+", selector.lower())
        if "not" in words:  # `# [not aarch64]` names the platforms a line is not for
            continue
        tokens = set(words) - {"and", "or"}
        table = OSX_ARCH_TOKENS if "osx" in tokens else LINUX_ARCH_TOKENS
        named += [table[token] for token in sorted(tokens) if token in table and table[token] not in named]
    return named if len(named) == 1 else []


def _packages(names: list[str], known: set[str]) -> list[str]:
    platforms = {match[1] for name in names if (match := re.search(r"_((?:linux|osx|win)-\w+)$", name))}
    platforms &= known
    return sorted(platforms) if len(platforms) == 1 else []


def _file_name(name: str, known: set[str]) -> list[str]:
    lowered = name.lower()
    named = [platform for platform in known if platform in lowered]
    if not named and re.search(r"(^|[^a-z0-9])aarch64([^a-z0-9]|$)", lowered):
        named = ["linux-aarch64"]
    return named if len(named) == 1 else []

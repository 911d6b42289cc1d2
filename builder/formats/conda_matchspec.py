"""One conda MatchSpec as an environment file writes it (`pytorch::pytorch=2.1.0=py3.11_cuda12.1*`), read by
rattler into the one value init, lint and export take: name, version as written, build, channel.

A format of its own because three stages read the same lines: init imports them, lint checks them and
`export` re-spells a spec's conda packages for pixi.
"""

from __future__ import annotations

from dataclasses import dataclass

from rattler import MatchSpec
from rattler.exceptions import InvalidMatchSpecError

OPERATORS = ("==", ">=", "<=", "!=", "~=", ">", "<")


@dataclass(frozen=True)
class CondaLine:
    text: str
    name: str
    version: str | None  # "2.1.0", "2.1.*", ">=2.0,<2.2"; None when unpinned
    build: str | None
    channel: str | None  # `pytorch::pytorch` -> "pytorch"

    def spec(self, with_version: bool = True) -> str:
        if not with_version or not self.version:
            return self.name
        if self.version.startswith(OPERATORS):
            return f"{self.name}{self.version}"
        return f"{self.name}={self.version}"


def parse_conda_line(text: str) -> CondaLine | None:
    """A conda MatchSpec as environment.yml files write it, read by rattler (conda's own grammar: brackets,
    channels with labels, `name version build`); None when rattler refuses it, it names no one package, or it
    holds what no pin carries (alternatives, a line break, a build with spaces)."""
    body = text.strip()
    if not body.isprintable():
        return None
    try:
        spec = MatchSpec(body)
    except (InvalidMatchSpecError, ValueError, TypeError):
        return None
    version = str(spec.version) if spec.version is not None else None
    build = str(spec.build) if spec.build is not None else None
    if spec.name is None or (version and "|" in version) or (build and " " in build):
        return None
    return CondaLine(text, spec.name.normalized, _as_written(version, body), build or None,
                     spec.channel.name if spec.channel is not None else None)


def _as_written(version: str | None, text: str) -> str | None:
    """rattler's version in the file's own spelling where both mean the same: `=2.1.0` (rattler: 2.1.0.*) and
    `=2.1.0=build` (rattler: ==2.1.0, a build pins one version) stay `2.1.0`; `*` is no pin."""
    if version is None or version in ("*", ""):
        return None
    written = text.replace(" ", "")
    if version.endswith(".*") and version not in written:
        return version.removesuffix(".*")
    if version.startswith("==") and version not in written:
        return version.removeprefix("==")
    return version

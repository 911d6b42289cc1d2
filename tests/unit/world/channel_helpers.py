"""rattler's install and solve on channels written by tests/world/channel/packages.py, each in a child
process (tests/world/channel/rattler_ops.py): what the channel's unit and world tests share."""

from __future__ import annotations

from pathlib import Path

from tests.world.channel import rattler_ops


def rattler_install(channel: Path | str, prefix: Path, *specs: str, platform: str = "linux-64", cuda: str | None = None):
    """The records of what rattler installed into `prefix` from `channel`."""
    args = ["install", "--channel", str(channel), "--platform", platform, "--prefix", str(prefix),
            "--cache", str(prefix.parent / "pkgs")]
    if cuda:
        args += ["--cuda", cuda]
    return rattler_ops.run(*args, *specs)


def rattler_solve(channels: list[str], *specs: str, platform: str = "linux-64", cuda: str | None = None):
    """The solution for `specs` from `channels`: each record by package name."""
    args = ["solve", "--platform", platform]
    for channel in channels:
        args += ["--channel", channel]
    if cuda:
        args += ["--cuda", cuda]
    return {r["name"]: r for r in rattler_ops.run(*args, *specs)}

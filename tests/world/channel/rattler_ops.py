"""rattler index / solve / install in a child process that prints one JSON line.

py-rattler crashes at interpreter exit in a few percent of runs (a tokio shutdown race, measured
1 in 30 here): a test process that imports it can end with SIGSEGV after every test passed.
Tests therefore run rattler through this module and judge the JSON line, never the exit code
alone; the process ends with `os._exit` once the line is out.

    python -m tests.world.channel.rattler_ops solve   --channel C [--channel C2] --platform linux-64
                                                       [--cuda 12.6] SPEC...
    python -m tests.world.channel.rattler_ops install --prefix P --cache DIR (same options) SPEC...
    python -m tests.world.channel.rattler_ops index   CHANNEL_DIR
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SOLVE_TIMEOUT = datetime.timedelta(seconds=60)


def run(*args: str, timeout: float = 600) -> Any:
    """Run one operation in a child process; returns its JSON result or raises RuntimeError."""
    done = subprocess.run([sys.executable, "-m", "tests.world.channel.rattler_ops", *args],
                          capture_output=True, text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"rattler_ops {args[0]} printed no result (exit {done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(lines[-1])
    if "error" in result:
        raise RuntimeError(result["error"])
    return result["result"]


def _records(records: list[Any]) -> list[dict[str, Any]]:
    return [{"name": r.name.normalized, "version": str(r.version), "build": str(r.build), "subdir": str(r.subdir),
             "file_name": str(r.file_name), "url": str(r.url), "channel": str(r.channel),
             "sha256": r.sha256.hex() if r.sha256 else None} for r in records]


async def _solve(args: argparse.Namespace) -> list[Any]:
    import rattler

    virtual = []
    if args.cuda:
        virtual.append(rattler.GenericVirtualPackage(rattler.PackageName("__cuda"), rattler.Version(args.cuda),
                                                     rattler.BuildString("0")))
    # A bare relative path would be read as a channel name on the default host.
    channels = [c if "://" in c else str(Path(c).resolve()) for c in args.channel]
    return await rattler.solve(channels, args.specs, platforms=[args.platform, "noarch"],
                               virtual_packages=virtual, timeout=SOLVE_TIMEOUT)


async def _main(args: argparse.Namespace) -> Any:
    if args.op == "index":
        from tests.world.channel.packages import index_channel

        await asyncio.to_thread(index_channel, Path(args.channel_dir))
        return {"indexed": args.channel_dir}
    records = await _solve(args)
    if args.op == "install":
        import rattler

        await rattler.install(records, args.prefix, cache_dir=args.cache, show_progress=False)
    return _records(records)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.world.channel.rattler_ops")
    sub = parser.add_subparsers(dest="op", required=True)
    index = sub.add_parser("index")
    index.add_argument("channel_dir")
    for name in ("solve", "install"):
        op = sub.add_parser(name)
        op.add_argument("--channel", action="append", required=True, help="a path or an http URL; repeat")
        op.add_argument("--platform", default="linux-64")
        op.add_argument("--cuda", default=None, help="__cuda version; none when absent")
        op.add_argument("specs", nargs="+")
        if name == "install":
            op.add_argument("--prefix", type=Path, required=True)
            op.add_argument("--cache", type=Path, required=True)
    return parser


def main() -> None:
    args = _parser().parse_args()
    try:
        line = json.dumps({"result": asyncio.run(_main(args))})
        code = 0
    except Exception as exc:  # noqa: BLE001 - everything goes back to the parent as one line
        line = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        code = 1
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()

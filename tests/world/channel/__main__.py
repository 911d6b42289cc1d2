"""`python -m tests.world.channel build|serve|wait|synthetic|clean`: see the package docstring."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from builder.errors import EnvbuildError

from . import DEFAULT_WORLD, world_url


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except EnvbuildError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code


def _build(args: argparse.Namespace) -> int:
    from .build import build_world

    report = build_world(args.world, log=(lambda m: print(m, file=sys.stderr)) if args.verbose else (lambda _: None))
    if report.cached:
        print(f"world at {args.world} is up to date ({report.seconds:.2f} s)")
    else:
        print(f"world at {args.world} built in {report.seconds:.1f} s: {len(report.written)} packages written, "
              f"{report.kept} kept, {len(report.removed)} removed")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from tests.world.channel.packages import make_http_server

    from .build import world_port

    port = args.port if args.port is not None else world_port()
    server = make_http_server(args.world.resolve(), "127.0.0.1", port)
    # SIGTERM from channel_down.sh: leave serve_forever cleanly so the socket is closed.
    signal.signal(signal.SIGTERM, _stop_serving)
    print(f"serving {args.world} at http://127.0.0.1:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _stop_serving(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _wait(args: argparse.Namespace) -> int:
    """Poll the served world until its conda-forge channel answers (or time runs out)."""
    url = f"{world_url(args.port)}/conda/conda-forge/noarch/repodata.json"
    deadline = time.monotonic() + args.timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return 0
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise EnvbuildError(f"the world server did not answer at {url} within {args.timeout:.0f} s")
        time.sleep(0.1)


def _synthetic(args: argparse.Namespace) -> int:
    from .synthetic import make_synthetic_channel

    start = time.monotonic()
    made = make_synthetic_channel(args.out, names=args.names, versions_per_name=args.versions,
                                  subdirs=tuple(args.subdir or ("linux-64", "osx-arm64")), seed=args.seed,
                                  wheel_cache=args.wheel_cache)
    counts = ", ".join(f"{s}: {n}" for s, n in made.records_per_subdir.items())
    print(f"synthetic channel at {args.out} in {time.monotonic() - start:.1f} s ({counts} records per solve)")
    return 0


def _clean(args: argparse.Namespace) -> int:
    from .build import remove_world

    remove_world(args.world)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.world.channel", description=__doc__)
    sub = parser.add_subparsers(required=True)
    build = sub.add_parser("build", help="build the channels and the pip index (cached)")
    build.add_argument("--verbose", "-v", action="store_true")
    build.set_defaults(func=_build)
    serve = sub.add_parser("serve", help="serve the world folder over http on 127.0.0.1 (foreground)")
    serve.add_argument("--port", type=int, default=None, help="default: $ENVBUILD_WORLD_PORT or 8765")
    serve.set_defaults(func=_serve)
    wait = sub.add_parser("wait", help="wait until a served world answers")
    wait.add_argument("--port", type=int, default=None)
    wait.add_argument("--timeout", type=float, default=15.0)
    wait.set_defaults(func=_wait)
    synth = sub.add_parser("synthetic", help="write a synthetic conda-forge-like channel (repodata only)")
    synth.add_argument("--out", type=Path, required=True)
    synth.add_argument("--names", type=int, default=2000)
    synth.add_argument("--versions", type=int, default=10)
    synth.add_argument("--subdir", action="append")
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--wheel-cache", type=Path, default=None, help="a world's cache/wheels for real dependencies")
    synth.set_defaults(func=_synthetic)
    clean = sub.add_parser("clean", help="delete the world folder, caches included")
    clean.set_defaults(func=_clean)
    for command in (build, serve, clean):
        command.add_argument("--world", type=Path, default=DEFAULT_WORLD, help="default: .world")
    return parser


if __name__ == "__main__":
    code = main()
    # py-rattler (used by `build`) can crash at interpreter exit after the work is done: leave first.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

"""`make bench-lock`: envbuild's matrix lock against plain conda-lock, on a synthetic channel.

The channel is conda-forge-like (about 20,000 records per platform, repodata only, served as
file://, see tests/world/channel/synthetic.py). The spec is the default env (envs/pytorch.yaml)
with the targets conda alone can lock (the wheel-index targets need a pip index, which this
channel lacks), each for linux-64 and osx-arm64, plus synthetic libraries a team's env would carry.

Measured, one after the other:
- baseline: plain `conda-lock lock` once per target, one target after the other, with the same
  inputs (environment.yml, virtual packages) and the same solver (envbuild-micromamba);
- cold: `envbuild lock` of the whole matrix, no lock present;
- no-op: `envbuild lock` again, nothing changed.
Targets (at load 1 on 2 cores): no-op <= 0.35 s, cold/baseline <= 0.35. The last line is
the summary:
`lock: cold=<s> noop=<s> ratio=<cold/baseline> targets=<n>`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from builder.lock.inputs import lock_inputs
from builder.lock.run import LOCK_FILE, conda_lock_args, write_conda_lock_inputs
from builder.lock.targets import find_solver
from builder.specs.model import Route, load_spec
from builder.specs.target import Sources, resolve_targets
from tests.world.channel.synthetic import make_synthetic_channel

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = REPO / "envs" / "pytorch.yaml"
PLATFORMS = ("linux-64", "osx-arm64")
# ~1,670 names x 10 versions x 1.2 (python-extension builds) ~= 20,000 records per platform
SYNTHETIC_NAMES = 1670
EXTRA_PACKAGES = 30
NOOP_GOAL_S = 0.35
RATIO_GOAL = 0.35


def bench_spec(folder: Path, library_names: list[str]) -> Path:
    """The default env, its conda-lockable targets on both platforms, plus synthetic libraries."""
    data = yaml.safe_load(DEFAULT_SPEC.read_text(encoding="utf-8"))
    default_route = data.get("route", Route.CONDA_FORGE.value)
    data["name"] = "bench-lock"
    data["platforms"] = list(PLATFORMS)
    data["targets"] = [
        {key: value for key, value in target.items() if key != "platforms"}
        for target in data["targets"]
        if target.get("route", default_route) != Route.PIP.value
    ]
    data["conda"] = [*data.get("conda", []), *library_names]
    spec = folder / "bench-lock.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def timed_envbuild(spec: Path, channel: str, locks: Path) -> tuple[float, str]:
    command = [sys.executable, "-m", "builder", "lock", str(spec), "--channel", channel,
               "--locks", str(locks), "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=spec.parent, env=_env(), check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bench: envbuild lock failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def timed_conda_lock_per_target(spec: Path, channel: str, folder: Path) -> tuple[float, dict[str, Path]]:
    """Plain conda-lock, once per target, one after the other: the same inputs envbuild renders."""
    conda_lock = Path(sys.executable).parent / "conda-lock"
    solver = find_solver()
    targets = resolve_targets(load_spec(spec), sources=Sources(channels=(channel,)))
    shutil.rmtree(folder, ignore_errors=True)
    lockfiles = {}
    started = time.perf_counter()
    for target in targets:
        inputs = lock_inputs(target)
        work = folder / target.key
        write_conda_lock_inputs(work, inputs)
        done = subprocess.run([str(conda_lock), *conda_lock_args(work, inputs, solver)], cwd=work,
                              capture_output=True, text=True, env=_env(POETRY_CACHE_DIR=str(work / "poetry")),
                              check=False)
        if done.returncode != 0:
            raise SystemExit(f"bench: conda-lock failed for {target.key}:\n{done.stderr[-3000:]}")
        lockfiles[target.key] = work / LOCK_FILE
    return time.perf_counter() - started, lockfiles


def median_of(runs: int, measure: Callable[[], float]) -> tuple[float, list[float]]:
    """The median of a few runs: shared cores make a single run noisy."""
    seconds = [measure() for _ in range(runs)]
    return statistics.median(seconds), seconds


def _env(**extra: str) -> dict[str, str]:
    # PYTHONPATH: the child runs this checkout's envbuild, whatever is installed
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "CI": "true", **extra}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lock", description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=SYNTHETIC_NAMES, help="synthetic package names")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement (the median is reported)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-lock-") as temporary:
        root = args.keep or Path(temporary)
        root.mkdir(parents=True, exist_ok=True)
        made = make_synthetic_channel(root / "channel", names=args.names, subdirs=PLATFORMS)
        channel = (root / "channel").resolve().as_uri()
        # the upper half of the names depend on the lower: a few dozen pull in a few hundred
        step = max(1, len(made.names) // 2 // EXTRA_PACKAGES)
        libraries = list(made.names[len(made.names) // 2 :: step][:EXTRA_PACKAGES])
        spec = bench_spec(root, libraries)
        targets = [t.key for t in resolve_targets(load_spec(spec))]
        records = ", ".join(f"{s}: {n}" for s, n in made.records_per_subdir.items())
        print(f"channel: {records} records; spec: {len(targets)} targets ({', '.join(targets)}) "
              f"x {len(PLATFORMS)} platforms, {EXTRA_PACKAGES} synthetic libraries")

        baselines: dict[str, Path] = {}

        def baseline_run() -> float:
            seconds, lockfiles = timed_conda_lock_per_target(spec, channel, root / "baseline")
            baselines.update(lockfiles)
            return seconds

        def cold_run() -> float:
            shutil.rmtree(root / "locks", ignore_errors=True)
            return timed_envbuild(spec, channel, root / "locks")[0]

        def noop_run() -> float:
            seconds, output = timed_envbuild(spec, channel, root / "locks")
            if output.count('"unchanged"') != len(targets):
                raise SystemExit(f"bench: the unchanged envbuild lock solved again:\n{output}")
            return seconds

        # interleaved, so a neighbour's load on the shared cores falls on both sides alike
        baseline_runs, cold_runs = [], []
        for _ in range(args.runs):
            baseline_runs.append(baseline_run())
            cold_runs.append(cold_run())
        baseline, cold = statistics.median(baseline_runs), statistics.median(cold_runs)
        print(f"conda-lock once per target, one after the other: {baseline:.2f} s (runs: {_list(baseline_runs)})")
        print(f"envbuild lock, cold: {cold:.2f} s (runs: {_list(cold_runs)})")
        noop, noop_runs = median_of(args.runs, noop_run)
        print(f"envbuild lock, unchanged: {noop:.2f} s (runs: {_list(noop_runs)})")
        same = all((root / "locks" / key / LOCK_FILE).read_bytes() == baselines[key].read_bytes() for key in targets)
        print(f"lockfiles byte-identical to plain conda-lock's: {'yes' if same else 'NO'}")
        ratio = cold / baseline
        print(f"targets: no-op <= {NOOP_GOAL_S} s ({'met' if noop <= NOOP_GOAL_S else 'missed'}), "
              f"ratio <= {RATIO_GOAL} ({'met' if ratio <= RATIO_GOAL else 'missed'}) on {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.2f} (other work on the same cores slows the parallel part)")
        print(f"lock: cold={cold:.2f} noop={noop:.2f} ratio={ratio:.2f} targets={len(targets)}")


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()

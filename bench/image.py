"""`make bench-image`: cold build, rebuild after a change outside the environment, size overhead,
and whether the env layer is byte-identical across two builds from scratch.

Two targets: the default spec's CPU image (line `image:`) and the real CUDA torch 2.14.1 of
tests/fixtures/specs/torch-cuda-pip.yaml (line `image-cuda:`, about 6 GB, three builds take some
8 minutes on 2 cores). Targets (issue "Images"): rebuild <= 10 % of cold; image <= 5 % over the
installed env plus the base; the env layer digest always equal. Printed, never asserted: these
machines are shared.

Beside each, in the same run, from the same index or lock and base: the plain one-stage Dockerfile
a user would write instead (`<label>: cold= baseline= ratio= env_ratio=`; the baseline holds the image's
compiler RUN too, and env_ratio leaves that RUN out of both), and a one-package change
(`incremental:`): a small pure-Python package added to the spec, relocked, rebuilt with the cache;
which of the env's layers it made new, and whether the CUDA and torch layers stayed. The CPU image
is pushed to the world's registry before and after the change (`push:`, what the second push sent).
And an envbuild upgrade (`upgrade:`): this checkout's builder/ copied with its version bumped, the same
lock rebuilt with the cache by that copy in a child process; the new bytes are the engine's sizes of the
layers the first image did not have (goal: <= 3 % of the image, the CUDA and torch layers unchanged).

Options: `--only image|image-cuda`, `--cold-only` (the cold build against its baseline, nothing else), and
`--pairs N` (N such pairs in alternating order, medians in the summary line: one pair is noise on a shared
machine).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import yaml

import builder
from bench._world import BenchEnv, bench_env
from builder.image.build import (
    ANSI,
    ENV_COPY,
    GROUP_RUN,
    RUNNING_IN,
    STEP,
    STEP_IMAGE,
    BuildOptions,
    ImageResult,
    build_image,
    docker_client,
    push_image,
)
from builder.image.context import make_context
from builder.image.render import compiler_instructions
from builder.lock.targets import lock_targets
from builder.specs.cuda import TargetId, cuda_or_cpu
from builder.specs.model import load_spec
from builder.specs.target import Sources, Target, resolve_targets, with_images
from tests.world.offline import (
    BUILDER_BASE,
    CHANNEL,
    CUDA_TORCH_SPEC,
    PIP_INDEX,
    RUNTIME_BASE,
    WORLD,
    cuda_torch_build_fits,
)

# What a user writes without envbuild. pip route: Debian's python (the env-builder base, the world's
# stand-in for python:3.11-slim) and pip from the index (Debian strips ensurepip), then the same pins
# the spec names, from the same index. conda route: the same installer and lock, run once in place (its plan
# named as a group, `all`, so the per-step split reads its RUN as it reads the image's).
# Both hold what the image holds besides the env: the same compiler RUN for torch.compile (rendered from the
# same block), so `ratio=` compares images with the same content; `env_ratio=` leaves that RUN out of both.
# The conda baseline byte-compiles the env as the image's installer does (`unchecked-hash` pycs, which the
# image's user needs for a fast `import torch`); installed in place, the installer compiles nothing itself. As
# the installer, it keeps going past a file that does not compile (compileall exits 1 for it).
PIP_BASELINE = """FROM {base}
{compiler}
RUN python3 -c "import urllib.request as r; r.urlretrieve('{pip_wheel}', '/tmp/pip-26.3-py3-none-any.whl')" \\
 && python3 /tmp/pip-26.3-py3-none-any.whl/pip install --no-cache-dir --break-system-packages \\
      --index-url {index} torch=={torch} torchvision=={torchvision} numpy \\
 && rm /tmp/pip-26.3-py3-none-any.whl
"""
CONDA_BASELINE = """FROM {base}
{compiler}
COPY envbuild/layers/installer/ /
COPY envbuild/plan.json /opt/envbuild/plans/all.json
RUN python3 -m zipfile -e /opt/envbuild/installer/rattler.zip /tmp/envbuild-rattler \\
 && PYTHONPATH=/opt/envbuild/installer:/tmp/envbuild-rattler python3 -m builder.lock.install \\
      --plan /opt/envbuild/plans/all.json --prefix /opt/env --cache-dir /tmp/envbuild-cache \\
 && { PYTHONHASHSEED=0 /opt/env/bin/python -m compileall -q -f -j 0 --invalidation-mode unchecked-hash /opt/env/lib || true; } \\
 && rm -rf /tmp/envbuild-cache /tmp/envbuild-rattler /opt/envbuild
ENV PATH=/opt/env/bin:$PATH
"""
# Small, pure Python, in the world's channel and in neither test spec.
ADDED_PACKAGE = "packaging"

NETWORK = BuildOptions(network="host")
NO_CACHE = BuildOptions(network="host", no_cache=True)
# The next envbuild release as far as the image can tell: the same files, another __version__.
UPGRADE_SUFFIX = "+bench-upgrade"
BIG_GROUPS = ("cuda", "torch")
COMPILER_STEP = re.compile(r"apt-get install\b.*\bgcc\b")


# The installer's last line in a RUN (builder/lock/install.py main): its own count of seconds.
INSTALLED = re.compile(r"^installed \d+ conda and \d+ pip package\(s\) .*\(\d+ bytes, ([\d.]+) s\)$")


@dataclass
class StepTime:
    """When one build step started, its container ran, the installer finished, and the step's image was made."""

    number: int
    instruction: str
    started: float
    running: float | None = None
    installed: float | None = None
    installer_s: float | None = None
    ended: float | None = None

    @property
    def seconds(self) -> float:
        return (self.ended or self.started) - self.started


class StepClock:
    """build_image's echo: the time each line of the engine's log arrives, per step."""

    def __init__(self) -> None:
        self.steps: list[StepTime] = []

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        line = ANSI.sub("", line)
        step = STEP.match(line)
        if step:
            self.steps.append(StepTime(int(step.group(1)), step.group(3), now))
            return
        if not self.steps:
            return
        current = self.steps[-1]
        installed = INSTALLED.match(line.strip())
        if RUNNING_IN.match(line):
            current.running = now
        elif installed:
            current.installed, current.installer_s = now, float(installed.group(1))
        elif STEP_IMAGE.match(line) or line.startswith("Successfully built"):
            current.ended = current.ended or now

    def feed(self, chunk: dict) -> None:
        """A chunk of the engine's decoded build stream (a plain `client.api.build`)."""
        for line in str(chunk.get("stream", "")).splitlines():
            if line.strip():
                self(line)


def print_step_times(label: str, clock: StepClock) -> None:
    """Where a build's time went: each step over a second, and for each installing RUN its split:
    the container's start, what runs before the installer's own work (rattler's unzip, python's start),
    the installer, and what follows it (find -cnewer and touch over the prefix, the layer's commit)."""
    totals = {"container start": 0.0, "before the installer": 0.0, "installer": 0.0, "after the installer": 0.0}
    for step in clock.steps:
        group = GROUP_RUN.search(step.instruction)
        if group and step.running and step.installed and step.installer_s is not None and step.ended:
            split = {"container start": step.running - step.started,
                     "before the installer": max(0.0, step.installed - step.installer_s - step.running),
                     "installer": step.installer_s, "after the installer": step.ended - step.installed}
            for key, value in split.items():
                totals[key] += value
            shown = ", ".join(f"{key} {value:.1f}" for key, value in split.items())
            print(f"{label}:   step {step.number} group {group.group(1)}: {step.seconds:.1f} s ({shown})")
        elif step.seconds >= 1.0:
            print(f"{label}:   step {step.number}: {step.seconds:.1f} s {' '.join(step.instruction.split())[:80]}")
    summary = " ".join(f"{key.replace(' ', '_')}={value:.1f}" for key, value in totals.items())
    print(f"{label}: install RUNs: {summary}", flush=True)


def build(env, folder: Path, options: BuildOptions, change_outside_env: bool = False, clock: StepClock | None = None):
    context = make_context(env.target, env.lock_path, folder)
    if change_outside_env:
        # The smoke suite ships with every image but is not part of the environment.
        readme = context.root / "smoke" / "README.md"
        readme.write_text(readme.read_text() + f"\n<!-- bench {time.time_ns()} -->\n")
    return build_image(context, options, echo=clock or (lambda line: None))


def installed_env_bytes(image_id: str) -> int:
    """The bytes of the files and links under /opt/env (`du` would add 4 kB per folder, which no
    layer stores)."""
    client = docker_client()
    script = r"""find /opt/env \( -type f -o -type l \) -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}'"""
    out = client.containers.run(image_id, ["sh", "-c", script], remove=True, user="0")
    return int(out.split()[0])


def import_torch_seconds(image_id: str) -> float:
    """`import torch` as the image's own user, the second of two runs (the page cache warm): stale
    pycs would show here, since that user cannot write new ones."""
    client = docker_client()
    timed = "import time; t = time.time(); import torch; print(time.time() - t)"
    script = f"python -c 'import torch' && python -c '{timed}'"
    out = client.containers.run(image_id, ["sh", "-c", script], remove=True)
    return float(out.split()[-1])


def baseline_seconds(env: BenchEnv, context_root: Path, clock: StepClock | None = None) -> float:
    """Build the plain one-stage Dockerfile of this target in `context_root` (a build context
    envbuild made: the conda baseline takes its installer and plan), --no-cache; its seconds."""
    target = env.target
    compiler = compiler_instructions(target)
    if target.route.value == "pip":
        text = PIP_BASELINE.format(base=BUILDER_BASE, pip_wheel=f"{WORLD}/pypi/files/pip-26.3-py3-none-any.whl",
                                   index=PIP_INDEX, torch=target.torch, torchvision=target.torchvision,
                                   compiler=compiler)
    else:
        text = CONDA_BASELINE.format(base=BUILDER_BASE, compiler=compiler)
    (context_root / "Dockerfile.baseline").write_text(text)
    client = docker_client()
    started = time.monotonic()
    image_id = None
    for chunk in client.api.build(path=str(context_root), dockerfile="Dockerfile.baseline", rm=True, forcerm=True,
                                  nocache=True, network_mode="host", decode=True):
        if "error" in chunk:
            raise SystemExit(f"bench: baseline build failed: {chunk['error']}")
        if clock is not None:
            clock.feed(chunk)
        if isinstance(chunk.get("aux"), dict) and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
    seconds = time.monotonic() - started
    if image_id:
        size = int(client.api.inspect_image(image_id)["Size"])
        print(f"baseline ({target.route.value} route, one stage): {seconds:.1f} s, image {size / 1e6:.0f} MB")
        client.api.remove_image(image_id, force=True)
    return seconds


def with_added_package(env: BenchEnv) -> BenchEnv:
    """The same env with ADDED_PACKAGE added to its spec's conda packages, relocked."""
    spec_path = env.target.spec.source
    assert spec_path is not None
    data = yaml.safe_load(spec_path.read_text())
    data["conda"] = [*(data.get("conda") or []), ADDED_PACKAGE]
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = with_images(load_spec(spec_path), RUNTIME_BASE, BUILDER_BASE)
    target = resolve_targets(spec, (TargetId(env.target.cuda),), Sources(channels=(CHANNEL,), pip_index=PIP_INDEX))[0]
    result = lock_targets([target], lock_root=env.folder / "locks")[0]
    if result.status == "failed":
        raise SystemExit(f"bench: relock with {ADDED_PACKAGE} failed: {result.message}")
    return BenchEnv(target, result.path, env.folder)


def known_layers(before: ImageResult) -> set[str]:
    """The layer digests of `before` (its env layers even when the engine no longer has the image)."""
    known = {layer["digest"] for layer in before.env_layers}
    if _exists(before.image_id):
        known |= set(docker_client().api.inspect_image(before.image_id)["RootFS"]["Layers"])
    return known


def new_layers(known: set[str], image_id: str) -> list[tuple[str, int]]:
    """The layers of `image_id` not in `known` (what a push would send, what a pull would fetch): the
    instruction that made each, and its size as the engine reports it."""
    client = docker_client()
    history = [h for h in reversed(client.api.history(image_id)) if "#(nop)" not in h.get("CreatedBy", "")
               or "#(nop) COPY" in h["CreatedBy"] or "#(nop) ADD" in h["CreatedBy"]]
    layers = client.api.inspect_image(image_id)["RootFS"]["Layers"]
    return [(" ".join(h.get("CreatedBy", "").split()), int(h["Size"]))
            for h, digest in zip(history, layers, strict=False) if digest not in known]




def big_layers_stable(before: ImageResult, after: ImageResult) -> str:
    """"yes" when the CUDA and torch layers of `after` are those of `before`."""
    big = {layer["group"]: layer["digest"] for layer in before.env_layers if layer["group"] in BIG_GROUPS}
    now = {layer["group"]: layer["digest"] for layer in after.env_layers}
    return "yes" if big and all(now.get(group) == digest for group, digest in big.items()) else "no"


def upgraded_envbuild(folder: Path) -> Path:
    """This checkout's builder/ and docker/ templates, copied under `folder` with __version__ bumped:
    what an envbuild release that changes nothing else ships."""
    checkout = Path(builder.__file__).resolve().parent.parent
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("builder", "docker"):
        shutil.copytree(checkout / name, folder / name, ignore=ignore)
    init = folder / "builder" / "__init__.py"
    text = init.read_text(encoding="utf-8")
    line = f'__version__ = "{builder.__version__}"'
    if line not in text:
        raise SystemExit(f"bench: no `{line}` in builder/__init__.py to bump")
    init.write_text(text.replace(line, f'__version__ = "{builder.__version__}{UPGRADE_SUFFIX}"'), encoding="utf-8")
    return folder


def base_ids(target: Target) -> tuple[str | None, ...]:
    """The engine's image ids of the target's base images now."""
    client = docker_client()
    ids = []
    for reference in (target.runtime_image.reference, target.builder_image.reference):
        ids.append(client.api.inspect_image(reference)["Id"] if _exists(reference) else None)
    return tuple(ids)


def upgrade(env: BenchEnv, before: ImageResult) -> ImageResult:
    """Rebuild the same lock with the cache by a version-bumped copy of envbuild, in a child process
    (its `builder` is the copy: the child runs in the copy's folder, which `python -m` puts first on
    the path); what the engine made new."""
    known = known_layers(before)  # now: the rebuild takes over the tags, and the engine drops the untagged image
    bases = base_ids(env.target)
    copy = upgraded_envbuild(env.folder / "upgraded-envbuild")
    checkout = Path(builder.__file__).resolve().parent.parent
    child = {**os.environ, "PYTHONPATH": str(checkout)}  # bench/ and tests/ from here, builder/ from the copy
    assert env.target.spec.source is not None
    done = subprocess.run(
        [sys.executable, "-m", "bench.image", "--upgrade-child", str(env.target.spec.source), str(env.lock_path),
         cuda_or_cpu(env.target.cuda), str(env.folder / "upgrade")],
        cwd=copy, env=child, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    # the earlier image's base must be today's too: a base imported anew between the two builds is not an upgrade
    runtime_base = env.target.runtime_image.reference
    base_layers = set()
    if _exists(runtime_base):
        base_layers = set(docker_client().api.inspect_image(runtime_base)["RootFS"]["Layers"])
    if base_ids(env.target) != bases or not base_layers <= known:
        print("upgrade: not measured: a base image changed during the run (another world on this engine "
              "imported its own); run the bench again", flush=True)
        return before
    if done.returncode != 0:
        raise SystemExit(f"bench: the upgraded envbuild's build failed: {done.stderr[-2000:]}")
    built = json.loads(done.stdout.strip().splitlines()[-1])
    if built["version"] != f"{builder.__version__}{UPGRADE_SUFFIX}":
        raise SystemExit(f"bench: the child ran envbuild {built['version']}, not the bumped copy")
    result = ImageResult(**built["result"])
    made = new_layers(known, result.image_id)
    new_bytes = sum(size for _, size in made)
    print(f"upgrade: envbuild {builder.__version__} -> {built['version']}, same lock: rebuild_s={result.seconds:.1f} "
          f"new_bytes={new_bytes} new_bytes_ratio={new_bytes / result.size:.4f} "
          f"big_layers_stable={big_layers_stable(before, result)}", flush=True)
    for instruction, size in made:
        print(f"  new layer: {size / 1e6:.1f} MB {instruction.removeprefix('/bin/sh -c ')[:100]}")
    return result


def upgrade_child(spec_path: Path, lock_path: Path, cuda: str, folder: Path) -> None:
    """The child of `upgrade`: build the target from its existing lock, print the result as JSON."""
    spec = with_images(load_spec(spec_path), RUNTIME_BASE, BUILDER_BASE)
    target: Target = resolve_targets(spec, (TargetId.parse(cuda),),
                                     Sources(channels=(CHANNEL,), pip_index=PIP_INDEX))[0]
    result = build_image(make_context(target, lock_path, folder), NETWORK)
    print(json.dumps({"version": builder.__version__, "result": result.as_dict()}), flush=True)


def incremental(env: BenchEnv, cold: ImageResult, push: bool) -> None:
    """Add one small package, relock, rebuild with the cache: what was made new. With `push`, both
    images go to the world's registry: what the second push sent, and what the registry already had."""
    registry = os.environ.get("ENVBUILD_TEST_REGISTRY", "") if push else ""
    if registry:
        push_image(cold, registry)
    before = known_layers(cold)  # before the rebuild takes over the tags
    changed = with_added_package(env)
    rebuild = build(changed, env.folder / "incremental", NETWORK)
    new_bytes = sum(size for _, size in new_layers(before, rebuild.image_id))
    print(f"incremental: rebuild_s={rebuild.seconds:.1f} new_bytes={new_bytes} "
          f"new_bytes_ratio={new_bytes / rebuild.size:.4f} big_layers_stable={big_layers_stable(cold, rebuild)}",
          flush=True)
    for layer in rebuild.env_layers:
        print(f"  env layer {layer['group']}: {layer['size'] / 1e6:.1f} MB {layer['digest'][:19]}"
              f"{'' if layer['digest'] in before else ' (new)'}")
    if registry:
        push_image(rebuild, registry)
        print(f"push: first image sent {cold.push_sent_bytes or 0:,} bytes; after the change, sent "
              f"{rebuild.push_sent_bytes or 0:,} bytes, the registry already had {rebuild.push_reused_bytes or 0:,}",
              flush=True)


def _exists(image_id: str) -> bool:
    try:
        docker_client().api.inspect_image(image_id)
        return True
    except Exception:  # noqa: BLE001 - gone: the layers of the result are what is left to compare
        return False


def build_only_bytes(result: ImageResult) -> int:
    """Bytes in the image's layers that its final filesystem deletes: the installer and the plans,
    copied in by `COPY envbuild/layers/<name>/ /` (every whole-root copy after the bootstrap group's)."""
    history = list(reversed(docker_client().api.history(result.image_id)))
    copies = [int(h["Size"]) for h in history if ENV_COPY.search(h.get("CreatedBy", ""))]
    return sum(copies[1:])


def compiler_seconds(clock: StepClock) -> float:
    """The seconds of the compiler RUN, which the image and its baseline share (`apt-get install` of gcc)."""
    return sum(step.seconds for step in clock.steps if COMPILER_STEP.search(step.instruction))


@dataclass(frozen=True)
class Pair:
    cold: float
    baseline: float
    cold_compiler: float
    baseline_compiler: float

    @property
    def ratio(self) -> float:
        return self.cold / self.baseline

    @property
    def env_ratio(self) -> float:
        """The ratio without the shared compiler RUN: what the env's layering costs against one RUN."""
        return (self.cold - self.cold_compiler) / (self.baseline - self.baseline_compiler)


def cold_against_baseline(env, label: str, pairs: int) -> ImageResult:
    """`pairs` cold builds, each beside a one-stage baseline build, which goes first in every other pair (the
    second of a pair finds the page cache and the engine warmer); one line per pair, then the medians in the
    summary line `<label>: cold= baseline= ratio= env_ratio=`. The last cold build is returned."""
    measured: list[Pair] = []
    cold: ImageResult | None = None
    for number in range(pairs):
        baseline_clock, clock = StepClock(), StepClock()
        root = make_context(env.target, env.lock_path, env.folder / f"baseline-{number}").root
        baseline = baseline_seconds(env, root, baseline_clock) if number % 2 == 0 else None
        cold = build(env, env.folder / f"cold-{number}", NO_CACHE, clock=clock)
        if baseline is None:
            baseline = baseline_seconds(env, root, baseline_clock)
        pair = Pair(cold.seconds, baseline, compiler_seconds(clock), compiler_seconds(baseline_clock))
        measured.append(pair)
        print(f"{label}: pair {number + 1}/{pairs}: cold={pair.cold:.1f} baseline={pair.baseline:.1f} "
              f"ratio={pair.ratio:.2f} compiler_run={pair.cold_compiler:.1f}/{pair.baseline_compiler:.1f} "
              f"env_ratio={pair.env_ratio:.2f}", flush=True)
    assert cold is not None
    print(f"{label}: cold build (--no-cache): {cold.seconds:.1f} s, image {cold.size / 1e6:.0f} MB, "
          f"env layers {cold.env_layer_size / 1e6:.0f} MB {cold.env_layer_digest[:19]}")
    print(f"{label}: cold={median(p.cold for p in measured):.1f} baseline={median(p.baseline for p in measured):.1f} "
          f"ratio={median(p.ratio for p in measured):.2f} env_ratio={median(p.env_ratio for p in measured):.2f} "
          f"pairs={pairs}", flush=True)
    print(f"{label}: where the last cold build's time went, per step:")
    print_step_times(label, clock)
    print(f"{label}: and the last one-stage baseline's:")
    print_step_times(f"{label} baseline", baseline_clock)
    return cold


def measure(env, label: str, cold_only: bool = False, pairs: int = 1) -> None:
    """The four measurements of one target, then its summary line `<label>: cold= ...`; with `cold_only` the
    first alone (cold against the baseline)."""
    cold = cold_against_baseline(env, label, pairs)
    if cold_only:
        return
    extra = build_only_bytes(cold)
    print(f"{label}: build-only bytes in layers: {extra} ({100 * extra / cold.size:.2f} % of the image)")
    rebuild = build(env, env.folder / "rebuild", NETWORK, change_outside_env=True)
    print(f"{label}: rebuild after a smoke-suite change: {rebuild.seconds:.1f} s")
    again = build(env, env.folder / "again", NO_CACHE)
    print(f"{label}: second build from scratch: {again.seconds:.1f} s, env layers {again.env_layer_digest[:19]}")
    if again.base_size is None:
        raise SystemExit(f"bench: the engine does not know the runtime base {env.target.runtime_image.reference}")
    installed = installed_env_bytes(again.image_id)  # the tags moved there; earlier builds are gone
    overhead = 100 * (again.size / (installed + again.base_size) - 1)
    print(f"{label}: installed env {installed / 1e6:.0f} MB + base {cold.base_size / 1e6:.0f} MB "
          f"-> image {again.size / 1e6:.0f} MB")
    print(f"{label}: import torch as the image's user: {import_torch_seconds(again.image_id):.2f} s")
    stable = "yes" if again.env_layer_digest == cold.env_layer_digest else "no"
    print(f"{label}: cold={cold.seconds:.1f} rebuild={rebuild.seconds:.1f} "
          f"rebuild_ratio={rebuild.seconds / cold.seconds:.3f} size_overhead={overhead:.2f} "
          f"env_layer_stable={stable}", flush=True)
    # Against a build with the cache, as the upgrade's is: after --no-cache builds the engine holds two
    # compiler layers (apt-get's are not byte-identical), and which one a cached build picks is its own.
    # Before `incremental`, which changes the spec and the lock; the upgraded image holds the tags after.
    upgraded = upgrade(env, build(env, env.folder / "current", NETWORK))
    incremental(env, upgraded, push=label == "image")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.image")
    parser.add_argument("--upgrade-child", nargs=4, metavar=("SPEC", "LOCK", "TARGET", "FOLDER"),
                        help="(the `upgrade:` child) build TARGET (a CUDA version or cpu) of SPEC from LOCK")
    parser.add_argument("--only", choices=("image", "image-cuda"), help="measure this target alone")
    parser.add_argument("--cold-only", action="store_true",
                        help="only the cold build against its one-stage baseline (no rebuild, upgrade, incremental)")
    parser.add_argument("--pairs", type=int, default=1, metavar="N",
                        help="N cold builds, each beside a baseline build, in alternating order; the medians count")
    args = parser.parse_args(argv)
    if args.upgrade_child:
        spec, lock, key, folder = args.upgrade_child
        upgrade_child(Path(spec), Path(lock), key, Path(folder))
        return
    if args.pairs < 1:
        parser.error("--pairs must be 1 or more")
    if args.only != "image-cuda":
        with bench_env("cpu") as env:
            measure(env, "image", args.cold_only, args.pairs)
    if args.only == "image":
        return
    # The real CUDA torch (pip route, about 6 GB): the same targets hold for an image 30x larger.
    fits, why_not = cuda_torch_build_fits()
    if not fits:
        print(f"image-cuda: skipped: {why_not}")
        return
    with bench_env("13.0", CUDA_TORCH_SPEC) as env:
        measure(env, "image-cuda", args.cold_only, args.pairs)


if __name__ == "__main__":
    main()

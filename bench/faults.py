"""`make bench-faults`: the fault catalogue end to end, then kill -9 trials of lock, image and smoke.

    faults: cases=N clean=N tracebacks=0 left_behind=0 lost=0
      data-loss: clean=N/N
      ...          (one line per boundary class of tests/faults/harness.py's BOUNDARIES)
    kill -9 lock: trials=20 old=.. new=.. torn=0 processes_left=0 scratch_left=0
    kill -9 image: trials=N containers_left=0 tags_left=0 folders_left_after_next_run=0
    kill -9 smoke: trials=N containers_left_after_next_run=0
    fuzz: examples=N failures=0 hangs=0

The fuzz part runs tests/unit/shared/test_fuzz.py with ENVBUILD_BENCH_FUZZ examples per target (default 2000:
10,000 in all) and fresh random inputs each time; the unit suite runs the same tests smaller and fixed.

Cases that need the offline world run only inside it (`tests/world/with-world.sh`); without it
they are counted as skipped. ENVBUILD_BENCH_TRIALS sets the lock trials (default 20).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.faults.cases import CASES, lock_world
from tests.faults.harness import (
    BOUNDARIES,
    BUILDER_BASE,
    RUNTIME_BASE,
    Unsupported,
    Workspace,
    processes_with_tmpdir,
    run_case,
)

WORLD = bool(os.environ.get("ENVBUILD_TEST_WORLD"))


def catalogue(root: Path) -> None:
    counts = {"cases": 0, "clean": 0, "tracebacks": 0, "left_behind": 0, "lost": 0}
    skipped, pending, dirty = 0, 0, []
    classes = {boundary: [0, 0] for boundary in BOUNDARIES}  # boundary -> [clean, run]
    for index, case in enumerate(CASES):
        if case.needs != "unit" and not WORLD:
            skipped += 1
            continue
        try:
            outcome = run_case(case, root / f"case-{index}")
        except Unsupported:
            skipped += 1
            continue
        if case.pending and not outcome.clean:
            pending += 1
            continue
        counts["cases"] += 1
        counts["clean"] += outcome.clean
        classes[case.boundary][0] += outcome.clean
        classes[case.boundary][1] += 1
        counts["tracebacks"] += outcome.traceback
        counts["left_behind"] += bool(outcome.left_behind)
        counts["lost"] += bool(outcome.lost)
        if not outcome.clean:
            dirty.append(outcome.report())
    print("faults: " + " ".join(f"{key}={value}" for key, value in counts.items())
          + f" (skipped={skipped} pending={pending})", flush=True)
    for boundary, (clean, run) in classes.items():
        print(f"  {boundary}: clean={clean}/{run}", flush=True)
    for report in dirty:
        print("  " + report[:1500], flush=True)


def _start(args: list[str], ws: Workspace) -> subprocess.Popen:
    env = {**os.environ, "CI": "true", "TMPDIR": str(ws.tmp), "HOME": str(ws.home)}
    return subprocess.Popen([sys.executable, "-m", "builder", *args], cwd=ws.root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_after(process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait()


def lock_trials(root: Path, trials: int) -> None:
    """The lock is always the old one or the new one; no conda-lock or solver process outlives it."""
    ws = Workspace(root / "lock")
    ws.values["env"] = "faults-kill"
    ws.spec(name="faults-kill", file="team.yaml")
    lock_world(ws)
    lockfile = ws.root / "locks" / "cpu" / "conda-lock.yml"
    old = lockfile.read_bytes()
    args = ["lock", "team.yaml", "--channel", ws.values["world_channel"], "--locks", "locks", "--force"]
    done = subprocess.run([sys.executable, "-m", "builder", *args], cwd=ws.root, capture_output=True,
                          env={**os.environ, "CI": "true", "TMPDIR": str(ws.tmp)}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    new = lockfile.read_bytes()
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "builder", *args], cwd=ws.root, capture_output=True,
                   env={**os.environ, "CI": "true", "TMPDIR": str(ws.tmp)}, timeout=300)
    full = time.monotonic() - started
    rng = random.Random(13)
    seen = {"old": 0, "new": 0, "torn": 0}
    processes_left = scratch_left = 0
    for _ in range(trials):
        process = _start(args, ws)
        _kill_after(process, rng.uniform(0.2, 1.5 * full))
        data = lockfile.read_bytes() if lockfile.exists() else b""
        seen["old" if data == old else "new" if data == new else "torn"] += 1
        deadline = time.monotonic() + 3
        while processes_with_tmpdir(ws.tmp) and time.monotonic() < deadline:
            time.sleep(0.1)
        processes_left += len(processes_with_tmpdir(ws.tmp))
    # The next run removes what the killed ones could not.
    subprocess.run([sys.executable, "-m", "builder", *args[:-1]], cwd=ws.root, capture_output=True,
                   env={**os.environ, "CI": "true", "TMPDIR": str(ws.tmp)}, timeout=300)
    scratch_left = len(list(ws.tmp.iterdir()))
    ws.close()
    print(f"kill -9 lock: trials={trials} old={seen['old']} new={seen['new']} torn={seen['torn']} "
          f"processes_left={processes_left} scratch_left_after_next_run={scratch_left} (one lock: {full:.1f} s)",
          flush=True)


def image_trials(root: Path, trials: int) -> None:
    import docker
    from tests.world.offline import remove_env_images

    ws = Workspace(root / "image")
    name = "faults-kill-image"
    ws.values["env"] = name
    ws.spec(name=name, file="team.yaml")
    lock_world(ws)
    args = ["image", "team.yaml", "--cuda", "cpu", "--frozen", "--locks", "locks", "--channel",
            ws.values["world_channel"], "--base-image", RUNTIME_BASE, "--builder-image", BUILDER_BASE,
            "--network", "host", "--no-cache"]
    client = docker.from_env()
    before = {c.id for c in client.containers.list(all=True)}
    for trial in range(trials):
        _kill_after(_start(args, ws), 4 + 3 * trial)
    # The engine notices the closed connection, stops the step and removes its container (rm/forcerm):
    # a few seconds, so a container is counted only when it is still there after 30 s.
    def build_containers() -> list:
        # A build step's container runs one of the Dockerfile's commands, which all work under /opt/envbuild.
        return [c for c in client.containers.list(all=True) if c.id not in before
                and "/opt/envbuild" in str(c.attrs.get("Config", {}).get("Cmd"))]

    deadline = time.monotonic() + 30
    while (containers := build_containers()) and time.monotonic() < deadline:
        time.sleep(1)
    tags = [t for image in client.images.list() for t in image.tags if name in t]
    folders = [p for p in ws.tmp.iterdir() if p.name.startswith("envbuild-context")]
    # The next run (refused at once by --frozen on a missing target) removes stale context folders.
    refused = [arg if arg != "locks" else "no-locks" for arg in args]
    subprocess.run([sys.executable, "-m", "builder", *refused], cwd=ws.root, capture_output=True,
                   env={**os.environ, "CI": "true", "TMPDIR": str(ws.tmp)}, timeout=300)
    folders_after = [p for p in ws.tmp.iterdir() if p.name.startswith("envbuild-context")]
    remove_env_images(name)
    client.close()
    ws.close()
    print(f"kill -9 image: trials={trials} new_containers={len(containers)} tags_left={len(tags)} "
          f"context_folders_left={len(folders)} after_next_run={len(folders_after)}", flush=True)


def smoke_trials(root: Path, trials: int) -> None:
    import docker

    ws = Workspace(root / "smoke")
    image = os.environ.get("ENVBUILD_TEST_BUSYBOX_IMAGE", "local/busybox:static")
    client = docker.from_env()
    labelled = {"label": "io.envbuild.run=smoke"}
    for _ in range(trials):
        process = _start(["smoke", image], ws)
        _kill_after(process, 1.5)
    left = [c for c in client.api.containers(all=True, filters=labelled)
            if c["Labels"].get("io.envbuild.owner", "").startswith(f"{os.uname().nodename}:")]
    done = subprocess.run([sys.executable, "-m", "builder", "smoke", image], cwd=ws.root, capture_output=True,
                          env={**os.environ, "CI": "true", "TMPDIR": str(ws.tmp)}, timeout=300)
    dead_owner_left = [c for c in client.api.containers(all=True, filters=labelled)
                       if c["Labels"].get("io.envbuild.owner", "").startswith(f"{os.uname().nodename}:")]
    client.close()
    ws.close()
    print(f"kill -9 smoke: trials={trials} containers_left={len(left)} "
          f"after_next_run={len(dead_owner_left)} (next run exit {done.returncode})", flush=True)


def fuzz(per_test: int) -> None:
    """The fuzz tests, deeper: examples run (hypothesis's statistics), tests failed, tests stopped by their timeout."""
    import re

    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                           "--hypothesis-show-statistics", "tests/unit/shared/test_fuzz.py"],
                          env={**os.environ, "FUZZ_EXAMPLES": str(per_test)}, capture_output=True, text=True,
                          timeout=7200)
    examples = sum(int(n) for n in re.findall(r"- (\d+) passing", done.stdout))
    failures = len(re.findall(r"^FAILED ", done.stdout, re.MULTILINE))
    hangs = done.stdout.count("Timeout (>")
    print(f"fuzz: examples={examples} failures={failures} hangs={hangs}", flush=True)
    if done.returncode != 0:
        print("  " + done.stdout[-3000:], flush=True)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-faults-") as folder:
        root = Path(folder)
        only = os.environ.get("ENVBUILD_BENCH_ONLY", "")  # e.g. "lock,image": only those parts
        if not only or "catalogue" in only.split(","):
            catalogue(root / "catalogue")
        if not only or "fuzz" in only.split(","):
            fuzz(int(os.environ.get("ENVBUILD_BENCH_FUZZ", "2000")))
        if not WORLD:
            print("kill -9 trials: skipped (run inside the offline world: make bench-faults)")
            return
        if not only or "lock" in only.split(","):
            lock_trials(root, int(os.environ.get("ENVBUILD_BENCH_TRIALS", "20")))
        if not only or "smoke" in only.split(","):
            smoke_trials(root, 3)
        if not only or "image" in only.split(","):
            image_trials(root, 3)


if __name__ == "__main__":
    main()

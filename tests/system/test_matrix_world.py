"""envbuild matrix on the offline world: lock check, image and smoke per target, one table, JUnit.

The CPU target's image runs the real torch, so its torch checks pass; the spec pins torchvision, which the world
has for its CPU torch only as a payload-free stand-in, so that row fails on exactly the torchvision checks
(tests/system/test_smoke_container.py). The CUDA 12.9 image holds payload-free stand-ins (no torch module), so
its smoke suite fails at `import torch`. The matrix must report each row's own failure, keep going, and exit 1.
A target whose lock is missing under --frozen fails at the lock stage without building.
"""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest

from tests.envbuild_cli import envbuild
from tests.system.test_smoke_container import PINNED_BUT_ABSENT

pytestmark = [pytest.mark.docker, pytest.mark.world, pytest.mark.torch]


def matrix_args(world_env, *extra: str) -> list[str]:
    image_args = world_env.image_args()
    return ["matrix", *image_args[1:-1], *extra]  # image_args: ["image", spec, ..., "--json"]


def test_matrix_reports_every_target_and_fails_when_one_fails(built, world_env, tmp_path) -> None:
    junit = tmp_path / "matrix.xml"
    done = envbuild(*matrix_args(world_env, "--cuda", "cpu", "--cuda", "12.9", "--junit", str(junit), "--json"))
    assert done.returncode == 1, done.stderr[-3000:]
    rows = {row["target"]: row for row in json.loads(done.stdout)["targets"]}
    cpu, cuda = rows["cpu"], rows["cuda12.9"]
    assert cpu["lock"] == "fresh" and cpu["summary"]["passed"] >= 10
    assert {c["name"] for c in cpu["checks"] if c["status"] == "failed"} == PINNED_BUT_ABSENT
    assert cpu["image"] == f"{world_env.name}:2.13.0-cpu" and cpu["image_size"] > 0
    assert not cuda["ok"] and cuda["stage"] == "done" and cuda["result"] == "1 smoke check(s) failed"
    failed = [c for c in cuda["checks"] if c["status"] == "failed"]
    assert [c["name"] for c in failed] == ["env.import_torch"] and "No module named 'torch'" in failed[0]["reason"]
    suite = ElementTree.parse(junit).getroot()
    names = {case.get("name") for case in suite.iter("testcase")}
    assert {"cpu.lock", "cpu.image", "cpu.amp.cpu_bf16", "cuda12.9.image", "cuda12.9.env.import_torch"} <= names
    assert int(suite.get("failures")) == 1 + len(PINNED_BUT_ABSENT)
    # Each stage's case carries the time it took, as measured (JUnit readers show and sum them).
    times = {case.get("name"): float(case.get("time")) for case in suite.iter("testcase")}
    assert times["cpu.image"] > 0 and times["cpu.image"] == pytest.approx(cpu["stage_seconds"]["image"], abs=0.001)
    assert times["cpu.lock"] == pytest.approx(cpu["stage_seconds"]["lock"], abs=0.001)


def test_frozen_matrix_fails_a_target_without_a_lock_at_the_lock_stage(world_env, tmp_path) -> None:
    args = matrix_args(world_env, "--cuda", "cpu", "--frozen", "--json")
    args[args.index(str(world_env.locks))] = str(tmp_path / "no-locks")
    done = envbuild(*args)
    assert done.returncode == 1
    row = json.loads(done.stdout)["targets"][0]
    assert row["stage"] == "lock" and row["lock"] == "missing" and row["image"] == ""
    assert "the lock is missing" in row["error"]


def test_human_table_names_each_target_and_its_result(built, world_env) -> None:
    done = envbuild(*matrix_args(world_env, "--cuda", "cpu"))
    assert done.returncode == 1, done.stderr[-3000:]
    assert "matrix on this host" in done.stdout
    [row] = [line for line in done.stdout.splitlines() if f"{world_env.name}:2.13.0-cpu" in line]
    assert row.split()[1:4] == ["cpu", "│", "2.13.0"], row
    # the result cell may wrap, so its words are looked for, not the phrase
    assert all(word in done.stdout for word in (str(len(PINNED_BUT_ABSENT)), "check(s)", "failed")), done.stdout


def test_bad_container_options_fail_before_anything_is_built(world_env) -> None:
    for option in (["--gpus", "some"], ["--ulimit", "memlock=unlimited"], ["--shm-size", "lots"]):
        done = envbuild(*matrix_args(world_env, "--cuda", "cpu", *option))
        assert done.returncode == 2, done.stderr
        assert [line for line in done.stderr.splitlines() if line.startswith("Error:")] == \
            [done.stderr.strip().splitlines()[-1]] and option[0] in done.stderr
        assert "Step 1/" not in done.stderr

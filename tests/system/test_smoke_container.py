"""envbuild smoke IMAGE: the in-image suite run in a real container of an image envbuild built.

The CPU image (tests/conftest.py `built`) has the real python and CPU torch, so the CPU checks run
for real inside it; the engine here has no NVIDIA runtime, which is how the GPU request paths are
exercised.
"""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest

import docker
from tests.envbuild_cli import envbuild
from tests.system.outside_run import run_outside_check

pytestmark = [pytest.mark.docker, pytest.mark.world, pytest.mark.torch]

CPU_CHECKS_THAT_RUN = {
    "env.import_torch", "env.torch_version", "env.cuda_build", "visibility.to_semantics",
    "dp.passthrough", "amp.cpu_bf16", "checkpoint.cpu_map_location",
    "checkpoint.dataparallel_prefix", "dataloader.fork", "dataloader.spawn",
    "ddp.allreduce_step", "container.shm", "container.limits",
    "compile.inductor",  # the image's own gcc/g++ layer (docker/blocks/compiler.j2)
}
# The spec pins torchvision 0.28.0, which the world has only as a payload-free stand-in (tests/world/CHANNEL.md):
# the image is built to hold it, so the suite fails on it by name instead of skipping "not installed".
PINNED_BUT_ABSENT = {"env.expected_packages", "torchvision.version", "torchvision.cuda_build", "torchvision.ops",
                     "torchvision.resnet18_amp"}


@pytest.fixture(scope="module")
def cpu_image(built, world_env) -> str:
    return f"{world_env.name}:2.13.0-cpu"


@pytest.fixture(scope="module")
def containers_before() -> set[str]:
    client = docker.from_env()
    ids = {c.id for c in client.containers.list(all=True)}
    client.close()
    return ids


@pytest.fixture(scope="module")
def cpu_report(cpu_image, containers_before, tmp_path_factory) -> tuple[dict, str]:
    junit = tmp_path_factory.mktemp("smoke") / "smoke.xml"
    done = envbuild("smoke", cpu_image, "--json", "--junit", str(junit))
    assert done.returncode == 1, done.stderr[-3000:] + done.stdout[-3000:]
    return json.loads(done.stdout), junit.read_text()


def test_cpu_checks_pass_inside_the_image_and_gpu_checks_skip_with_reasons(cpu_report) -> None:
    report, _ = cpu_report
    by_name = {check["name"]: check for check in report["checks"]}
    passed = {name for name, check in by_name.items() if check["status"] == "passed"}
    assert passed == CPU_CHECKS_THAT_RUN
    failed = {name for name, check in by_name.items() if check["status"] == "failed"}
    assert failed == PINNED_BUT_ABSENT
    assert all("torchvision 0.28.0" in by_name[name]["reason"] for name in failed)
    for check in by_name.values():
        if check["status"] == "skipped":
            assert check["reason"], check
    # The expectations come from the image's labels: torch 2.13.0, a CPU build.
    assert "2.13.0" in by_name["env.torch_version"]["reason"]
    assert "cpu" in by_name["env.cuda_build"]["reason"]


def test_junit_counts_match_the_report(cpu_report) -> None:
    report, junit = cpu_report
    suite = ElementTree.fromstring(junit)
    assert int(suite.get("tests")) == len(report["checks"])
    assert int(suite.get("failures")) == len(PINNED_BUT_ABSENT)
    assert int(suite.get("skipped")) == report["summary"]["skipped"]


def test_no_container_is_left_behind(cpu_report, containers_before) -> None:
    client = docker.from_env()
    assert {c.id for c in client.containers.list(all=True)} == containers_before
    client.close()


def test_the_image_carries_its_compiler_and_says_so(cpu_image) -> None:
    client = docker.from_env()
    try:
        labels = client.images.get(cpu_image).labels
        version = client.containers.run(cpu_image, ["g++", "--version"], remove=True).decode()
    finally:
        client.close()
    assert labels["io.envbuild.compile"] == "gcc"
    assert version.startswith("g++")


def test_the_outside_check_passes_inside_the_image_but_for_the_absent_torchvision(cpu_image) -> None:
    # PyTorch's release smoke test's operations on CPU (tests/system/outside_check.py), not envbuild's suite
    status, results = run_outside_check(cpu_image)
    failed = {name: result["detail"] for name, result in results.items() if not result["ok"]}
    assert status == 1
    assert set(results) == {"conv2d", "linalg.svd", "numpy", "compile.float16", "compile.float32", "compile.float64",
                            "vectorised_isa", "max_autotune", "torchvision.nms"}
    assert failed == {"torchvision.nms": "ModuleNotFoundError: No module named 'torchvision'"}


def test_gpus_without_nvidia_runtime_fall_back_to_cpu_with_a_note(cpu_image) -> None:
    done = envbuild("smoke", cpu_image, "--gpus", "all", "--only", "env.import_torch,env.cuda_build", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["notes"] == ["no NVIDIA container runtime on this engine: ran the CPU checks only"]
    assert report["summary"]["passed"] == 2


def test_required_gpus_without_nvidia_runtime_fail_in_one_line(cpu_image, containers_before) -> None:
    done = envbuild("smoke", cpu_image, "--gpus", "all", "--require-gpus", "1")
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "GPU(s) required but this engine has no NVIDIA runtime" in errors[0]
    client = docker.from_env()
    assert {c.id for c in client.containers.list(all=True)} == containers_before
    client.close()


def test_required_gpus_without_gpus_for_the_container_is_one_usage_line(cpu_image) -> None:
    # The suite would fail every GPU check for the wrong reason: the container simply got no GPUs.
    done = envbuild("smoke", cpu_image, "--require-gpus", "1", "--only", "env.cuda_available", "--json")
    assert done.returncode == 2 and done.stdout == ""
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "--gpus all" in errors[0]


def test_wrong_expected_cuda_fails_the_environment_check(cpu_image) -> None:
    done = envbuild("smoke", cpu_image, "--expect-cuda", "12.9", "--only", "env.cuda_build", "--json")
    assert done.returncode == 1
    check = json.loads(done.stdout)["checks"][0]
    assert check["name"] == "env.cuda_build" and check["status"] == "failed"


def test_refused_ulimit_is_one_clear_line(cpu_image) -> None:
    done = envbuild("smoke", cpu_image, "--ulimit", "memlock=-1", "--only", "env.import_torch")
    # Some hosts refuse memlock=-1 at start (this one does); others accept it and the suite runs.
    if done.returncode == 0:
        pytest.skip("this engine accepts memlock=-1")
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "ulimit" in errors[0]


def test_missing_image_is_one_clear_line() -> None:
    done = envbuild("smoke", "envbuild-test-missing:nothing")
    assert done.returncode == 1
    assert "build it with `envbuild image`" in done.stderr

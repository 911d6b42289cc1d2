"""The smoke runner's container options: checked once, before any image is built or container made."""

from __future__ import annotations

import pytest

from builder.errors import UsageError
from builder.image.build import remote_reference
from builder.image.smoke_run import GpuRequest, container_options

pytestmark = pytest.mark.unit


def test_options_as_given_on_the_command_line() -> None:
    options = container_options("2", "2g", ("stack=67108864", "memlock=-1:-1", "nofile=1024:4096"))
    assert options.gpus == GpuRequest(2)
    assert options.shm_size == "2g"
    assert options.ulimits == (("stack", 67108864, 67108864), ("memlock", -1, -1), ("nofile", 1024, 4096))
    assert container_options("all").gpus == GpuRequest(-1)
    assert container_options(None).gpus == GpuRequest(None)


@pytest.mark.parametrize(("gpus", "shm", "ulimits", "flag"), [
    ("some", "1g", (), "--gpus"),
    ("auto:x", "1g", (), "--gpus"),
    (None, "lots", (), "--shm-size"),
    (None, "1g", ("memlock=unlimited",), "--ulimit"),
    (None, "1g", ("=5",), "--ulimit"),
    (None, "1g", ("stack",), "--ulimit"),
])
def test_bad_options_are_one_usage_line(gpus, shm, ulimits, flag) -> None:
    with pytest.raises(UsageError) as caught:
        container_options(gpus, shm, ulimits)
    assert caught.value.message.startswith(flag) and "\n" not in caught.value.message


def test_push_and_pull_name_an_image_the_same_way() -> None:
    assert remote_reference("127.0.0.1:5000/team/", "pytorch:2.13.0-cuda12.9") == \
        ("127.0.0.1:5000/team/pytorch", "2.13.0-cuda12.9")


def test_the_host_reads_the_suites_own_report_model() -> None:
    from builder.errors import EnvbuildError
    from builder.image.smoke_run import SmokeRun
    from smoke.report import CheckResult, SmokeReport

    written = SmokeReport([CheckResult("env.import_torch", "passed", "torch 2.13.0 imports", 2.5),
                           CheckResult("gpu.matmul_per_device", "skipped", "needs 1 CUDA device(s), 0 visible")])
    run = SmokeRun.from_json(written.to_dict(), ["ran the CPU checks only"], 12.34)
    assert run.report == written
    assert (run.summary, run.failed, run.summary_line()) == (
        {"passed": 1, "failed": 0, "skipped": 1}, 0, "1 passed, 0 failed, 1 skipped")
    assert run.table_rows()[0] == ["env.import_torch", "passed", "2.5", "torch 2.13.0 imports"]
    assert run.as_dict()["notes"] == ["ran the CPU checks only"] and run.as_dict()["seconds"] == 12.3
    tampered = {**written.to_dict(), "summary": {"passed": 2, "failed": 0, "skipped": 0}}
    with pytest.raises(EnvbuildError, match="cannot read"):
        SmokeRun.from_json(tampered, [], 0.0)

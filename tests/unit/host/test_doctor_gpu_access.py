"""doctor's "GPU access" line: which path GPUs take into this host's containers and why, in the host
table, among the findings (a fix where one is needed) and in --json."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from builder.gpu_access import engine_gpu_access
from builder.host.doctor import OK, WARNING, diagnose
from tests.paths import FIXTURES
from tests.unit.host.doctor_helpers import A100_PAIR, ENGINE_UP, checked, host

pytestmark = pytest.mark.unit

CASES = {case["name"]: case for case in
         yaml.safe_load((FIXTURES / "engine-info" / "gpu_access_cases.yaml").read_text())["cases"]}


def _report(case: str):
    answers = CASES[case]
    engine = dataclasses.replace(ENGINE_UP, gpu_access=engine_gpu_access(answers["version"], answers["info"], False))
    return checked(diagnose(host("570.133.20", (12, 8), A100_PAIR, engine=engine)))


def test_a_cdi_host_says_cdi_and_lists_the_devices() -> None:
    report = _report("docker-28-default-with-nvidia-spec")
    [line] = [f for f in report.findings if f.subject == "GPU access"]
    assert line.level == OK and line.message.startswith("CDI:") and "nvidia.com/gpu=all" in line.message
    assert ["GPU access", line.message] in report.host_rows()
    carried = json.loads(json.dumps(report.as_dict()))["host"]["engine"]["gpu_access"]
    assert carried["path"] == "cdi" and "nvidia.com/gpu=all" in carried["devices"]


def test_an_engine_without_cdi_takes_the_gpus_path_and_says_why() -> None:
    report = _report("docker-20.10-here")
    [line] = [f for f in report.findings if f.subject == "GPU access"]
    assert "--gpus path through the NVIDIA runtime hook" in line.message and "20.10" in line.message
    assert json.loads(json.dumps(report.as_dict()))["host"]["engine"]["gpu_access"]["path"] == "gpu-capability"
    assert not [p for p in report.problems() if p.rule == "doctor.gpu-access"]


def test_cdi_without_an_nvidia_spec_is_a_problem_with_the_command_that_writes_one() -> None:
    report = _report("docker-28-default-no-spec-yet")
    [problem] = [p for p in report.problem_rows() if p[1] == "GPU access"]
    assert problem[0] == WARNING and "nvidia-ctk cdi generate --output=" in problem[3]


def test_no_engine_no_gpu_access_line() -> None:
    report = checked(diagnose(host(None, None, engine=dataclasses.replace(ENGINE_UP, reachable=False))))
    assert not [f for f in report.findings if f.subject == "GPU access"]
    assert ["GPU access", "unknown (no engine answered)"] in report.host_rows()

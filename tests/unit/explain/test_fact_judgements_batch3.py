"""Facts, families and judgements added from the blind corpus' batch-3 dev logs (issue 31): each rests on what
the log states (a board or a wheel alone on its line, a libcuda file name, the package pip was installing, a
cuInit result, a rank waiting for the root's NCCL id) and the fix answers those facts."""

from __future__ import annotations

import pytest

from bench.answers import cause_of
from builder.explain.report import ExplainReport, explain_text

pytestmark = pytest.mark.unit


def _report(log: str) -> ExplainReport:
    return explain_text(log.encode(), "log")


def _first(log: str) -> tuple[str, str, str]:
    report = _report(log)
    assert report.findings, report
    finding = report.findings[0]
    return finding.rule, cause_of(report), finding.fix or ""


def test_an_environment_lists_board_and_wheel_are_facts() -> None:
    facts = _report("Other\n\n- NVIDIA GeForce GTX 1080 Ti\n- Windows 10\n- 2.8.0+cu128\n").facts
    assert facts.get("gpu") == "NVIDIA GeForce GTX 1080 Ti" and facts.get("sm") == "sm_61"
    assert facts.get("torch") == "2.8.0+cu128" and facts.get("torch_cuda") == "12.8"


def test_a_torchvision_version_alone_on_its_line_is_not_torch() -> None:
    assert _report("- 0.23.0+cu128\n").facts.get("torch") is None


def test_a_gpu_line_inside_json_drops_the_quote_and_comma() -> None:
    facts = _report('"nvidia_gpu_models": "GPU 0: NVIDIA GeForce RTX 5060 Ti",\n').facts
    assert facts.get("gpu") == "NVIDIA GeForce RTX 5060 Ti" and facts.get("sm") == "sm_120"


def test_the_driver_is_read_from_a_libcuda_file_name() -> None:
    assert _report("Unable to load /usr/lib64/libcuda.so.550.54.15: nope\n").facts.get("driver") == "550.54.15"


@pytest.mark.parametrize(("log", "package"), [
    ("  Building wheel for flash-attn (setup.py) ... error\n", "flash-attn"),
    ("Failed to build mpi4py\nERROR: Could not build wheels for mpi4py\n", "mpi4py"),
    ("$ pip install -U --index-url https://example.invalid/simple mmcv==2.1.0\n", "mmcv"),
])
def test_the_package_pip_was_installing_is_a_fact(log: str, package: str) -> None:
    assert _report(log).facts.get("installing") == package


def test_cuinit_3_from_ollama_names_the_code_and_hmm() -> None:
    rule, cause, fix = _first('msg="Unable to load cudart library /usr/lib/x86_64-linux-gnu/libcuda.so.575.57.08: '
                              'cuda driver library init failure: 3"\n')
    assert rule == "explain.cuda.driver-init-failed"
    assert "CUDA_ERROR_NOT_INITIALIZED" in cause and "575.57.08 (line 1)" in cause
    assert "uvm_disable_hmm=1" in fix


def test_a_cuinit_code_without_a_known_cause_keeps_the_familys_fix() -> None:
    rule, cause, fix = _first("cuInit err: 46\n")
    assert rule == "explain.cuda.driver-init-failed" and "returned 46" in cause
    assert "nvidia-smi" in fix and "uvm_disable_hmm" not in fix


def test_a_rank_waiting_for_the_roots_nccl_id_points_at_the_root_and_the_network() -> None:
    rule, cause, fix = _first("torch.distributed.DistBackendError: [4] is setting up NCCL communicator and retrieving "
                              "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got "
                              "error: Socket Timeout\n")
    assert rule == "explain.distributed.nccl-id-store"
    assert "rank 4" in cause and "rank 0's ncclUniqueId" in cause and "Socket Timeout" in cause
    assert "rank 0's own log" in fix and "NCCL_SOCKET_IFNAME" in fix

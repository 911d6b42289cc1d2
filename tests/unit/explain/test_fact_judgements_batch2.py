"""Judgements and matchers added from the blind corpus' batch-2 dev logs (issue 31): each rests on a fact the
log states (a library's folder, pip's offered versions, the interpreter, a second nvcc) and the fix answers it."""

from __future__ import annotations

import pytest

from bench.answers import cause_of
from builder.explain.report import explain_text

pytestmark = pytest.mark.unit


def _first(log: str) -> tuple[str, str, str]:
    report = explain_text(log.encode(), "log")
    assert report.findings, report
    finding = report.findings[0]
    return finding.rule, cause_of(report), finding.fix or ""


def test_an_undefined_symbol_in_torchs_own_library_is_a_stale_torch() -> None:
    rule, cause, fix = _first(
        "    from torch._C import *\nImportError: /opt/venv/lib/python3.9/site-packages/torch/lib/libtorch_cpu.so: "
        "undefined symbol: _ZN3c1017RegisterOperatorsD1Ev\n")
    assert rule == "explain.loader.undefined-symbol"
    assert "undefined symbol _ZN3c1017RegisterOperatorsD1Ev" in cause and "torch's own" in cause
    assert "pip uninstall torch" in fix and "setup.py clean" in fix


def test_an_extensions_undefined_symbol_is_named_in_the_cause() -> None:
    _, cause, fix = _first("ImportError: /srv/env/lib/python3.11/site-packages/foo/_C.so: undefined symbol: "
                           "_ZN3c104cuda9SetDeviceEi\n")
    assert cause.startswith("undefined symbol _ZN3c104cuda9SetDeviceEi")
    assert "torch" in fix and "setup.py clean" not in fix


def test_a_message_retyped_without_the_space_before_its_bracket_still_matches() -> None:
    rule, _, fix = _first('AssertionError: The NVIDIA driver on your system is too old(found version 10010).\n')
    assert rule == "explain.cuda.driver-too-old" and "driver" in fix


def test_vllms_nccl_wrapper_error_is_nccl_invalid_usage() -> None:
    rule, cause, fix = _first("[rank0]:   File \"pynccl_wrapper.py\", line 223, in NCCL_CHECK\n"
                              "[rank0]: RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)\n")
    assert rule == "explain.nccl.error"
    assert "ncclInvalidUsage" in cause
    assert "libnccl" in fix and "driver" in fix


def test_only_placeholder_versions_on_offer_means_no_wheel_fits_the_interpreter() -> None:
    _, cause, fix = _first("ERROR: Could not find a version that satisfies the requirement torch==2.1.0 (from "
                           "versions: 0.1.2, 0.1.2.post1, 0.1.2.post2)\nERROR: No matching distribution found for "
                           "torch==2.1.0\n")
    assert "placeholder" in cause and "(line 1)" in cause
    assert "64-bit" in fix and "Python 3.8 to 3.11" in fix  # torch 2.1's Pythons, from compat.yaml


def test_no_versions_for_a_new_python_names_the_releases_that_have_its_wheels() -> None:
    _, cause, fix = _first("Python 3.13.0\n$ pip install torch\nERROR: Could not find a version that satisfies the "
                           "requirement torch (from versions: none)\n")
    assert "3.13.0 (line 1)" in cause and "only from 2.5 on" in cause
    assert "torch>=2.5" in fix and "Python 3.12" in fix


def test_no_versions_for_a_python_every_release_supports_is_left_to_the_index() -> None:
    _, cause, _ = _first("Python 3.10.4\nERROR: Could not find a version that satisfies the requirement torch "
                         "(from versions: none)\n")
    assert "only from" not in cause


def test_a_second_nvcc_in_the_log_pairs_torch_with_the_toolkit_the_user_has() -> None:
    _, cause, fix = _first(
        "      RuntimeError:\n      The detected CUDA version (12.2) mismatches the version that was used to compile\n"
        "      PyTorch (11.7). Please make sure to use the same CUDA versions.\n$ nvcc -V\n"
        "Cuda compilation tools, release 12.1, V12.1.105\n")
    assert "nvcc --version shows CUDA 12.1 (line 5)" in cause
    assert "whl/cu121" in fix and "CUDA_HOME" in fix


def test_a_second_nvcc_of_an_unpublished_cuda_keeps_the_toolkit_answer() -> None:
    _, _, fix = _first(
        "The detected CUDA version (12.2) mismatches the version that was used to compile PyTorch (11.8).\n"
        "Cuda compilation tools, release 12.0, V12.0.76\n")
    assert "CUDA 11.8 toolkit" in fix and "published no build for CUDA 12.0" in fix


def test_a_conda_plan_with_cpu_builds_when_cuda_was_asked_for_points_at_cpuonly() -> None:
    rule, cause, fix = _first("conda install pytorch torchvision cudatoolkit=11.3 -c pytorch\n\nThe following NEW "
                              "packages will be INSTALLED:\n\n    pytorch            pytorch/linux-64::pytorch-1.10.0-"
                              "py3.9_cpu_0\n    torchvision        pytorch/linux-64::torchvision-0.11.1-py39_cpu\n")
    assert rule == "explain.conda.cpu-build-planned"
    assert "1.10.0" in cause and "py3.9_cpu" in cause
    assert "cpuonly" in fix and "pytorch=*=*cuda*" in fix


def test_a_cpu_plan_when_no_cuda_was_asked_for_is_no_finding() -> None:
    report = explain_text(b"The following NEW packages will be INSTALLED:\n  pytorch  pytorch/linux-64::pytorch-"
                          b"1.10.0-py3.9_cpu_0\n", "log")
    assert all(finding.rule != "explain.conda.cpu-build-planned" for finding in report.findings)


def test_bfloat16_on_a_gpu_below_capability_8_runs_in_float16() -> None:
    rule, cause, fix = _first("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
                              "8.0. Your Tesla V100-SXM2-32GB GPU has compute capability 7.0.\n")
    assert rule == "explain.gpu.bfloat16-unsupported"
    assert "Tesla V100-SXM2-32GB" in cause and "7.0" in cause and "8.0" in cause
    assert "--dtype half" in fix and "driver" not in fix


def test_a_failed_nvcc_command_of_a_build_offers_the_prebuilt_wheel() -> None:
    rule, cause, fix = _first("error: command '/usr/local/cuda/bin/nvcc' failed with exit code 2\n")
    assert rule == "explain.build.compiler-failed"
    assert "nvcc" in cause and "exit code 2" in cause
    assert "prebuilt wheel" in fix


def test_a_failed_host_compiler_keeps_the_general_answer() -> None:
    rule, _, fix = _first("error: command 'gcc' failed with exit code 1\n")
    assert rule == "explain.build.compiler-failed"
    assert fix.startswith("read the compiler's first `error`")

"""Triton's own messages (triton-lang/triton: third_party/nvidia/backend/driver.py libcuda_dirs, runtime/build.py
_build, backend/compiler.py make_cubin), each a family with its cause and fix, recorded with its upstream file."""

from __future__ import annotations

import pytest

from bench.answers import cause_of
from builder.explain.families import load_rules
from builder.explain.report import explain_text

pytestmark = pytest.mark.unit

TRITON_FAMILIES = ("explain.triton.libcuda-not-found", "explain.triton.no-c-compiler",
                   "explain.triton.ptxas-unknown-arch", "explain.triton.ptxas-failed")


def _first(log: str) -> tuple[str, str, str]:
    report = explain_text(log.encode(), "log")
    assert report.findings, report
    return report.findings[0].rule, cause_of(report), report.findings[0].fix or ""


def test_each_family_is_recorded_with_its_upstream_file_and_version() -> None:
    families = {family.id: family for family in load_rules()}
    for family_id in TRITON_FAMILIES:
        source = families[family_id].source
        assert source["project"].startswith("Triton") and "driver.py" in source["file"] and source["version"]


def test_libcuda_listed_but_not_where_triton_checks_asks_for_the_link_or_the_path() -> None:
    log = ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\nAssertionError: libcuda.so cannot "
           "found!\nPossible files are located at ['/usr/lib/x86_64-linux-gnu/libcuda.so.1'].Please create a symlink of "
           "libcuda.so to any of the file.\n")
    rule, cause, fix = _first(log)
    assert rule == "explain.triton.libcuda-not-found"  # before inductor's general backend failure
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in cause and "unversioned libcuda.so" in cause
    assert "ln -s libcuda.so.1" in fix and "TRITON_LIBCUDA_PATH" in fix


def test_libcuda_not_listed_at_all_asks_for_the_linker_cache() -> None:
    log = ('AssertionError: libcuda.so cannot found!\nPlease make sure GPU is set up and then run "/sbin/ldconfig" '
           "(requires sudo) to refresh the linker cache.\n")
    rule, cause, fix = _first(log)
    assert rule == "explain.triton.libcuda-not-found" and "linker cache" in cause
    assert "ldconfig" in fix and "TRITON_LIBCUDA_PATH" in fix and "ln -s" not in fix


@pytest.mark.parametrize("tail", [".", " or set triton.knobs.build.impl."])
def test_no_c_compiler_in_both_wordings(tail: str) -> None:
    rule, _, fix = _first(f"RuntimeError: Failed to find C compiler. Please specify via CC environment variable{tail}\n")
    assert rule == "explain.triton.no-c-compiler" and "build-essential" in fix and "CC=" in fix


def test_an_unknown_gpu_name_comes_before_the_ptxas_failure_and_names_the_arch() -> None:
    log = ("triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n`ptxas` stderr:\n"
           "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'\n")
    rule, cause, fix = _first(log)
    assert rule == "explain.triton.ptxas-unknown-arch" and "sm_120a" in cause
    assert "TRITON_PTXAS_PATH" in fix and "sm_120a" in fix


def test_a_bf16_kernel_on_an_older_gpu_is_the_dtype_not_the_install() -> None:
    log = ("RuntimeError: Internal Triton PTX codegen error:\nptxas /tmp/x.ptx, line 147; error   : Feature '.bf16' "
           "requires .target sm_80 or higher\n")
    rule, cause, fix = _first(log)
    assert rule == "explain.triton.ptxas-failed" and ".bf16" in cause and "sm_80" in cause
    assert "float16" in fix and "TRITON_PTXAS_PATH" not in fix


def test_the_symlink_line_pasted_alone_is_the_same_message() -> None:
    rule, cause, fix = _first("Possible files are located at ['/lib64/libcuda.so.1'].Please create a symlink of "
                              "libcuda.so to any of the files.\n")
    assert rule == "explain.triton.libcuda-not-found" and "/lib64/libcuda.so.1" in cause and "ln -s" in fix

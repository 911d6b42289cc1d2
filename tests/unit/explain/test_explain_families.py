"""`envbuild explain` as data: every message family from its source, the error-code tables it resolves,
the facts it reads, the verdicts it makes with them, and input of any size, encoding or kind.

The one-line examples (explain_examples.py) are messages as their sources print them (the template's text
with the variable parts filled in), one per family: each must name its family first. The real logs behind the
families are in tests/corpus (error-logs: unit tests; realworld-logs: `make bench-realworld`)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.explain import log_input as bounded_input
from builder.explain.error_codes import load_code_tables
from builder.explain.facts import extract_facts
from builder.explain.families import load_explain_data, load_rules
from builder.explain.log_input import decode_log, read_log
from builder.explain.log_text import LogText
from builder.explain.machine import Machine, driver_runs, trusted_driver_cuda
from builder.explain.report import catalogue, explain_text, rule_registry
from builder.specs.compat import load_compat
from builder.specs.cuda import CudaVersion
from smoke.driver import DriverReading
from tests.unit.explain.explain_examples import EXAMPLES

pytestmark = pytest.mark.unit


def first(text: str, **context):
    report = explain_text(text, **context)
    assert report.findings, f"nothing recognised in {text!r}"
    return report.findings[0]


def test_every_family_has_an_example():
    assert set(EXAMPLES) == set(rule_registry().ids())


@pytest.mark.parametrize("family", sorted(EXAMPLES))
def test_each_family_names_itself_on_its_sources_message(family: str):
    finding = first(EXAMPLES[family])
    assert finding.rule == family
    assert "?" not in finding.message.replace("(?", "").split("`")[0], finding.message
    assert finding.fix and "\n" not in finding.fix


def test_every_family_says_where_its_message_is_made():
    data = load_explain_data()
    for family in load_rules():
        source = family.source
        assert source["project"] and source["file"] and source["version"], family.id
        assert family.templates or any(code.family == family.id for table in load_code_tables().values()
                                       for code in table.codes), family.id
    rows = catalogue()["families"]
    assert [row["id"] for row in rows] == [family.id for family in load_rules()]
    assert {row["source"]["id"] for row in rows} <= set(data.sources)


def test_code_tables_are_complete_and_point_at_families():
    tables = load_code_tables()
    cuda = tables["cudaError_t"]
    assert len(cuda.codes) >= 130 and cuda.source["file"].startswith("include/driver_types.h")
    assert {code.code for code in cuda.codes} >= {0, 2, 35, 46, 100, 101, 209, 222, 700, 710, 802, 803, 804, 999}
    assert len({code.code for code in cuda.codes}) == len(cuda.codes)
    assert len(tables["nvmlReturn_t"].codes) >= 30 and len(tables["ncclResult_t"].codes) == 9
    families = set(rule_registry().ids())
    for table in tables.values():
        assert table.family in families
        for code in table.codes:
            assert code.family is None or code.family in families, code


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=209 : ",
    "cupy.cuda.runtime.CUDARuntimeError: cudaErrorNoKernelImageForDevice",
    "failed call to cuInit: CUDA_ERROR_NO_BINARY_FOR_GPU",
])
def test_one_code_in_any_of_its_forms_lands_on_its_family(line: str):
    assert first(line).rule == "explain.cuda.no-kernel-image"


def test_old_numbers_count_only_without_text():
    # CUDA 10.1 renumbered cudaError_t: (59) was the device-side assert, today 59 is nothing.
    assert first("RuntimeError: cuda runtime error (59) : at /opt/THC/THCGeneral.cpp:70").rule == \
        "explain.cuda.device-assert"
    # The text decides when both are there: (38) is the old number of `no CUDA-capable device`.
    assert first("RuntimeError: cuda runtime error (38) : no CUDA-capable device is detected at "
                 "THCGeneral.cpp:74").rule == "explain.cuda.no-device"
    # A number the template does not tie to CUDA is not read as a code: errno 2 is no out-of-memory.
    assert not explain_text("OSError: Error 2: No such file or directory").recognised


def test_a_code_without_a_family_of_its_own_is_told_by_its_meaning():
    finding = first("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert finding.rule == "explain.cuda.error"
    assert "cudaErrorIllegalAddress (700)" in finding.message
    assert "CUDA_LAUNCH_BLOCKING=1" in (finding.fix or "")
    assert finding.details["code"]["name"] == "cudaErrorIllegalAddress"


def test_one_line_is_told_by_one_family():
    # cuDNN's loader message also holds the dynamic loader's text: the more specific family tells it.
    report = explain_text("Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot "
                          "open shared object file: No such file or directory")
    assert [finding.rule for finding in report.findings] == ["explain.cudnn.load-failed"]
    assert "cuDNN 8" in report.findings[0].message


def test_a_placeholder_takes_what_a_paste_left_in_it():
    # Found by the held-out logs: a port a user blanked out is still the store timeout.
    finding = first("torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying "
                    "to connect to (PRIVATE_IP, PORT).")
    assert finding.rule == "explain.distributed.store-timeout" and "PRIVATE_IP:PORT" in finding.message


def test_a_message_wrapped_by_a_paste_is_still_read():
    text = ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a\n"
            "new one. This error indicates that your module has parameters that were not used")
    assert first(text).rule == "explain.ddp.unused-parameters"


# --- facts --------------------------------------------------------------------------------------

NVIDIA_SMI = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 450.119.03   Driver Version: 450.119.03   CUDA Version: 11.0     |
|-------------------------------+----------------------+----------------------+
|   0  A100-SXM4-40GB      On   | 00000000:04:00.0 Off |                    0 |
+-------------------------------+----------------------+----------------------+
"""


def facts_of(text: str) -> dict[str, str]:
    return {name: fact.value for name, fact in extract_facts(LogText(text)).facts.items()}


def test_facts_from_an_nvidia_smi_header():
    facts = facts_of(NVIDIA_SMI)
    assert facts["driver"] == "450.119.03" and facts["driver_cuda"] == "11.0"
    assert facts["gpu"] == "A100-SXM4-40GB" and facts["sm"] == "sm_80"  # capability from gpus.yaml's model name


@pytest.mark.parametrize(("text", "wanted"), [
    ("The NVIDIA driver on your system is too old (found version 11040).", {"driver_cuda": "11.4"}),
    ("Cuda compilation tools, release 11.8, V11.8.89", {"toolkit": "11.8"}),
    ("PyTorch version: 1.10.2\nCUDA used to build PyTorch: 11.3\nPython version: 3.8.0 (default, Nov  6 2019)",
     {"torch": "1.10.2", "torch_cuda": "11.3", "python": "3.8.0"}),
    ("pip install torch==2.0.1+cu118 torchvision==0.15.2+cu118", {"torch": "2.0.1+cu118", "torch_cuda": "11.8"}),
    ('  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1', {"python": "3.10"}),
    ("    PyTorch 2.1.0+cu121 with CUDA 1201 (you have 2.1.0+cu118)\n    Python  3.8.18 (you have 3.8.5)",
     {"torch": "2.1.0+cu118", "python": "3.8.5"}),
    ("Found GPU0 NVIDIA GeForce GTX 680 which is of cuda capability 3.0.", {"gpu": "NVIDIA GeForce GTX 680",
                                                                             "sm": "sm_30"}),
    ("NCCL error in: ProcessGroupNCCL.cpp:1333, unhandled system error, NCCL version 2.18.6", {"nccl": "2.18.6"}),
    ('OSError: [WinError 126] Error loading "C:\\torch\\lib\\c10.dll"', {"os": "windows"}),
    ("  - https://conda.anaconda.org/pytorch/linux-aarch64", {"platform": "linux-aarch64"}),
    ("docker run --gpus all --rm -it nvidia/cuda:12.4.1-base-ubuntu22.04 bash", {"container": "docker"}),
    ("In PyTorch 2.6, we changed the default value of the weights_only argument", {}),
    # Found by the held-out logs: a message wrapped over two lines, a Python of two parts.
    ("The detected CUDA version (11.2) mismatches the version that was used to compile\n    PyTorch (10.2).",
     {"toolkit": "11.2", "torch_cuda": "10.2"}),
    ("_GPU: NVIDIA QUADRO RTX 6000_\nPython 3.8\nCudatoolkit 11.0.221", {"python": "3.8", "toolkit": "11.0",
                                                                         "gpu": "NVIDIA QUADRO RTX 6000"}),
    ("I use Python 3.10.", {"python": "3.10"}),
])
def test_facts_a_log_states(text: str, wanted: dict[str, str]):
    facts = facts_of(text)
    assert {name: facts.get(name) for name in wanted} == wanted
    if not wanted:
        assert "torch" not in facts


def test_facts_are_printed_and_in_json():
    report = explain_text(NVIDIA_SMI + "RuntimeError: CUDA error: no kernel image is available for execution on "
                                       "the device\n")
    assert report.text_lines()[0].startswith("facts: driver 450.119.03 (line 2), driver's CUDA 11.0 (line 2)")
    assert report.as_dict()["facts"]["driver"] == {"value": "450.119.03", "line": 2, "how": "nvidia-smi or a stated "
                                                                                             "driver version"}


# --- verdicts with the log's facts ----------------------------------------------------------------

ARCH_WARNING = ("A100-SXM4-40GB with CUDA capability sm_80 is not compatible with the current PyTorch installation.\n"
                "The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70.\n")


def test_the_fix_never_names_a_build_the_logs_driver_cannot_run():
    finding = first(ARCH_WARNING + NVIDIA_SMI)
    assert finding.rule == "explain.cuda.arch-not-in-build"
    assert "CUDA 11.8" in (finding.fix or "") and "minor-version" in (finding.fix or "")
    assert "CUDA 12.6" not in (finding.fix or "") and "CUDA 13" not in (finding.fix or "")
    assert "the log's driver 450.119.03 (CUDA 11.0)" in finding.message


def test_the_logs_driver_comes_before_this_hosts():
    host = DriverReading("nvml", (13, 0), "580.95.05")
    finding = first(ARCH_WARNING + NVIDIA_SMI, driver=host)
    assert "CUDA 12" not in (finding.fix or "") and "CUDA 13" not in (finding.fix or "")
    without_log_driver = first(ARCH_WARNING, driver=host)
    assert "CUDA 12.6" in (without_log_driver.fix or "")  # the newest torch's oldest CUDA with sm_80


def test_a_forward_compatibility_cuda_is_not_the_drivers_own():
    compat = load_compat()
    inflated = Machine(driver_version="470.57.02", driver_cuda=CudaVersion(12, 1))
    assert trusted_driver_cuda(inflated, compat) is None
    assert driver_runs(inflated, CudaVersion(12, 1), compat) is None
    assert driver_runs(inflated, CudaVersion(11, 8), compat) == "minor"
    honest = Machine(driver_version="535.54.03", driver_cuda=CudaVersion(12, 2))
    assert trusted_driver_cuda(honest, compat) == CudaVersion(12, 2)
    assert driver_runs(honest, CudaVersion(12, 1), compat) == "runs"


def test_hardware_no_current_build_supports_gets_the_last_release_that_did():
    finding = first("Found GPU0 GeForce GTX 680 which is of cuda capability 3.0.\nPyTorch no longer supports this "
                    "GPU because it is too old.\nThe minimum cuda capability supported by this library is 3.7.")
    assert finding.rule == "explain.cuda.arch-too-old"
    assert "3.0" in finding.message and "CPU" in (finding.fix or "")
    kepler = first("Found GPU0 Tesla K80 which is of cuda capability 3.7.\nMinimum and Maximum cuda capability "
                   "supported by this version of PyTorch is (5.0) - (9.0)")
    assert "torch 2.7.1 with CUDA 11.8" in (kepler.fix or "")


def test_a_gpu_newer_than_the_build_runs_through_ptx():
    finding = first("Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.\nMinimum and Maximum cuda capability "
                    "supported by this version of PyTorch is (8.0) - (12.0)")
    assert finding.severity.value == "warning" and "PTX" in finding.message


def test_a_log_without_a_family_gets_its_facts_and_one_next_step():
    report = explain_text("pip install torch==2.1.0+cu121\n" + NVIDIA_SMI.replace("450.119.03", "470.57.02")
                          .replace("11.0 ", "11.4 ") + "Segmentation fault (core dumped)\n")
    assert not report.recognised
    lines = report.text_lines()
    assert lines[0].startswith("nothing recognised in this log; next: torch 2.1.0+cu121 is built for CUDA 12.1")
    assert "cannot run" in lines[0] and "525.60.13" in lines[0]
    assert lines[1].startswith("facts: driver 470.57.02")
    assert report.as_dict()["next"] == report.next_step


# --- input of any size, encoding or kind ----------------------------------------------------------

def test_binary_and_compressed_input_is_one_line():
    garbage = bytes(range(256)) * 64
    report = explain_text(garbage)
    assert report.text_lines() == ["not a text log (16 KiB, mostly unprintable bytes): envbuild explain reads error "
                                   "logs and tracebacks"]
    gz = decode_log(b"\x1f\x8b\x08\x00" + garbage)
    assert gz.binary and "zcat" in gz.binary


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-8-sig", "gbk"])
def test_other_encodings_are_read(encoding: str):
    text = "训练开始\nRuntimeError: CUDA error: device-side assert triggered\n"
    data = text.encode(encoding)
    assert first(data).rule == "explain.cuda.device-assert"


class Endless(io.RawIOBase):
    """A stdin that never ends, counting what was read from it."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        line = b"epoch 1 step 2 loss 0.5 all fine\n"
        chunk = (line * (len(buffer) // len(line) + 1))[:len(buffer)]
        buffer[:len(chunk)] = chunk
        self.given += len(chunk)
        return len(chunk)


def test_an_endless_stdin_is_cut_and_said(monkeypatch):
    monkeypatch.setattr(bounded_input, "HEAD_BYTES", 64 << 10)
    monkeypatch.setattr(bounded_input, "TAIL_BYTES", 64 << 10)
    monkeypatch.setattr(bounded_input, "CHUNK_BYTES", 16 << 10)
    monkeypatch.setattr(bounded_input, "MAX_READ_BYTES", 4 << 20)
    stream = Endless()
    log_input = read_log(io.BufferedReader(stream))
    assert log_input.stopped and stream.given <= (4 << 20) + (128 << 10)
    assert len(log_input.text) <= (64 << 10) * 2 + 2
    report = explain_text(log_input.text, log_input=log_input)
    assert len(report.text_lines()) == 1 and "stopped reading after 4 MiB" in report.text_lines()[0]


def test_a_big_file_is_read_as_head_and_tail(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(bounded_input, "HEAD_BYTES", 64 << 10)
    monkeypatch.setattr(bounded_input, "TAIL_BYTES", 64 << 10)
    log = tmp_path / "big.log"
    with log.open("w", encoding="utf-8") as out:
        out.write(NVIDIA_SMI)
        out.write("epoch 1 step 2 loss 0.5\n" * 200_000)
        out.write("RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    with log.open("rb") as stream:
        log_input = read_log(stream)
    assert log_input.skipped > 0 and not log_input.stopped
    report = explain_text(log_input.text, str(log), log_input=log_input)
    assert [finding.rule for finding in report.findings] == ["explain.cuda.no-kernel-image"]
    assert report.facts.get("driver") == "450.119.03"  # the head is read too
    assert report.text_lines()[0].startswith("note: looked at the first 64 KiB and the last 64 KiB of 5 MiB")


# --- the CLI --------------------------------------------------------------------------------------

def test_cli_catalogue_lists_every_family_with_its_source():
    done = CliRunner().invoke(cli, ["explain", "--catalogue"])
    assert done.exit_code == 0, done.output
    for family in load_rules():
        assert family.id in done.output
    assert "NVIDIA NCCL (github.com/NVIDIA/nccl): src/nccl.h.in" in done.output
    as_json = CliRunner().invoke(cli, ["explain", "--catalogue", "--json"])
    data = json.loads(as_json.output)
    assert len(data["families"]) == len(load_rules())
    assert {table["enum"] for table in data["code_tables"]} == {"cudaError_t", "nvmlReturn_t", "ncclResult_t"}


def test_cli_without_a_log_is_a_usage_error():
    done = CliRunner().invoke(cli, ["explain"])
    assert done.exit_code == 2 and "Traceback" not in done.output


def test_cli_binary_input_is_one_line(tmp_path: Path):
    garbage = tmp_path / "core"
    garbage.write_bytes(bytes(range(256)) * 100)
    done = CliRunner().invoke(cli, ["explain", "--no-host", str(garbage)])
    assert done.exit_code == 1
    assert len(done.output.strip().splitlines()) == 1 and done.output.startswith("not a text log")


@pytest.mark.parametrize(("line", "said"), [
    # adaption.h today (torch 2.11 prints it), before, and in 1.9 (with its typo); TensorIterator without method
    ("RuntimeError: Expected all tensors to be on the same device, but got index is on cuda:1, different from other "
     "tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)", "(cuda:0 and cuda:1): index"),
    ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0! "
     "(when checking argument for argument mat1 in method wrapper_addmm)", "(cpu and cuda:0): mat1 is on cuda:0"),
    ("RuntimeError: Expected all tensors to be on the same common device, but found at least two devices, cuda:0 "
     "and cpu! (when checking arugment for argument target in method wrapper_nll_loss_forward)", "target is on cpu"),
    ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
     "(cuda:0 and cpu)"),
    ("RuntimeError: Expected tensor for argument #1 'input' to have the same device as tensor for argument #2 "
     "'weight'; but device 1 does not equal 0 (while checking arguments for cudnn_convolution)", "(0 and 1)"),
    ("RuntimeError: Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU (while checking arguments "
     "for addmm)", "(GPU and CPU): 'mat1' is on CPU"),
    ("RuntimeError: Expected object of device type cuda but got device type cpu for argument #1 'self' in call to "
     "_th_index_select", "(cuda and cpu)"),
    ("RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same",
     "different devices"),
    ("RuntimeError: indices should be either on cpu or on the same device as the indexed tensor (cpu)",
     "different devices"),
])
def test_every_form_of_the_device_check_is_one_family(line: str, said: str):
    finding = first(line)
    assert finding.rule == "explain.torch.device-mismatch"
    assert said in finding.message, finding.message


def test_a_dtype_mismatch_is_not_a_device_mismatch():
    report = explain_text("RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) "
                          "should be the same")
    assert "explain.torch.device-mismatch" not in [finding.rule for finding in report.findings]


def test_invalid_device_id_is_dataparallels_only_through_data_parallel():
    tail = ('  File "torch/cuda/__init__.py", line 689, in get_device_properties\n'
            '    raise AssertionError("Invalid device id")\nAssertionError: Invalid device id\n')
    through = ('  File "site-packages/torch/nn/parallel/data_parallel.py", line 168, in __init__\n'
               "    _check_balance(self.device_ids)\n")
    assert first(through + tail).rule == "explain.dataparallel.device-ids"
    assert "device_ids" in first(through + tail).message
    assert first(tail).rule == "explain.cuda.invalid-device-ordinal"


@pytest.mark.parametrize("line", [
    "RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 1800000ms for send operation to "
    "complete",
    "RuntimeError: [gloo/transport/uv/unbound_buffer.cc:67] Timed out waiting 15000ms for recv operation to complete",
    "[Rank 0]: Rank 3 failed to pass monitoredBarrier in 30000 ms",
])
def test_a_collective_one_rank_never_joined(line: str):
    assert first(line).rule == "explain.distributed.collective-timeout"


def test_operation_timed_out_is_a_collective_only_in_torch_distributed():
    work = '  File "torch/distributed/distributed_c10d.py", line 2501, in all_reduce\n    work.wait()\n'
    assert first(work + "RuntimeError: Operation timed out!").rule == "explain.distributed.collective-timeout"
    assert "explain.distributed.collective-timeout" not in [
        finding.rule for finding in explain_text("curl: (28) Operation timed out!").findings]

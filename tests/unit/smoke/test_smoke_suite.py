"""The smoke suite's pure logic (no torch): split math, nvidia-smi parsing, driver and arch verdicts,
version matching, torchvision pairing, the report format, and the check runner's rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from smoke.compat import (
    FAIL,
    OK,
    WARN,
    CudaExpectation,
    arch_coverage,
    cudnn_text,
    driver_cuda_from_nvml,
    driver_verdict,
    expected_torchvision,
    load_compat_data,
    target_expectations,
    version_matches_prefix,
)
from smoke.nvsmi import parse_nvidia_smi
from smoke.registry import (
    Check,
    Context,
    Settings,
    apply_gpu_requirement,
    failed,
    needs_gpus,
    passed,
    run_check,
    select_checks,
    skipped,
)
from smoke.report import CheckResult, SmokeReport
from smoke.split import check_split, expected_split, rows_per_device
from tests.nvidia_replay import SMI_FIXTURES, fake_nvidia_smi, needs_no_nvml, replay_nvidia_smi
from tests.paths import REPO

pytestmark = pytest.mark.unit


# --- DataParallel split -------------------------------------------------------------------------

@pytest.mark.parametrize(("batch", "n_gpus", "expected"), [
    (32, 2, [16, 16]),
    (33, 2, [17, 16]),
    (32, 3, [11, 11, 10]),
    (6, 4, [2, 2, 2]),  # only three of four GPUs get rows
    (1, 4, [1]),
    (7, 3, [3, 3, 1]),
    (32, 1, [32]),
])
def test_expected_split(batch: int, n_gpus: int, expected: list[int]) -> None:
    assert expected_split(batch, n_gpus) == expected


def test_expected_split_invariants() -> None:
    for batch in range(1, 70):
        for n_gpus in range(1, 9):
            sizes = expected_split(batch, n_gpus)
            assert sum(sizes) == batch
            assert len(sizes) <= n_gpus
            assert sizes == sorted(sizes, reverse=True)
            assert all(size == sizes[0] for size in sizes[:-1]), "only the last chunk may be smaller"


@pytest.mark.parametrize(("batch", "n_gpus"), [(0, 2), (4, 0), (-1, 1)])
def test_expected_split_rejects_nonsense(batch: int, n_gpus: int) -> None:
    with pytest.raises(ValueError):
        expected_split(batch, n_gpus)


@pytest.mark.parametrize(("recorded", "batch", "n_gpus"), [
    ([16, 16], 32, 2), ([17, 16], 33, 2), ([11, 11, 10], 32, 3), ([2, 2, 2], 6, 4), ([2, 2, 2, 0], 6, 4),
])
def test_check_split_accepts_the_real_split(recorded: list[int], batch: int, n_gpus: int) -> None:
    verdict = check_split(recorded, batch, n_gpus)
    assert verdict.ok, verdict.message


def test_check_split_negative_control_whole_batch_on_one_device_fails() -> None:
    verdict = check_split([32], 32, 2)
    assert not verdict.ok
    assert verdict.expected == [16, 16] and verdict.recorded == [32, 0]
    assert "expected rows per device [16, 16]" in verdict.message


@pytest.mark.parametrize(("recorded", "batch", "n_gpus", "words"), [
    ([32, 0], 32, 2, "recorded [32, 0]"),
    ([16, 15], 32, 2, "31 rows seen in total"),
    ([16, 17], 33, 2, "expected rows per device [17, 16]"),  # right total, wrong order
    ([2, 2, 1, 1], 6, 4, "[2, 2, 2, 0]"),  # an even-looking split that chunking never makes
    ([16, 16, 1], 32, 2, "3 devices reported"),
])
def test_check_split_rejects_wrong_records(recorded: list[int], batch: int, n_gpus: int, words: str) -> None:
    verdict = check_split(recorded, batch, n_gpus)
    assert not verdict.ok
    assert words in verdict.message


def test_rows_per_device_sums_and_keeps_strays() -> None:
    records = [(0, 8), (1, 16), (0, 8), (None, 3)]
    assert rows_per_device(records, [0, 1]) == [16, 16, 3]
    assert not check_split(rows_per_device(records, [0, 1]), 32, 2).ok
    assert rows_per_device([(0, 16), (1, 16)], [0, 1]) == [16, 16]


# --- nvidia-smi ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("fixture", "driver", "cuda", "gpus"), [
    ("classic-535-2gpu.txt", "535.54.03", (12, 2),
     [(0, "NVIDIA A100-SXM4-40GB", "00000000:07:00.0", 12000, 40960, 35),
      (1, "NVIDIA A100-SXM4-40GB", "00000000:0F:00.0", 4, 40960, 0)]),
    ("kmd-610-4gpu.txt", "610.43.02", (13, 3),
     [(i, "NVIDIA B200", bus, used, 183359, util) for i, bus, used, util in
      [(0, "00000000:1B:00.0", 0, 0), (1, "00000000:43:00.0", 2048, 3), (2, "00000000:52:00.0", 0, 0),
       (3, "00000000:61:00.0", 0, 0)]]),
    ("kmd-610-1gpu-truncated-name.txt", "610.43.03", (13, 3),
     [(0, "NVIDIA GeForce RTX 5070 ...", "00000000:02:00.0", 273, 12227, 2)]),
    ("legacy-331-no-cuda.txt", "331.62", None,  # GPU-Util says N/A
     [(0, "GeForce GTX 680", "0000:03:00.0", 9, 4095, None), (1, "GeForce GTX 680", "0000:04:00.0", 9, 4095, None)]),
    ("query-q-450.txt", "450.66", (11, 0), [(0, "GeForce GTX 780", "00000000:01:00.0", None, None, None)]),
])
def test_parse_nvidia_smi(fixture: str, driver: str, cuda: tuple[int, int] | None, gpus: list[tuple]) -> None:
    reading = parse_nvidia_smi((SMI_FIXTURES / fixture).read_text())
    assert reading.driver_version == driver
    assert reading.cuda_version == cuda
    assert [(g.index, g.name, g.bus_id, g.memory_used_mib, g.memory_total_mib, g.utilization_percent)
            for g in reading.gpus] == gpus


def test_parse_nvidia_smi_of_nothing() -> None:
    reading = parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert (reading.driver_version, reading.cuda_version, reading.gpus) == (None, None, [])


# --- driver vs runtime ---------------------------------------------------------------------------

@pytest.mark.parametrize(("driver", "runtime", "level"), [
    ((12, 2), (12, 4), WARN),  # minor-version compatibility only
    ((11, 8), (12, 1), FAIL),
    ((11, 8), (12, 8), FAIL),
    ((12, 8), (13, 0), FAIL),
    ((12, 4), (12, 4), OK),
    ((12, 8), (12, 1), OK),
    ((13, 0), (12, 8), OK),  # a newer driver runs older runtimes
    ((12, 0), (11, 8), OK),
])
def test_driver_verdict(driver: tuple[int, int], runtime: tuple[int, int], level: str) -> None:
    verdict = driver_verdict(driver, runtime)
    assert verdict.level == level
    assert f"{driver[0]}.{driver[1]}" in verdict.message and f"{runtime[0]}.{runtime[1]}" in verdict.message


@pytest.mark.parametrize(("encoded", "version"), [
    (12020, (12, 2)), (11080, (11, 8)), (13000, (13, 0)), (12090, (12, 9)),
])
def test_nvml_cuda_version_decoding(encoded: int, version: tuple[int, int]) -> None:
    assert driver_cuda_from_nvml(encoded) == version


# --- arch list -----------------------------------------------------------------------------------

CU121_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


@pytest.mark.parametrize(("arch_list", "capability", "covered", "how"), [
    (CU121_ARCHS, (8, 6), True, "exact"),
    (CU121_ARCHS, (9, 0), True, "exact"),
    (CU121_ARCHS, (8, 9), True, "binary-compatible"),  # RTX 4090 runs sm_86 code
    (CU121_ARCHS, (10, 0), False, "none"),  # Blackwell: no sm_100, no PTX
    (CU121_ARCHS, (3, 7), False, "none"),  # K80 dropped
    (["sm_86"], (8, 0), False, "none"),  # machine code never runs on an older minor
    (["sm_80", "compute_90"], (12, 0), True, "ptx-jit"),
    (["sm_80", "compute_90"], (8, 9), True, "binary-compatible"),
    (["compute_90"], (8, 9), False, "none"),  # PTX only runs on equal or newer GPUs
    (["sm_90a"], (9, 0), True, "exact"),
    (["sm_90a"], (10, 0), False, "none"),  # arch-specific code is for that GPU only
    (["sm_100", "sm_120"], (12, 1), True, "binary-compatible"),
    (["sm_100"], (12, 0), False, "none"),
    ([], (8, 0), False, "none"),
])
def test_arch_coverage(arch_list: list[str], capability: tuple[int, int], covered: bool, how: str) -> None:
    coverage = arch_coverage(arch_list, capability)
    assert (coverage.covered, coverage.how) == (covered, how)
    if not covered:
        assert "no kernel image is available" in coverage.message


# --- versions and expectations -------------------------------------------------------------------

@pytest.mark.parametrize(("installed", "expected", "match"), [
    ("2.13.0+cpu", "2.13", True),
    ("2.13.0+cpu", "2.13.0", True),
    ("2.13.0+cu121", "2.13.0+cpu", True),  # local suffixes are the CUDA check's business
    ("2.13.0", "2.1", False),  # component-wise, not string prefix
    ("2.13.1", "2.13.0", False),
    ("2.4.0a0+git1234", "2.4", True),
    ("1.13.1", "2", False),
])
def test_version_matches_prefix(installed: str, expected: str, match: bool) -> None:
    assert version_matches_prefix(installed, expected) is match


@pytest.mark.parametrize(("expectation", "torch_cuda", "match"), [
    ("cpu", None, True),
    ("cpu", "12.1", False),
    ("11.8", None, False),
    ("12.1", "12.1", True),
    ("12.1", "12.4", False),
    ("12", "12.4", True),
    ("12.4", "12.4.1", True),
])
def test_cuda_expectation(expectation: str, torch_cuda: str | None, match: bool) -> None:
    assert CudaExpectation.parse(expectation).matches(torch_cuda) is match


@pytest.mark.parametrize("text", ["banana", "12.x", "", "cu121"])
def test_cuda_expectation_rejects_nonsense(text: str) -> None:
    with pytest.raises(ValueError):
        CudaExpectation.parse(text)


@pytest.fixture(scope="module")
def shipped_pairs() -> dict[str, str]:
    """The pairing table envbuild writes into every copy of the suite, from its compatibility data."""
    smoke_data = pytest.importorskip("builder.image.smoke_data")
    return smoke_data.smoke_data()["torchvision_pairs"]


@pytest.mark.parametrize(("torch_version", "torchvision"), [
    ("2.0.1", "0.15"), ("2.4.0+cu121", "0.19"), ("2.13.0+cpu", "0.28"), ("2.14.1", "0.29"), ("2.14.1+cu130", "0.29"),
    ("1.13.1", None), ("3.0.0", None),
])
def test_torchvision_pairing_from_the_shipped_data(shipped_pairs, torch_version: str, torchvision: str | None) -> None:
    assert expected_torchvision(torch_version, shipped_pairs) == torchvision


def test_shipped_pairing_is_the_compat_data_row_by_row(shipped_pairs) -> None:
    compat = pytest.importorskip("builder.spec.compat")
    rows = compat.load_compat().releases()
    assert rows and len(shipped_pairs) == len(rows)
    for row in rows:
        assert expected_torchvision(row.latest, shipped_pairs) == row.torchvision, row.line


def test_a_source_checkout_ships_no_second_copy_of_the_pairing(tmp_path: Path) -> None:
    assert load_compat_data(tmp_path / "absent.json") is None
    assert not (REPO / "smoke" / "data").exists()
    assert target_expectations(None) == {}


@pytest.mark.parametrize(("reported", "text"), [(92400, "9.24.0"), (90100, "9.1.0"), (91002, "9.10.2"), (8907, "8.9.7"), (90501, "9.5.1")])
def test_cudnn_versions_read_as_torch_reports_them(reported: int, text: str) -> None:
    assert cudnn_text(reported) == text


# --- report format -------------------------------------------------------------------------------

def _sample_report() -> SmokeReport:
    return SmokeReport(
        checks=[
            CheckResult("env.torch_version", "passed", "torch 2.13.0 matches 2.13", 0.01, {"torch": "2.13.0"}),
            CheckResult("dp.split", "failed", "batch 32 on 2 GPUs: expected [16, 16], recorded [32, 0]", 0.5),
            CheckResult("amp.cuda_fp16", "skipped", "needs 1 CUDA device(s), 0 visible"),
        ],
        environment={"torch": "2.13.0"},
        collect_env="PyTorch version: 2.13.0",
    )


def test_report_json_round_trip() -> None:
    report = _sample_report()
    data = json.loads(report.to_json())
    assert data["summary"] == {"passed": 1, "failed": 1, "skipped": 1}
    assert set(data["checks"][0]) == {"name", "status", "reason", "seconds", "details"}
    assert SmokeReport.from_json(report.to_json()) == report
    assert not report.ok


def test_report_rejects_a_summary_that_disagrees_with_its_checks() -> None:
    data = json.loads(_sample_report().to_json())
    data["summary"]["failed"] = 0
    with pytest.raises(ValueError, match="does not match"):
        SmokeReport.from_dict(data)


def test_results_need_a_reason_and_a_known_status() -> None:
    with pytest.raises(ValueError, match="reason"):
        CheckResult("x.y", "passed", "  ")
    with pytest.raises(ValueError, match="status"):
        CheckResult("x.y", "warning", "a reason")


def test_junit_counts_and_elements() -> None:
    root = ET.fromstring(_sample_report().to_junit_xml())
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["dp.split"].find("failure").get("message").startswith("batch 32 on 2 GPUs")
    assert cases["amp.cuda_fp16"].find("skipped") is not None
    assert cases["env.torch_version"].find("failure") is None and cases["env.torch_version"].find("skipped") is None


def test_report_files_are_written_whole(tmp_path: Path) -> None:
    report = _sample_report()
    report.write_json(tmp_path / "out" / "smoke.json")
    report.write_junit(tmp_path / "out" / "smoke.xml")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["smoke.json", "smoke.xml"]


# --- the check runner ----------------------------------------------------------------------------

def _ctx(require_gpus: int = 0, gpu_count: int = 0, timeout: float = 5.0) -> Context:
    return Context(Settings(require_gpus=require_gpus, timeout_per_check=timeout), gpu_count=gpu_count)


@pytest.mark.parametrize(("needed", "required", "status"), [(1, 0, "skipped"), (1, 1, "failed"), (2, 1, "skipped"),
                                                            (2, 2, "failed"), (2, 4, "failed")])
def test_gpu_skips_fail_only_when_that_many_gpus_are_required(needed: int, required: int, status: str) -> None:
    assert apply_gpu_requirement(needs_gpus(needed, "too few GPUs"), required).status == status


def test_plain_skips_stay_skips_under_require_gpus() -> None:
    assert apply_gpu_requirement(skipped("torchvision is not installed"), 8).status == "skipped"


def test_runner_gates_on_gpu_count_before_running() -> None:
    ran = []
    gated = Check("x.gpu", lambda ctx: ran.append(1) or passed("ran"), gpus=2)
    assert run_check(gated, _ctx(gpu_count=1)).status == "skipped"
    assert run_check(gated, _ctx(gpu_count=1, require_gpus=2)).status == "failed"
    assert ran == []
    assert run_check(gated, _ctx(gpu_count=2)).status == "passed"


def test_runner_turns_exceptions_into_failures_and_keeps_warnings() -> None:
    def explodes(ctx: Context):
        warnings.warn("pin_memory is set but no accelerator is found", UserWarning, stacklevel=1)
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device")

    result = run_check(Check("x.boom", explodes), _ctx())
    assert result.status == "failed"
    assert result.reason.startswith("RuntimeError: CUDA error: no kernel image")
    assert "traceback" in result.details
    assert result.details["warnings"] == ["UserWarning: pin_memory is set but no accelerator is found"]


def test_runner_times_out_a_stuck_check() -> None:
    ctx = _ctx(timeout=0.3)
    start = time.perf_counter()
    result = run_check(Check("x.stuck", lambda ctx: time.sleep(5) or passed("woke")), ctx)
    assert time.perf_counter() - start < 3
    assert result.status == "failed" and "timed out after 0.3 s" in result.reason
    assert ctx.hung_checks == ["x.stuck"]


def test_runner_rejects_a_check_that_returns_no_outcome() -> None:
    assert run_check(Check("x.none", lambda ctx: None), _ctx()).status == "failed"  # type: ignore[arg-type, return-value]


def test_select_checks_by_name_and_group() -> None:
    checks = [Check(n, lambda ctx: failed("unused")) for n in ("env.a", "env.b", "amp.c")]
    assert [c.name for c in select_checks(checks, ["amp"])] == ["amp.c"]
    assert [c.name for c in select_checks(checks, ["env.b", "amp.c"])] == ["env.b", "amp.c"]
    assert len(select_checks(checks, [])) == 3
    with pytest.raises(ValueError, match="unknown check name"):
        select_checks(checks, ["amp.nope"])


# --- a broken torch still gives a report ---------------------------------------------------------

def test_broken_torch_import_is_reported_as_a_failure(tmp_path: Path) -> None:
    # A torch that cannot import, as in an image missing a shared library: the suite must still
    # write a report that says so, instead of dying with a traceback.
    broken = tmp_path / "site" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libcudart.so.12: cannot open shared object file')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(REPO)]))
    report_path = tmp_path / "smoke.json"
    done = subprocess.run([sys.executable, "-m", "smoke", "--json", str(report_path), "--no-collect-env"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    report = SmokeReport.from_json(report_path.read_text())
    assert [(c.name, c.status) for c in report.checks] == [("env.import_torch", "failed")]
    assert "libcudart.so.12" in report.checks[0].reason


# --- the driver reading (NVML first, then nvidia-smi) --------------------------------------------

@needs_no_nvml
def test_driver_reading_falls_back_to_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from smoke.driver import read_driver

    replay_nvidia_smi(tmp_path / "bin", "kmd-610-4gpu.txt", monkeypatch)
    reading = read_driver()
    assert (reading.source, reading.cuda, reading.driver_version) == ("nvidia-smi", (13, 3), "610.43.02")
    assert any(note.startswith("NVML:") for note in reading.notes)


@needs_no_nvml
def test_driver_reading_reports_a_failing_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from smoke.driver import read_driver

    fake_nvidia_smi(tmp_path / "bin", "echo \"NVIDIA-SMI has failed because it couldn't communicate\"\nexit 9\n",
                    monkeypatch)
    reading = read_driver()
    assert (reading.source, reading.cuda) == (None, None)
    assert any("nvidia-smi: exit 9" in note for note in reading.notes)

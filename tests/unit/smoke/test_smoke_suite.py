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
    cudnn_text,
    driver_verdict,
    expected_torchvision,
    load_compat_data,
    target_expectations,
    version_matches_prefix,
)
from smoke.gpu_compat import arch_coverage, driver_cuda_from_nvml
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
    compat = pytest.importorskip("builder.specs.compat")
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


# --- former names and the --require-compile switch -----------------------------------------------

def test_select_checks_accepts_a_former_name() -> None:
    checks = [Check("gpu.arch_in_build", lambda ctx: failed("unused"), aliases=("env.arch_list",)),
              Check("env.driver", lambda ctx: failed("unused"))]
    assert [c.name for c in select_checks(checks, ["env.arch_list"])] == ["gpu.arch_in_build"]
    assert [c.name for c in select_checks(checks, ["env"])] == ["env.driver"]  # the group is the new one's


def test_a_former_name_cannot_be_registered_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from smoke import registry

    monkeypatch.setattr(registry, "REGISTRY", [])
    registry.check("gpu.arch_in_build", aliases=("env.arch_list",))(lambda ctx: failed("unused"))
    with pytest.raises(ValueError, match="registered twice"):
        registry.check("env.arch_list")(lambda ctx: failed("unused"))


@pytest.mark.parametrize(("argv", "environ", "required"), [
    ([], {}, False), (["--require-compile"], {}, True), ([], {"ENVBUILD_REQUIRE_COMPILE": "1"}, True),
    ([], {"ENVBUILD_REQUIRE_COMPILE": "0"}, False), ([], {"ENVBUILD_REQUIRE_COMPILE": ""}, False),
])
def test_require_compile_from_flag_or_environment(monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                                  environ: dict[str, str], required: bool) -> None:
    from smoke.cli import build_parser, parse_settings

    monkeypatch.delenv("ENVBUILD_REQUIRE_COMPILE", raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    parser = build_parser()
    assert parse_settings(parser, parser.parse_args(argv)).require_compile is required


def test_expected_packages_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from smoke.cli import build_parser, parse_settings

    monkeypatch.setenv("ENVBUILD_EXPECT_PACKAGES", "torchvision=0.29.1 torchaudio Pillow=11.0 scikit_learn")
    parser = build_parser()
    settings = parse_settings(parser, parser.parse_args([]))
    assert settings.expect_packages == (("torchvision", "0.29.1"), ("torchaudio", None), ("pillow", "11.0"),
                                        ("scikit-learn", None))
    assert settings.expects("torchaudio") and settings.expected_version("torchaudio") is None


@pytest.mark.parametrize("entry", ["torchvision=", "torchvision==0.29", "=0.29", "pillow>=10"])
def test_a_bad_expected_package_is_a_usage_error(entry: str, capsys: pytest.CaptureFixture[str]) -> None:
    from smoke.cli import build_parser, parse_settings

    parser = build_parser()
    with pytest.raises(SystemExit) as stopped:
        parse_settings(parser, parser.parse_args(["--expect-packages", entry]))
    assert stopped.value.code == 2
    assert f"--expect-packages {entry!r}: write NAME=VERSION or NAME" in capsys.readouterr().err


# --- child processes -----------------------------------------------------------------------------

def test_children_run_together_and_report_how_they_ended(tmp_path: Path) -> None:
    from smoke.children import child_environment, run_children

    env = child_environment({"SMOKE_TEST_WORD": "hello"})
    runs = run_children([
        ([sys.executable, "-c", "import os; print(os.environ['SMOKE_TEST_WORD'])"], env),
        ([sys.executable, "-c", "import sys; sys.exit('no luck')"], env),
    ], timeout_s=60, workdir=tmp_path)
    assert [(r.returncode, r.timed_out) for r in runs] == [(0, False), (1, False)]
    assert runs[0].stdout.strip() == "hello" and runs[1].tail() == "no luck"


def test_children_past_the_deadline_are_killed_with_what_they_forked(tmp_path: Path) -> None:
    from smoke.children import child_environment, run_children

    pid_file = tmp_path / "grandchild.pid"
    # The child starts a grandchild that would sleep for a minute, then hangs itself.
    script = ("import subprocess, sys, time; "
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    started = time.monotonic()
    (run,) = run_children([([sys.executable, "-c", script], child_environment({}))], timeout_s=3, workdir=tmp_path)
    assert time.monotonic() - started < 10
    assert run.timed_out and run.returncode is None
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the grandchild outlived its group's kill"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead, only not yet reaped by its new parent


def test_a_free_loopback_port_can_be_bound() -> None:
    import socket

    from smoke.children import free_loopback_port

    port = free_loopback_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
    assert 1024 <= port <= 65535


def test_clip_middle_keeps_both_ends() -> None:
    from smoke.children import clip_middle

    assert clip_middle("short", 100) == "short"
    clipped = clip_middle("HEAD" + "x" * 1000 + "TAIL: Python.h: No such file or directory", 200)
    assert len(clipped) <= 200 and clipped.startswith("HEAD") and clipped.endswith("No such file or directory")


# --- DistributedDataParallel: rendezvous, judging, diagnosis --------------------------------------

def test_ranks_get_the_environment_torchrun_gives() -> None:
    from smoke.ddp import rank_environment

    env = rank_environment(1, 29511, "gloo")
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                                "LOCAL_WORLD_SIZE")} == {
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2"}
    assert env["SMOKE_DDP_BACKEND"] == "gloo"


@pytest.mark.parametrize(("gpus", "nccl", "gloo", "backend", "words"), [
    (0, True, True, "gloo", "gloo on the CPU"), (1, True, True, "gloo", "1 visible"), (2, True, True, "nccl", "NCCL"),
    (4, True, True, "nccl", "NCCL"), (2, False, True, "gloo", "warning:"), (0, False, False, None, "no gloo"),
])
def test_backend_choice(gpus: int, nccl: bool, gloo: bool, backend: str | None, words: str) -> None:
    from smoke.ddp import choose_backend

    chosen, why = choose_backend(gpus, nccl=nccl, gloo=gloo)
    assert chosen == backend and words in why


def _rank_reports() -> list[dict]:
    from smoke.ddp import all_reduce_input, expected_all_reduce

    assert [all_reduce_input(0), all_reduce_input(1)] == [[1.0, 10.0], [2.0, 20.0]]
    return [{"rank": r, "all_reduce": expected_all_reduce(), "grads_match": True, "grad_max_diff": 1e-8,
             "params_match": True, "param_max_diff": 1e-9, "param_checksum": -2.54} for r in (0, 1)]


def test_judge_ranks_accepts_agreeing_ranks() -> None:
    from smoke.ddp import judge_ranks

    assert judge_ranks(_rank_reports()) == []


@pytest.mark.parametrize(("rank", "change", "words"), [
    (1, {"all_reduce": [1.0, 10.0]}, "all_reduce(SUM) gave [1.0, 10.0], not [3.0, 30.0]"),  # rank 1 summed alone
    (0, {"grads_match": False, "grad_max_diff": 0.2}, "DDP gradients differ"),
    (1, {"params_match": False}, "parameters after the DDP step differ"),
    (1, {"param_checksum": -2.5}, "the ranks hold different parameters"),
])
def test_judge_ranks_negative_controls(rank: int, change: dict, words: str) -> None:
    from smoke.ddp import judge_ranks

    reports = _rank_reports()
    reports[rank].update(change)
    problems = judge_ranks(reports)
    assert len(problems) == 1 and words in problems[0]
    assert judge_ranks(reports[:1]) == ["1 of 2 ranks reported"]


# Error texts as torch 2.13's c10d, gloo and NCCL raise them (the first two reproduced here on the CPU
# build; NCCL's from its shmutils.cc and torch's NCCLUtils).
PORT_TAKEN = ("DistNetworkError: The server socket has failed to listen on any local network address. port: 41225, "
              "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
CLIENT_TIMEOUT = ("DistNetworkError: The client socket has timed out after 40000ms while trying to connect to "
                  "(127.0.0.1, 41225).")
NO_INTERFACE = ("RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84]"
                " ifa != nullptr. Unable to find address for: nosuchif0")
NCCL_SHM = ("DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3690, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3\nncclSystemError: "
            "System call (e.g. socket, malloc) or external library call failed or device error. \nLast error:\n"
            "Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888), error: No space left "
            "on device (28)")
NCCL_WARN_LINE = "host:123:456 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-abc to 9637892 bytes"


@pytest.mark.parametrize(("errors", "outputs", "key", "words"), [
    ([PORT_TAKEN, CLIENT_TIMEOUT], [], "port_in_use", "port 41225"),  # rank 0's cause, not rank 1's timeout
    ([CLIENT_TIMEOUT], [], "refused", "no rendezvous answered at 127.0.0.1:41225"),
    ([NO_INTERFACE, NO_INTERFACE], [], "no_interface", "no network interface"),
    ([NCCL_SHM, CLIENT_TIMEOUT], [], "shm", "/dev/shm"),
    (["DistBackendError: NCCL error: unhandled system error"], [NCCL_WARN_LINE], "nccl_system", "system call"),
    (["RuntimeError: rank 1 was killed at the deadline"], [NCCL_WARN_LINE], "shm", "/dev/shm"),
    (["RuntimeError: Distributed package doesn't have NCCL built in"], [], "no_nccl", "no NCCL"),
    (["RuntimeError: something nobody has seen"], ["plain output"], None, None),
])
def test_diagnose_names_the_root_cause(errors: list[str], outputs: list[str], key: str | None,
                                       words: str | None) -> None:
    from smoke.ddp import diagnose

    found = diagnose(errors, port=41225, outputs=outputs)
    if key is None:
        assert found is None
        return
    assert found is not None and found.key == key and words in found.cause
    assert found.fix and found.evidence


def test_the_shm_fix_names_docker_and_kubernetes() -> None:
    from smoke.ddp import diagnose

    found = diagnose([NCCL_SHM], port=1)
    assert found is not None
    for words in ("--ipc=host", "--shm-size", "emptyDir", "medium: Memory", "NCCL_SHM_DISABLE=1"):
        assert words in found.fix


# --- torch.compile's toolchain -------------------------------------------------------------------

def test_compiler_candidates_follow_inductor_and_triton() -> None:
    from smoke.toolchain import inductor_cxx_candidates, triton_cc_candidates

    assert inductor_cxx_candidates({}) == ["g++"]
    assert inductor_cxx_candidates({"CXX": "/opt/bin/clang++"}) == ["/opt/bin/clang++"]
    assert inductor_cxx_candidates({}, platform="darwin") == ["clang++"]
    assert triton_cc_candidates({}) == ["gcc", "clang"]
    assert triton_cc_candidates({"CC": "cc"}) == ["cc"]


def test_find_compiler_takes_the_first_that_exists() -> None:
    from smoke.toolchain import find_compiler

    which = {"clang": "/usr/bin/clang"}.get
    assert find_compiler(["gcc", "clang"], which) == "/usr/bin/clang"
    assert find_compiler(["gcc"], which) is None


@pytest.mark.parametrize(("text", "key"), [
    ("InvalidCxxCompiler: No working C++ compiler found in torch._inductor.config.cpp.cxx: (None, 'g++')", "cxx"),
    ("RuntimeError: Failed to find C compiler. Please specify via CC environment variable.", "cc"),
    ("TritonMissing: Cannot find a working triton installation. Either the package is not installed or it is too "
     "old.", "triton"),
    ("CppCompileError: C++ compile error ... fatal error: Python.h: No such file or directory", "python_headers"),
    ("GPUTooOldForTriton: Found Tesla P100 which is too old to be supported by the triton GPU compiler, which is "
     "used as the backend.", "gpu_too_old"),
    ("RuntimeError: Python 3.15+ not yet supported for torch.compile", "python"),
    ("AssertionError: compiled output differs", None),
])
def test_missing_toolchain_pieces_from_the_errors_raised(text: str, key: str | None) -> None:
    from smoke.toolchain import missing_piece

    found = missing_piece(text)
    assert (found.key if found else None) == key


def test_a_missing_compiler_fails_only_when_compile_was_required() -> None:
    from smoke.toolchain import NO_CXX, compile_requirement

    status, reason = compile_requirement(NO_CXX, required=False)
    assert status == "skipped" and "--require-compile" in reason and "features: [compile]" in reason
    status, reason = compile_requirement(NO_CXX, required=True)
    assert status == "failed" and reason.startswith("torch.compile is required but cannot run: no C++ compiler")


# --- /dev/shm and limits -------------------------------------------------------------------------

def test_loader_shm_is_workers_times_prefetch_times_page_rounded_batches() -> None:
    from smoke.resources import loader_shm_bytes

    # This suite's loader: 2 workers x 2 batches of 8 float32 rows of 1 value (32 B, one 4 KiB page each).
    assert loader_shm_bytes(2, 2, 8, 4, 4096) == 4 * 4096
    # 64 RGB 224x224 float32 images: 38,535,168 B a batch, already whole pages.
    assert loader_shm_bytes(8, 2, 64, 3 * 224 * 224 * 4, 4096) == 16 * 38_535_168
    assert loader_shm_bytes(1, 1, 1, 4097, 4096) == 8192
    with pytest.raises(ValueError):
        loader_shm_bytes(0, 2, 8, 4, 4096)


def _shm(total: int, free: int | None = None):
    from smoke.resources import ShmReading

    return ShmReading("/dev/shm", True, True, total, total if free is None else free)


@pytest.mark.parametrize(("reading", "level", "words"), [
    (_shm(8 << 30), OK, "needs 16 KiB at its peak"),
    (_shm(64 << 20), WARN, "Docker's default"),
    (_shm(64 << 20, free=8 << 10), FAIL, "insufficient shared memory (shm)"),
    (_shm(1 << 30, free=0), FAIL, "needs 16 KiB"),
])
def test_shm_verdict(reading, level: str, words: str) -> None:
    from smoke.resources import shm_verdict

    judged = shm_verdict(reading, 16 << 10, gpus=0, page_size=4096)
    assert judged.level == level and words in judged.message
    if level != OK:
        assert "--ipc=host" in judged.message and "--shm-size" in judged.message and "emptyDir" in judged.message


def test_shm_verdict_missing_or_read_only_and_nccl_named_with_two_gpus() -> None:
    from smoke.resources import ShmReading, shm_verdict

    assert shm_verdict(ShmReading("/dev/shm", False, False), 1, gpus=0, page_size=4096).level == FAIL
    assert "not writable" in shm_verdict(ShmReading("/dev/shm", True, False, 1 << 30, 1 << 30), 1, gpus=0,
                                         page_size=4096).message
    assert "NCCL" in shm_verdict(_shm(64 << 20), 1, gpus=2, page_size=4096).message


def test_read_shm_measures_a_mount(tmp_path: Path) -> None:
    from smoke.resources import read_shm

    reading = read_shm(str(tmp_path))
    assert reading.exists and reading.writable and reading.total_bytes >= reading.free_bytes > 0
    assert not read_shm(str(tmp_path / "absent")).exists


@pytest.mark.parametrize(("soft", "hard", "rdma", "level", "words"), [
    (-1, -1, ["uverbs0"], OK, "unlimited"),
    (8 << 20, 8 << 20, [], OK, "no RDMA device here"),
    (64 << 10, 64 << 10, ["uverbs0", "uverbs1"], FAIL, "--ulimit memlock=-1"),
])
def test_memlock_verdict(soft: int, hard: int, rdma: list[str], level: str, words: str) -> None:
    from smoke.resources import memlock_verdict

    judged = memlock_verdict(soft, hard, rdma)
    assert judged.level == level and words in judged.message


# --- cuDNN and NCCL against their packages -------------------------------------------------------

@pytest.mark.parametrize(("runtime", "compiled", "level"), [
    ((9, 10, 2), (9, 10, 2), OK), ((9, 10, 1), (9, 10, 2), OK),  # patch levels may differ
    ((9, 12, 0), (9, 10, 2), WARN),  # torch accepts a newer minor of the same major
    ((9, 8, 0), (9, 10, 2), FAIL), ((8, 9, 7), (9, 1, 0), FAIL), ((10, 0, 0), (9, 10, 2), FAIL),
])
def test_cudnn_runtime_verdict(runtime: tuple, compiled: tuple, level: str) -> None:
    from smoke.compat import cudnn_runtime_verdict

    judged = cudnn_runtime_verdict(runtime, compiled)
    assert judged.level == level
    assert ".".join(map(str, runtime)) in judged.message and ".".join(map(str, compiled)) in judged.message


@pytest.mark.parametrize(("package", "runtime", "match"), [
    ("9.24.0.43", (9, 24, 0), True), ("2.27.3", (2, 27, 3), True), ("2.27.3.1", (2, 27, 3), True),
    ("2.26.2", (2, 27, 3), False), ("9.1.0.70", (9, 10, 0), False),
])
def test_package_versions_against_the_loaded_library(package: str, runtime: tuple, match: bool) -> None:
    from smoke.compat import package_matches_runtime

    assert package_matches_runtime(package, runtime) is match


def test_wheel_and_conda_packages_are_found(tmp_path: Path) -> None:
    from smoke.packages import conda_versions, wheel_versions

    installed = [("nvidia-nccl-cu12", "2.27.3"), ("nvidia_cudnn_cu12", "9.10.2.21"), ("nvidia-nccl-cu12-extra", "1"),
                 ("torch", "2.13.0")]
    assert [(p.name, p.version) for p in wheel_versions(r"nvidia-nccl-cu\d+", installed)] == [
        ("nvidia-nccl-cu12", "2.27.3")]
    assert [p.describe() for p in wheel_versions(r"nvidia-cudnn-cu\d+", installed)] == [
        "the pip package nvidia-cudnn-cu12 9.10.2.21"]
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "nccl-2.27.7.1-h03a54cd_0.json").write_text(json.dumps({"name": "nccl", "version": "2.27.7.1"}))
    (meta / "nccl-tests-2.0-h0_0.json").write_text(json.dumps({"name": "nccl-tests", "version": "2.0"}))
    assert [(p.manager, p.version) for p in conda_versions("nccl", tmp_path)] == [("conda", "2.27.7.1")]
    assert conda_versions("cudnn", tmp_path) == [] and conda_versions("nccl", tmp_path / "nowhere") == []


# --- what covers a GPU the build does not --------------------------------------------------------

def test_what_covers_names_the_entries_and_the_spec_targets() -> None:
    from smoke.compat import what_covers

    alone = what_covers((12, 0))
    assert "sm_120" in alone and "compute_XY PTX at or below 12.0" in alone and "envbuild targets" in alone
    targets = {"cuda12.6": ["sm_80", "sm_90", "compute_90"], "cuda12.8": ["sm_90", "sm_100", "sm_120"]}
    assert what_covers((12, 0), targets).endswith("carried by this spec's target(s) cuda12.6, cuda12.8")
    assert what_covers((8, 6), {"cuda13.0": ["sm_90", "sm_100"]}).endswith(
        "none of this spec's targets (cuda13.0) carries them")


# --- the check table in smoke/README.md ----------------------------------------------------------

def _registered_checks() -> list[tuple[str, str, str]]:
    """(name, first docstring line, stands_for) of every @check in smoke/checks, read from the source
    (no torch), in the run order load_checks gives."""
    import ast

    from smoke.checks import CHECK_MODULES

    found = []
    for module in CHECK_MODULES:
        tree = ast.parse((REPO / "smoke" / "checks" / f"{module}.py").read_text())
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == "check":
                    keywords = {k.arg: ast.literal_eval(k.value) for k in decorator.keywords}
                    doc = (ast.get_docstring(node) or "").strip().splitlines()[0]
                    found.append((ast.literal_eval(decorator.args[0]), doc, keywords.get("stands_for", "")))
    return found


def test_every_check_says_what_it_stands_for() -> None:
    checks = _registered_checks()
    assert len(checks) == 36
    assert all(stands_for.startswith(("seed", "upstream", "envbuild", "'no kernel")) for _, _, stands_for in checks), \
        [name for name, _, stands_for in checks if not stands_for]


def test_the_readme_table_is_the_registry() -> None:
    table = [line for line in (REPO / "smoke" / "README.md").read_text().splitlines() if line.startswith("| `")]
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table]
    names = [row[0].strip("`") for row in rows]
    assert names == ["env.import_torch"] + [name for name, _, _ in _registered_checks()]
    for (name, doc, stands_for), row in zip(_registered_checks(), rows[1:], strict=True):
        assert row[1].startswith(doc.rstrip(".")), name
        assert row[2] == stands_for, name

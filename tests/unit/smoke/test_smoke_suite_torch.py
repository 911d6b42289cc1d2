"""The smoke suite's checks running torch (CPU), and `python -m smoke` end to end in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.paths import REPO

torch = pytest.importorskip("torch")

from smoke.checks import load_checks  # noqa: E402
from smoke.checks.amp import CHANCE_LOSS, judge_run, train_blobs  # noqa: E402
from smoke.checks.checkpoints import judge_gpu_less_load, load_in_gpu_less_child  # noqa: E402
from smoke.checks.dataloader import judge_delivery, load_all_batches  # noqa: E402
from smoke.checks.dataparallel import BatchRecorder  # noqa: E402
from smoke.checks.visibility import mig_limit  # noqa: E402
from smoke.compat import CudaExpectation  # noqa: E402
from smoke.device_info import mig_in_view  # noqa: E402
from smoke.registry import Context, Settings, run_check  # noqa: E402
from smoke.report import SmokeReport  # noqa: E402

pytestmark = pytest.mark.torch

CHECKS = {c.name: c for c in load_checks()}
CPU_ONLY = not torch.cuda.is_available()
needs_cpu_only = pytest.mark.skipif(not CPU_ONLY, reason="asserts what happens on a machine without CUDA")
HAS_CXX = shutil.which(os.environ.get("CXX") or "g++") is not None


@pytest.fixture(autouse=True)
def one_torch_thread():
    # The suite shares two cores with everyone else here; its work is tiny anyway.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _run(name: str, **settings) -> object:
    ctx = Context(Settings(**settings), gpu_count=torch.cuda.device_count() if torch.cuda.is_available() else 0)
    return run_check(CHECKS[name], ctx)


# --- AMP -----------------------------------------------------------------------------------------

def test_amp_training_learns_in_bf16() -> None:
    run = train_blobs("cpu", torch.bfloat16)
    assert abs(run.first_loss - CHANCE_LOSS) < 0.3
    assert run.end_ratio < 0.7
    assert judge_run(run, torch.bfloat16) == []


def test_amp_training_is_repeatable_for_a_seed() -> None:
    first, second = (train_blobs("cpu", torch.bfloat16, steps=30) for _ in range(2))
    assert first.last_loss == second.last_loss


def test_amp_check_fails_with_lr_zero() -> None:
    run = train_blobs("cpu", torch.bfloat16, lr=0.0)
    problems = judge_run(run, torch.bfloat16)
    assert len(problems) == 1 and "needs < 0.7" in problems[0]


def test_amp_check_fails_when_the_dtype_is_wrong() -> None:
    run = train_blobs("cpu", None)  # fp32, trains fine
    problems = judge_run(run, torch.bfloat16)
    assert problems and "logits are float32" in problems[0]


@needs_cpu_only
def test_cuda_autocast_without_cuda_is_caught_by_the_dtype_and_scaler_checks() -> None:
    with pytest.warns(UserWarning):
        run = train_blobs("cpu", torch.float16, autocast_device="cuda", use_scaler=True)
    problems = judge_run(run, torch.float16)
    assert any("autocast('cuda') did not take effect" in p for p in problems)
    assert any("GradScaler is disabled" in p for p in problems)


def test_amp_cpu_check_passes() -> None:
    result = _run("amp.cpu_bf16")
    assert result.status == "passed", result.reason
    assert result.details["logits_dtype"] == "bfloat16"


# --- environment ---------------------------------------------------------------------------------

@needs_cpu_only
def test_wrong_expect_cuda_fails_the_env_check() -> None:
    result = _run("env.cuda_build", expect_cuda=CudaExpectation.parse("11.8"))
    assert result.status == "failed"
    assert "CPU build but 11.8 was expected" in result.reason
    assert _run("env.cuda_build", expect_cuda=CudaExpectation.parse("cpu")).status == "passed"


def test_expect_torch() -> None:
    version = str(torch.__version__).split("+")[0]
    assert _run("env.torch_version", expect_torch=version).status == "passed"
    assert _run("env.torch_version", expect_torch="1.0").status == "failed"
    assert _run("env.torch_version").status == "skipped"


def test_expected_packages_fail_when_missing_or_another_version() -> None:
    import importlib.metadata

    numpy_version = importlib.metadata.version("numpy")
    assert _run("env.expected_packages", expect_packages=(("numpy", numpy_version),)).status == "passed"
    wrong = _run("env.expected_packages", expect_packages=(("numpy", "0.1"),))
    assert wrong.status == "failed" and f"numpy {numpy_version} is installed but 0.1 is pinned" in wrong.reason
    # this venv has no torchvision (FIELD-NOTES: the CPU torch has no working one)
    missing = _run("env.expected_packages", expect_packages=(("torchvision", "0.28.0"),))
    assert missing.status == "failed" and "torchvision 0.28.0 is pinned but not installed" in missing.reason
    assert _run("torchvision.ops", expect_packages=(("torchvision", "0.28.0"),)).status == "failed"
    assert _run("torchvision.ops").status == "skipped"
    assert _run("env.expected_packages").status == "skipped"


def test_expected_packages_without_a_version_and_under_another_import_name() -> None:
    # a name alone: any version, but installed and importable; pyyaml imports as `yaml`, by its metadata
    found = _run("env.expected_packages", expect_packages=(("pyyaml", None),))
    assert found.status == "passed", found.reason
    missing = _run("env.expected_packages", expect_packages=(("torchaudio", None),))
    assert missing.status == "failed" and "torchaudio is pinned but not installed" in missing.reason
    assert _run("torchvision.ops", expect_packages=(("torchvision", None),)).status == "failed"


def test_an_expected_package_that_does_not_import_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution whose metadata is there but whose module raises on import: a failure naming it."""
    info = tmp_path / "brokenpkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenpkg\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("brokenmod\n")
    (tmp_path / "brokenmod.py").write_text("raise ImportError('libfoo.so.1: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = _run("env.expected_packages", expect_packages=(("brokenpkg", "1.0"),))
    assert result.status == "failed", result.reason
    assert "import brokenmod (brokenpkg) failed: ImportError: libfoo.so.1" in result.reason


@needs_cpu_only
def test_require_gpus_fails_the_visibility_check_here() -> None:
    result = _run("visibility.devices", require_gpus=1)
    assert result.status == "failed"
    assert "0 CUDA device(s) visible but --require-gpus 1" in result.reason
    assert _run("visibility.devices").status == "skipped"


def test_to_semantics_on_cpu() -> None:
    result = _run("visibility.to_semantics")
    assert result.status == "passed", result.reason


# --- DataParallel --------------------------------------------------------------------------------

@needs_cpu_only
def test_dataparallel_passes_through_on_cpu() -> None:
    result = _run("dp.passthrough")
    assert result.status == "passed", result.reason
    assert result.details["device_ids"] == [] and result.details["seen"] == [(None, 32)]


@needs_cpu_only
def test_split_checks_skip_with_their_reason_on_cpu() -> None:
    for name in ("dp.split", "dp.device_ids0", "dp.gradients", "dp.throughput"):
        result = _run(name)
        assert result.status == "skipped" and "needs 2 CUDA device(s)" in result.reason
        assert _run(name, require_gpus=2).status == "failed"


def test_batch_recorder_replicas_share_the_record() -> None:
    recorder = BatchRecorder()
    replica = recorder._replicate_for_data_parallel()  # what DataParallel.replicate makes per device
    replica(torch.zeros(5, 8))
    recorder(torch.zeros(3, 8))
    assert recorder.seen == [(None, 5), (None, 3)]


# --- checkpoints and DataLoader ------------------------------------------------------------------

def test_checkpoint_checks_pass_on_cpu() -> None:
    for name in ("checkpoint.cpu_map_location", "checkpoint.dataparallel_prefix"):
        result = _run(name)
        assert result.status == "passed", result.reason


def _forge_cuda_checkpoint(path: Path, state: dict) -> None:
    """A checkpoint whose storages say 'cuda:0', made without CUDA: the file torch.save writes on a GPU
    box. Only the location tag is forced; the format is torch's own."""
    import torch.serialization as serialization

    original = serialization.location_tag
    serialization.location_tag = lambda storage: "cuda:0"
    try:
        torch.save(state, path)
    finally:
        serialization.location_tag = original


def test_gpu_less_child_sees_the_known_error_and_map_location_fixes_it(tmp_path: Path) -> None:
    state = {"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "bias": torch.ones(2)}
    sums = {k: float(v.double().sum()) for k, v in state.items()}
    forged = tmp_path / "cuda.pt"
    _forge_cuda_checkpoint(forged, state)
    child = load_in_gpu_less_child(forged)
    assert judge_gpu_less_load(child, sums) == []
    # Negative control: a CPU checkpoint loads without map_location, which the judge must notice.
    plain = tmp_path / "cpu.pt"
    torch.save(state, plain)
    problems = judge_gpu_less_load(load_in_gpu_less_child(plain), sums)
    assert problems and "without map_location" in problems[0]


def test_fork_workers_deliver_every_batch() -> None:
    result = load_all_batches("fork", pin_memory=False)
    assert judge_delivery(result, pin_memory=False) == []


def test_delivery_judge_rejects_lost_or_unpinned_batches() -> None:
    result = load_all_batches("fork", pin_memory=False)
    assert judge_delivery(result, pin_memory=True) == ["pin_memory=True returned unpinned batches"]
    short = dict(result, rows=result["rows"][:-8], batches=result["batches"] - 1)
    assert len(judge_delivery(short, pin_memory=False)) == 2


# --- python -m smoke -----------------------------------------------------------------------------

def _smoke(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "smoke", *args], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=timeout)


def test_full_run_writes_reports_that_agree(tmp_path: Path) -> None:
    json_path, junit_path = tmp_path / "smoke.json", tmp_path / "smoke.xml"
    done = _smoke("--json", str(json_path), "--junit", str(junit_path))
    report = SmokeReport.from_json(json_path.read_text())  # also checks summary == checks
    summary = report.summary
    assert done.returncode == (1 if summary.failed else 0), done.stdout + done.stderr
    assert f"smoke: {summary.passed} passed, {summary.failed} failed, {summary.skipped} skipped" in done.stdout
    raw = json.loads(json_path.read_text())
    assert raw["environment"]["torch"] == str(torch.__version__)
    assert raw["collect_env"] and "PyTorch version" in raw["collect_env"]
    suite = ET.parse(junit_path).getroot().find("testsuite")
    assert suite is not None
    assert int(suite.get("tests")) == len(report.checks)
    assert int(suite.get("failures")) == summary.failed == len(suite.findall("testcase/failure"))
    assert int(suite.get("skipped")) == summary.skipped == len(suite.findall("testcase/skipped"))
    assert all(c.reason for c in report.checks)
    if CPU_ONLY:
        statuses = {c.name: c.status for c in report.checks}
        assert summary.failed == 0, [c for c in report.checks if c.status == "failed"]
        for name in ("env.import_torch", "visibility.to_semantics", "dp.passthrough", "amp.cpu_bf16",
                     "checkpoint.cpu_map_location", "checkpoint.dataparallel_prefix", "dataloader.fork",
                     "dataloader.spawn", "ddp.allreduce_step", "container.shm", "container.limits"):
            assert statuses[name] == "passed", name
        assert statuses["compile.inductor"] == ("passed" if HAS_CXX else "skipped")


@needs_cpu_only
def test_cli_expectations_come_from_flags_and_environment(tmp_path: Path) -> None:
    report_path = tmp_path / "r.json"
    done = _smoke("--only", "env.cuda_build,env.torch_version", "--no-collect-env", "--json", str(report_path),
                  env={"ENVBUILD_EXPECT_CUDA": "11.8", "ENVBUILD_EXPECT_TORCH": str(torch.__version__)})
    assert done.returncode == 1
    statuses = {c.name: c.status for c in SmokeReport.from_json(report_path.read_text()).checks}
    assert statuses == {"env.cuda_build": "failed", "env.torch_version": "passed"}
    # A flag wins over the environment.
    done = _smoke("--only", "env.cuda_build", "--no-collect-env", "--expect-cuda", "cpu",
                  env={"ENVBUILD_EXPECT_CUDA": "11.8"})
    assert done.returncode == 0, done.stdout


@needs_cpu_only
def test_cli_require_gpus_fails_here() -> None:
    done = _smoke("--only", "visibility", "--no-collect-env", "--require-gpus", "1")
    assert done.returncode == 1
    assert "FAIL   visibility.devices" in done.stdout


@pytest.mark.parametrize("args", [["--expect-cuda", "banana"], ["--only", "no.such"], ["--require-gpus", "-1"]])
def test_cli_usage_errors_exit_2(args: list[str]) -> None:
    done = _smoke(*args, "--no-collect-env")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("python -m smoke: error:")


# --- kernels and arch lists ----------------------------------------------------------------------

@needs_cpu_only
def test_matmul_per_device_skips_without_gpus_and_fails_when_they_are_required() -> None:
    result = _run("gpu.matmul_per_device")
    assert (result.status, result.reason) == ("skipped", "needs 1 CUDA device(s), 0 visible")
    assert _run("gpu.matmul_per_device", require_gpus=1).status == "failed"


@needs_cpu_only
def test_arch_flags_skip_on_a_cpu_build() -> None:
    result = _run("env.arch_flags", expect_archs=("sm_80",))
    assert (result.status, result.reason) == ("skipped", "CPU build of torch: no GPU architectures compiled in")


@pytest.mark.parametrize(("built", "status", "words"), [
    ("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120", "passed", "as envbuild's data says"),
    ("sm_80 sm_86 sm_90 sm_100 sm_120 compute_120", "failed", "missing sm_75"),
    ("sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120", "failed", "extra sm_70"),
    ("", "failed", "(empty)"),
])
def test_arch_flags_against_the_data(monkeypatch: pytest.MonkeyPatch, built: str, status: str, words: str) -> None:
    # What a CUDA build's torch._C reports without a GPU, against the list compat.yaml gives torch 2.13 cu130
    from builder.specs.compat import load_compat
    from builder.specs.cuda import CudaVersion
    from builder.specs.model import Route

    expected = tuple(load_compat().torch["2.13"].archs_for(Route.PIP, CudaVersion(13, 0)))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch._C, "_cuda_getArchFlags", lambda: built, raising=False)
    result = _run("env.arch_flags", expect_archs=expected)
    assert result.status == status and words in result.reason, result.reason


def test_cli_expect_archs_from_the_environment_and_refused_when_malformed() -> None:
    # On a CUDA build the check compares for real: expect what this torch was built with (on a GPU machine,
    # a made-up list failed here).
    archs = " ".join(torch.cuda.get_arch_list()) or "sm_80 sm_90"
    done = _smoke("--only", "env.arch_flags", "--no-collect-env", env={"ENVBUILD_EXPECT_ARCHS": archs})
    assert done.returncode == 0, done.stdout + done.stderr
    done = _smoke("--only", "env.arch_flags", "--no-collect-env", "--expect-archs", "ampere")
    assert done.returncode == 2
    assert "--expect-archs 'ampere'" in done.stderr


# --- torchvision ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("torch_version", "torchvision", "ok"), [
    ("2.13.0+cpu", "0.28.0", True), ("2.14.1+cu130", "0.29.1+cu130", True), ("1.13.1", "0.14.1", True),
    ("2.13.0+cpu", "0.29.1", False), ("2.14.1", "0.15.2", False), ("9.0.0", "1.0.0", True),
])
def test_torchvision_pairing_verdict(torch_version: str, torchvision: str, ok: bool) -> None:
    from builder.image.smoke_data import smoke_data
    from smoke.checks.torchvision_checks import pairing_verdict

    verdict_ok, message = pairing_verdict(torch_version, torchvision, smoke_data()["torchvision_pairs"])
    assert verdict_ok is ok
    if not ok:
        assert "does not pair" in message


def test_torchvision_pairing_without_shipped_data_is_not_judged() -> None:
    from smoke.checks.torchvision_checks import pairing_verdict

    ok, message = pairing_verdict("2.13.0+cpu", "0.29.1")  # the source tree ships no data file
    assert ok is True and "no compatibility data shipped" in message


@pytest.mark.parametrize(("number", "cuda"), [(13000, "13.0"), (12090, "12.9"), (11080, "11.8"), (-1, None)])
def test_torchvision_cuda_version_numbers(number: int, cuda: str | None) -> None:
    from smoke.checks.torchvision_checks import cuda_from_version_number

    assert cuda_from_version_number(number) == cuda


def test_torchvision_checks_skip_with_a_reason_when_it_is_absent() -> None:
    from smoke.checks.torchvision_checks import installed_torchvision

    if installed_torchvision() is not None:
        pytest.skip("torchvision is installed here")
    for name in ("torchvision.version", "torchvision.cuda_build", "torchvision.ops", "torchvision.resnet18_amp"):
        result = _run(name, require_gpus=1)  # not a GPU skip: --require-gpus leaves it alone
        assert (result.status, result.reason) == ("skipped", "torchvision is not installed")


# --- DistributedDataParallel ---------------------------------------------------------------------

@needs_cpu_only
def test_ddp_step_on_cpu_passes_with_gloo() -> None:
    result = _run("ddp.allreduce_step")
    assert result.status == "passed", result.reason
    assert result.details["backend"] == "gloo"
    reports = result.details["attempts"][-1]["reports"]
    assert [r["all_reduce"] for r in reports] == [[3.0, 30.0], [3.0, 30.0]]
    assert all(r["grads_match"] and r["params_match"] and r["stage"] == "done" for r in reports)


def test_one_rank_alone_is_not_the_whole_batch_but_the_average_is() -> None:
    # What makes the DDP comparison able to fail: a rank's own gradients (no all-reduce) miss the
    # whole batch's; their average, which DDP's all-reduce computes, meets it.
    from smoke.ddp_rank import all_close, gradients, make_batch, make_model

    inputs, targets = make_batch()
    whole = gradients(make_model(), inputs, targets)
    first = gradients(make_model(), inputs[:8], targets[:8])
    second = gradients(make_model(), inputs[8:], targets[8:])
    assert not all_close(first, whole) and not all_close(second, whole)
    assert all_close([(a + b) / 2 for a, b in zip(first, second, strict=True)], whole)


@needs_cpu_only
def test_ddp_names_the_cause_when_gloo_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "nosuchif0")  # gloo's own "Unable to find address for: nosuchif0"
    result = _run("ddp.allreduce_step")
    assert result.status == "failed"
    assert "found no network interface" in result.reason and "GLOO_SOCKET_IFNAME=lo" in result.reason
    assert "Unable to find address for: nosuchif0" in result.details["attempts"][-1]["diagnosis"]["evidence"]


def test_ddp_ranks_past_the_deadline_are_killed_and_reaped(monkeypatch: pytest.MonkeyPatch) -> None:
    import smoke.checks.distributed as distributed

    monkeypatch.setattr(distributed, "DEADLINE_S", 1.0)
    monkeypatch.setattr(distributed, "MIN_DEADLINE_S", 1.0)
    result = _run("ddp.allreduce_step")
    # The reason names the 1 s deadline it enforced; no wall-clock bound, which fails on a loaded machine.
    assert result.status == "failed" and "did not finish within 1 s and were killed" in result.reason
    assert _running("smoke.ddp_rank") == []


def _running(module: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if module.encode() in command and state != "Z":
            found.append(int(entry.name))
    return found


# --- torch.compile -------------------------------------------------------------------------------

@needs_cpu_only
@pytest.mark.skipif(not HAS_CXX, reason="no C++ compiler here: the pass path cannot run")
def test_compile_matches_eager_on_cpu() -> None:
    result = _run("compile.inductor")
    assert result.status == "passed", result.reason
    assert result.details["kernels"] >= 1 and result.details["max_diff"] < 1e-5
    assert result.details["compiler"]


@needs_cpu_only
def test_no_compiler_is_a_named_skip_unless_compile_is_required(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-g++"))
    monkeypatch.delenv("TORCH_INDUCTOR_INSTALL_GXX", raising=False)
    result = _run("compile.inductor")
    assert result.status == "skipped"
    assert "no C++ compiler" in result.reason and "--require-compile" in result.reason
    required = _run("compile.inductor", require_compile=True)  # the probe runs: torch's own error comes back
    assert required.status == "failed"
    assert required.reason.startswith("torch.compile is required but cannot run: no C++ compiler")
    assert required.details["error"].startswith("InvalidCxxCompiler: No working C++ compiler found")


@needs_cpu_only
def test_cli_require_compile_fails_without_a_compiler(tmp_path: Path) -> None:
    done = _smoke("--only", "compile", "--no-collect-env", env={"CXX": str(tmp_path / "none"),
                                                                  "ENVBUILD_REQUIRE_COMPILE": "1"})
    assert done.returncode == 1 and "FAIL   compile.inductor" in done.stdout


# --- the container -------------------------------------------------------------------------------

def test_container_checks_pass_here() -> None:
    for name in ("container.shm", "container.limits"):
        result = _run(name)
        assert result.status == "passed", result.reason
    assert _run("container.shm").details["need_bytes"] == 4 * os.sysconf("SC_PAGE_SIZE")


def test_shm_check_fails_when_the_loader_would_not_fit_and_warns_at_dockers_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from smoke.checks import container
    from smoke.resources import ShmReading

    monkeypatch.setattr(container, "read_shm", lambda: ShmReading("/dev/shm", True, True, 64 << 20, 4096))
    result = _run("container.shm")
    assert result.status == "failed" and "this suite's DataLoader needs 16 KiB" in result.reason
    monkeypatch.setattr(container, "read_shm", lambda: ShmReading("/dev/shm", True, True, 64 << 20, 60 << 20))
    result = _run("container.shm")
    assert result.status == "passed" and result.reason.startswith("warning:") and "--shm-size" in result.reason


# --- cuDNN, NCCL and the arch list on a CPU build ------------------------------------------------

@needs_cpu_only
def test_cudnn_and_nccl_checks_skip_on_a_cpu_build() -> None:
    assert (_run("env.cudnn_consistency").status, _run("env.cudnn_consistency").reason) == (
        "skipped", "CPU build of torch: no cuDNN")
    assert (_run("env.nccl_version").status, _run("env.nccl_version").reason) == (
        "skipped", "CPU build of torch: no NCCL")


@needs_cpu_only
def test_the_former_arch_check_name_still_selects_it() -> None:
    done = _smoke("--only", "env.arch_list", "--no-collect-env")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SKIP   gpu.arch_in_build" in done.stdout


def test_list_shows_what_every_check_stands_for() -> None:
    done = _smoke("--list")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    names = [line.split()[0] for line in lines if not line.startswith(" ")]
    assert names == ["env.import_torch"] + list(CHECKS)
    stands_for = [line.strip() for line in lines if line.startswith(" ")]
    assert len(stands_for) == len(names) and all(line.startswith("for: ") and line != "for: -" for line in stands_for)


# --- what the GPU-side checks make of what a CUDA build reports (no GPU needed) -------------------

def _cuda_build(monkeypatch: pytest.MonkeyPatch, *, packages: list, **reported) -> None:
    """A CUDA build's reports, forged on this CPU build: torch.version.cuda, cuDNN's and NCCL's versions,
    and the NVIDIA packages the environment holds."""
    import types

    import smoke.checks.environment as environment

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch._C, "_cudnn", types.SimpleNamespace(
        getRuntimeVersion=lambda: reported.get("cudnn_runtime", (9, 24, 0)),
        getCompileVersion=lambda: reported.get("cudnn_compiled", (9, 24, 0))), raising=False)
    monkeypatch.setattr(torch._C, "_nccl_version", lambda: 0, raising=False)
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: reported.get("nccl", (2, 27, 3)))
    monkeypatch.setattr(environment, "wheel_versions", lambda pattern: [
        p for p in packages if p.manager == "pip" and pattern.startswith(p.name.rsplit("-", 1)[0])])
    monkeypatch.setattr(environment, "conda_versions", lambda name: [
        p for p in packages if p.manager == "conda" and p.name == name])


def _pip(name: str, version: str):
    from smoke.packages import InstalledPackage

    return InstalledPackage("pip", name, version)


@pytest.mark.parametrize(("reported", "packages", "status", "words"), [
    ({}, [("nvidia-cudnn-cu13", "9.24.0.43")], "passed", "cuDNN 9.24.0 is loaded, torch was built with 9.24.0"),
    ({"cudnn_runtime": (9, 26, 0)}, [], "passed", "warning: cuDNN 9.26.0 is loaded"),
    ({"cudnn_runtime": (8, 9, 7)}, [], "failed", "torch refuses it"),
    ({}, [("nvidia-cudnn-cu13", "9.10.2.21")], "failed", "another libcudnn comes first"),
])
def test_cudnn_consistency_on_what_a_cuda_build_reports(monkeypatch: pytest.MonkeyPatch, reported: dict,
                                                        packages: list, status: str, words: str) -> None:
    _cuda_build(monkeypatch, packages=[_pip(*p) for p in packages], **reported)
    result = _run("env.cudnn_consistency")
    assert result.status == status and words in result.reason, result.reason


@pytest.mark.parametrize(("reported", "packages", "status", "words"), [
    ({}, [("nvidia-nccl-cu13", "2.27.3")], "passed", "NCCL 2.27.3 is the one the pip package nvidia-nccl-cu13"),
    ({"nccl": (2, 27, 3, "+cuda13.0")}, [], "passed", "NCCL 2.27.3 (+cuda13.0) (no nvidia-nccl wheel"),
    ({}, [("nvidia-nccl-cu13", "2.26.2")], "failed", "another libnccl comes first"),
])
def test_nccl_version_on_what_a_cuda_build_reports(monkeypatch: pytest.MonkeyPatch, reported: dict,
                                                   packages: list, status: str, words: str) -> None:
    _cuda_build(monkeypatch, packages=[_pip(*p) for p in packages], **reported)
    result = _run("env.nccl_version")
    assert result.status == status and words in result.reason, result.reason


@pytest.mark.parametrize(("archs", "capability", "status", "words"), [
    (["sm_80", "sm_90", "compute_90"], (9, 0), "passed", "cuda:0 9.0 exact (sm_90)"),
    (["sm_80", "sm_90", "compute_90"], (12, 0), "passed", "ptx-jit (compute_90)"),
    (["sm_80", "sm_90"], (12, 0), "failed", "it needs sm_120 kernels"),
])
def test_arch_in_build_on_what_a_gpu_reports(monkeypatch: pytest.MonkeyPatch, archs: list[str],
                                             capability: tuple[int, int], status: str, words: str) -> None:
    import smoke.checks.environment as environment

    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: archs)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "NVIDIA Forged")
    monkeypatch.setattr(environment, "_run_a_kernel", lambda index: None)
    result = run_check(CHECKS["gpu.arch_in_build"], Context(Settings(), gpu_count=1))
    assert result.status == status and words in result.reason, result.reason


def test_a_mig_instance_is_told_by_its_name_or_by_cuda_visible_devices() -> None:
    a100_slice = {"index": 0, "name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb"}
    assert mig_in_view([a100_slice], None) == "device name 'NVIDIA A100-SXM4-40GB MIG 1g.5gb'"
    assert mig_in_view([], "MIG-4b2a1c3e-0000-5f6a-8b9c-0123456789ab,MIG-GPU-0/1/0") == (
        "CUDA_VISIBLE_DEVICES lists 2 MIG instance(s)")
    assert mig_in_view([{"index": 0, "name": "NVIDIA H100 80GB HBM3"}], "0,1") is None
    assert "--require-gpus 2 cannot be met" in mig_limit("device name 'x MIG 1g.5gb'", 2)


def test_require_gpus_on_mig_instances_says_mig_sets_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4b2a1c3e-0000-5f6a-8b9c-0123456789ab")
    result = _run("visibility.devices", require_gpus=2)
    assert result.status == "failed"
    assert "MIG is on (CUDA_VISIBLE_DEVICES lists 1 MIG instance(s))" in result.reason

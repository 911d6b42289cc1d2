"""`envbuild explain`: rules use this host's facts and the spec's targets, the CLI reads a file or stdin,
exit 0 when it recognised something, 1 when not, and --json carries the shared Finding shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.explain.facts import capability_of
from builder.explain.families import load_rules
from builder.explain.report import explain_text, rule_registry
from builder.findings import Finding
from builder.host.gpuinfo import gpus_from_nvml
from smoke.driver import DriverReading
from tests import paths
from tests.unit.host.doctor_helpers import H100, K80_BOARD, RTX_5090, spec_targets

pytestmark = pytest.mark.unit

CORPUS = paths.CORPUS / "error-logs"
ROOT = paths.REPO


def first(text: str, **context) -> Finding:
    report = explain_text(text, **context)
    assert report.findings, "nothing recognised"
    return report.findings[0]


def test_every_data_rule_is_registered_once_in_file_order():
    assert rule_registry().ids() == [rule.id for rule in load_rules()]
    assert len(set(rule_registry().ids())) == len(load_rules())


@pytest.mark.parametrize(("sm", "capability"), [("sm_120", (12, 0)), ("sm_86", (8, 6)), ("sm_37", (3, 7)),
                                                ("sm_90", (9, 0)), ("compute_37", None)])
def test_capability_of(sm: str, capability):
    assert capability_of(sm) == capability


def test_no_kernel_image_names_the_spec_target_for_this_hosts_gpu():
    log = (CORPUS / "01-no-kernel-image-rtx2060.log").read_text()
    k80 = tuple(gpus_from_nvml(K80_BOARD))
    finding = first(log, gpus=k80, driver=DriverReading("nvml", (11, 4), "470.256.02"),
                    targets=spec_targets().values())
    assert finding.rule == "explain.cuda.no-kernel-image"
    assert "GPU 0 Tesla K80 (sm_37)" in finding.message
    assert finding.fix == "use target cuda11.8 (its build has sm_37 kernels for Tesla K80)"


def test_no_kernel_image_without_host_or_warning_points_at_doctor():
    finding = first("RuntimeError: CUDA error: no kernel image is available for execution on the device")
    assert "envbuild doctor SPEC" in (finding.fix or "")


def test_arch_fix_never_names_a_build_the_driver_cannot_run():
    log = (CORPUS / "02-sm120-not-compatible-5090.log").read_text()
    unknown_driver = first(log)
    # No driver in the log, but sm_120 came with CUDA 12.8: a driver that drives the GPU runs a 12.8 build,
    # while the newest build (CUDA 13) would need a newer driver than some Blackwell setups have.
    assert "CUDA 12.8" in (unknown_driver.fix or "") and "CUDA 13" not in (unknown_driver.fix or "")
    assert "first CUDA with this architecture" in (unknown_driver.fix or "")
    assert "--index-url " in (unknown_driver.fix or "") and "/whl/cu128`" in (unknown_driver.fix or "")
    old_driver = first(log, driver=DriverReading("nvml", (12, 8), "570.86.15"), gpus=gpus_from_nvml(RTX_5090))
    assert "CUDA 13" not in (old_driver.fix or "")
    assert "CUDA 12.8" in (old_driver.fix or "")


def test_no_kernel_image_keeps_the_logs_torch_release_with_a_build_for_the_gpu():
    # torch 2.8's CUDA 12.8 build dropped Pascal; its CUDA 12.6 build of the same release still has sm_61, and a
    # driver that ran the 12.8 build runs it: the smallest change, named with the facts it rests on.
    finding = first("RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
                    "- NVIDIA GeForce GTX 1080 Ti\n- 2.8.0+cu128\n")
    assert "GTX 1080 Ti (line 2), sm_61" in finding.message
    assert "torch 2.8.0+cu128 (line 3) has kernels for sm_70" in finding.message
    assert (finding.fix or "").startswith("use torch 2.8.0 with CUDA 12.6: the log's torch release")


def test_no_kernel_image_without_proof_of_the_driver_names_the_newest_and_the_oldest_driver_build():
    # An RTX 3090 (sm_86, first in CUDA 11.1): no build in the data is that old, so the fix names the newest
    # build with the driver it needs, and the newest of those that need the oldest driver.
    finding = first("RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
                    "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-x)\n")
    assert "the newest released build with sm_86 kernels" in (finding.fix or "")
    assert "it needs driver >=" in (finding.fix or "") and "for an older driver" in (finding.fix or "")


def test_driver_too_old_lists_the_spec_targets_that_run():
    log = (CORPUS / "04-driver-too-old-11040.log").read_text()
    finding = first(log, targets=spec_targets().values())
    assert "CUDA 11.4" in finding.message
    assert finding.fix.startswith("use a target this driver runs: cuda11.8 (minor-version compatibility)")
    assert "cuda12" not in finding.fix and "cuda13" not in finding.fix


def test_driver_insufficient_with_this_hosts_driver():
    finding = first("CUDA driver version is insufficient for CUDA runtime version",
                    driver=DriverReading("nvml", (12, 2), "535.54.03"), gpus=gpus_from_nvml(H100))
    assert "supports CUDA 12.2" in finding.message
    assert "12.9" not in (finding.fix or "") and "13.0" not in (finding.fix or "")


def test_module_prefix_direction():
    wrapped_model = first('Missing key(s) in state_dict: "module.fc.weight", "module.fc.bias".\n'
                          'Unexpected key(s) in state_dict: "fc.weight", "fc.bias".')
    assert "model.module.load_state_dict" in (wrapped_model.fix or "")
    prefixed_checkpoint = first((CORPUS / "08-state-dict-module-prefix.log").read_text())
    assert "consume_prefix_in_state_dict_if_present" in (prefixed_checkpoint.fix or "")


def test_oom_that_fits_gets_allocator_advice():
    finding = first("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB "
                    "(GPU 0; 5.80 GiB total capacity; 4.36 GiB already allocated; 6.69 MiB free)")
    assert "expandable_segments" in (finding.fix or "")
    assert "total 5.80 GiB" in finding.message


@pytest.mark.parametrize(("log", "rule"), [
    ("Failed to initialize NVML: Insufficient Permissions", "explain.driver.insufficient-permissions"),
    ("$ nvidia-smi\nNo devices were found\n", "explain.driver.no-devices"),
    ("RuntimeError: DataLoader worker (pid(s) 3216) exited unexpectedly", "explain.dataloader.worker-exited"),
    ("AssertionError: Torch not compiled with CUDA enabled", "explain.torch.not-compiled-with-cuda"),
])
def test_rules_without_a_corpus_log(log: str, rule: str):
    assert first(log).rule == rule


def test_unrelated_text_is_not_recognised():
    report = explain_text("Traceback (most recent call last):\nValueError: bad value\n")
    assert not report.recognised and report.findings == ()


def test_cli_human_output_and_exit_codes(tmp_path: Path):
    runner = CliRunner()
    done = runner.invoke(cli, ["explain", "--no-host", str(CORPUS / "10-dataparallel-device-ids.log")])
    assert done.exit_code == 0, done.output
    assert "error: explain.dataparallel.device-ids (line 8)" in done.output
    assert "fix:" in done.output
    nothing = tmp_path / "ok.log"
    nothing.write_text("all good\n")
    missed = runner.invoke(cli, ["explain", "--no-host", str(nothing)])
    assert missed.exit_code == 1
    assert "nothing recognised" in missed.output


def test_cli_reads_stdin_and_prints_json():
    log = (CORPUS / "07-deserialize-cuda-on-cpu.log").read_bytes()
    done = CliRunner().invoke(cli, ["explain", "--no-host", "--json", "-"], input=log)
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["source"] == "-" and data["recognised"] is True
    [finding] = data["findings"]
    assert finding["rule"] == "explain.checkpoint.map-location"
    assert Finding.from_dict(finding).fix and "map_location" in finding["fix"]


def test_cli_names_spec_targets():
    done = CliRunner().invoke(cli, ["explain", "--no-host", "--json", "--spec", str(ROOT / "envs" / "pytorch.yaml"),
                                    str(CORPUS / "02-sm120-not-compatible-5090.log")])
    assert done.exit_code == 0, done.output
    fixes = [f["fix"] for f in json.loads(done.output)["findings"]]
    assert fixes[0].startswith("use target cuda13.0")
    assert fixes[1].startswith("use target cuda13.0")  # no kernel image: same GPU, from the warning


def test_cli_missing_file_is_one_error_line():
    done = CliRunner().invoke(cli, ["explain", "does-not-exist.log"])
    assert done.exit_code == 2
    assert "Error:" in done.output and "Traceback" not in done.output


def test_a_long_training_log_is_read_to_its_end():
    # Many harmless mentions of a rule's needle before the real error: every one is looked at.
    noise = "epoch 3 step 100 loss 0.12 (saved state_dict to ckpt.pt)\n" * 40_000
    log = noise + 'RuntimeError: Error(s) in loading state_dict for Net:\n\tUnexpected key(s) in state_dict: "module.fc.weight".\n'
    [finding] = explain_text(log).findings
    assert finding.rule == "explain.checkpoint.module-prefix"
    assert finding.location is not None and finding.location.line == 40_002
    assert finding.evidence == 'Unexpected key(s) in state_dict: "module.fc.weight".'


def test_oom_names_this_hosts_biggest_gpu_processes():
    from smoke.nvsmi import SmiProcess

    processes = [SmiProcess(pid=4242, name="python", gpu=0, memory_mib=300),
                 SmiProcess(pid=31337, name="tritonserver", gpu=0, memory_mib=70_000)]
    finding = first("RuntimeError:CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total capacity; "
                    "4.36 GiB already allocated; 6.69 MiB free; 4.63 GiB reserved in total by PyTorch)",
                    processes=processes)
    assert "on this host now: pid 31337 tritonserver 70000 MiB, pid 4242 python 300 MiB (line 1: `" in finding.message


def test_cli_json_when_nothing_is_recognised(tmp_path: Path):
    log = tmp_path / "fine.log"
    log.write_text("epoch 1 loss 0.5\n")
    done = CliRunner().invoke(cli, ["explain", "--no-host", "--json", str(log)])
    assert done.exit_code == 1
    data = json.loads(done.output)
    assert {key: data[key] for key in ("source", "recognised", "findings", "facts")} == \
        {"source": str(log), "recognised": False, "findings": [], "facts": {}}
    assert data["next"].startswith("paste the full error output")

"""The families and causes added for answers (issue 31): each on lines written from its upstream message
(apex's setup.py, Lightning's device parser, Poetry's solver, pip's conflict lines, torch's TCPStore, torch's
Windows DLL loader), checked on the cause it states and the fix it gives."""

from __future__ import annotations

import pytest

from builder.explain.report import explain_text
from tests.unit.explain.first_answer import answer

pytestmark = pytest.mark.unit


def test_pip_conflict_line_of_old_pip_names_the_nightly_pair():
    rule, cause, fix = answer("ERROR: torchaudio 0.7.0 has requirement torch==1.7.0, but you'll have torch "
                              "1.8.0.dev20201104 which is incompatible.")
    assert rule == "explain.pip.broken-requirements"
    assert "torchaudio 0.7.0" in cause and "torch==1.7.0" in cause and "1.8.0.dev20201104" in cause
    assert "nightly" in cause and "--pre" in fix


def test_pip_conflict_of_another_package_suggests_a_release_that_fits():
    rule, cause, fix = answer("mypkg 3.1.0 requires torch==2.2.0, but you have torch 2.1.0 which is incompatible.")
    assert rule == "explain.pip.broken-requirements"
    assert "torch==2.2.0" in cause and "2.1.0" in cause
    assert "release of mypkg whose requirement admits torch 2.1.0" in fix
    assert "nightly" not in cause


def test_poetry_companion_conflict_names_the_pair_that_solves():
    rule, cause, fix = answer("Because torchvision (0.5.0) depends on torch (1.4.0)\n and no versions of torchvision "
                              "match >0.5.0,<0.6.0, torchvision (>=0.5.0,<0.6.0) requires torch (1.4.0).\nSo, because "
                              "app depends on both torch (=1.5.0) and torchvision (^0.5.0), version solving failed.")
    assert rule == "explain.poetry.solve-failed"
    assert "torchvision 0.5.0" in cause and "1.4.0" in cause and "1.5.0" in cause
    assert "torchvision==0.6.0" in fix


def test_poetry_failure_without_a_known_pair_keeps_the_general_fix():
    rule, cause, fix = answer("Because app depends on foo (>=2) which doesn't match any versions, version solving "
                              "failed.")
    assert rule == "explain.poetry.solve-failed"
    assert "general fix" in fix


def test_apex_cuda_check_reads_both_versions_and_never_blames_the_driver():
    rule, cause, fix = answer("Compiling cuda extensions with\nnvcc: NVIDIA (R) Cuda compiler driver\nCuda "
                              "compilation tools, release 12.1, V12.1.105\nfrom /opt/cuda/bin\n\nRuntimeError: Cuda "
                              "extensions are being compiled with a version of Cuda that does not match the version "
                              "used to compile Pytorch binaries.  Pytorch binaries were compiled with Cuda 11.8.")
    assert rule == "explain.extension.apex-cuda-mismatch"
    assert "CUDA 12.1" in cause and "11.8" in cause and "does not match" in cause
    assert "cuda-nvcc=11.8" in fix and "driver" not in fix


@pytest.mark.parametrize("evidence", ["_pytorch_select           0.1                       cpu_0",
                                      "torch==2.3.1+cpu", "CUDA used to build PyTorch: None"])
def test_lightning_on_a_cpu_torch_says_cpu_build(evidence: str):
    rule, cause, fix = answer("pytorch_lightning.utilities.exceptions.MisconfigurationException: \n"
                              "        You requested GPUs: [0]\n        But your machine only has: []\n" + evidence)
    assert rule == "explain.lightning.gpus-unavailable"
    assert "[0]" in cause and "CPU build" in cause
    assert "CUDA build" in fix and "driver" not in fix and "gpus=0" not in fix


def test_lightning_without_a_cpu_build_says_torch_sees_no_gpu():
    rule, cause, fix = answer("MisconfigurationException: You requested gpu: [1]\n But your machine only has: [0]\n"
                              ">>> torch.cuda.is_available() False")
    assert rule == "explain.lightning.gpus-unavailable"
    assert "[1]" in cause and "is_available() is False" in cause
    assert "nvidia-smi" in fix and "gpus=0" not in fix


def test_torch_1x_bare_address_in_use_is_the_store_port():
    rule, cause, fix = answer('  File "train.py", line 3, in <module>\nRuntimeError: Address already in use')
    assert rule == "explain.distributed.port-in-use"
    assert "Address already in use" in cause and "MASTER_PORT" in fix


def test_python_socket_address_in_use_is_not_the_store():
    report = explain_text("OSError: [Errno 98] Address already in use")
    assert not report.findings or report.findings[0].rule != "explain.distributed.port-in-use"


def test_fbgemm_dll_names_libomp_and_the_release_before():
    rule, cause, fix = answer('OSError: [WinError 126] fbgemm.dll" or one of its dependencies')
    assert rule == "explain.loader.windows-dll"
    assert "fbgemm.dll" in cause and "libomp140" in cause
    assert "2.3.1" in fix and "driver" not in fix


def test_extension_built_without_cuda_names_the_op_and_the_build_check():
    rule, cause, fix = answer("RuntimeError: Not compiled with GPU support (deform_conv_forward at "
                              "layers/csrc/deformable/deform_conv.h:54)")
    assert rule == "explain.extension.built-without-cuda"
    assert "deform_conv_forward" in cause and "Not compiled with GPU support" in cause
    assert "CUDA_HOME" in fix and "is_available" in fix and "rebuild" in fix


def test_no_kernel_image_in_an_mmcv_op_sends_to_mmcv_not_torch():
    rule, cause, fix = answer('  File "site-packages/mmcv/ops/roi_align.py", line 80, in forward\n'
                              "RuntimeError: CUDA error: no kernel image is available for execution on the device")
    assert rule == "explain.cuda.no-kernel-image"
    assert "mmcv's compiled op (roi_align)" in cause
    assert "mmcv" in fix and "driver" not in fix and "envbuild doctor" not in fix


def test_torch_library_missing_under_an_extension_says_rebuild_it():
    rule, cause, fix = answer('  File "app.py", line 2, in <module>\n    from maskrcnn import _C\n'
                              "ImportError: libc10_cuda.so: cannot open shared object file: No such file or directory")
    assert rule == "explain.loader.missing-library"
    assert "libc10_cuda.so" in cause and "maskrcnn" in cause
    assert "rebuild maskrcnn" in fix and "LD_LIBRARY_PATH" not in fix


def test_undefined_torch_symbol_in_a_module_file_names_its_distribution():
    rule, cause, fix = answer("torch 2.1.0\nImportError: /opt/py/site-packages/transformer_engine_torch.cpython-310-"
                              "x86_64-linux-gnu.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev")
    assert rule == "explain.loader.undefined-symbol"
    assert "transformer_engine_torch's compiled extension" in cause
    assert "reinstall transformer-engine's build" in fix


def test_classic_conda_resolve_failure_on_arm_names_the_platform_and_pip():
    rule, cause, fix = answer("ResolvePackageNotFound: \n  - pytorch=1.12.1\n\n$ uname -m -o\naarch64 GNU/Linux")
    assert rule == "explain.conda.packages-not-found"
    assert "ResolvePackageNotFound" in cause and "pytorch=1.12.1" in cause and "linux-aarch64" in cause
    assert "pip" in fix


def test_python_dll_load_failure_in_pillow_sends_to_pillow():
    rule, cause, fix = answer('  File "C:\\py\\lib\\site-packages\\PIL\\Image.py", line 90, in <module>\n'
                              "    from . import _imaging as core\n"
                              "ImportError: DLL load failed while importing _imaging: The specified module could not "
                              "be found.")
    assert rule == "explain.loader.windows-dll"
    assert "_imaging" in cause and "Pillow" in cause
    assert "pillow" in fix and "cuda" not in fix.casefold()


def test_oom_fix_offers_half_precision_for_inference():
    rule, _, fix = answer("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
                          "capacity of 7.79 GiB of which 3.06 MiB is free.")
    assert rule == "explain.cuda.out-of-memory"
    assert "float16" in fix


def test_an_unrecognised_source_build_quotes_pips_step_and_reads_the_sdist_and_os():
    report = explain_text("Collecting flash-attn\n  Downloading flash_attn-2.5.0.tar.gz (2.5 MB)\n"
                          "  Getting requirements to build wheel did not run successfully.\n  exit code: 1\n"
                          "on win11, python 3.12\n")
    assert not report.findings
    assert report.facts.get("sdist") == "flash_attn-2.5.0.tar.gz"
    assert report.facts.get("os") == "windows"
    assert [entry.text for entry in report.likely_error] == [
        "Getting requirements to build wheel did not run successfully."]


def test_a_jit_built_op_that_is_missing_points_at_its_failed_build():
    report = explain_text("ImportError: ~/.cache/torch_extensions/py311_cu124/fused_adam/fused_adam.so: cannot "
                          "open shared object file: No such file or directory")
    finding = report.findings[0]
    assert finding.rule == "explain.loader.missing-library"
    assert "builds just in time" in finding.details["cause"]
    assert "DS_BUILD_CPU_ADAM" in (finding.fix or "") and "LD_LIBRARY_PATH" not in (finding.fix or "")
    # a cause told apart by the log's own lines narrows the fix: it is not the family's general one
    assert finding.details["fix_from"] == "facts" and "general fix" not in (finding.fix or "")


def test_lightning_accelerator_check_of_1_6_on_is_the_same_family():
    rule, cause, fix = answer("lightning_fabric.utilities.exceptions.MisconfigurationException: `CUDAAccelerator` can "
                              "not run on your system since the accelerator is not available. The following "
                              "accelerator(s) is available and can be passed into `accelerator` argument of "
                              "`Trainer`: ['cpu'].")
    assert rule == "explain.lightning.gpus-unavailable"
    assert "torch does not see" in cause and "nvidia-smi" in fix


def test_flash_attn_warning_then_cuda_home_error_is_told_as_cuda_home():
    rule, _, fix = answer("UserWarning: flash_attn was requested, but nvcc was not found.  Are you sure your "
                          "environment has nvcc available?\nOSError: CUDA_HOME environment variable is not set. "
                          "Please set it to your CUDA install root.")
    assert rule == "explain.extension.no-cuda-home"
    assert "CUDA_HOME" in fix


def test_windows_port_in_use_is_the_store_port():
    rule, cause, _ = answer("RuntimeError: The server socket has failed to bind to [::]:29500 (system error: 10048 - "
                            "Only one usage of each socket address (protocol/network address/port) is normally "
                            "permitted.)")
    assert rule == "explain.distributed.port-in-use"
    assert "[::]:29500" in cause


def test_repl_outputs_below_two_prints_do_not_make_cudas_version_torchs():
    report = explain_text("print(torch.version.cuda)\nprint(torch.__version__)\n'10.2.89'\n'1.6.0+cu102'\n")
    assert report.facts.get("torch") != "10.2.89"
    assert explain_text(">>> torch.__version__\n'1.13.1+cu117'\n").facts.get("torch") == "1.13.1+cu117"


def test_old_pips_conflict_line_gives_the_installed_torch():
    report = explain_text("ERROR: torchvision 0.6.0 has requirement torch==1.5.0, but you'll have torch 1.4.0 which "
                          "is incompatible.")
    assert report.facts.get("torch") == "1.4.0"

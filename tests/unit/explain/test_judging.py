"""A judgement per finding from the log's facts (builder/explain/judging.py): each kind of log the issue names
gets a cause that states its facts with their lines and a fix for those facts; a log with no such fact keeps
the family's general fix and says so."""

from __future__ import annotations

import json

import pytest

from builder.explain.report import explain_text

pytestmark = pytest.mark.unit


def first(text: str) -> tuple[str, str, dict]:
    report = explain_text(text)
    assert report.findings, text
    finding = report.findings[0]
    return finding.message, finding.fix or "", dict(finding.details)


NO_DRIVER = ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
             "installed a driver from http://www.nvidia.com/Download/index.aspx")


@pytest.mark.parametrize("header", ["Step 5/7 : RUN python -c 'import torch; torch.zeros(1).cuda()'",
                                    "#9 [stage-1 4/6] RUN python -c 'import torch; torch.zeros(1).cuda()'"])
def test_no_driver_inside_a_docker_build_step_moves_the_gpu_work_to_run_time(header: str) -> None:
    log = f"{header}\n#9 0.812 Traceback (most recent call last):\n#9 0.813 {NO_DRIVER}\n"
    cause, fix, details = first(log)
    assert "docker build step" in cause and "line 1" in cause and "never get a GPU" in cause
    assert "run time" in fix and "--gpus all" in fix
    assert details["facts_used"][0]["fact"] == "phase" and details["facts_used"][0]["line"] == 1


def test_no_driver_outside_a_build_keeps_the_familys_fix() -> None:
    cause, fix, _ = first(NO_DRIVER + "\n")
    assert "docker build step" not in cause


def test_a_pytorch_index_for_an_unpublished_cuda_is_named_with_the_nearest_that_exists() -> None:
    log = ("$ pip install torch --index-url https://download.pytorch.org/whl/cu119\n"
           "Looking in indexes: https://download.pytorch.org/whl/cu119\n"
           "ERROR: Could not find a version that satisfies the requirement torch (from versions: none)\n"
           "ERROR: No matching distribution found for torch\n")
    cause, fix, details = first(log)
    assert "https://download.pytorch.org/whl/cu119 (line 1) does not exist" in cause
    assert "whl/cu118" in fix
    assert {"fact": "index_url", "value": "https://download.pytorch.org/whl/cu119", "line": 1} in details["facts_used"]


def test_a_torch_too_old_for_the_interpreter_names_the_pythons_it_supports() -> None:
    log = ("Python 3.12.1\n$ pip install torch==2.0.1\n"
           "ERROR: Could not find a version that satisfies the requirement torch==2.0.1 (from versions: 2.2.0, 2.3.0)\n"
           "ERROR: No matching distribution found for torch==2.0.1\n")
    cause, fix, _ = first(log)
    assert "torch 2.0.1 (line 3) supports Python 3.8 to 3.11" in cause and "3.12" in cause
    assert "Python 3.8 to 3.11" in fix and "2.2" in fix


def test_a_cuda_package_missing_from_the_channels_given_gets_the_nvidia_channel() -> None:
    log = ("Could not solve for environment specs\n"
           "The following packages are incompatible\n"
           "└─ cuda-toolkit =11.8 * does not exist (perhaps a typo or a missing channel).\n"
           "Current channels:\n  - https://conda.anaconda.org/pytorch/linux-64\n"
           "  - https://repo.anaconda.com/pkgs/main/linux-64\n")
    cause, fix, _ = first(log)
    assert "cuda-toolkit =11.8 (line 3)" in cause and "main, pytorch" in cause
    assert "-c nvidia" in fix


def test_cudnn_8_missing_where_cudnn_9_is_listed_names_both() -> None:
    log = ("Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared "
           "object file: No such file or directory\n$ ldconfig -p | grep cudnn\n"
           "\tlibcudnn_ops.so.9 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9\n")
    cause, fix, _ = first(log)
    assert "cuDNN 8 (libcudnn_ops_infer.so.8, line 1)" in cause and "cuDNN 9 (libcudnn_ops.so.9, line 3)" in cause
    assert "nvidia-cudnn-cu11==8" in fix


def test_a_missing_torchvision_operator_with_both_versions_names_the_pair() -> None:
    log = ("torch 2.1.2\ntorchvision 0.15.2\n"
           "RuntimeError: operator torchvision::nms does not exist\n")
    cause, fix, _ = first(log)
    assert "torchvision 0.15.2 (line 2)" in cause and "torch 2.1.2 (line 1)" in cause and "0.16" in cause
    assert "torchvision==0.16.2" in fix and "2.0.1" in fix


def test_a_device_mismatch_inside_a_dataparallel_replica_names_the_replica_causes() -> None:
    log = ("Traceback (most recent call last):\n"
           "RuntimeError: Caught RuntimeError in replica 1 on device 1.\n"
           '  File "/opt/venv/lib/python3.10/site-packages/torch/nn/parallel/parallel_apply.py", line 64\n'
           "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 "
           "and cuda:0!\n")
    cause, fix, _ = first(log)
    assert "replica" in cause and "registered parameter or buffer" in cause
    assert "register_buffer" in fix and "x.device" in fix


def test_a_family_fix_no_fact_narrows_says_so_and_json_carries_cause_facts_and_fix() -> None:
    report = explain_text("RuntimeError: CUDA error: device-side assert triggered\n")
    data = json.loads(json.dumps(report.as_dict()))
    finding = data["findings"][0]
    assert "general fix" in finding["fix"]
    assert finding["details"]["fix_from"] == "family" and finding["details"]["cause"] == finding["message"]
    assert isinstance(finding["details"]["facts_used"], list)


def test_a_companion_pinned_to_another_torch_gets_the_pair_that_solves() -> None:
    log = ("ERROR: Cannot install -r requirements.txt (line 2) and torch==1.12.1 because these package versions "
           "have conflicting dependencies.\nThe conflict is caused by:\n    The user requested torch==1.12.1\n"
           "    torchaudio 0.13.0 depends on torch==1.13.0\n")
    cause, fix, details = first(log)
    assert "torchaudio 0.13.0 (line 4) is built for torch 1.13.0" in cause and "(line 3)" in cause
    assert "torchaudio==0.12.1" in fix
    assert {"fact": "torch", "value": "1.12.1", "line": 3} in details["facts_used"]


def test_an_oom_with_other_processes_in_the_logs_nvidia_smi_names_them() -> None:
    log = ("|    0   N/A  N/A     41234      C   /usr/bin/python3                 30122MiB |\n"
           "|    0   N/A  N/A      1822      G   /usr/lib/xorg/Xorg                  12MiB |\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "31.74 GiB of which 1.02 GiB is free.\n")
    cause, fix, details = first(log)
    assert "pid 41234 python3 30122 MiB on GPU 0 (line 1)" in cause and "Xorg" not in cause
    assert "stop or move pid 41234" in fix
    assert details["facts_used"][0] == {"fact": "gpu_process", "value": "pid 41234 30122 MiB", "line": 1}


def test_a_conda_forge_companion_of_another_pytorch_variant_names_both_builds() -> None:
    log = ("Could not solve for environment specs\nThe following packages are incompatible\n"
           "├─ pytorch 2.1.0 cuda118_py310h6bd5fe8_302 is requested and can be installed;\n"
           "└─ torchvision 0.16.1 cpu_py310h2a2f7e4_0 is not installable because it requires\n"
           "   └─ pytorch 2.1.* cpu_*, which conflicts with any installable versions previously reported.\n")
    cause, fix, _ = first(log)
    assert "cuda118_py310h6bd5fe8_302 (line 3) is cuda118" in cause and "cpu_py310h2a2f7e4_0 (line 4) is cpu" in cause
    assert "torchvision=*=*cuda118*" in fix


@pytest.mark.parametrize(("log", "phase"), [
    ("[rank3]: RuntimeError: CUDA error: device-side assert triggered\n", "torchrun rank's output (rank 3, line 1)"),
    ("____ test_forward[cuda] ____\nE   RuntimeError: CUDA error: device-side assert triggered\n",
     "pytest test (test_forward[cuda], line 1)"),
])
def test_a_findings_cause_names_the_phase_it_was_printed_in(log: str, phase: str) -> None:
    cause, _, details = first(log)
    assert f"printed in a {phase}" in cause
    assert details["facts_used"][-1]["fact"] == "phase"


def test_cuda_pins_that_disagree_are_named_with_their_lines() -> None:
    log = ("Could not solve for environment specs\nThe following packages are incompatible\n"
           "├─ cuda-cudart 12.1.105 would require\n│  └─ cuda-version >=12.1,<12.2.0a0 *, which can be installed;\n"
           "├─ cuda-version =12.6 * is not installable because it requires\n")
    cause, fix, _ = first(log)
    assert "`cuda-cudart 12.1` (line 3)" in cause and "`cuda-version =12.6` (line 5)" in cause
    assert "cuda-version=12.1" in fix and "cuda-version=12.6" in fix


def test_the_packages_a_solver_cannot_find_are_named_in_the_cause() -> None:
    log = ("PackagesNotFoundError: The following packages are not available from current channels:\n\n"
           "  - pytorch-cuda=12.1\n\nCurrent channels:\n\n  - https://conda.anaconda.org/nvidia/linux-64\n")
    cause, _, _ = first(log)
    assert "not found: pytorch-cuda=12.1 (line 3)" in cause


def test_an_extension_missing_a_torch_symbol_is_named_with_the_torch_it_was_not_built_for() -> None:
    cause, fix, _ = first("torch 1.8.0+cu101\nImportError: ~/env/lib/python3.6/site-packages/detectron2/_C.so: "
                          "undefined symbol: _ZNK2at10TensorBase8data_ptrIdEEPT_v\n")
    assert "undefined symbol _ZNK2at10TensorBase8data_ptrIdEEPT_v in detectron2's compiled extension" in cause
    assert "torch 1.8.0+cu101 (line 1)" in cause
    assert "reinstall detectron2's build that matches torch 1.8.0+cu101" in fix


def test_a_symbol_outside_torch_keeps_the_familys_answer() -> None:
    cause, _, _ = first("torch 2.1.0\nImportError: ~/env/lib/python3.10/site-packages/foo/_C.so: "
                        "undefined symbol: png_create_read_struct\n")
    assert "foo's compiled extension" not in cause


def test_a_cuda_stated_on_its_own_line_is_the_toolkit_nvcc_is_checked_against() -> None:
    cause, fix, _ = first("环境cuda10.2-cudnn7-devel\nnvcc fatal   : Unsupported gpu architecture 'compute_86'\n")
    assert "the log's nvcc is 10.2" in cause
    assert "CUDA toolkit >= 11.1" in fix
    assert "driver" not in fix

"""Families swept from the modules that make the messages explain already knew (issue 31, item 3): each on a
line written from its upstream message, checked on the facts its cause names and the fix it gives."""

from __future__ import annotations

import pytest

from builder.explain.report import explain_text
from tests.unit.explain.first_answer import answer

pytestmark = pytest.mark.unit


def test_cuda_init_failure_after_a_fork_says_spawn():
    rule, cause, fix = answer("ERROR worker: VLLM_WORKER_MULTIPROC_METHOD=fork\n"
                              "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.")
    assert rule == "explain.torch.cuda-init-failed"
    assert "forked" in cause
    assert "spawn" in fix


def test_cuda_init_failure_alone_checks_the_driver():
    rule, cause, fix = answer("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.")
    assert rule == "explain.torch.cuda-init-failed"
    assert "cudaErrorInitializationError" in cause
    assert "nvidia-smi" in fix and "general fix" in fix


def test_nvidia_smi_missing_in_a_build_step_moves_it_to_run_time():
    rule, cause, fix = answer("#7 [3/5] RUN nvidia-smi\n#7 0.21 /bin/sh: 1: nvidia-smi: not found")
    assert rule == "explain.driver.nvidia-smi-missing"
    assert "docker build" in cause
    assert "run time" in fix and "install the NVIDIA driver" not in fix


def test_nvidia_smi_missing_in_a_container_asks_for_gpus_not_a_driver():
    rule, cause, fix = answer("root@3f2a9c1b7d4e:/workspace# nvidia-smi\nbash: nvidia-smi: command not found")
    assert rule == "explain.driver.nvidia-smi-missing"
    assert "container" in cause
    assert "--gpus all" in fix and "installing a driver inside the image is not the fix" in fix


def test_nvidia_smi_missing_with_only_compute_capability_names_utility():
    rule, cause, fix = answer("NVIDIA_DRIVER_CAPABILITIES=compute\nbash: nvidia-smi: command not found")
    assert "NVIDIA_DRIVER_CAPABILITIES" in cause
    assert "utility" in fix


def test_dataloader_worker_segfault_names_the_signal_and_native_code():
    rule, cause, fix = answer("RuntimeError: DataLoader worker (pid 999) is killed by signal: Segmentation fault. ")
    assert rule == "explain.dataloader.worker-exited"
    assert "999" in cause and "Segmentation fault" in cause and "native code" in cause
    assert "num_workers=0" in fix


def test_dataloader_worker_killed_stays_the_oom_killer():
    rule, cause, fix = answer("RuntimeError: DataLoader worker (pid 12345) is killed by signal: Killed. ")
    assert "out-of-memory killer" in cause
    assert "dmesg" in fix


def test_missing_keys_without_a_prefix_name_the_model_and_keys():
    rule, cause, fix = answer('RuntimeError: Error(s) in loading state_dict for ResNet:\n'
                              '\tMissing key(s) in state_dict: "fc.weight", "fc.bias".')
    assert rule == "explain.checkpoint.missing-keys"
    assert "ResNet" in cause and "fc.weight" in cause
    assert "strict=False only" in fix


def test_compiled_models_orig_mod_prefix_is_told_as_torch_compile():
    rule, cause, fix = answer('RuntimeError: Error(s) in loading state_dict for GPT:\n'
                              '\tMissing key(s) in state_dict: "wte.weight".\n'
                              '\tUnexpected key(s) in state_dict: "_orig_mod.wte.weight".')
    assert rule == "explain.checkpoint.missing-keys"
    assert "torch.compile" in cause
    assert "_orig_mod" in fix


def test_module_prefix_still_wins_over_missing_keys():
    rule, _, _ = answer('RuntimeError: Error(s) in loading state_dict for Net:\n'
                        '\tUnexpected key(s) in state_dict: "module.fc.weight".')
    assert rule == "explain.checkpoint.module-prefix"


def test_a_module_prefix_error_is_told_once():
    report = explain_text('RuntimeError: Error(s) in loading state_dict for Net:\n'
                          '\tMissing key(s) in state_dict: "fc.weight".\n'
                          '\tUnexpected key(s) in state_dict: "module.fc.weight".')
    assert [finding.rule for finding in report.findings] == ["explain.checkpoint.module-prefix"]


def test_unsupported_gcc_names_the_toolkits_maximum_and_the_compiler_to_use():
    rule, cause, fix = answer("gcc (Ubuntu 13.2.0-4ubuntu3) 13.2.0\n"
                              "/usr/local/cuda/include/crt/host_config.h:132:2: error: #error -- unsupported GNU "
                              "version! gcc versions later than 11 are not supported!")
    assert rule == "explain.nvcc.unsupported-host-compiler"
    assert "gcc up to 11" in cause and "gcc 13.2.0" in cause
    assert "g++-11" in fix and "-allow-unsupported-compiler" in fix


def test_python_headers_missing_under_torch_compile_is_tritons_launcher():
    rule, cause, fix = answer("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
                              "/tmp/tmpq/main.c:5:10: fatal error: Python.h: No such file or directory")
    assert rule == "explain.build.python-headers-missing"
    assert "Triton" in cause and "Python.h" in cause
    assert "python3.X-dev" in fix


def test_libcuda_link_failure_for_triton_names_triton_libcuda_path():
    rule, cause, fix = answer("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
                              "/usr/bin/ld: cannot find -lcuda: No such file or directory")
    assert rule == "explain.build.libcuda-link"
    assert "libcuda.so.1" in cause
    assert "TRITON_LIBCUDA_PATH" in fix


def test_triton_missing_on_windows_says_no_windows_wheels():
    rule, cause, fix = answer('  File "C:\\Users\\me\\venv\\Lib\\site-packages\\torch\\_inductor\\scheduler.py"\n'
                              "torch._inductor.exc.TritonMissing: Cannot find a working triton installation.")
    assert rule == "explain.triton.missing"
    assert "Windows" in cause
    assert "aot_eager" in fix and "triton-windows" in fix


def test_triton_missing_on_linux_installs_the_pinned_triton():
    rule, cause, fix = answer("torch._inductor.exc.TritonMissing: Cannot find a working triton installation. "
                              "Either the package is not installed or it is too old.")
    assert "Triton" in cause
    assert "pip show torch" in fix


def test_no_cxx_compiler_names_what_inductor_tried():
    rule, cause, fix = answer("torch._inductor.exc.InvalidCxxCompiler: No working C++ compiler found in "
                              "torch._inductor.config.cpp.cxx: (None, 'g++')")
    assert rule == "explain.inductor.no-cxx-compiler"
    assert "(None, 'g++')" in cause
    assert "apt-get install g++" in fix


def test_backend_failure_with_a_compiler_command_reads_the_compiler_error():
    rule, cause, fix = answer("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
                              "CalledProcessError: Command '['/usr/bin/gcc', '/tmp/main.c', '-lcuda']' returned "
                              "non-zero exit status 1.")
    assert rule == "explain.inductor.backend-failed"
    assert "'inductor'" in cause and "host C compiler" in cause


def test_a_backend_failure_over_a_known_inner_error_tells_the_inner_one():
    rule, _, _ = answer("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
                        "RuntimeError: Cannot find a working triton installation.")
    assert rule == "explain.triton.missing"


def test_requires_python_names_the_spec_and_the_interpreter():
    rule, cause, fix = answer("ERROR: Package 'torch' requires a different Python: 3.7.9 not in '>=3.8.0'")
    assert rule == "explain.pip.requires-python"
    assert "'>=3.8.0'" in cause and "3.7.9" in cause
    assert "Requires-Python" in fix


def test_versions_ignored_for_python_name_the_first_and_what_it_needs():
    rule, cause, fix = answer("ERROR: Ignored the following versions that require a different python version: "
                              "0.11.0 Requires-Python >=3.12; 0.11.2 Requires-Python >=3.12\n"
                              "ERROR: No matching distribution found for jax==0.11.2")
    assert rule == "explain.pip.requires-python"
    assert "jax==0.11.2" in cause and "0.11.0" in cause and ">=3.12" in cause


def test_clobber_names_the_path_and_the_packages_and_one_channel():
    rule, cause, fix = answer("ClobberError: This transaction has incompatible packages due to a shared path.\n"
                              "  packages: pkgs/main/linux-64::jpeg-9e-h5eee18b_1, pytorch/linux-64::libjpeg-turbo-2.0.0\n"
                              "  path: 'share/man/man1/rdjpgcom.1'")
    assert rule == "explain.conda.clobber"
    assert "'share/man/man1/rdjpgcom.1'" in cause and "libjpeg-turbo" in cause
    assert "channel_priority" in fix


def test_conda_http_000_is_the_connection_not_the_channel():
    rule, cause, fix = answer("CondaHTTPError: HTTP 000 CONNECTION FAILED for url "
                              "<https://conda.example.invalid/pytorch/linux-64/current_repodata.json>")
    assert rule == "explain.conda.http-error"
    assert "HTTP 000" in cause and "proxy" in cause
    assert "proxy_servers" in fix


def test_conda_http_404_is_the_channel():
    rule, cause, fix = answer("CondaHTTPError: HTTP 404 NOT FOUND for url "
                              "<https://conda.example.invalid/no-such-channel/linux-64/repodata.json>")
    assert "HTTP 404" in cause and "channel" in cause
    assert "channel name" in fix


def test_bitsandbytes_names_the_binary_it_looked_for_and_bnb_cuda_version():
    rule, cause, fix = answer("BNB_CUDA_VERSION=122\nCUDA SETUP: Required library version not found: "
                              "libbitsandbytes_cuda122.so. Maybe you need to compile it from source?")
    assert rule == "explain.bitsandbytes.cuda-setup"
    assert "libbitsandbytes_cuda122.so" in cause and "BNB_CUDA_VERSION" in cause
    assert "unset BNB_CUDA_VERSION" in fix


def test_bitsandbytes_setup_failure_without_facts_upgrades_it():
    rule, cause, fix = answer("RuntimeError:\n        CUDA Setup failed despite GPU being available.")
    assert rule == "explain.bitsandbytes.cuda-setup"
    assert "0.43" in fix and "python -m bitsandbytes" in fix


def test_flash_attn_on_a_pre_ampere_gpu_offers_sdpa():
    rule, cause, fix = answer("RuntimeError: FlashAttention only supports Ampere GPUs or newer.")
    assert rule == "explain.flash-attn.unsupported"
    assert "8.0" in cause
    assert "sdpa" in fix


def test_flash_attn_build_names_its_nvcc_not_torchs_cuda():
    rule, cause, fix = answer("Cuda compilation tools, release 11.5, V11.5.119\n"
                              "RuntimeError: FlashAttention is only supported on CUDA 11.7 and above.  Note: make sure "
                              "nvcc has a supported version by running nvcc -V.")
    assert rule == "explain.flash-attn.unsupported"
    assert "11.7" in cause and "11.5" in cause
    assert "CUDA_HOME" in fix


def test_nccl_warn_connect_failure_names_the_interface_setting():
    rule, cause, fix = answer("node1:1234:1300 [0] include/socket.h:409 NCCL WARN Net : Connect to 10.0.0.2<34567> "
                              "failed : Connection refused")
    assert rule == "explain.nccl.warning"
    assert "10.0.0.2" in cause
    assert "NCCL_SOCKET_IFNAME" in fix


def test_an_nccl_error_with_warn_lines_is_told_as_the_error_first():
    report = explain_text("node1:1:2 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-x to "
                          "9637892 bytes\nRuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system "
                          "error, NCCL version 2.14.3")
    assert report.findings[0].rule == "explain.nccl.error"


def test_libgl_missing_is_opencvs_gui_build():
    rule, cause, fix = answer("ImportError: libGL.so.1: cannot open shared object file: No such file or directory")
    assert rule == "explain.loader.missing-library"
    assert "opencv" in cause
    assert "opencv-python-headless" in fix and "libgl1" in fix


def test_a_git_lfs_pointer_in_place_of_weights_says_git_lfs_pull():
    rule, cause, fix = answer("_pickle.UnpicklingError: invalid load key, 'v'.")
    assert rule == "explain.checkpoint.not-a-pickle"
    assert "'v'" in cause and "Git LFS pointer" in cause
    assert "git lfs pull" in fix


def test_an_html_page_in_place_of_weights_says_download_the_file():
    rule, cause, fix = answer("_pickle.UnpicklingError: invalid load key, '<'.")
    assert "HTML page" in cause
    assert "head -c 100" in fix


def test_ancdata_is_the_file_descriptor_sharing_strategy():
    rule, cause, fix = answer('  File "/usr/lib/python3.10/multiprocessing/reduction.py", line 164, in recvfds\n'
                              "RuntimeError: received 0 items of ancdata")
    assert rule == "explain.dataloader.too-many-open-files"
    assert "file_descriptor" in cause
    assert 'set_sharing_strategy("file_system")' in fix and "ulimit -n" in fix


def test_too_many_open_files_elsewhere_is_not_the_dataloader():
    report = explain_text("OSError: [Errno 24] Too many open files: 'data/img_001.png'")
    assert all(finding.rule != "explain.dataloader.too-many-open-files" for finding in report.findings)


def test_process_group_missing_with_syncbatchnorm_says_one_process_cannot_sync():
    rule, cause, fix = answer('  File "torch/nn/modules/batchnorm.py", line 731, in forward  # SyncBatchNorm\n'
                              "ValueError: Default process group has not been initialized, please make sure to "
                              "call init_process_group.")
    assert rule == "explain.distributed.not-initialized"
    assert "SyncBatchNorm" in cause
    assert "torchrun" in fix


def test_driver_library_mismatch_names_the_library_version():
    rule, cause, _ = answer("Failed to initialize NVML: Driver/library version mismatch\n"
                            "NVML library version: 535.183")
    assert rule == "explain.driver.driver-library-mismatch"
    assert "535.183" in cause


def test_ninja_missing_says_install_it_and_put_its_bin_on_path():
    rule, cause, fix = answer("RuntimeError: Ninja is required to load C++ extensions")
    assert rule == "explain.extension.no-ninja"
    assert "ninja --version" in cause and "PATH" in cause
    assert "pip install ninja" in fix and "PATH" in fix

"""One line per message family of `envbuild explain`, as its source prints it (the template's text with the
variable parts filled in): each must name its family first. Shared by the family tests and the corpus's
coverage check."""

# family -> a line its source prints
EXAMPLES = {
    "explain.transformer-engine.version-mismatch": "AssertionError: TransformerEngine package version mismatch. Found "
                                                   "transformer_engine_torch v2.1.0, transformer-engine v2.2.0, and "
                                                   "transformer-engine-cu12 v2.2.0. Install transformer-engine using "
                                                   "'pip install transformer-engine[pytorch]==VERSION'",
    "explain.transformer-engine.no-torch-extension": "  File \"/venv/lib/python3.10/site-packages/transformer_engine/"
                                                     "pytorch/__init__.py\", line 52, in _load_library\n"
                                                     "    so_path = next(so_dir.glob(f\"{module_name}.*.{extension}\"))"
                                                     "\nStopIteration",
    "explain.build.cudnn-header-missing": "torch/include/ATen/cudnn/cudnn-wrapper.h:3:10: fatal error: cudnn.h: No "
                                          "such file or directory",
    "explain.torch.missing-api": "AttributeError: module 'torch' has no attribute 'frombuffer'",
    "explain.conda.extension-cpu-build-planned": "  pyg                pyg/linux-64::pyg-2.5.0-py311_torch_2.2.0_cpu",
    "explain.gpu.bfloat16-unsupported": "ValueError: Bfloat16 is only supported on GPUs with compute capability of at "
                                        "least 8.0. Your Tesla T4 GPU has compute capability 7.5.",
    "explain.conda.cpu-build-planned": "$ conda install pytorch cudatoolkit=11.3 -c pytorch\n  pytorch            "
                                       "pytorch/linux-64::pytorch-1.10.0-py3.9_cpu_0",
    "explain.build.compiler-failed": "error: command '/usr/local/cuda/bin/nvcc' failed with exit code 1",
    "explain.triton.gpu-too-old": "torch._inductor.exc.GPUTooOldForTriton: Found Tesla P100-PCIE-16GB which is too old "
                                  "to be supported by the triton GPU compiler, which is used as the backend. Triton "
                                  "only supports devices of CUDA Capability >= 7.0, but your device is of CUDA "
                                  "capability 6.0",
    "explain.distributed.collective-mismatch": "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is "
                                               "running collective: CollectiveFingerPrint(SequenceNumber=12, "
                                               "OpType=ALLREDUCE, TensorShape=[10], TensorDtypes=Float), but Rank 1 "
                                               "is running collective: CollectiveFingerPrint(SequenceNumber=12, "
                                               "OpType=ALLREDUCE, TensorShape=[20], TensorDtypes=Float).",
    "explain.distributed.rendezvous-failed": "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The "
                                             "connection to the C10d store has failed. See inner exception for details.",
    "explain.distributed.store-connect-failed": "torch.distributed.DistNetworkError: The client socket has failed to "
                                                "connect to [node-0]:29500 (errno: 111 - Connection refused).",
    "explain.distributed.store-clients-missing": "torch.distributed.DistStoreError: Timed out after 901 seconds waiting "
                                                 "for clients. 1/2 clients joined.",
    "explain.cuda.mig-device-count": 'RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at '
                                     '"../aten/src/ATen/cuda/CUDAContext.cpp":50, please report a bug to PyTorch.',
    "explain.cuda.arch-not-in-build": "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the "
                                      "current PyTorch installation.",
    "explain.cuda.arch-too-old": "Found GPU0 Tesla K40m which is of cuda capability 3.5.\n    PyTorch no longer "
                                 "supports this GPU because it is too old.",
    "explain.cuda.driver-too-old": "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
    "explain.torch.no-driver": "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
                               "NVIDIA GPU and installed a driver",
    "explain.cuda.driver-insufficient": "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA "
                                        "runtime version",
    "explain.cuda.forward-compat-unsupported": "cudaErrorCompatNotSupportedOnDevice: forward compatibility was "
                                               "attempted on non supported HW",
    "explain.cuda.system-not-ready": "Error 802: system not yet initialized",
    "explain.driver.gpu-lost": "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
    "explain.driver.nvml-unknown-error": "Failed to initialize NVML: Unknown Error",
    "explain.driver.nvml-stub-library": "You should always run with libnvidia-ml.so that is installed with your\n"
                                        "NVIDIA Display Driver. By default it's installed in /usr/lib and /usr/lib64.\n"
                                        "libnvidia-ml.so in GDK package is a stub library that is attached only for\n"
                                        "build purposes\n",
    "explain.driver.no-driver": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "explain.driver.os-blocked": "Failed to initialize NVML: GPU access blocked by the operating system",
    "explain.driver.driver-library-mismatch": "Failed to initialize NVML: Driver/library version mismatch",
    "explain.driver.insufficient-permissions": "Failed to initialize NVML: Insufficient Permissions",
    "explain.driver.no-devices": "$ nvidia-smi\nNo devices were found\n",
    "explain.container.no-gpu-runtime": 'docker: Error response from daemon: could not select device driver "" with '
                                        "capabilities: [[gpu]].",
    "explain.cuda.devices-unavailable": "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
    "explain.cuda.no-device": "RuntimeError: CUDA error: no CUDA-capable device is detected",
    "explain.torch.no-gpus-visible": "RuntimeError: No CUDA GPUs are available",
    "explain.torch.cuda-unknown-error": "RuntimeError: CUDA unknown error - this may be due to an incorrectly set up "
                                        "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program "
                                        "start.",
    "explain.cuda.invalid-device-ordinal": "RuntimeError: CUDA error: invalid device ordinal",
    "explain.cuda.no-kernel-image": "RuntimeError: CUDA error: no kernel image is available for execution on the "
                                    "device",
    "explain.cuda.ptx-toolchain": "CUDA error: the provided PTX was compiled with an unsupported toolchain.",
    "explain.nvcc.unsupported-arch": "nvcc fatal   : Unsupported gpu architecture 'compute_89'",
    "explain.extension.cuda-mismatch": "RuntimeError:\nThe detected CUDA version (12.4) mismatches the version that "
                                       "was used to compile\nPyTorch (11.8). Please make sure to use the same CUDA "
                                       "versions.",
    "explain.extension.apex-cuda-mismatch": "RuntimeError: Cuda extensions are being compiled with a version of Cuda "
                                            "that does not match the version used to compile Pytorch binaries.  "
                                            "Pytorch binaries were compiled with Cuda 11.8.",
    "explain.lightning.gpus-unavailable": "lightning.fabric.utilities.exceptions.MisconfigurationException: You "
                                          "requested gpu: [0, 1]\n But your machine only has: [0]",
    "explain.poetry.solve-failed": "Because torchaudio (2.0.2) depends on torch (2.0.1)\n and no versions of "
                                   "torchaudio match >2.0.2,<3.0.0, torchaudio (>=2.0.2,<3.0.0) requires torch "
                                   "(2.0.1).\nSo, because demo depends on both torch (=2.1.0) and torchaudio "
                                   "(^2.0.2), version solving failed.",
    "explain.extension.built-without-cuda": "RuntimeError: Not compiled with GPU support (nms_rotated at "
                                            "detectron2/layers/csrc/nms_rotated/nms_rotated.h:24)",
    "explain.extension.apex-no-nvcc": "RuntimeError: --cuda_ext was requested, but nvcc was not found.  Are you sure "
                                      "your environment has nvcc available?",
    "explain.extension.no-cuda-home": "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA "
                                      "install root.",
    "explain.xformers.built-for-other-torch": "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers "
                                              "was built for:\n    PyTorch 2.5.1+cu124 with CUDA 1204 (you have "
                                              "2.6.0+cu126)",
    "explain.cudnn.load-failed": "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open "
                                 "shared object file: No such file or directory",
    "explain.loader.undefined-symbol": "ImportError: /venv/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-"
                                       "x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
    "explain.system.glibc-too-old": "ImportError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found "
                                    "(required by /venv/lib/libtorch_cpu.so)",
    "explain.system.libstdcxx-too-old": "ImportError: /usr/lib/x86_64-linux-gnu/libstdc++.so.6: version "
                                        "`GLIBCXX_3.4.30' not found (required by /env/lib/libicuuc.so.73)",
    "explain.loader.missing-library": "ImportError: libcudart.so.11.0: cannot open shared object file: No such file "
                                      "or directory",
    "explain.loader.windows-dll": 'OSError: [WinError 126] The specified module could not be found. Error loading '
                                  '"C:\\venv\\Lib\\site-packages\\torch\\lib\\fbgemm.dll" or one of its dependencies.',
    "explain.windows.paging-file": "OSError: [WinError 1455] The paging file is too small for this operation to "
                                   "complete.",
    "explain.torchvision.mismatch": "RuntimeError: operator torchvision::nms does not exist",
    "explain.torch.not-compiled-with-cuda": "AssertionError: Torch not compiled with CUDA enabled",
    "explain.checkpoint.map-location": "RuntimeError: Attempting to deserialize object on a CUDA device but "
                                       "torch.cuda.is_available() is False.",
    "explain.checkpoint.missing-device": "RuntimeError: Attempting to deserialize object on CUDA device 3 but "
                                         "torch.cuda.device_count() is 1.",
    "explain.checkpoint.weights-only": "_pickle.UnpicklingError: Weights only load failed. WeightsUnpickler error: "
                                       "Unsupported global: GLOBAL numpy.core.multiarray._reconstruct",
    "explain.checkpoint.corrupt": "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding "
                                  "central directory",
    "explain.checkpoint.module-prefix": 'Unexpected key(s) in state_dict: "module.fc.weight".',
    "explain.checkpoint.size-mismatch": "size mismatch for fc.weight: copying a param with shape torch.Size([1000, "
                                        "512]) from checkpoint, the shape in current model is torch.Size([10, 512]).",
    "explain.dataparallel.device-ids": "RuntimeError: module must have its parameters and buffers on device cuda:0 "
                                       "(device_ids[0]) but found one of them on device: cpu",
    "explain.torch.device-mismatch": "RuntimeError: Expected all tensors to be on the same device, but found at least "
                                     "two devices, cuda:0 and cpu!",
    "explain.ddp.unused-parameters": "RuntimeError: Expected to have finished reduction in the prior iteration before "
                                     "starting a new one.",
    "explain.ddp.ready-twice": "RuntimeError: Expected to mark a variable ready only once.",
    "explain.cuda.device-assert": "RuntimeError: CUDA error: device-side assert triggered",
    "explain.cuda.out-of-memory": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
                                  "a total capacity of 23.65 GiB of which 1.12 GiB is free.",
    "explain.cublas.status": "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling "
                             "`cublasCreate(handle)`",
    "explain.cudnn.status": "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED",
    "explain.multiprocessing.cuda-in-fork": "RuntimeError: Cannot re-initialize CUDA in forked subprocess.",
    "explain.multiprocessing.main-guard": "An attempt has been made to start a new process before the\n        current "
                                          "process has finished its bootstrapping phase.",
    "explain.dataloader.shared-memory": "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.",
    "explain.dataloader.worker-exited": "RuntimeError: DataLoader worker (pid(s) 3216) exited unexpectedly",
    "explain.nccl.duplicate-gpu": "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
    "explain.nccl.watchdog-timeout": "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
                                     "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 "
                                     "milliseconds before timing out.",
    "explain.distributed.collective-timeout": "RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in "
                                              "5000 ms",
    "explain.distributed.port-in-use": "RuntimeError: The server socket has failed to bind to [::]:29500 (errno: 98 - "
                                       "Address already in use).",
    "explain.amp.autocast-disabled": "UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                                     "Disabling.",
    "explain.distributed.nccl-id-store": "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and "
                                         "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
                                         "store->get('0') got error: Connection reset by peer",
    "explain.cuda.driver-init-failed": 'msg="Unable to load cudart library /usr/lib/x86_64-linux-gnu/libcuda.so.'
                                       '570.86.15: cuda driver library init failure: 999"',
    "explain.distributed.store-timeout": "torch.distributed.DistNetworkError: The client socket has timed out after "
                                         "600000ms while trying to connect to (10.0.0.1, 29500).",
    "explain.nccl.error": "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote "
                          "process exited or there was a network error, NCCL version 2.21.5",
    "explain.conda.cuda-virtual-package": "  - nothing provides __cuda needed by pytorch-2.1.2-cuda118_py310",
    "explain.conda.pytorch-cuda-mismatch": "├─ pytorch-cuda ==12.1 ha16c6d3_5 is requested and can be installed;",
    "explain.conda.packages-not-found": "PackagesNotFoundError: The following packages are not available from "
                                        "current channels:\n\n  - cudatoolkit=11.7",
    "explain.conda.unsatisfiable": "UnsatisfiableError: The following specifications were found to be incompatible "
                                   "with each other:",
    "explain.pip.resolution-impossible": "ERROR: Cannot install torch==2.0.1 and torchvision==0.17.0 because these "
                                         "package versions have conflicting dependencies.",
    "explain.triton.libcuda-not-found": "AssertionError: libcuda.so cannot found!\nPlease make sure GPU is set up and "
                                        "then run \"/sbin/ldconfig\" (requires sudo) to refresh the linker cache.",
    "explain.triton.no-c-compiler": "RuntimeError: Failed to find C compiler. Please specify via CC environment "
                                    "variable.",
    "explain.triton.ptxas-unknown-arch": "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'",
    "explain.triton.ptxas-failed": "triton.runtime.errors.PTXASError: PTXAS error: `ptxas` failed with error code 1\n"
                                   "`ptxas` stderr:",
    "explain.uv.no-solution": "  × No solution found when resolving dependencies:\n  ╰─▶ Because xformers==0.0.24 depends "
                              "on torch==2.2.0 and you require xformers==0.0.24 and torch==2.4.0, we can conclude "
                              "that your requirements are unsatisfiable.",
    "explain.pip.cuda-wheel-index": "ERROR: No matching distribution found for torch==2.1.0+cu121",
    "explain.pip.unsupported-wheel": "ERROR: torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl is not a supported wheel "
                                     "on this platform.",
    "explain.pip.hash-mismatch": "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.",
    "explain.pip.broken-requirements": "ERROR: pip's dependency resolver does not currently take into account all the "
                                       "packages that are installed.\ntorchaudio 2.0.2+cu117 requires torch==2.0.1, "
                                       "but you have torch 1.11.0+cu113 which is incompatible.",
    "explain.cuda.error": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "explain.dataparallel.replica-error": "StopIteration: Caught StopIteration in replica 0 on device 0.",
    "explain.driver.nvml-error": "pynvml.NVMLError_NotSupported: Not Supported",
    "explain.distributed.child-failed": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
                                        "  exitcode  : -9 (pid: 14750)",
    "explain.torch.cuda-init-failed": "RuntimeError: CUDA driver initialization failed, you might not have a CUDA "
                                      "gpu.",
    "explain.driver.nvidia-smi-missing": "bash: nvidia-smi: command not found",
    "explain.checkpoint.missing-keys": "RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) in "
                                       "state_dict: \"fc.weight\", \"fc.bias\".",
    "explain.nvcc.unsupported-host-compiler": "/usr/local/cuda/include/crt/host_config.h:132:2: error: #error -- "
                                              "unsupported GNU version! gcc versions later than 11 are not supported!",
    "explain.build.python-headers-missing": "src/module.c:1:10: fatal error: Python.h: No such file or directory",
    "explain.build.libcuda-link": "/usr/bin/ld: cannot find -lcuda: No such file or directory",
    "explain.triton.missing": "RuntimeError: Cannot find a working triton installation. Either the package is not "
                              "installed or it is too old.",
    "explain.inductor.no-cxx-compiler": "torch._inductor.exc.InvalidCxxCompiler: No working C++ compiler found in "
                                        "torch._inductor.config.cpp.cxx: (None, 'g++')",
    "explain.inductor.backend-failed": "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
    "explain.pip.requires-python": "ERROR: Package 'torch' requires a different Python: 3.7.9 not in '>=3.8.0'",
    "explain.conda.clobber": "ClobberError: This transaction has incompatible packages due to a shared path.\n"
                             "  packages: conda-forge/linux-64::cudatoolkit-11.8.0, nvidia/linux-64::cuda-cudart-11.8.89\n"
                             "  path: 'lib/libcudart.so.11.0'",
    "explain.conda.http-error": "CondaHTTPError: HTTP 000 CONNECTION FAILED for url "
                                "<https://conda.example.invalid/pytorch/linux-64/current_repodata.json>",
    "explain.bitsandbytes.cuda-setup": "RuntimeError:\n        CUDA Setup failed despite GPU being available. Please run "
                                       "the following command to get more information:",
    "explain.flash-attn.unsupported": "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
    "explain.nccl.warning": "node1:1234:1300 [0] include/socket.h:409 NCCL WARN Net : Connect to 10.0.0.2<34567> "
                            "failed : Connection refused",
    "explain.checkpoint.not-a-pickle": "_pickle.UnpicklingError: invalid load key, '<'.",
    "explain.dataloader.too-many-open-files": "RuntimeError: received 0 items of ancdata",
    "explain.distributed.not-initialized": "ValueError: Default process group has not been initialized, please make "
                                           "sure to call init_process_group.",
    "explain.extension.no-ninja": "RuntimeError: Ninja is required to load C++ extensions",
}

"""Make PyTorch, CUDA, NCCL and the DataLoader raise the errors users meet, on a real GPU, and keep their text.

Run on a machine with one or more NVIDIA GPUs (`tests/gpu/device-check.sh` does): each case runs in a child of
its own (an error such as a device-side assert poisons the CUDA context for the rest of a process), bounded in
time, and its output is written to OUTDIR/<case>.log as the user would paste it. The logs are the messages as
their sources print them today, for explain's corpus; the expected answer of each is written beside it before
explain ever reads it (tests/corpus/device-logs/manifest.yaml).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Each rank of the two-process cases runs this (substituted into the case as a string).
RANK_NCCL = """\
import os, datetime, torch, torch.distributed as dist
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30))
torch.cuda.set_device(0)
t = torch.ones(1, device="cuda:0")
dist.all_reduce(t)
torch.cuda.synchronize()
print("rank", os.environ["RANK"], "sum", t.item())
"""

RANK_GLOO = """\
import os, datetime, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
if os.environ["RANK"] == "0":
    dist.all_reduce(torch.ones(1))
else:
    import time; time.sleep(12)
"""

# CUDA sources of the two kernel cases (substituted like the rank code): one built for sm_75 alone, so a newer
# GPU has no kernel image for it; one that writes far outside its buffer.
FILL_KERNEL = """\
#include <c10/cuda/CUDAException.h>
__global__ void fill(float* out, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = 1.0f; }
torch::Tensor run(torch::Tensor x) {
  fill<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), x.numel());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return x;
}
"""

SCRIBBLE_KERNEL = """\
__global__ void scribble(float* out) { out[threadIdx.x * 1099511627776ULL] = 1.0f; }
torch::Tensor run(torch::Tensor x) { scribble<<<1, 32>>>(x.data_ptr<float>()); return x; }
"""

CASES: dict[str, str] = {
    "deserialize-cuda1-one-gpu": """
        import io, torch
        buf = io.BytesIO(); torch.save(torch.ones(2, device="cuda:0"), buf); buf.seek(0)
        torch.load(buf, map_location={"cuda:0": "cuda:1"})
    """,
    "oom-allocate-300gib": """
        import torch
        torch.zeros(1, device="cuda")
        torch.empty(300 * 2**30, dtype=torch.uint8, device="cuda")
    """,
    "device-side-assert-embedding": """
        import torch
        emb = torch.nn.Embedding(10, 4).cuda()
        emb(torch.tensor([3, 12], device="cuda")).sum().item()
    """,
    "invalid-device-ordinal": """
        import torch
        torch.zeros(1, device="cuda:7")
    """,
    "set-device-out-of-range": """
        import torch
        torch.cuda.set_device(5)
        torch.zeros(1, device="cuda")
    """,
    "no-gpus-visible-empty-env": """
        import os; os.environ["CUDA_VISIBLE_DEVICES"] = ""
        import torch
        print("is_available:", torch.cuda.is_available())
        torch.zeros(1, device="cuda")
    """,
    "dataparallel-device-ids-two-on-one-gpu": """
        import torch
        model = torch.nn.Linear(4, 2).cuda()
        dp = torch.nn.DataParallel(model, device_ids=[0, 1])
        dp(torch.randn(8, 4, device="cuda"))
    """,
    "mixed-devices-matmul": """
        import torch
        torch.nn.Linear(4, 2).cuda()(torch.randn(3, 4))
    """,
    "cuda-after-fork": """
        import multiprocessing as mp, torch
        torch.zeros(1, device="cuda")
        def child():
            torch.zeros(1, device="cuda")
        ctx = mp.get_context("fork")
        p = ctx.Process(target=child); p.start(); p.join()
        raise SystemExit(p.exitcode)
    """,
    "ddp-unused-parameter": """
        import os, torch, torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29531", RANK="0", WORLD_SIZE="1")
        dist.init_process_group("nccl")
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__(); self.used = torch.nn.Linear(4, 2); self.unused = torch.nn.Linear(4, 2)
            def forward(self, x):
                return self.used(x)
        model = torch.nn.parallel.DistributedDataParallel(Net().cuda(), device_ids=[0])
        for _ in range(2):
            model(torch.randn(8, 4, device="cuda")).sum().backward()
    """,
    "nccl-two-ranks-one-gpu": """
        import os, subprocess, sys
        rank_code = RANK_NCCL
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29532", WORLD_SIZE="2", NCCL_DEBUG="WARN")
        procs = [subprocess.Popen([sys.executable, "-c", rank_code], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
                 for r in range(2)]
        raise SystemExit(max(p.wait() for p in procs))
    """,
    "gloo-collective-timeout": """
        import os, subprocess, sys
        rank_code = RANK_GLOO
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", WORLD_SIZE="2")
        procs = [subprocess.Popen([sys.executable, "-c", rank_code], env=dict(env, RANK=str(r))) for r in range(2)]
        raise SystemExit(max(p.wait() for p in procs))
    """,
    "dataloader-worker-killed": """
        import os, signal, torch
        from torch.utils.data import DataLoader, Dataset
        class Killer(Dataset):
            def __len__(self): return 8
            def __getitem__(self, i):
                if i == 3: os.kill(os.getpid(), signal.SIGKILL)
                return torch.zeros(2)
        for _ in DataLoader(Killer(), num_workers=2, pin_memory=True): pass
    """,
    "strict-load-module-prefix": """
        import torch
        model = torch.nn.Linear(4, 2).cuda()
        state = torch.nn.DataParallel(model).state_dict()
        torch.nn.Linear(4, 2).load_state_dict(state)
    """,
    "nvml-invalid-index": """
        import pynvml
        pynvml.nvmlInit()
        pynvml.nvmlDeviceGetHandleByIndex(9)
    """,
    "get-device-properties-out-of-range": """
        import torch
        torch.cuda.get_device_properties(4)
    """,
    "cuda-visible-devices-bogus-uuid": """
        import os; os.environ["CUDA_VISIBLE_DEVICES"] = "GPU-00000000-0000-0000-0000-000000000000"
        import torch
        print("is_available:", torch.cuda.is_available(), "count:", torch.cuda.device_count())
        torch.zeros(1, device="cuda")
    """,
    "weights-only-custom-class": """
        import io, torch
        class Box:
            def __init__(self): self.t = torch.ones(2, device="cuda")
        buf = io.BytesIO(); torch.save({"box": Box()}, buf); buf.seek(0)
        torch.load(buf)
    """,
    "memory-fraction-oom": """
        import torch
        torch.cuda.set_per_process_memory_fraction(0.001)
        keep = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
        torch.empty(512 * 2**20, dtype=torch.uint8, device="cuda")
    """,
    "nccl-bad-socket-ifname": """
        import os, datetime, torch, torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29534", RANK="0", WORLD_SIZE="1",
                          NCCL_SOCKET_IFNAME="nonexistent0", NCCL_DEBUG="WARN")
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30), device_id=torch.device("cuda:0"))
        t = torch.ones(1, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        print("sum", t.item())
    """,
    "autocast-cuda-without-gpu": """
        import os, warnings; os.environ["CUDA_VISIBLE_DEVICES"] = ""
        warnings.simplefilter("always")
        import torch
        with torch.autocast("cuda", dtype=torch.float16):
            y = torch.nn.Linear(4, 2)(torch.randn(3, 4))
        scaler = torch.amp.GradScaler("cuda")
        print("dtype under autocast:", y.dtype, "scaler enabled:", scaler.is_enabled())
    """,
    "kernel-without-sm90-image": """
        import torch
        from torch.utils.cpp_extension import load_inline
        mod = load_inline("sm75_only", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=FILL_KERNEL,
                          functions=["run"], extra_cuda_cflags=["-gencode=arch=compute_75,code=sm_75"])
        mod.run(torch.zeros(16, device="cuda"))
        torch.cuda.synchronize()
    """,
    "illegal-memory-access": """
        import torch
        from torch.utils.cpp_extension import load_inline
        mod = load_inline("scribble", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=SCRIBBLE_KERNEL,
                          functions=["run"], extra_cuda_cflags=["-gencode=arch=compute_90,code=sm_90"])
        mod.run(torch.zeros(16, device="cuda"))
        torch.cuda.synchronize()
    """,
    "tcpstore-port-in-use": """
        import os, socket, datetime, torch.distributed as dist
        holder = socket.socket(); holder.bind(("127.0.0.1", 29535)); holder.listen()
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29535", RANK="0", WORLD_SIZE="1")
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=20))
    """,
}


SUBSTITUTED = {"RANK_NCCL": RANK_NCCL, "RANK_GLOO": RANK_GLOO, "FILL_KERNEL": FILL_KERNEL,
               "SCRIBBLE_KERNEL": SCRIBBLE_KERNEL}


def run_case(name: str, body: str, outdir: Path, timeout: int) -> tuple[str, int | str]:
    code = textwrap.dedent(body)
    for placeholder, text in SUBSTITUTED.items():
        code = code.replace(placeholder, repr(text))
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
        text, status = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        text, status = out + err + f"\n[timed out after {timeout} s]\n", "timeout"
    (outdir / f"{name}.log").write_text(text)
    return name, status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--timeout", type=int, default=90)
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    chosen = [name for name in args.only.split(",") if name] or list(CASES)
    unknown = sorted(set(chosen) - set(CASES))
    if unknown:
        parser.error(f"unknown cases: {', '.join(unknown)}")
    args.outdir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda name: run_case(name, CASES[name], args.outdir, args.timeout), chosen))
    for name, status in results:
        print(f"{name}: exit {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

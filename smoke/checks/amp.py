"""AMP: a short deterministic training run under autocast must really learn in the autocast dtype.

Four Gaussian blobs, a 3-layer MLP, 200 full-batch SGD steps from a fixed seed. The loss starts near
chance (ln 4) and must end below 0.7 of its start. autocast("cuda") without CUDA silently turns
itself off, so the logits' dtype is asserted; a GradScaler must be enabled where one is used.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from smoke.registry import Context, Outcome, check, skipped, verdict

CHANCE_LOSS = math.log(4)
START_BAND = 0.3  # measured starts: 1.34-1.46 across seeds
MAX_END_RATIO = 0.7  # measured: 0.20-0.28 of the start for bf16, fp16 and fp32; lr=0 stays at 1.0
DEFAULT_LR = 0.1
DEFAULT_STEPS = 200
BLOB_CENTRES = ((1.5, 1.5), (-1.5, 1.5), (-1.5, -1.5), (1.5, -1.5))
ROWS_PER_BLOB = 128
HIDDEN = 64


@dataclass(frozen=True)
class TrainRun:
    device: str
    autocast_device: str
    requested_dtype: str
    lr: float
    steps: int
    first_loss: float
    last_loss: float
    logits_dtype: str
    scaler_enabled: bool | None  # None: no scaler used
    peak_memory_bytes: int | None  # CUDA only
    seconds: float

    @property
    def end_ratio(self) -> float:
        return self.last_loss / self.first_loss

    def as_details(self) -> dict[str, object]:
        return {
            "device": self.device, "autocast_device": self.autocast_device, "dtype": self.requested_dtype,
            "lr": self.lr, "steps": self.steps, "first_loss": round(self.first_loss, 4),
            "last_loss": round(self.last_loss, 4), "end_ratio": round(self.end_ratio, 4),
            "logits_dtype": self.logits_dtype, "scaler_enabled": self.scaler_enabled,
            "peak_memory_bytes": self.peak_memory_bytes, "seconds": round(self.seconds, 3),
        }


def make_blobs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    centres = torch.tensor(BLOB_CENTRES)
    labels = torch.arange(len(BLOB_CENTRES)).repeat_interleave(ROWS_PER_BLOB)
    points = centres[labels] + torch.randn(len(labels), 2, generator=generator)
    return points, labels


def make_mlp(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(2, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, len(BLOB_CENTRES))
    )


def train_blobs(
    device: str = "cpu",
    dtype: torch.dtype | None = torch.bfloat16,
    lr: float = DEFAULT_LR,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    use_scaler: bool = False,
    autocast_device: str | None = None,
) -> TrainRun:
    """Train under autocast(autocast_device or device's type, dtype); dtype None trains in fp32."""
    autocast_type = autocast_device or torch.device(device).type
    points, labels = make_blobs(seed)
    points, labels = points.to(device), labels.to(device)
    model = make_mlp(seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scaler = make_grad_scaler(autocast_type) if use_scaler else None
    on_cuda = torch.device(device).type == "cuda"
    if on_cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    losses: list[float] = []
    logits = torch.empty(0)
    start = time.perf_counter()
    with _one_thread_on_cpu(device):
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            with _autocast(autocast_type, dtype):
                logits = model(points)
                loss = nn.functional.cross_entropy(logits, labels)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            losses.append(float(loss.detach()))
    peak = int(torch.cuda.max_memory_allocated(device)) if on_cuda else None
    return TrainRun(
        device=str(device), autocast_device=autocast_type, requested_dtype=_dtype_name(dtype), lr=lr, steps=steps,
        first_loss=losses[0], last_loss=losses[-1], logits_dtype=_dtype_name(logits.dtype),
        scaler_enabled=None if scaler is None else bool(scaler.is_enabled()), peak_memory_bytes=peak,
        seconds=time.perf_counter() - start,
    )


def judge_run(run: TrainRun, expected_logits_dtype: torch.dtype) -> list[str]:
    """Everything wrong with a run; empty when it trained as it should in the dtype it should."""
    problems = []
    if abs(run.first_loss - CHANCE_LOSS) > START_BAND:
        problems.append(f"first loss {run.first_loss:.3f} is not near chance ln 4 = {CHANCE_LOSS:.3f}")
    if not math.isfinite(run.last_loss) or run.end_ratio >= MAX_END_RATIO:
        problems.append(
            f"loss went from {run.first_loss:.3f} to {run.last_loss:.3f} ({run.end_ratio:.2f} of its start, "
            f"needs < {MAX_END_RATIO})"
        )
    if run.logits_dtype != _dtype_name(expected_logits_dtype):
        problems.append(
            f"logits are {run.logits_dtype}, not {_dtype_name(expected_logits_dtype)}: autocast"
            f"({run.autocast_device!r}) did not take effect"
        )
    if run.scaler_enabled is False:
        problems.append("GradScaler is disabled: fp16 gradients are not being scaled")
    return problems


def make_grad_scaler(device_type: str) -> Any:
    """torch.amp.GradScaler(device) where it exists (2.3+), else the older torch.cuda.amp one."""
    amp_scaler = getattr(torch.amp, "GradScaler", None)
    if amp_scaler is not None:
        return amp_scaler(device_type)
    if device_type != "cuda":
        raise RuntimeError(f"torch {torch.__version__} has no GradScaler for {device_type!r}")
    return torch.cuda.amp.GradScaler()


def _autocast(device_type: str, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[object]:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=dtype)


@contextlib.contextmanager
def _one_thread_on_cpu(device: str) -> Iterator[None]:
    # Tiny matrices gain nothing from threads, and the suite shares its cores with whatever else runs.
    if torch.device(device).type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _dtype_name(dtype: torch.dtype | None) -> str:
    return "float32 (no autocast)" if dtype is None else str(dtype).replace("torch.", "")


def _outcome(run: TrainRun, expected: torch.dtype, label: str, **extra: object) -> Outcome:
    problems = judge_run(run, expected)
    ok = f"{label}: loss {run.first_loss:.3f} -> {run.last_loss:.3f} ({run.end_ratio:.2f}), logits {run.logits_dtype}"
    return verdict(problems, ok, **run.as_details(), **extra)


_fp32_peaks: dict[str, int | None] = {}


def _fp32_peak(device: str) -> int | None:
    if device not in _fp32_peaks:
        _fp32_peaks[device] = train_blobs(device, dtype=None).peak_memory_bytes
    return _fp32_peaks[device]


@check("amp.cpu_bf16",
       stands_for="seed 000's mixed precision: autocast must take effect (here bf16 on the CPU)")
def cpu_bf16(ctx: Context) -> Outcome:
    """bf16 autocast on CPU trains the blobs, logits in bfloat16 (one thread)."""
    return _outcome(train_blobs("cpu", torch.bfloat16), torch.bfloat16, "CPU bf16 autocast")


@check("amp.cuda_fp16", gpus=1,
       stands_for="seed 000: autocast with GradScaler, fp16 halves activation memory; upstream smoke_test_conv2d "
                  "under autocast on cuda")
def cuda_fp16(ctx: Context) -> Outcome:
    """fp16 autocast with an enabled GradScaler on cuda:0 trains the blobs; peak memory vs fp32."""
    run = train_blobs("cuda:0", torch.float16, use_scaler=True)
    return _outcome(run, torch.float16, "CUDA fp16 + GradScaler", fp32_peak_memory_bytes=_fp32_peak("cuda:0"))


@check("amp.cuda_bf16", gpus=1,
       stands_for="seed 000's mixed precision, in bf16 where the GPU has it")
def cuda_bf16(ctx: Context) -> Outcome:
    """bf16 autocast on cuda:0 where the GPU supports it; peak memory vs fp32."""
    if not torch.cuda.is_bf16_supported():
        return skipped(f"{torch.cuda.get_device_name(0)} does not support bf16")
    run = train_blobs("cuda:0", torch.bfloat16)
    return _outcome(run, torch.bfloat16, "CUDA bf16 autocast", fp32_peak_memory_bytes=_fp32_peak("cuda:0"))

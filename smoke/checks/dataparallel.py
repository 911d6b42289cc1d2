"""DataParallel (seeds 000, 001): the batch split, the device_ids[0] rule, gradients, pass-through.

The split is observed, not computed: a module records (device, rows) from inside forward, and the
record is judged by smoke.split.check_split against an expectation derived from first principles.
"""

from __future__ import annotations

import copy
import threading
import time

import torch
from torch import nn

from smoke.registry import Context, Outcome, check, failed, passed, skipped, verdict
from smoke.split import check_split, rows_per_device

DEVICE_IDS0_MESSAGE = "must have its parameters and buffers on device cuda:0 (device_ids[0])"
FEATURES = 8


class BatchRecorder(nn.Module):
    """A linear layer that notes, per call, the device and rows it saw.

    DataParallel's replicas are shallow copies of this module's __dict__, so they all append to the
    same list under the same lock.
    """

    def __init__(self, features: int = FEATURES, outputs: int = 4) -> None:
        super().__init__()
        self.linear = nn.Linear(features, outputs)
        self.seen: list[tuple[int | None, int]] = []
        self.seen_lock = threading.Lock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.seen_lock:
            self.seen.append((x.device.index, int(x.shape[0])))
        return self.linear(x)


def split_cases(n_gpus: int) -> list[tuple[int, int]]:
    """(batch, devices) pairs worth observing on a machine with n_gpus."""
    cases = [(32, 2), (33, 2)]
    if n_gpus >= 3:
        cases.append((32, 3))
    if n_gpus >= 4:
        cases.append((6, 4))
    if n_gpus > 4:
        cases.append((32, n_gpus))
    return cases


@check("dp.passthrough",
       stands_for="seeds 000 and 001: DataParallel that silently runs the whole batch on one device")
def passthrough(ctx: Context) -> Outcome:
    """Without CUDA (or with one GPU) DataParallel runs the plain module on the whole batch."""
    if ctx.gpu_count >= 2:
        return skipped(f"{ctx.gpu_count} GPUs visible: DataParallel splits here (see dp.split)")
    device = torch.device("cuda:0") if ctx.gpu_count == 1 else torch.device("cpu")
    torch.manual_seed(0)
    plain = BatchRecorder().to(device)
    wrapped = nn.DataParallel(plain)
    batch = torch.randn(32, FEATURES, device=device)
    with torch.no_grad():
        expected = plain.linear(batch)
        plain.seen.clear()
        output = wrapped(batch)
    expected_ids = [0] if ctx.gpu_count == 1 else []
    problems = []
    if list(wrapped.device_ids) != expected_ids:
        problems.append(f"device_ids is {wrapped.device_ids}, expected {expected_ids}")
    if [rows for _, rows in plain.seen] != [32]:
        problems.append(f"forward saw {plain.seen} instead of the whole batch of 32 once")
    if not torch.equal(output, expected):
        problems.append("output differs from the plain module's")
    where = "on cuda:0 (one GPU)" if ctx.gpu_count == 1 else "on CPU: no CUDA, no split, no warning"
    return verdict(
        problems,
        f"DataParallel passes the whole batch through {where}",
        device_ids=list(wrapped.device_ids),
        seen=plain.seen,
    )


@check("dp.split", gpus=2,
       stands_for="seed 000 (a batch of 32 splits 16 + 16) and seed 001 ('the batch must divide by the GPU count': "
                  "it need not)")
def split(ctx: Context) -> Outcome:
    """Rows each replica saw follow chunk semantics (32 on 2 -> 16+16, 33 -> 17+16, 6 on 4 -> 2+2+2)."""
    # The checker must reject an unsplit batch, or every verdict below means nothing.
    control = check_split([32], 32, 2)
    if control.ok:
        return failed("check_split accepted 32 rows on one device out of 2: the checker is broken")
    problems: list[str] = []
    observed = []
    for batch, n_gpus in split_cases(ctx.gpu_count):
        device_ids = list(range(n_gpus))
        recorder = BatchRecorder().to("cuda:0")
        wrapped = nn.DataParallel(recorder, device_ids=device_ids)
        with torch.no_grad():
            output = wrapped(torch.randn(batch, FEATURES, device="cuda:0"))
        judged = check_split(rows_per_device(recorder.seen, device_ids), batch, n_gpus)
        observed.append({"batch": batch, "n_gpus": n_gpus, "expected": judged.expected,
                         "recorded": judged.recorded, "ok": judged.ok})
        if not judged.ok:
            problems.append(judged.message)
        if tuple(output.shape) != (batch, 4) or output.device != torch.device("cuda:0"):
            problems.append(f"batch {batch}: gathered output {tuple(output.shape)} on {output.device}")
    summary = "; ".join(f"{o['batch']} on {o['n_gpus']} -> {o['recorded']}" for o in observed)
    return verdict(problems, f"splits follow chunk semantics: {summary}", cases=observed)


@check("dp.device_ids0", gpus=2,
       stands_for="seed 000: a model on cuda:1 with device_ids=[0, 1] ('must have its parameters ... on device "
                  "cuda:0')")
def module_must_sit_on_device_ids0(ctx: Context) -> Outcome:
    """A model on cuda:1 wrapped with device_ids [0, 1] raises the device_ids[0] error; on cuda:0 it runs."""
    batch = torch.randn(8, FEATURES, device="cuda:0")
    misplaced = nn.DataParallel(BatchRecorder().to("cuda:1"), device_ids=[0, 1])
    try:
        with torch.no_grad():
            misplaced(batch)
    except RuntimeError as exc:
        message = " ".join(str(exc).split())
        if DEVICE_IDS0_MESSAGE not in message:
            return failed(f"the misplaced model raised an unexpected error: {message[:300]}")
    else:
        return failed("a model on cuda:1 with device_ids [0, 1] ran without the device_ids[0] error")
    placed = nn.DataParallel(BatchRecorder().to("cuda:0"), device_ids=[0, 1])
    with torch.no_grad():
        placed(batch)
    return passed("model on cuda:1 raises the device_ids[0] error; moved to cuda:0 it runs", error=message)


@check("dp.gradients", gpus=2,
       stands_for="seed 000: gradients gathered on the main GPU equal one device's")
def gradients_match_single_device(ctx: Context) -> Outcome:
    """One DataParallel step gives the same gradients as the same step on one device (allclose)."""
    torch.manual_seed(0)
    single = _mlp().to("cuda:0")
    parallel_module = copy.deepcopy(single)
    wrapped = nn.DataParallel(parallel_module, device_ids=list(range(ctx.gpu_count)))
    inputs = torch.randn(64, FEATURES, device="cuda:0")
    targets = torch.randn(64, 1, device="cuda:0")
    nn.functional.mse_loss(single(inputs), targets).backward()
    nn.functional.mse_loss(wrapped(inputs), targets).backward()
    worst = 0.0
    problems = []
    for (name, a), b in zip(single.named_parameters(), parallel_module.parameters(), strict=True):
        if a.grad is None or b.grad is None:
            problems.append(f"{name}: no gradient ({'single device' if a.grad is None else 'DataParallel'})")
            continue
        difference = float((a.grad - b.grad).abs().max())
        worst = max(worst, difference)
        if not torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6):
            problems.append(f"{name}: gradients differ (max abs difference {difference:.2e})")
    return verdict(problems, f"gradients match a single-device step (max abs difference {worst:.1e})",
                   max_abs_difference=worst, devices=ctx.gpu_count)


@check("dp.throughput", gpus=2,
       stands_for="seed 000 (GPU-Util at 35%) and seed 001 (training no faster with DataParallel)")
def throughput_ratio(ctx: Context) -> Outcome:
    """DataParallel vs one GPU, samples per second; reported, never asserted."""
    single_rate = _samples_per_second(_wide_mlp().to("cuda:0"), "cuda:0")
    wrapped = nn.DataParallel(_wide_mlp().to("cuda:0"), device_ids=list(range(ctx.gpu_count)))
    parallel_rate = _samples_per_second(wrapped, "cuda:0")
    ratio = parallel_rate / single_rate
    return passed(
        f"DataParallel on {ctx.gpu_count} GPUs runs {ratio:.2f}x one GPU (informational)",
        single_samples_per_s=round(single_rate), dataparallel_samples_per_s=round(parallel_rate),
        ratio=round(ratio, 3),
    )


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))


def _wide_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))


def _samples_per_second(model: nn.Module, device: str, batch: int = 4096, steps: int = 20) -> float:
    inputs = torch.randn(batch, 1024, device=device)
    for _ in range(3):  # warm-up: cuBLAS handles, replicas' first allocations
        model(inputs).sum().backward()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        model(inputs).sum().backward()
    torch.cuda.synchronize()
    return batch * steps / (time.perf_counter() - start)

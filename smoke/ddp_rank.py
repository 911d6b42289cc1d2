"""One rank of `ddp.allreduce_step`, run as `python -m smoke.ddp_rank RESULT_FILE` with torchrun's
environment (smoke.ddp.rank_environment). It writes what it saw, or where it failed and why, as JSON
to RESULT_FILE; the parent judges (smoke.ddp.judge_ranks) and names causes (smoke.ddp.diagnose).

Its work: an all-reduce of known tensors, then one DistributedDataParallel step on this rank's half of
a fixed batch, compared with one process doing the same step on the whole batch.
"""

from __future__ import annotations

import datetime
import inspect
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from smoke.children import clip_middle
from smoke.ddp import (
    BATCH,
    DEADLINE_S,
    FEATURES,
    GRAD_ATOL,
    GRAD_RTOL,
    OUTPUTS,
    all_reduce_input,
)

HIDDEN = 16
LEARNING_RATE = 0.1
ERROR_CHARS = 2000


def make_model() -> nn.Module:
    """The same weights in every process: the seed is set right before they are drawn."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUTPUTS))


def make_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, FEATURES, generator=generator), torch.randn(BATCH, OUTPUTS, generator=generator)


def gradients(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> list[torch.Tensor]:
    """One backward pass of the mean squared error; the gradients it leaves (DDP's are averaged)."""
    model.zero_grad()
    nn.functional.mse_loss(model(inputs), targets).backward()
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def max_difference(first: list[torch.Tensor], second: list[torch.Tensor]) -> float:
    return max(float((a.detach() - b.detach()).abs().max()) for a, b in zip(first, second, strict=True))


def all_close(first: list[torch.Tensor], second: list[torch.Tensor]) -> bool:
    return len(first) == len(second) and all(
        torch.allclose(a, b, rtol=GRAD_RTOL, atol=GRAD_ATOL) for a, b in zip(first, second, strict=True))


def run_rank(report: dict[str, Any], save: Callable[[], None] = lambda: None) -> None:
    """This rank's work; `report` is filled in as it goes and `save` called at each stage, so a rank
    killed at the deadline still tells where it hung."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    backend = os.environ["SMOKE_DDP_BACKEND"]
    timeout = datetime.timedelta(seconds=float(os.environ["SMOKE_DDP_TIMEOUT_S"]))
    torch.set_num_threads(1)
    if not dist.is_available():
        raise RuntimeError("this torch is built without torch.distributed (USE_DISTRIBUTED=0)")
    device = torch.device("cpu")
    options: dict[str, Any] = {"backend": backend, "init_method": "env://", "timeout": timeout}
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        if "device_id" in inspect.signature(dist.init_process_group).parameters:
            options["device_id"] = device  # NCCL starts now, so its failures are the init's, not a collective's
    report.update(device=str(device), stage="init_process_group")
    save()
    dist.init_process_group(**options)
    try:
        report["stage"] = "all_reduce"
        save()
        summed = torch.tensor(all_reduce_input(rank), device=device)
        dist.all_reduce(summed)
        report["all_reduce"] = summed.cpu().tolist()

        report["stage"] = "ddp_step"
        save()
        inputs, targets = (t.to(device) for t in make_batch())
        rows = BATCH // world_size
        mine = slice(rank * rows, (rank + 1) * rows)
        model, reference = make_model().to(device), make_model().to(device)
        wrapped = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
        ddp_grads = gradients(wrapped, inputs[mine], targets[mine])
        whole_batch_grads = gradients(reference, inputs, targets)
        report.update(grad_max_diff=max_difference(ddp_grads, whole_batch_grads),
                      grads_match=all_close(ddp_grads, whole_batch_grads))
        torch.optim.SGD(wrapped.parameters(), lr=LEARNING_RATE).step()
        torch.optim.SGD(reference.parameters(), lr=LEARNING_RATE).step()
        after = [p.detach() for p in model.parameters()]
        expected = [p.detach() for p in reference.parameters()]
        report.update(param_max_diff=max_difference(after, expected), params_match=all_close(after, expected),
                      param_checksum=float(sum(float(p.double().sum()) for p in after)))
        report["stage"] = "done"
    finally:
        dist.destroy_process_group()


def main(argv: list[str]) -> int:
    # A bound of its own: if the parent is killed outright, this rank still ends (SIGALRM's default
    # action) instead of waiting for a peer forever.
    signal.alarm(int(DEADLINE_S) + 5)
    result_file = Path(argv[0])
    report: dict[str, Any] = {"rank": int(os.environ.get("RANK", "-1")), "backend": os.environ.get("SMOKE_DDP_BACKEND"),
                              "stage": "started"}

    def save() -> None:
        partial = result_file.with_suffix(".partial")
        partial.write_text(json.dumps(report), encoding="utf-8")
        partial.replace(result_file)  # whole or not at all, for a parent reading after a kill

    save()
    status = 0
    try:
        run_rank(report, save)
    except Exception as exc:  # reported to the parent, which names the cause  # noqa: BLE001
        report["error"] = clip_middle(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
        status = 1
    save()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

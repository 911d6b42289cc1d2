"""DistributedDataParallel (what seed 000 ends by recommending over DataParallel, and seed 001 compares
it with): two ranks started as torchrun starts them, gloo on the CPU or NCCL on two GPUs.

The ranks are child processes (smoke/ddp_rank.py) in process groups of their own, bounded together
by smoke.ddp.DEADLINE_S and always killed and reaped; when a backend cannot start, the failure names
the cause and the fix from the errors the ranks really raised (smoke.ddp.diagnose).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist

from smoke.children import ChildRun, child_environment, free_loopback_port, python_module, run_children
from smoke.ddp import (
    DEADLINE_S,
    WORLD_SIZE,
    choose_backend,
    diagnose,
    expected_all_reduce,
    judge_ranks,
    rank_environment,
)
from smoke.registry import Context, Outcome, check, failed, passed

ATTEMPTS = 2  # a second port only when the first was taken between choosing it and binding it
MIN_DEADLINE_S = 5.0


@check("ddp.allreduce_step",
       stands_for="seed 000 (ends recommending DistributedDataParallel over DataParallel) and seed 001 "
                  "(DataParallel vs DDP: NCCL, a launcher starting one process per GPU)")
def allreduce_step(ctx: Context) -> Outcome:
    """Two torchrun-style ranks (env:// on a free loopback port): an all-reduce, then a DDP step as one process's."""
    if not dist.is_available():
        return failed("this torch is built without torch.distributed: DistributedDataParallel cannot run")
    backend, why = choose_backend(ctx.gpu_count, nccl=dist.is_nccl_available(), gloo=dist.is_gloo_available())
    if backend is None:
        return failed(f"no backend for two CPU ranks: {why}")
    # Inside --timeout-per-check too, so the ranks are gone before the suite gives up on this check.
    deadline = max(MIN_DEADLINE_S, min(DEADLINE_S, ctx.settings.timeout_per_check - 2))
    started = time.monotonic()
    attempts: list[dict[str, Any]] = []
    for _ in range(ATTEMPTS):
        left = deadline - (time.monotonic() - started)
        attempt = _run_ranks(backend, left)
        attempts.append(attempt)
        if attempt["diagnosis"] is None or attempt["diagnosis"]["key"] != "port_in_use" or left < deadline / 2:
            break
    return _outcome(backend, why, attempts, deadline, time.monotonic() - started)


def _run_ranks(backend: str, timeout_s: float) -> dict[str, Any]:
    port = free_loopback_port()
    with tempfile.TemporaryDirectory(prefix="smoke-ddp-") as folder:
        workdir = Path(folder)
        commands = []
        for rank in range(WORLD_SIZE):
            extra = rank_environment(rank, port, backend)
            extra.setdefault("OMP_NUM_THREADS", "1")
            env = child_environment(extra)
            env.setdefault("NCCL_DEBUG", "WARN")  # NCCL's own WARN lines name what failed; the user's setting wins
            commands.append((python_module("smoke.ddp_rank", str(workdir / f"rank{rank}.json")), env))
        runs = run_children(commands, timeout_s, workdir)
        reports = [_read_report(workdir / f"rank{rank}.json", runs[rank], rank) for rank in range(WORLD_SIZE)]
    errors = [str(r["error"]) for r in reports if r.get("error")]
    outputs = [run.stdout + "\n" + run.stderr for run in runs]
    found = diagnose(errors, port=port, outputs=outputs) if errors or any(r.timed_out for r in runs) else None
    return {
        "port": port,
        "reports": reports,
        "timed_out": [rank for rank, run in enumerate(runs) if run.timed_out],
        "exit_codes": [run.returncode for run in runs],
        "seconds": [round(run.seconds, 2) for run in runs],
        "output_tails": [run.tail() for run in runs],
        "diagnosis": None if found is None else {"key": found.key, "cause": found.cause, "fix": found.fix,
                                                 "evidence": found.evidence},
    }


def _read_report(path: Path, run: ChildRun, rank: int) -> dict[str, Any]:
    """What the rank wrote (it saves at every stage), completed by how it ended."""
    try:
        report = dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        report = {"rank": rank, "stage": "import torch"}  # killed or crashed before its first save
    if run.timed_out and not report.get("error"):
        report["error"] = f"rank {rank} was killed at the deadline during {report.get('stage')}: {run.tail()}"
    elif run.returncode and not report.get("error"):  # a signal, a crash inside NCCL: its output is all there is
        report["error"] = f"rank {rank} exited {run.returncode} during {report.get('stage')}: {run.tail()}"
    return report


def _outcome(backend: str, why: str, attempts: list[dict[str, Any]], deadline: float, seconds: float) -> Outcome:
    last = attempts[-1]
    details: dict[str, Any] = {"backend": backend, "world_size": WORLD_SIZE, "seconds": round(seconds, 2),
                               "attempts": attempts}
    diagnosis = last["diagnosis"]
    where = ", ".join(f"rank {r.get('rank')} at {r.get('stage')}" for r in last["reports"] if r.get("error"))
    if last["timed_out"]:
        stages = ", ".join(f"rank {r.get('rank')}: {r.get('stage')}" for r in last["reports"])
        named = f"; {diagnosis['cause']}; fix: {diagnosis['fix']}" if diagnosis else ""
        return failed(f"{backend}: the ranks did not finish within {deadline:g} s and were killed with their "
                      f"process groups ({stages or 'no report'}){named}", **details)
    if diagnosis:
        return failed(f"{backend} could not run ({where}): {diagnosis['cause']}; fix: {diagnosis['fix']}", **details)
    errors = [f"rank {r.get('rank')} at {r.get('stage')}: {r['error'][:300]}"
              for r in last["reports"] if r.get("error")]
    if errors:
        return failed(f"{backend}: " + "; ".join(errors), **details)
    problems = judge_ranks(last["reports"])
    if problems:
        return failed(f"{backend}: " + "; ".join(problems), **details)
    worst = max(float(r.get("grad_max_diff") or 0.0) for r in last["reports"])
    return passed(f"{why}: all_reduce gave {expected_all_reduce()} on {WORLD_SIZE} ranks; one DDP step's gradients "
                  f"equal one process on the whole batch (max difference {worst:.1e}); {seconds:.1f} s", **details)

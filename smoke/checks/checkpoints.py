"""Checkpoints (seed 000): map_location round trips, CUDA checkpoints on CPU-only boxes, the
DataParallel `module.` prefix."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

from smoke.registry import Context, Outcome, check, failed, verdict

CUDA_ON_CPU_MESSAGE = "Attempting to deserialize object on a CUDA device"
CHILD_TIMEOUT_S = 120.0

# Runs in a process that sees no GPU: the CPU-only box the seed's error comes from.
_LOAD_WITHOUT_GPU = r"""
import json, sys, torch
path = sys.argv[1]
result = {"cuda_available": torch.cuda.is_available()}
try:
    torch.load(path)
    result["without_map_location"] = "loaded"
except Exception as exc:
    result["without_map_location"] = " ".join(str(exc).split())[:400]
state = torch.load(path, map_location="cpu")
result["map_location_devices"] = sorted({str(t.device) for t in state.values()})
result["sums"] = {k: float(v.double().sum()) for k, v in state.items()}
print(json.dumps(result))
"""


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def strip_dataparallel_prefix(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keys without DataParallel's `module.` prefix, by torch's own helper (in place on a copy)."""
    from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

    stripped = dict(state)
    consume_prefix_in_state_dict_if_present(stripped, "module.")
    return stripped


@check("checkpoint.cpu_map_location",
       stands_for="seed 000: torch.load(..., map_location='cpu')")
def cpu_round_trip(ctx: Context) -> Outcome:
    """A state_dict saved and loaded with map_location='cpu' restores identical outputs."""
    source = _model()
    buffer = io.BytesIO()
    torch.save(source.state_dict(), buffer)
    buffer.seek(0)
    restored = _model_with_other_weights()
    restored.load_state_dict(torch.load(buffer, map_location="cpu"))
    probe = torch.randn(3, 4)
    same = torch.equal(source(probe), restored(probe))
    return verdict([] if same else ["outputs differ after the round trip"],
                   "state_dict round trip with map_location='cpu' restores the model exactly")


@check("checkpoint.cuda_to_cpu", gpus=1,
       stands_for="seed 000: 'Attempting to deserialize object on a CUDA device' on a CPU-only box")
def cuda_checkpoint_on_cpu_only_box(ctx: Context) -> Outcome:
    """Saved from cuda:0: loads onto CPU with map_location; without it a GPU-less process gets the known error."""
    source = _model().to("cuda:0")
    with tempfile.TemporaryDirectory(prefix="smoke-ckpt-") as folder:
        path = Path(folder) / "cuda.pt"
        torch.save(source.state_dict(), path)
        here = torch.load(path, map_location="cpu")
        child = load_in_gpu_less_child(path)
    problems = []
    if sorted({str(t.device) for t in here.values()}) != ["cpu"]:
        problems.append("map_location='cpu' left tensors off the CPU")
    expected_sums = {k: float(v.cpu().double().sum()) for k, v in source.state_dict().items()}
    problems += judge_gpu_less_load(child, expected_sums)
    return verdict(problems, "cuda:0 checkpoint loads with map_location='cpu'; without it a GPU-less process "
                   f"fails with '{CUDA_ON_CPU_MESSAGE}'", child=child)


def judge_gpu_less_load(child: dict[str, object], expected_sums: dict[str, float]) -> list[str]:
    """Problems with what a GPU-less process made of a CUDA checkpoint (see load_in_gpu_less_child)."""
    problems = []
    if child["cuda_available"]:
        problems.append("the child with CUDA_VISIBLE_DEVICES='' still saw CUDA")
    if CUDA_ON_CPU_MESSAGE not in str(child["without_map_location"]):
        problems.append(f"loading without map_location on a GPU-less process gave: {child['without_map_location']}")
    if child["map_location_devices"] != ["cpu"]:
        problems.append(f"the GPU-less child loaded tensors onto {child['map_location_devices']}")
    sums = child["sums"]
    if not isinstance(sums, dict) or sums.keys() != expected_sums.keys() or not all(
        math.isclose(sums[k], expected_sums[k], rel_tol=1e-9, abs_tol=1e-9) for k in expected_sums
    ):
        problems.append("the GPU-less child read different values")
    return problems


@check("checkpoint.dataparallel_prefix",
       stands_for="seed 000: DataParallel's `module.` prefix in saved keys")
def dataparallel_prefix(ctx: Context) -> Outcome:
    """A DataParallel checkpoint (`module.` keys) fails a strict load into a plain model, loads once stripped."""
    wrapped = nn.DataParallel(_model())
    state = wrapped.state_dict()
    if not all(key.startswith("module.") for key in state):
        return failed(f"DataParallel state_dict keys lack the module. prefix: {sorted(state)}")
    plain = _model_with_other_weights()
    try:
        plain.load_state_dict(state)
    except RuntimeError as exc:
        strict_error = " ".join(str(exc).split())[:300]
    else:
        return failed("a module.-prefixed state_dict loaded strictly into a plain model")
    stripped = strip_dataparallel_prefix(state)
    plain.load_state_dict(stripped)
    # Compare weights, not outputs: with one GPU DataParallel has moved its module to cuda:0.
    loaded = plain.state_dict()
    same = loaded.keys() == stripped.keys() and all(torch.equal(loaded[k], stripped[k].cpu()) for k in loaded)
    return verdict([] if same else ["weights differ after loading the stripped state_dict"],
                   "module.-prefixed keys fail a strict load and load once the prefix is stripped",
                   keys=sorted(state), strict_error=strict_error)


def _model_with_other_weights() -> nn.Module:
    torch.manual_seed(1)  # different weights, so a load that did nothing cannot pass
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def load_in_gpu_less_child(path: Path) -> dict[str, object]:
    """Load `path` in a fresh process with CUDA_VISIBLE_DEVICES='', with and without map_location."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_WITHOUT_GPU, str(path)],
        capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"checkpoint child exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))

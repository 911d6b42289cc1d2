"""Visibility (seed 000): which GPUs torch sees, CUDA_VISIBLE_DEVICES remapping, `.to()` semantics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from smoke.checks.cuda_probe import probe_cuda
from smoke.device_info import device_identity, identity_key, mig_in_view
from smoke.registry import Context, Outcome, check, failed, needs_gpus, passed, verdict

CHILD_TIMEOUT_S = 120.0
SAME_DEVICE_MESSAGE = "Expected all tensors to be on the same device"


@check("visibility.devices",
       stands_for="seed 000 (device_count, get_device_name, the GPU with the most free memory) and seed 001 "
                  "(device_count() says 1 on a 4-GPU box)")
def visible_devices(ctx: Context) -> Outcome:
    """Device count, names, UUIDs, total and free memory; at least --require-gpus devices."""
    devices = [device_identity(i) for i in range(ctx.gpu_count)]
    details: dict[str, Any] = {
        "count": ctx.gpu_count,
        "devices": devices,
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    required = ctx.settings.require_gpus
    mig = mig_in_view(devices, details["CUDA_VISIBLE_DEVICES"])
    if mig:
        details["mig"] = mig
    if ctx.gpu_count < required:
        why = mig_limit(mig, required) if mig else probe_cuda().describe_unavailable()
        return failed(
            f"{ctx.gpu_count} CUDA device(s) visible but --require-gpus {required}" + (f" ({why})" if why else ""),
            **details,
        )
    if ctx.gpu_count == 0:
        return needs_gpus(1, "no CUDA device visible", **details)
    most_free = max(devices, key=lambda d: d["free_memory_bytes"])
    details["most_free_device"] = most_free["index"]
    names = ", ".join(f"cuda:{d['index']} {d['name']}" for d in devices)
    return passed(f"{ctx.gpu_count} device(s): {names}; most free memory on cuda:{most_free['index']}", **details)


def mig_limit(mig: str, required: int) -> str:
    return (f"MIG is on ({mig}): CUDA gives a process one MIG instance, so --require-gpus {required} cannot be "
            "met and DataParallel cannot span instances; run one process per instance, or turn MIG off")


@check("visibility.remap", gpus=2,
       stands_for="seeds 000 and 001: CUDA_VISIBLE_DEVICES=1,3 makes them cuda:0 and cuda:1 (set before CUDA "
                  "starts)")
def cuda_visible_devices_remaps(ctx: Context) -> Outcome:
    """A child with only the second GPU visible sees one device: the parent's second (by UUID)."""
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    everything = _child_devices(inherited)
    if len(everything) < 2:
        return failed(f"a child with the same CUDA_VISIBLE_DEVICES sees {len(everything)} device(s), not 2 or more")
    # With CUDA_VISIBLE_DEVICES set, enumeration follows its order, so its second entry is device 1.
    tokens = [t.strip() for t in inherited.split(",")] if inherited else []
    second_token = tokens[1] if len(tokens) >= 2 else "1"
    only_second = _child_devices(second_token)
    parent_keys = sorted(identity_key(device_identity(i)) for i in range(ctx.gpu_count))
    child_keys = [identity_key(d) for d in everything]
    details = {
        "parent": parent_keys,
        "child_pci_order": child_keys,
        "second_token": second_token,
        "child_with_second_only": [identity_key(d) for d in only_second],
    }
    problems = []
    if sorted(child_keys) != parent_keys:
        problems.append("a child sees different GPUs than this process")
    if len(only_second) != 1:
        problems.append(f"with CUDA_VISIBLE_DEVICES={second_token} a child sees {len(only_second)} devices, not 1")
    elif identity_key(only_second[0]) != child_keys[1]:
        problems.append(
            f"with CUDA_VISIBLE_DEVICES={second_token} the child's cuda:0 is {identity_key(only_second[0])}, "
            f"not the second GPU {child_keys[1]}"
        )
    return verdict(problems, f"CUDA_VISIBLE_DEVICES={second_token} shows exactly the second GPU as cuda:0", **details)


@check("visibility.to_semantics",
       stands_for="seed 000: tensor.to() returns a copy (an unassigned result is lost), module.to() works in place")
def to_semantics_cpu(ctx: Context) -> Outcome:
    """On CPU: a tensor's .to() returns a new tensor and leaves the original; a module's .to() is in place."""
    original = torch.randn(3, 3)
    converted = original.to(torch.float64)
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    returned = net.to(torch.float64)
    problems = []
    if converted is original or original.dtype != torch.float32 or converted.dtype != torch.float64:
        problems.append("tensor.to(float64) did not return a new float64 tensor beside the float32 original")
    if returned is not net:
        problems.append("module.to() did not return the module itself")
    if next(net.parameters()).dtype != torch.float64:
        problems.append("module.to(float64) did not convert its parameters in place")
    # Documented: nothing to change means no copy; code relying on a copy here shares memory.
    same = original.to("cpu")
    return verdict(
        problems,
        "tensor.to() copies and leaves the original; module.to() converts in place and returns self",
        tensor_to_same_device_returns_self=same is original,
    )


@check("visibility.to_semantics_cuda", gpus=1,
       stands_for="seed 000: the same on CUDA, and 'Expected all tensors to be on the same device'")
def to_semantics_cuda(ctx: Context) -> Outcome:
    """On CUDA: tensor.to('cuda') copies, module.to('cuda') moves in place; mixed devices raise."""
    original = torch.randn(3, 3)
    on_gpu = original.to("cuda:0")
    both = original.to(device="cuda:0", dtype=torch.float16)
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    returned = net.to("cuda:0")
    problems = []
    if on_gpu is original or original.device.type != "cpu" or on_gpu.device != torch.device("cuda:0"):
        problems.append("tensor.to('cuda:0') did not return a CUDA copy beside the CPU original")
    if both.device != torch.device("cuda:0") or both.dtype != torch.float16:
        problems.append("tensor.to(device=, dtype=) did not change both")
    if returned is not net or not next(net.parameters()).is_cuda:
        problems.append("module.to('cuda:0') did not move the module in place and return it")
    mixed_error = None
    try:
        net(original)  # the classic mistake: a CPU batch into a CUDA model
        problems.append("a CPU tensor into a CUDA module did not raise")
    except RuntimeError as exc:
        mixed_error = " ".join(str(exc).split())[:300]
        if SAME_DEVICE_MESSAGE not in mixed_error:
            problems.append(f"a CPU tensor into a CUDA module raised an unexpected error: {mixed_error}")
    return verdict(
        problems,
        "tensor.to() copies, module.to() moves in place, mixing CPU and CUDA tensors raises the known error",
        mixed_device_error=mixed_error,
    )


def _child_devices(visible: str | None) -> list[dict[str, Any]]:
    """Devices a fresh process sees with CUDA_VISIBLE_DEVICES=visible (None: unset), in PCI order."""
    env = dict(os.environ)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # the numbering nvidia-smi uses, not "fastest first"
    if visible is None:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        env["CUDA_VISIBLE_DEVICES"] = visible
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "smoke.device_info"],
        capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"device probe child exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return list(json.loads(done.stdout.strip().splitlines()[-1])["devices"])


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])

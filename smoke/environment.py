"""What the report says about the environment, and torch's own collect_env text (never asserted on)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any

COLLECT_ENV_TIMEOUT_S = 60.0


def describe_environment() -> dict[str, Any]:
    """Versions and settings that explain a report. Imports torch: call after the import succeeded."""
    import torch

    from smoke.checks.cuda_probe import probe_cuda
    from smoke.checks.torchvision_checks import installed_torchvision

    probe = probe_cuda()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch": str(torch.__version__),
        "torch_cuda": torch.version.cuda,
        "cudnn": cudnn,
        "cuda_available": probe.available,
        "cuda_device_count": probe.device_count,
        "cuda_warnings": probe.warnings,
        "torchvision": installed_torchvision(),
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER"),
        "torch_threads": torch.get_num_threads(),
    }


def collect_env_text(timeout_s: float = COLLECT_ENV_TIMEOUT_S) -> tuple[str | None, str | None]:
    """(text, note): `python -m torch.utils.collect_env` in a child, so a hang costs only the timeout.

    Its output can mislead (it reports a system nvcc beside a CPU build), so it is attached, not judged.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-m", "torch.utils.collect_env"],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"torch.utils.collect_env timed out after {timeout_s:g} s"
    except OSError as exc:
        return None, f"torch.utils.collect_env could not start: {exc}"
    if done.returncode != 0 or not done.stdout.strip():
        return None, f"torch.utils.collect_env exited {done.returncode}: {done.stderr.strip()[-300:]}"
    return done.stdout, None

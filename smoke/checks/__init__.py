"""The check modules, grouped by concern. Importing them imports torch and registers the checks."""

from __future__ import annotations

import importlib

from smoke.registry import REGISTRY, Check

# Registry order is run order: environment first (it probes CUDA), torchvision last.
CHECK_MODULES = (
    "environment",
    "kernels",
    "visibility",
    "container",
    "dataparallel",
    "distributed",
    "amp",
    "checkpoints",
    "dataloader",
    "compile_inductor",
    "torchvision_checks",
)


def load_checks() -> list[Check]:
    for module in CHECK_MODULES:
        importlib.import_module(f"smoke.checks.{module}")
    # By module, as listed above, whatever order the modules imported each other in (container.py
    # sizes /dev/shm by the DataLoader check's constants); within a module, as registered.
    position = {f"smoke.checks.{module}": index for index, module in enumerate(CHECK_MODULES)}
    return sorted(REGISTRY, key=lambda c: position.get(c.func.__module__, len(position)))

"""Run tests/system/outside_check.py (PyTorch's release-smoke operations on CPU, written apart from envbuild's
suite) inside an image, the way a user would: a plain container with the script mounted read-only."""

from __future__ import annotations

import json
from pathlib import Path

import docker

OUTSIDE_CHECK = Path(__file__).with_name("outside_check.py")


def run_outside_check(image: str, timeout: int = 900) -> tuple[int, dict[str, dict]]:
    """The container's exit status and the check's results by name."""
    client = docker.from_env()
    try:
        container = client.containers.run(image, ["python", "/outside/outside_check.py"], detach=True,
                                          volumes={str(OUTSIDE_CHECK.parent): {"bind": "/outside", "mode": "ro"}})
        try:
            status = container.wait(timeout=timeout)["StatusCode"]
            results = json.loads(container.logs(stderr=False).decode())
        finally:
            container.remove(force=True)
    finally:
        client.close()
    return status, results

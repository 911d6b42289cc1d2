"""Recorded NVIDIA tool output for machines without a GPU: an `nvidia-smi` on PATH that replays a
recorded table, and a guard for tests that need NVML to stay silent so the replay is what answers."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from builder.host.hostkind import HostProbe
from smoke.nvml import nvml_answers
from tests.paths import FIXTURES

SMI_FIXTURES = FIXTURES / "nvidia-smi"


needs_no_nvml = pytest.mark.skipif(nvml_answers(), reason="a real NVML answers first on this machine")


def fake_nvidia_smi(folder: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put an `nvidia-smi` running `script` first on PATH (child processes inherit it)."""
    folder.mkdir(exist_ok=True)
    executable = folder / "nvidia-smi"
    executable.write_text("#!/bin/sh\n" + script)
    executable.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


def replay_nvidia_smi(folder: Path, fixture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvidia_smi(folder, f"cat '{SMI_FIXTURES / fixture}'\n", monkeypatch)


def answering_nvidia_smi(folder: Path, monkeypatch: pytest.MonkeyPatch, table: Path, *,
                         gpu_csv: str | None = None, apps_csv: str | None = None,
                         refuse_compute_cap: bool = False) -> None:
    """An `nvidia-smi` that answers like a real one per argument: the table, `--query-gpu` (or the
    error old drivers give for an unknown field), `--query-compute-apps` (or an error when not given)."""
    folder.mkdir(exist_ok=True)
    (folder / "gpu.csv").write_text(gpu_csv or "")
    (folder / "apps.csv").write_text(apps_csv or "")
    refusal = ('  --query-gpu=*compute_cap*) echo \'Field "compute_cap" is not a valid field to query.\'; exit 2;;\n'
               if refuse_compute_cap else "")
    gpu = f"  --query-gpu=*) cat '{folder / 'gpu.csv'}';;\n" if gpu_csv is not None else \
        "  --query-gpu=*) echo 'Invalid combination of input arguments.'; exit 2;;\n"
    apps = f"  --query-compute-apps=*) cat '{folder / 'apps.csv'}';;\n" if apps_csv is not None else \
        "  --query-compute-apps=*) echo 'Invalid combination of input arguments.'; exit 2;;\n"
    fake_nvidia_smi(folder, f'case "$1" in\n{refusal}{gpu}{apps}  *) cat \'{table}\';;\nesac\n', monkeypatch)


def replay_host(capture: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> HostProbe:
    """Make this machine look, to doctor, like the host a pasted capture came from: an `nvidia-smi` that prints
    the capture for any arguments (none at all when the paste shows the shell not finding it), and the probe of
    what that host would have said of itself, as far as the paste shows it (`recorded_probe`)."""
    text = capture.read_text(encoding="utf-8", errors="replace")
    path = [entry for entry in os.environ.get("PATH", "").split(os.pathsep)
            if entry and not (Path(entry) / "nvidia-smi").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    if not _SMI_NOT_FOUND.search(text):
        fake_nvidia_smi(folder, f"cat '{capture}'\n", monkeypatch)
    return recorded_probe(text)


def recorded_probe(text: str) -> HostProbe:
    """What a pasted session shows of its host beyond nvidia-smi's own output, as doctor's probe would read it
    there: a POSIX shell or PowerShell (the OS), a prompt of Docker's container-id hostname, a `docker run`/`docker
    exec` of nvidia-smi or a pod's log (a container), what only a host does (its container markers were looked for),
    /proc/driver/nvidia/version's text. Nothing shown: not read."""
    system = "Windows" if _WINDOWS_SHELL.search(text) else "Linux" if _POSIX_SHELL.search(text) else None
    inside = next((why for why, pattern in _CONTAINER_CONTEXT if pattern.search(text)), None)
    proc = "\n".join(line for line in text.splitlines() if line.startswith("NVRM version:")) or None
    # A shell prompt shows the OS, which a container shares with its host; where the session shows something only
    # a host does, doctor's probe there would have looked for container markers and found none.
    on_host = inside is None and any(pattern.search(text) for pattern in _HOST_CONTEXT)
    return HostProbe(system=system, container=inside, proc_driver_version=proc,
                     container_checked=inside is not None or on_host)


# What only a host shows: a login into the machine over ssh, and tools that act on the host's kernel or its vGPU
# manager (a container can neither load modules nor run the vGPU-KVM host driver's daemons).
_HOST_CONTEXT = (
    re.compile(r"^\$\s*ssh\s+\S+\s*$", re.M),
    re.compile(r"^\S*[$#]\s*(?:sudo\s+)?(?:modprobe|insmod|rmmod|dkms|lsmod)\b", re.M),
    re.compile(r"\bvgpu_unlock\b[^\n]*nvidia-smi"),
)
# A shell that could not run nvidia-smi: the host has none.
_SMI_NOT_FOUND = re.compile(r"nvidia-smi: (?:No such file or directory|command not found)|"
                            r"'nvidia-smi' is not recognized", re.I)
_WINDOWS_SHELL = re.compile(r"^PS [A-Z]:\\|^[A-Z]:\\[^>\n]*>", re.M)
_POSIX_SHELL = re.compile(r"^(?:\S+@\S+:\S*\s*[$#]|\[\S+@\S+ [^\]]*\][$#]|[$#] ?nvidia-smi|bash: )", re.M)
_CONTAINER_CONTEXT = (
    ("a prompt of Docker's container-id hostname", re.compile(r"^\S+@[0-9a-f]{12}:", re.M)),
    ("nvidia-smi run by `docker run`", re.compile(r"docker run\b[^\n]*nvidia-smi")),
    # `docker exec` runs its command inside a running container (a kind node, a service).
    ("nvidia-smi run by `docker exec`", re.compile(r"\b(?:docker|podman) exec\b[^\n]*nvidia-smi")),
    ("a pod's log", re.compile(r"\bkubectl\b[^\n]*\slogs\b|\bstd(?:out|err) F ")),
    # A shell opened in a pod: what runs after `kubectl exec`/`oc exec ... -- bash` runs in that container.
    ("a shell in a pod (`kubectl exec`/`oc exec`)", re.compile(r"\b(?:kubectl|oc) exec\b[^\n]*\s--\s+(?:ba)?sh\b")),
    # text-generation-launcher --env names the image it runs in; outside the image the label is N/A.
    ("text-generation-launcher run in its image (Docker label)", re.compile(r"^Docker label: sha-[0-9a-f]+", re.M)),
    # The NVIDIA device plugin's first line: it runs only as a DaemonSet pod, so its log is a container's.
    ("the NVIDIA device plugin's log (a pod)", re.compile(r"^(?:\S+ )*Loading NVML\s*$", re.M | re.I)),
)

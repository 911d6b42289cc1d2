"""Clients nobody here wrote, on envbuild's outputs: hadolint on every Dockerfile envbuild renders
(shipped specs, the CUDA pip fixture, a spec with CA files, a user of its own and the compile feature). container-structure-test
on the image the world builds runs in tests/system/test_outside_tools_world.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from builder.image.render import render_target
from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from tests.host_ca import host_ca_certificate
from tests.paths import FIXTURES, REPO
from tests.unit.image.outside_tools_helpers import outside_tool


def _rendered_dockerfiles(folder: Path) -> dict[str, str]:
    (folder / "corp.crt").write_text(host_ca_certificate())
    custom = folder / "team.yaml"
    custom.write_text(yaml.safe_dump({
        "name": "team-vision", "python": "3.11", "torch": "2.13.0", "targets": [{"cuda": "12.9"}, {"cuda": "cpu"}],
        "ca_certificates": ["corp.crt"], "user": {"name": "trainer", "uid": 4242}, "features": ["compile"],
        "labels": {"org.opencontainers.image.vendor": "Team \"Vision\" $HOME"}}))
    specs = [*sorted((REPO / "envs").glob("*.yaml")), FIXTURES / "specs" / "torch-cuda-pip.yaml", custom]
    return {f"{spec.stem}-{target.key}": render_target(target).dockerfile
            for spec in specs for target in resolve_targets(load_spec(spec))}


@pytest.mark.unit
def test_hadolint_finds_nothing_in_any_rendered_dockerfile(tmp_path: Path) -> None:
    hadolint = outside_tool("hadolint")
    rendered = _rendered_dockerfiles(tmp_path)
    assert len(rendered) >= 8
    findings = {}
    for name, text in rendered.items():
        path = tmp_path / f"{name}.Dockerfile"
        path.write_text(text)
        done = subprocess.run([hadolint, "--no-color", "--format", "json", "--failure-threshold", "style", str(path)],
                              capture_output=True, text=True, timeout=60)
        found = json.loads(done.stdout or "[]")
        if found or done.returncode:
            findings[name] = [f"{f['line']} {f['code']} {f['message']}" for f in found] or [done.stderr]
    assert findings == {}


@pytest.mark.unit
def test_hadolint_does_see_a_pipe_without_pipefail(tmp_path: Path) -> None:
    """The check above can fail: the rule it once found in envbuild's user block still fires."""
    path = tmp_path / "Dockerfile"
    path.write_text('FROM debian:bookworm\nRUN taken="$(getent passwd 1000 | cut -d: -f1)"\n')
    done = subprocess.run([outside_tool("hadolint"), "--no-color", "--format", "json", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert "DL4006" in {f["code"] for f in json.loads(done.stdout)}

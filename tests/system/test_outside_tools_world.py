"""container-structure-test, a client nobody here wrote, on the CPU image the world builds, judged by a
config of its own (tests/fixtures/structure/)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.paths import FIXTURES
from tests.unit.image.outside_tools_helpers import outside_tool


@pytest.mark.docker
def test_container_structure_test_passes_on_the_cpu_image(built, tmp_path: Path) -> None:
    tag = built["cpu"]["tags"][0]
    config = FIXTURES / "structure" / "cpu-image.yaml"
    done = subprocess.run([outside_tool("container-structure-test"), "test", "--image", tag, "--config", str(config),
                           "--output", "json", "--test-report", str(tmp_path / "report.json")],
                          capture_output=True, text=True, timeout=300)
    report = json.loads((tmp_path / "report.json").read_text())
    failed = [(r["Name"], r.get("Errors")) for r in report["Results"] if not r["Pass"]]
    assert done.returncode == 0 and failed == [] and report["Pass"] == report["Total"] == 12, (failed, done.stderr)

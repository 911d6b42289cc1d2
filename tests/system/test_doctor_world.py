"""envbuild doctor against the world's running engine: the real gather finds it, and the CLI reports it."""

from __future__ import annotations

import os

import pytest

from builder.host.doctor import OK, diagnose, gather_host_facts
from tests.envbuild_cli import envbuild
from tests.unit.host.doctor_helpers import SPEC, checked


@pytest.mark.docker
def test_doctor_reports_the_running_engine() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        pytest.skip("the engine is not up: run inside tests/world/with-world.sh")
    import docker

    client = docker.from_env()
    version = client.version()["Version"]
    client.close()
    facts = gather_host_facts()
    assert (facts.engine.reachable, facts.engine.version) == (True, version)
    assert "runc" in facts.engine.runtimes
    report = checked(diagnose(facts))
    assert [f.level for f in report.findings if f.subject == "Docker engine"] == [OK]
    done = envbuild("doctor", str(SPEC))
    assert done.returncode == 0, done.stderr
    assert f"{version} (API " in done.stdout

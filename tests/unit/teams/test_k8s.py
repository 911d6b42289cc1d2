"""`envbuild ci k8s`: Kubernetes Jobs that smoke-test each CUDA target's image on a cluster's GPUs,
validated against the Kubernetes JSON schema (kubernetes-validate, strict: unknown fields fail)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.errors import UsageError
from builder.teams.k8s import job_name, parse_images
from smoke.cli import build_parser
from tests.paths import REPO

pytestmark = pytest.mark.unit
CUDA_KEYS = ["cuda13.0", "cuda12.9", "cuda12.6", "cuda11.8"]
DIGEST = "sha256:" + "ab" * 32
PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "envs").mkdir()
    shutil.copy(REPO / "envs" / "pytorch.yaml", tmp_path / "envs" / "pytorch.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def generate(*extra: str) -> tuple[list[dict], dict]:
    outcome = CliRunner().invoke(cli, ["ci", "k8s", "envs/pytorch.yaml", "--json", *extra])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.stdout)
    return list(yaml.safe_load_all(Path(report["path"]).read_text())), report


def strict_errors(document: dict) -> str | None:
    try:
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)
    except kubernetes_validate.ValidationError as exc:
        return str(exc)
    return None


def test_jobs_validate_against_the_kubernetes_schema(repo: Path) -> None:
    documents, report = generate("--registry", "registry.example.org/team", *sum((["--gpu-product", p] for p in PRODUCTS), []))
    assert report["path"] == "k8s/envbuild-pytorch-smoke.yaml"
    assert len(documents) == len(CUDA_KEYS) * len(PRODUCTS) == len(report["jobs"])
    for document in documents:
        assert strict_errors(document) is None, document["metadata"]["name"]
    checked = subprocess.run([str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", report["path"]],
                             check=False, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("passed for resource job/") == len(documents)


@pytest.mark.parametrize("break_it", [
    lambda job: job["spec"].update(backoffLimit="none"),
    lambda job: job["spec"].update(backofLimit=0),  # a typo: strict validation refuses unknown fields
    lambda job: job["spec"]["template"]["spec"]["containers"][0].pop("name"),
])
def test_schema_check_rejects_a_broken_job(repo: Path, break_it) -> None:
    documents, _ = generate("--registry", "registry.example.org/team")
    broken = documents[0]
    break_it(broken)
    assert strict_errors(broken) is not None


def test_each_job_asks_for_gpus_and_fails_once(repo: Path) -> None:
    documents, report = generate("--image", f"cuda12.6=registry.example.org/team/pytorch@{DIGEST}",
                                 "--registry", "registry.example.org/team", "--gpu-product", PRODUCTS[0],
                                 "--require-gpus", "2", "--namespace", "ml-ci")
    jobs = {document["metadata"]["labels"]["envbuild.io/target"]: document for document in documents}
    assert list(jobs) == CUDA_KEYS
    for key, job in jobs.items():
        assert job["metadata"]["namespace"] == "ml-ci"
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", job["metadata"]["name"])
        spec = job["spec"]
        assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 1800
        pod = spec["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": PRODUCTS[0]}
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
        [container] = pod["containers"]
        assert container["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"},
                                          "limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 2}}
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
        assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in pod["volumes"]
        # The suite's own command line, as smoke's parser reads it.
        assert container["command"][:2] == ["sh", "-c"] and container["command"][3] == "smoke"
        args = build_parser().parse_args(container["command"][4:])
        assert (args.require_gpus, args.expect_cuda) == (2, key.removeprefix("cuda"))
    assert jobs["cuda12.6"]["spec"]["template"]["spec"]["containers"][0]["image"] == f"registry.example.org/team/pytorch@{DIGEST}"
    assert jobs["cuda11.8"]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "registry.example.org/team/pytorch:2.7.1-cuda11.8"
    assert report["notes"][0].startswith("cuda13.0: registry.example.org/team/pytorch:2.13.0-cuda13.0 is a tag")
    assert not any(note.startswith("cuda12.6") for note in report["notes"])  # pinned by digest


def test_long_names_stay_valid_and_distinct() -> None:
    names = {job_name("a-very-long-environment-name-for-a-team", "cuda12.6", product)
             for product in ("NVIDIA-A100-SXM4-80GB-with-a-long-suffix-1", "NVIDIA-A100-SXM4-80GB-with-a-long-suffix-2")}
    assert len(names) == 2 and all(len(name) <= 63 and re.fullmatch(r"[a-z0-9-]+", name) for name in names)


@pytest.mark.parametrize("args, message", [
    ([], "no image for target cuda13.0: give --registry"),
    (["--registry", "registry.example.org/team", "--image", "cuda9.0=x/y@" + DIGEST], "--image cuda9.0: no such CUDA target"),
    (["--registry", "Registry Example"], "--registry 'Registry Example'"),
    (["--registry", "r.example.org/t", "--gpu-product", "A100 80GB"], "--gpu-product 'A100 80GB'"),
    (["--registry", "r.example.org/t", "--install-from", "envbuild==1.0"], "--install-from does not apply to `envbuild ci k8s`"),
])
def test_bad_options_are_one_line_and_write_nothing(repo: Path, args: list[str], message: str) -> None:
    outcome = CliRunner().invoke(cli, ["ci", "k8s", "envs/pytorch.yaml", *args])
    assert outcome.exit_code == 2 and outcome.output.startswith(f"Error: {message}"), outcome.output
    assert len(outcome.output.strip().splitlines()) == 1
    assert not Path("k8s").exists()


def test_k8s_options_are_refused_for_pipelines(repo: Path) -> None:
    outcome = CliRunner().invoke(cli, ["ci", "github", "envs/pytorch.yaml", "--gpu-product", PRODUCTS[0]])
    assert outcome.exit_code == 2 and outcome.output.strip() == "Error: --gpu-product does not apply to `envbuild ci github`"


def test_cpu_only_spec_has_nothing_to_run_on_gpus(repo: Path) -> None:
    Path("envs/cpu.yaml").write_text(yaml.safe_dump({"name": "cpu-tests", "python": "3.11", "torch": "2.13.0",
                                                     "targets": [{"cuda": "cpu"}]}))
    outcome = CliRunner().invoke(cli, ["ci", "k8s", "envs/cpu.yaml", "--registry", "r.example.org/t"])
    assert outcome.exit_code == 2 and "no CUDA target" in outcome.output


def test_image_option_format() -> None:
    assert parse_images((f"cuda12.6=r.example.org:5000/t/pytorch@{DIGEST}",)) == (
        ("cuda12.6", f"r.example.org:5000/t/pytorch@{DIGEST}"),)
    with pytest.raises(UsageError, match="write TARGET=IMAGE"):
        parse_images(("registry.example.org/team/pytorch",))


@pytest.mark.parametrize("suite_status", [0, 1])
def test_smoke_report_comes_back_from_the_log(repo: Path, tmp_path: Path, suite_status: int) -> None:
    """The container's command run by sh as the pod would, with a stand-in `python` that writes a report
    where the suite's --json says and exits as the suite did: the log carries the report between the
    markers, the documented sed line gives it back whole, and the exit status is the suite's."""
    documents, _ = generate("--registry", "registry.example.org/team")
    command = documents[0]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["sh", "-c"]
    report = {"summary": {"passed": 3, "failed": suite_status, "skipped": 1}, "checks": [{"name": "a b"}]}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python"
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != --json ]; do shift; done\n"
                    f"printf '%s' '{json.dumps(report)}' > \"$2\"\necho 'suite output'\nexit {suite_status}\n")
    fake.chmod(0o755)
    folder = tmp_path / "report-dir"
    script = command[2].replace("/tmp/envbuild-smoke", str(folder))
    args = [a.replace("/tmp/envbuild-smoke", str(folder)) for a in command[3:]]
    ran = subprocess.run(["sh", "-c", script, *args], check=False, capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert ran.returncode == suite_status
    from builder.teams.k8s import REPORT_FROM_LOGS

    header = Path("k8s/envbuild-pytorch-smoke.yaml").read_text().split("\n---", 1)[0]
    assert f"# The JSON report, from the log (kept as long as the Job): {REPORT_FROM_LOGS}" in header
    extract = REPORT_FROM_LOGS.split("| ", 1)[1].rsplit(" >", 1)[0]  # the sed part, fed the log
    back = subprocess.run(["sh", "-c", extract], input=ran.stdout, check=True, capture_output=True, text=True)
    assert json.loads(back.stdout) == report

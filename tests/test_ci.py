"""`envbuild ci`: the generated GitHub and GitLab pipelines parse, have a job per target where they
should, validate against the providers' schemas (check-jsonschema's vendored copies, offline), and
their shell steps pass shellcheck."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from builder.ci import CiOptions, parse_labels, pipeline_jobs, write_pipeline
from builder.cli import cli
from builder.errors import UsageError
from builder.spec import load_spec
from builder.target import resolve_targets

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = {"github": "vendor.github-workflows", "gitlab": "vendor.gitlab-ci"}
ALL_KEYS = ["cuda13.0", "cuda12.9", "cuda12.6", "cuda11.8", "cpu"]
CUDA_KEYS = ALL_KEYS[:-1]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    """A team repository holding the shipped spec, as the current folder."""
    (tmp_path / "envs").mkdir()
    shutil.copy(ROOT / "envs" / "pytorch.yaml", tmp_path / "envs" / "pytorch.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def generate(provider: str, spec_path: Path = Path("envs/pytorch.yaml"), out: Path | None = None,
             options: CiOptions = CiOptions(), force: bool = False):
    spec = load_spec(spec_path)
    return write_pipeline(provider, spec, spec_path, resolve_targets(spec), out, options, force)


def schema_check(provider: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", SCHEMAS[provider],
                           str(path)], check=False, capture_output=True, text=True, timeout=120)


def scripts_of(provider: str, data: dict) -> list[str]:
    if provider == "github":
        return [step["run"] for job in data["jobs"].values() for step in job["steps"] if "run" in step]
    return [script for job in data.values() if isinstance(job, dict)
            for script in job.get("before_script", []) + job.get("script", [])]


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_pipeline_validates_against_the_providers_schema(repo: Path, provider: str) -> None:
    pipeline = generate(provider)
    checked = schema_check(provider, pipeline.path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "validation done" in checked.stdout


@pytest.mark.parametrize("provider, break_it", [
    ("github", lambda data: data["jobs"]["build"].pop("runs-on")),
    ("gitlab", lambda data: data["build"]["artifacts"].update(when="sometimes")),
])
def test_schema_check_rejects_a_broken_pipeline(repo: Path, provider: str, break_it) -> None:
    """Negative control: the validator does reject what the providers reject."""
    pipeline = generate(provider)
    data = yaml.safe_load(pipeline.text)
    break_it(data)
    broken = repo / "broken.yml"
    broken.write_text(yaml.safe_dump(data))
    checked = schema_check(provider, broken)
    assert checked.returncode == 1, checked.stdout
    assert "Schema validation errors" in checked.stdout + checked.stderr


def test_github_jobs_per_target(repo: Path) -> None:
    pipeline = generate("github")
    assert pipeline.path == Path(".github/workflows/envbuild-pytorch.yml")
    data = yaml.safe_load(pipeline.path.read_text())
    jobs = data["jobs"]
    assert list(jobs) == ["lock-check", "build", "smoke-gpu", "smoke-cpu"]
    rows = {name: [row["target"] for row in job.get("strategy", {}).get("matrix", {}).get("include", [])]
            for name, job in jobs.items()}
    assert rows == {"lock-check": [], "build": ALL_KEYS, "smoke-gpu": CUDA_KEYS, "smoke-cpu": ALL_KEYS}
    assert jobs["smoke-gpu"]["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert jobs["build"]["runs-on"] == jobs["smoke-cpu"]["runs-on"] == ["ubuntu-latest"]
    assert (jobs["build"]["needs"], jobs["smoke-gpu"]["needs"], jobs["smoke-cpu"]["needs"]) == (
        "lock-check", "build", "build")
    include = jobs["build"]["strategy"]["matrix"]["include"]
    assert {"target": "cuda11.8", "cuda": "11.8", "tag": "pytorch:2.7.1-cuda11.8"} in include
    assert data["env"]["ENVBUILD_SPEC"] == "envs/pytorch.yaml"
    assert data["on"]["push"]["paths"] == ["envs/pytorch.yaml", "envs/pytorch/locks/**",
                                           ".github/workflows/envbuild-pytorch.yml"]
    steps = {name: [step.get("run", "") for step in job["steps"]] for name, job in jobs.items()}
    assert any('envbuild lock "$ENVBUILD_SPEC" --check --json > reports/lock-check.json' in s
               for s in steps["lock-check"])
    assert any('envbuild matrix "$ENVBUILD_SPEC" --cuda "$ENVBUILD_CUDA" --frozen --gpus all '
               '--require-gpus "$ENVBUILD_REQUIRE_GPUS" --junit "reports/smoke-gpu-$ENVBUILD_TARGET.xml"'
               in s for s in steps["smoke-gpu"])
    for name, job in jobs.items():  # every job keeps its reports, also when it failed
        upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert len(upload) == 1 and upload[0]["if"] == "always()" and upload[0]["with"]["path"] == "reports/", name


def test_gitlab_stages_tags_and_junit(repo: Path) -> None:
    pipeline = generate("gitlab")
    assert pipeline.path == Path(".gitlab-ci.yml")
    data = yaml.safe_load(pipeline.path.read_text())
    assert data["stages"] == ["lock", "build", "smoke"]
    jobs = {j.name: j for j in pipeline.jobs}
    assert list(jobs) == ["lock-check", "build", "smoke-gpu", "smoke-cpu"]
    assert (jobs["build"].targets, jobs["smoke-gpu"].targets, jobs["smoke-cpu"].targets) == (
        tuple(ALL_KEYS), tuple(CUDA_KEYS), tuple(ALL_KEYS))
    assert data["smoke-gpu"]["tags"] == ["gpu"] and "tags" not in data["smoke-cpu"]
    assert [data[j]["stage"] for j in jobs] == ["lock", "build", "smoke", "smoke"]
    assert data["smoke-gpu"]["artifacts"]["reports"]["junit"] == "reports/smoke-gpu-*.xml"
    assert data["smoke-cpu"]["artifacts"]["reports"]["junit"] == "reports/smoke-cpu-*.xml"
    assert all(data[j]["artifacts"]["when"] == "always" for j in jobs)
    assert data["variables"]["ENVBUILD_SPEC"] == "envs/pytorch.yaml"


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_shell_steps_pass_shellcheck(repo: Path, provider: str) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (Debian package shellcheck)")
    scripts = scripts_of(provider, yaml.safe_load(generate(provider).text))
    assert len(scripts) >= 5
    for script in scripts:
        checked = subprocess.run(["shellcheck", "--shell=sh", "-"], check=False, input=script,
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + script


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_runner_labels_and_gpu_count_are_configurable(repo: Path, provider: str) -> None:
    options = CiOptions(gpu_runner_labels=("self-hosted", "a100"), cpu_runner_labels=("linux-large",),
                        require_gpus=2)
    pipeline = generate(provider, options=options)
    jobs = {j.name: j.runs_on for j in pipeline.jobs}
    assert jobs == {"lock-check": ("linux-large",), "build": ("linux-large",), "smoke-gpu": ("self-hosted", "a100"),
                    "smoke-cpu": ("linux-large",)}
    data = yaml.safe_load(pipeline.text)
    assert (data["env"] if provider == "github" else data["variables"])["ENVBUILD_REQUIRE_GPUS"] == "2"
    assert schema_check(provider, pipeline.path).returncode == 0


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_cpu_only_spec_has_no_gpu_job(repo: Path, provider: str) -> None:
    spec = repo / "envs" / "cpu.yaml"
    spec.write_text(yaml.safe_dump({"name": "cpu-tests", "python": "3.11", "torch": "2.13.0",
                                    "targets": [{"cuda": "cpu"}]}))
    pipeline = generate(provider, Path("envs/cpu.yaml"), out=Path(f"{provider}.yml"))
    assert [j.name for j in pipeline.jobs] == ["lock-check", "build", "smoke-cpu"]
    assert schema_check(provider, pipeline.path).returncode == 0


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_values_stay_single_yaml_scalars(repo: Path, provider: str) -> None:
    folder = repo / 'team "a": b' / "envs #1"
    folder.mkdir(parents=True)
    spec = folder / "pytorch.yaml"
    shutil.copy(repo / "envs" / "pytorch.yaml", spec)
    requirement = "envbuild @ git+https://example.org/envbuild.git#egg=envbuild: ${{ github.token }}"
    pipeline = generate(provider, spec.relative_to(repo), out=Path("pipeline.yml"),
                        options=CiOptions(envbuild_requirement=requirement))
    data = yaml.safe_load(pipeline.text)
    variables = data["env"] if provider == "github" else data["variables"]
    assert variables["ENVBUILD_SPEC"] == 'team "a": b/envs #1/pytorch.yaml'
    assert variables["ENVBUILD_REQUIREMENT"] == requirement
    assert [j.name for j in pipeline_jobs(provider, pipeline.text)] == ["lock-check", "build", "smoke-gpu", "smoke-cpu"]
    for script in scripts_of(provider, data):  # scripts read values from the environment only
        assert "team" not in script and "example.org" not in script


def test_spec_outside_the_repository_is_refused(repo: Path, tmp_path_factory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "pytorch.yaml"
    shutil.copy(repo / "envs" / "pytorch.yaml", elsewhere)
    with pytest.raises(UsageError, match="outside this folder; run `envbuild ci` from the repository root"):
        generate("github", elsewhere)
    assert not (repo / ".github").exists()


def test_existing_pipeline_is_kept_unless_forced(repo: Path) -> None:
    Path(".gitlab-ci.yml").write_text("stages: [test]\n")
    with pytest.raises(UsageError, match="exists; pass --force"):
        generate("gitlab")
    assert Path(".gitlab-ci.yml").read_text() == "stages: [test]\n"
    generate("gitlab", force=True)
    assert "smoke-gpu" in yaml.safe_load(Path(".gitlab-ci.yml").read_text())


@pytest.mark.parametrize("value, expected", [
    ("self-hosted,linux,gpu", ("self-hosted", "linux", "gpu")),
    (" gpu , a100 ", ("gpu", "a100")),
    (None, None),
])
def test_label_option(value, expected) -> None:
    assert parse_labels(value, "--gpu-runner-labels") == expected


@pytest.mark.parametrize("value", ["gpu x", "gpu,\"x\"", "a" * 101])
def test_bad_labels_are_refused(value: str) -> None:
    with pytest.raises(UsageError, match="--gpu-runner-labels"):
        parse_labels(value, "--gpu-runner-labels")


def test_cli_writes_and_reports_jobs(repo: Path) -> None:
    runner = CliRunner()
    outcome = runner.invoke(cli, ["ci", "github", "envs/pytorch.yaml", "--gpu-runner-labels", "gpu,h100", "--json"])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.output)
    assert report["path"] == ".github/workflows/envbuild-pytorch.yml"
    assert {"name": "smoke-gpu", "runs_on": ["gpu", "h100"], "targets": CUDA_KEYS} in report["jobs"]
    table = runner.invoke(cli, ["ci", "gitlab", "envs/pytorch.yaml"])
    assert table.exit_code == 0, table.output
    assert "wrote .gitlab-ci.yml: gitlab pipeline for pytorch" in table.output
    again = runner.invoke(cli, ["ci", "gitlab", "envs/pytorch.yaml"])
    assert again.exit_code == 2 and again.output.strip() == "Error: .gitlab-ci.yml exists; pass --force to replace it"

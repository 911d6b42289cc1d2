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

from builder.cli.commands import cli
from builder.errors import UsageError
from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from builder.teams.ci import CiOptions, parse_labels, pipeline_jobs, write_pipeline
from tests.paths import REPO

pytestmark = pytest.mark.unit

SCHEMAS = {"github": "vendor.github-workflows", "gitlab": "vendor.gitlab-ci"}
ALL_KEYS = ["cuda13.0", "cuda12.9", "cuda12.6", "cuda11.8", "cpu"]
CUDA_KEYS = ALL_KEYS[:-1]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    """A team repository holding the shipped spec, as the current folder."""
    (tmp_path / "envs").mkdir()
    shutil.copy(REPO / "envs" / "pytorch.yaml", tmp_path / "envs" / "pytorch.yaml")
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
    ("github", lambda data: data["jobs"]["build-cuda12-6"].pop("runs-on")),
    ("gitlab", lambda data: data["build-cuda12-6"]["artifacts"].update(when="sometimes")),
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


IDS = ["cuda13-0", "cuda12-9", "cuda12-6", "cuda11-8", "cpu"]
GITHUB_JOBS = ["lock-check", *(f"{kind}-{i}" for i in IDS for kind in ("build", "publish")),
               *(f"smoke-gpu-{i}" for i in IDS[:-1])]
GITLAB_JOBS = ["lock-check", *(job for i in IDS for job in (f"build-{i}", f"smoke-gpu-{i}") if job != "smoke-gpu-cpu")]


def test_github_jobs_per_target(repo: Path) -> None:
    pipeline = generate("github")
    assert pipeline.path == Path(".github/workflows/envbuild-pytorch.yml")
    data = yaml.safe_load(pipeline.path.read_text())
    jobs = data["jobs"]
    assert list(jobs) == GITHUB_JOBS
    assert {job.name: job.targets for job in pipeline.jobs} == {
        "lock-check": (), **{name: (ALL_KEYS[IDS.index(name.split("-", 1)[1].removeprefix("gpu-"))],)
                             for name in GITHUB_JOBS[1:]}}
    # A hosted runner has no GPU: the CPU target is smoke-tested in its build job, CUDA ones on GPU runners.
    assert jobs["smoke-gpu-cuda12-6"]["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert jobs["build-cuda12-6"]["runs-on"] == jobs["publish-cpu"]["runs-on"] == ["ubuntu-latest"]
    assert jobs["build-cuda11-8"]["env"]["ENVBUILD_TAG"] == "pytorch:2.7.1-cuda11.8"
    assert data["env"]["ENVBUILD_SPEC"] == "envs/pytorch.yaml"
    assert data["on"]["push"]["paths"] == ["envs/pytorch.yaml", "envs/pytorch/locks/**",
                                           ".github/workflows/envbuild-pytorch.yml"]
    steps = {name: [step.get("run", "") for step in job["steps"]] for name, job in jobs.items()}
    assert any('envbuild lock "$ENVBUILD_SPEC" --check --json > reports/lock-check.json' in s
               for s in steps["lock-check"])
    assert any('envbuild matrix "$ENVBUILD_SPEC" --cuda "$ENVBUILD_CUDA" --frozen "$@"' in s
               and '--gpus all --require-gpus "$ENVBUILD_REQUIRE_GPUS"' in s for s in steps["smoke-gpu-cuda12-6"])
    assert any('envbuild smoke "$image"' in s for s in steps["build-cpu"])
    assert any('envbuild smoke "$image"' in s for s in steps["publish-cpu"])
    for name, job in jobs.items():  # every job keeps its reports, also when it failed
        upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert len(upload) == 1 and upload[0]["if"] == "always()" and upload[0]["with"]["path"] == "reports/", name


def test_each_smoke_job_needs_only_its_own_targets_build(repo: Path) -> None:
    """GitHub skips a job whose `needs` failed or was skipped unless its `if` uses a status function
    (docs: workflow syntax, jobs.<job_id>.needs). Exactly one of build-X / publish-X runs per event, so
    smoke-gpu-X says `!cancelled()` and asks for the success of one of its own two builds, nothing else."""
    jobs = yaml.safe_load(generate("github").text)["jobs"]
    for target_id in IDS[:-1]:
        smoke = jobs[f"smoke-gpu-{target_id}"]
        assert smoke["needs"] == [f"build-{target_id}", f"publish-{target_id}"]
        assert smoke["if"].startswith(f"${{{{ !cancelled() && (needs.build-{target_id}.result == 'success' || "
                                      f"needs.publish-{target_id}.result == 'success') && ")
        assert smoke["env"]["ENVBUILD_IMAGE"] == f"${{{{ needs.publish-{target_id}.outputs.image }}}}"
    for name, job in jobs.items():
        if name != "lock-check":
            assert job["needs"] == "lock-check" or name.startswith("smoke-gpu-"), name
    gitlab = yaml.safe_load(generate("gitlab").text)
    for target_id in IDS[:-1]:
        assert gitlab[f"smoke-gpu-{target_id}"]["needs"] == [{"job": f"build-{target_id}", "artifacts": True}]
        assert gitlab[f"build-{target_id}"]["artifacts"]["reports"]["dotenv"] == "reports/image.env"


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_every_job_has_a_time_limit(repo: Path, provider: str) -> None:
    from builder.teams.ci import ci_defaults

    limits = ci_defaults()["timeouts"]
    data = yaml.safe_load(generate(provider).text)
    jobs = data["jobs"] if provider == "github" else {k: v for k, v in data.items() if k in GITLAB_JOBS}
    key = "timeout-minutes" if provider == "github" else "timeout"
    minutes = {name: int(str(job[key]).removesuffix(" minutes")) for name, job in jobs.items()}
    assert len(minutes) == len(GITHUB_JOBS if provider == "github" else GITLAB_JOBS)
    assert minutes["lock-check"] == limits["lock_check"]
    assert minutes["build-cuda12-6"] == limits["build"]["cuda"] and minutes["build-cpu"] == limits["build"]["cpu"]
    # A pull request's smoke job builds from the lock before it tests: its limit covers both.
    assert minutes["smoke-gpu-cuda12-6"] == limits["smoke"] + limits["build"]["cuda"]


def test_gitlab_stages_tags_and_junit(repo: Path) -> None:
    pipeline = generate("gitlab")
    assert pipeline.path == Path(".gitlab-ci.yml")
    data = yaml.safe_load(pipeline.path.read_text())
    assert data["stages"] == ["lock", "build", "smoke"]
    jobs = {j.name: j for j in pipeline.jobs}
    assert list(jobs) == GITLAB_JOBS
    assert (jobs["build-cuda12-6"].targets, jobs["smoke-gpu-cuda11-8"].targets, jobs["build-cpu"].targets) == (
        ("cuda12.6",), ("cuda11.8",), ("cpu",))
    assert data["smoke-gpu-cuda12-6"]["tags"] == ["gpu"] and "tags" not in data["build-cpu"]
    assert {data[j]["stage"] for j in jobs if j.startswith("smoke-gpu-")} == {"smoke"}
    assert data["smoke-gpu-cuda12-6"]["artifacts"]["reports"]["junit"] == "reports/smoke-gpu-*.xml"
    assert data["build-cpu"]["artifacts"]["reports"]["junit"] == "reports/smoke-cpu-*.xml"
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
    assert jobs == {name: ("self-hosted", "a100") if name.startswith("smoke-gpu-") else ("linux-large",)
                    for name in (GITHUB_JOBS if provider == "github" else GITLAB_JOBS)}
    data = yaml.safe_load(pipeline.text)
    assert (data["env"] if provider == "github" else data["variables"])["ENVBUILD_REQUIRE_GPUS"] == "2"
    assert schema_check(provider, pipeline.path).returncode == 0


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_cpu_only_spec_has_no_gpu_job(repo: Path, provider: str) -> None:
    spec = repo / "envs" / "cpu.yaml"
    spec.write_text(yaml.safe_dump({"name": "cpu-tests", "python": "3.11", "torch": "2.13.0",
                                    "targets": [{"cuda": "cpu"}]}))
    pipeline = generate(provider, Path("envs/cpu.yaml"), out=Path(f"{provider}.yml"))
    assert [j.name for j in pipeline.jobs] == (["lock-check", "build-cpu", "publish-cpu"] if provider == "github"
                                               else ["lock-check", "build-cpu"])
    assert schema_check(provider, pipeline.path).returncode == 0


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_values_stay_single_yaml_scalars(repo: Path, provider: str) -> None:
    folder = repo / 'team "a": b' / "envs #1"
    folder.mkdir(parents=True)
    spec = folder / "pytorch.yaml"
    shutil.copy(repo / "envs" / "pytorch.yaml", spec)
    requirement = "envbuild @ git+https://example.org/envbuild.git@v1.0#subdirectory=a:b&egg=envbuild"
    pipeline = generate(provider, spec.relative_to(repo), out=Path("pipeline.yml"),
                        options=CiOptions(install_from=requirement))
    data = yaml.safe_load(pipeline.text)
    variables = data["env"] if provider == "github" else data["variables"]
    assert variables["ENVBUILD_SPEC"] == 'team "a": b/envs #1/pytorch.yaml'
    assert variables["ENVBUILD_REQUIREMENT"] == requirement
    assert [j.name for j in pipeline_jobs(provider, pipeline.text)] == (
        GITHUB_JOBS if provider == "github" else GITLAB_JOBS)
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
    assert "smoke-gpu-cuda12-6" in yaml.safe_load(Path(".gitlab-ci.yml").read_text())


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
    assert {"name": "smoke-gpu-cuda12-6", "runs_on": ["gpu", "h100"], "targets": ["cuda12.6"]} in report["jobs"]
    table = runner.invoke(cli, ["ci", "gitlab", "envs/pytorch.yaml"])
    assert table.exit_code == 0, table.output
    assert "wrote .gitlab-ci.yml: gitlab pipeline for pytorch" in table.output
    again = runner.invoke(cli, ["ci", "gitlab", "envs/pytorch.yaml"])
    assert again.exit_code == 2 and again.output.strip() == "Error: .gitlab-ci.yml exists; pass --force to replace it"


# --- issue 16: a pipeline that works the first time and keeps the team's runners and registry safe ---

PINNED_USES = r"[\w.-]+/[\w.-]+@[0-9a-f]{40}"


def linter(name: str) -> str:
    """A linter installed with the test extras, next to this Python (make setup installs them)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed: run `make setup` (it comes with the test extras)")
        return found
    return str(path)


def zizmor(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([linter("zizmor"), "--offline", "--no-progress", "--format", "plain", *extra, str(path)],
                          check=False, capture_output=True, text=True, timeout=120)


def actionlint(path: Path, config: Path | None) -> subprocess.CompletedProcess:
    args = [linter("actionlint"), "-no-color"] + (["-config-file", str(config)] if config else []) + [str(path)]
    return subprocess.run(args, check=False, capture_output=True, text=True, timeout=120)


def run_step(script: str, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """A generated step run by sh as a runner would, with a stand-in `envbuild` that records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    fake = bin_dir / "envbuild"
    # It prints FAKE_REPORT (the JSON the real command would print) when given, else {}.
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> "$ENVBUILD_CALLS"\n'
                    'if [ -n "${FAKE_REPORT:-}" ]; then echo "$FAKE_REPORT"; else echo "{}"; fi\n')
    fake.chmod(0o755)
    venv_python = tmp_path / ".envbuild-venv" / "bin" / "python"
    if "FAKE_REPORT" in env and not venv_python.exists():  # the steps read reports with the job's own Python
        venv_python.parent.mkdir(parents=True, exist_ok=True)
        venv_python.symlink_to(sys.executable)
    full_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "ENVBUILD_CALLS": str(calls), **env}
    done = subprocess.run(["sh", "-e", "-c", script], cwd=tmp_path, env=full_env, check=False,
                          capture_output=True, text=True, timeout=60)
    return done, calls.read_text().splitlines() if calls.exists() else []


def github_step(data: dict, job: str, name: str) -> dict:
    return next(step for step in data["jobs"][job]["steps"] if step.get("name") == name)


GIVEN = CiOptions(install_from="envbuild @ git+https://example.org/team/envbuild.git@" + "a" * 40)


def test_github_workflow_passes_zizmor(repo: Path) -> None:
    pipeline = generate("github", options=GIVEN)
    checked = zizmor(pipeline.path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "No findings to report" in checked.stdout + checked.stderr
    # The pedantic persona finds nothing either (concurrency limits, pinned actions, permissions).
    pedantic = zizmor(pipeline.path, "--persona", "pedantic")
    assert pedantic.returncode == 0, pedantic.stdout + pedantic.stderr


def test_github_workflow_passes_zizmor_as_auditor(repo: Path) -> None:
    """The auditor persona: registry secrets only inside a GitHub environment (secrets-outside-env), and
    the self-hosted GPU runners ignored inline with the reason beside them (self-hosted-runner)."""
    pipeline = generate("github", options=GIVEN)
    checked = zizmor(pipeline.path, "--persona=auditor")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "No findings to report" in checked.stdout + checked.stderr
    data = yaml.safe_load(pipeline.text)
    with_secrets = {name for name, job in data["jobs"].items() if "secrets." in json.dumps(job)}
    assert with_secrets == {f"publish-{i}" for i in IDS}
    assert all(data["jobs"][name]["environment"] == "envbuild-registry" for name in with_secrets)
    ignores = [line for line in pipeline.text.splitlines() if "zizmor: ignore" in line]
    assert len(ignores) == 4 and all(line.strip().startswith("runs-on: [\"self-hosted\"") for line in ignores)


def test_auditor_persona_finds_what_the_workflow_avoids(repo: Path) -> None:
    """Negative control: without the environment and the inline ignore, the auditor reports both."""
    text = generate("github", options=GIVEN).text.replace(" # zizmor: ignore[self-hosted-runner]", "")
    data = yaml.safe_load(text)
    for job in data["jobs"].values():
        job.pop("environment", None)
    broken = repo / ".github" / "workflows" / "broken.yml"
    broken.write_text(yaml.safe_dump(data, sort_keys=False))
    checked = zizmor(broken, "--persona=auditor")
    assert checked.returncode != 0
    assert checked.stdout.count("warning[secrets-outside-env]") == 2 * len(IDS), checked.stdout
    assert checked.stdout.count("warning[self-hosted-runner]") == len(IDS) - 1, checked.stdout
def test_zizmor_rejects_what_the_workflow_avoids(repo: Path) -> None:
    """Negative control: an unpinned action, checkout credentials kept and no permissions are findings."""
    data = yaml.safe_load(generate("github", options=GIVEN).text)
    del data["permissions"]
    for job in data["jobs"].values():
        job.pop("permissions")
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                step["uses"] = "actions/checkout@v4"
                step.pop("with")
    broken = repo / ".github" / "workflows" / "broken.yml"
    broken.write_text(yaml.safe_dump(data, sort_keys=False))
    checked = zizmor(broken)
    assert checked.returncode != 0
    for audit in ("unpinned-uses", "artipacked", "excessive-permissions"):
        assert audit in checked.stdout, checked.stdout


def test_github_workflow_passes_actionlint_given_the_gpu_label(repo: Path) -> None:
    pipeline = generate("github", options=GIVEN)
    # The one documented finding: `gpu` is the team's own runner label, which actionlint must be told.
    bare = actionlint(pipeline.path, None)
    assert bare.returncode == 1 and 'label "gpu" is unknown' in bare.stdout
    findings = [line for line in bare.stdout.splitlines() if line.startswith(".github/")]
    assert len(findings) == len(IDS) - 1 and all("[runner-label]" in line for line in findings), bare.stdout
    config = repo / ".github" / "actionlint.yaml"
    config.write_text("self-hosted-runner:\n  labels: [gpu]\n")
    checked = actionlint(pipeline.path, config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
def test_actions_are_pinned_by_commit_with_their_version(repo: Path) -> None:
    import re

    from builder.teams.ci import ci_defaults

    text = generate("github", options=GIVEN).text
    uses = re.findall(r"uses: (\S+)(.*)", text)
    assert len(uses) >= 8
    pins = ci_defaults()["github"]["actions"]
    for reference, comment in uses:
        assert re.fullmatch(PINNED_USES, reference), reference
        name, sha = reference.split("@")
        pin = next(p for p in pins.values() if p["uses"] == name)
        assert sha == pin["sha"] and comment == f" # {pin['version']}"


def test_github_permissions_and_checkout_credentials(repo: Path) -> None:
    data = yaml.safe_load(generate("github", options=GIVEN).text)
    assert data["permissions"] == {}
    for name, job in data["jobs"].items():
        assert job["permissions"] == {"contents": "read"}, name
        checkout = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
        assert len(checkout) == 1 and checkout[0]["with"] == {"persist-credentials": False}, name


def test_registry_credentials_only_where_images_are_published(repo: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(generate("github", options=GIVEN).text)
    publishing = ("github.event_name == 'push' && (github.ref_type == 'tag' || "
                  "github.ref_name == github.event.repository.default_branch)")
    assert data["jobs"]["publish-cuda12-6"]["if"] == publishing
    assert data["jobs"]["build-cuda12-6"]["if"] == f"${{{{ !({publishing}) }}}}"
    assert not [s for s in data["jobs"]["build-cuda12-6"]["steps"] if s.get("name") == "Registry login"]
    login = github_step(data, "publish-cuda12-6", "Registry login")
    secrets = dict(ENVBUILD_REGISTRY="registry.example.org/team", ENVBUILD_REGISTRY_USER="bot",
                   ENVBUILD_REGISTRY_PASSWORD="s3cret")
    run_step(login["run"], tmp_path, ENVBUILD_PUBLISH="false", **secrets)
    assert not (tmp_path / ".docker").exists()
    done, _ = run_step(login["run"], tmp_path, ENVBUILD_PUBLISH="true", **secrets)
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / ".docker" / "config.json").read_text())
    assert list(config["auths"]) == ["registry.example.org"]
    gitlab = yaml.safe_load(generate("gitlab", options=GIVEN).text)
    assert gitlab["build-cuda12-6"]["rules"] == [
        {"if": "$CI_COMMIT_TAG || $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH", "variables": {"ENVBUILD_PUBLISH": "true"}},
        {"if": "$CI_COMMIT_BRANCH"},
    ]


@pytest.mark.parametrize("image, expected", [
    ("registry.example.org/team/pytorch@sha256:" + "ab" * 32,
     ["smoke", "registry.example.org/team/pytorch@sha256:" + "ab" * 32, "--pull"]),
    ("", ["matrix", "envs/pytorch.yaml", "--cuda", "12.6", "--frozen"]),  # nothing pushed: build from the lock
])
def test_gpu_smoke_tests_the_pushed_digest(repo: Path, tmp_path: Path, image: str, expected: list[str]) -> None:
    data = yaml.safe_load(generate("github", options=GIVEN).text)
    step = github_step(data, "smoke-gpu-cuda12-6", "Smoke test on the GPUs")
    done, calls = run_step(step["run"], tmp_path, ENVBUILD_IMAGE=image, ENVBUILD_SPEC="envs/pytorch.yaml",
                           ENVBUILD_CUDA="12.6", ENVBUILD_TARGET="cuda12.6", ENVBUILD_REQUIRE_GPUS="1")
    assert done.returncode == 0, done.stderr
    assert calls == expected + ["--gpus", "all", "--require-gpus", "1", "--junit", "reports/smoke-gpu-cuda12.6.xml",
                                "--json"]


@pytest.mark.parametrize("need_gb, fails", [("1", False), ("1000000", True)])
def test_build_checks_the_engines_free_disk_first(repo: Path, tmp_path: Path, need_gb: str, fails: bool) -> None:
    """The step reads the engine's data folder from `docker info` and measures it with the real df."""
    data = yaml.safe_load(generate("github", options=GIVEN).text)
    step = github_step(data, "build-cuda12-6", "Free disk for the build")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(f"#!/bin/sh\necho {tmp_path}\n")
    docker.chmod(0o755)
    done, _ = run_step(step["run"], tmp_path, ENVBUILD_TARGET="cuda12.6", ENVBUILD_DISK_NEED_GB=need_gb)
    assert done.returncode == (1 if fails else 0), done.stderr
    if fails:
        [line] = done.stderr.splitlines()
        assert line.startswith(f"envbuild: building cuda12.6 needs about {need_gb} GB free for the Docker engine, "
                               f"{tmp_path} has ")
        assert "run it on a runner with more disk" in line and len(line) < 300


def test_build_that_cannot_see_the_engines_disk_says_what_it_needs(repo: Path, tmp_path: Path) -> None:
    """A Docker-in-Docker job: its docker CLI (here a stand-in that fails as one without an engine
    does) cannot name the engine's data folder, so the job says what it needs and goes on."""
    data = yaml.safe_load(generate("gitlab", options=GIVEN).text)
    check = data["build-cuda12-6"]["script"][0]
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    (tmp_path / "bin" / "docker").chmod(0o755)
    done, _ = run_step(check, tmp_path, ENVBUILD_TARGET="cuda12.6", ENVBUILD_DISK_NEED_GB="17")
    assert done.returncode == 0
    assert done.stderr.strip() == ("envbuild: cannot see the Docker engine's disk from this job; building cuda12.6 "
                                   "needs about 17 GB free there")
@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_given_install_source_is_what_every_job_installs(repo: Path, tmp_path: Path, provider: str) -> None:
    pipeline = generate(provider, options=GIVEN)
    data = yaml.safe_load(pipeline.text)
    variables = data["env"] if provider == "github" else data["variables"]
    assert variables["ENVBUILD_REQUIREMENT"] == GIVEN.install_from
    assert pipeline.install.origin == "given"
    assert f"pip-installs envbuild from {GIVEN.install_from}" in pipeline.text
    from builder import __version__

    assert f"envbuild=={__version__}" not in pipeline.text  # a name on no public index


@pytest.mark.parametrize("provider", ["github", "gitlab"])
def test_unknown_install_source_stops_each_job_with_one_line(repo: Path, tmp_path: Path, provider: str,
                                                             monkeypatch) -> None:
    from builder.teams import ci
    from builder.teams.install_source import InstallSource

    monkeypatch.setattr(ci, "install_source", lambda given: InstallSource("", "unset", "no remote"))
    pipeline = generate(provider)
    data = yaml.safe_load(pipeline.text)
    variables = data["env"] if provider == "github" else data["variables"]
    assert variables["ENVBUILD_REQUIREMENT"] == ("${{ vars.ENVBUILD_REQUIREMENT }}" if provider == "github" else "")
    install = next(s for s in scripts_of(provider, data) if "pip install" in s)
    done, _ = run_step(install, tmp_path, ENVBUILD_REQUIREMENT="")
    assert done.returncode == 1 and not (tmp_path / ".envbuild-venv").exists()
    assert done.stderr.startswith("envbuild: set the CI variable ENVBUILD_REQUIREMENT to a pinned envbuild source")
    assert len(done.stderr.splitlines()) == 1


def test_cli_says_where_jobs_install_envbuild_from(repo: Path) -> None:
    runner = CliRunner()
    source = "git+https://example.org/team/envbuild.git@v0.1.0"
    outcome = runner.invoke(cli, ["ci", "gitlab", "envs/pytorch.yaml", "--install-from", source])
    assert outcome.exit_code == 0, outcome.output
    assert f"jobs install {source} (given)" in outcome.output
    refused = runner.invoke(cli, ["ci", "github", "envs/pytorch.yaml", "--install-from", "envbuild"])
    assert refused.exit_code == 2 and refused.output.startswith("Error: --install-from 'envbuild': pin one version")
    assert not Path(".github").exists()


def test_summary_step_appends_markdown_after_failures_too(repo: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(generate("github", options=GIVEN).text)
    for job in data["jobs"].values():
        names = [step.get("name") for step in job["steps"]]
        assert names[-2:] == ["Summary", "Keep the reports"]
        assert job["steps"][-2]["if"] == "always()"
    step = github_step(data, "lock-check", "Summary")
    summary_file = tmp_path / "summary.md"
    done, _ = run_step(step["run"], tmp_path, GITHUB_STEP_SUMMARY=str(summary_file))
    assert done.returncode == 0 and not summary_file.exists()  # no reports yet: nothing to say
    venv_bin = tmp_path / ".envbuild-venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "envbuild").symlink_to(Path(sys.executable).parent / "envbuild")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "lock-check.json").write_text(json.dumps([{
        "target": "cuda12.6", "status": "missing", "path": "x", "seconds": 0, "input_hash": "h",
        "message": "no committed lock",
        "hint": "run `envbuild lock envs/pytorch.yaml` and commit envs/pytorch/locks/cuda12.6/",
        "torch_builds": {}, "package_counts": {}}]))
    done, _ = run_step(step["run"], tmp_path, GITHUB_STEP_SUMMARY=str(summary_file))
    assert done.returncode == 0, done.stderr
    text = summary_file.read_text()
    assert "| cuda12.6 | ❌ missing | no committed lock; run `envbuild lock envs/pytorch.yaml`" in text


def test_a_pipeline_names_the_targets_without_a_lock_its_lock_check_would_fail_on(repo: Path) -> None:
    assert generate("github").unlocked == tuple(ALL_KEYS)
    lock = repo / "envs" / "pytorch" / "locks" / "cuda12.6" / "conda-lock.yml"
    lock.parent.mkdir(parents=True)
    lock.write_text("version: 1\n")
    assert "cuda12.6" not in generate("github", force=True).unlocked

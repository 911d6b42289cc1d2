"""Rendering: snapshots of the default env, determinism, atomic output, injection refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from builder.errors import EnvbuildError, UsageError
from builder.image.render import render_target, render_to
from builder.specs.model import load_spec, parse_spec
from builder.specs.target import resolve_targets
from builder.templates import docker_str
from tests.host_ca import host_ca_certificate
from tests.paths import REPO, SNAPSHOTS

pytestmark = pytest.mark.unit



def default_targets():
    return resolve_targets(load_spec(REPO / "envs" / "pytorch.yaml"))


@pytest.mark.parametrize("target", default_targets(), ids=lambda t: t.key)
def test_snapshots(target) -> None:
    rendered = render_target(target)
    for name, text in rendered.files().items():
        snapshot = SNAPSHOTS / f"pytorch-{target.key}-{name}"
        if os.environ.get("ENVBUILD_UPDATE_SNAPSHOTS"):
            snapshot.write_text(text, encoding="utf-8")
        assert text == snapshot.read_text(encoding="utf-8"), f"{snapshot.name} changed; rerun with ENVBUILD_UPDATE_SNAPSHOTS=1 if intended"


def test_same_inputs_same_bytes() -> None:
    first = [render_target(t).files() for t in default_targets()]
    second = [render_target(t).files() for t in default_targets()]
    assert first == second


def test_environment_yml_pins_cuda_per_route() -> None:
    targets = {t.key: t for t in default_targets()}
    env = yaml.safe_load(render_target(targets["cuda12.9"]).environment_yml)
    assert "cuda-version=12.9" in env["dependencies"]
    assert "pytorch=2.13.0=cuda129*" in env["dependencies"]
    wheels = yaml.safe_load(render_target(targets["cuda11.8"]).environment_yml)
    assert {"pip": ["torch==2.7.1+cu118", "torchvision==0.22.1+cu118"]} in wheels["dependencies"]
    cpu = yaml.safe_load(render_target(targets["cpu"]).environment_yml)
    assert "pytorch=2.13.0=cpu*" in cpu["dependencies"]
    assert not any(str(d).startswith("cuda-version") for d in cpu["dependencies"])


def test_legacy_and_pip_routes() -> None:
    legacy = resolve_targets(parse_spec({
        "name": "legacy-vision", "python": "3.11", "torch": "2.5.1", "torchvision": "0.20.1",
        "route": "pytorch-channel", "targets": [{"cuda": "12.4"}, {"cuda": "cpu"}]}))
    deps = yaml.safe_load(render_target(legacy[0]).environment_yml)["dependencies"]
    assert "pytorch-cuda=12.4" in deps and "pytorch=2.5.1" in deps
    assert "cpuonly" in yaml.safe_load(render_target(legacy[1]).environment_yml)["dependencies"]
    pip = resolve_targets(parse_spec({
        "name": "wheels", "python": "3.11", "torch": "2.7.1", "route": "pip",
        "targets": [{"cuda": "11.8"}]}))[0]
    env = yaml.safe_load(render_target(pip).environment_yml)
    assert {"pip": ["torch==2.7.1+cu118"]} in env["dependencies"]
    assert env["pip-repositories"][0].endswith("/cu118")


def test_dockerfile_shape() -> None:
    cuda = next(t for t in default_targets() if t.key == "cuda12.6")
    dockerfile = render_target(cuda).dockerfile
    assert "# syntax=" not in dockerfile
    assert dockerfile.count("FROM ") == 2 and "AS env-builder" in dockerfile
    assert "COPY --from=env-builder /out/ /" in dockerfile
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=12.0"' in dockerfile  # minor-version compatibility
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in dockerfile
    # The environment layer comes before what changes often.
    assert dockerfile.index("--plan /opt/envbuild/plans/rest.json") < dockerfile.index("COPY smoke/")
    assert dockerfile.index("COPY smoke/") < dockerfile.rindex("LABEL ")
    assert "USER 1000" in dockerfile
    # no label whose value only a build could fill in (a plain `docker build` would leave it empty)
    assert "ARG " not in dockerfile and "lock-hash" not in dockerfile and "image.created" not in dockerfile
    assert 'io.envbuild.lock-hash="' + "ab" * 32 + '"' in render_target(cuda, "ab" * 32).dockerfile


def test_environment_layers_come_in_group_order_each_after_its_own_plan() -> None:
    """Bootstrap in the builder stage, then one RUN per group, each preceded by the COPY of only its
    plan; the installer leaves before the smoke suite comes."""
    dockerfile = render_target(next(t for t in default_targets() if t.key == "cuda12.9")).dockerfile
    builder_stage, runtime_stage = dockerfile.split("\nFROM ", 2)[1:]
    assert "--plan /opt/envbuild/plans/bootstrap.json" in builder_stage and "--staging /out/opt/env" in builder_stage
    lines = runtime_stage.splitlines()
    copies = [line for line in lines if line.startswith("COPY envbuild/layers/")]
    assert copies == ["COPY envbuild/layers/installer/ /", "COPY envbuild/layers/cuda/ /",
                      "COPY envbuild/layers/torch/ /", "COPY envbuild/layers/torch-deps/ /",
                      "COPY envbuild/layers/rest/ /"]
    groups = ("cuda", "torch", "torch-deps", "rest")
    positions = [runtime_stage.index(f"--plan /opt/envbuild/plans/{group}.json") for group in groups]
    assert positions == sorted(positions)
    for group in groups:
        copy = runtime_stage.index(f"COPY envbuild/layers/{group}/ /")
        assert runtime_stage.index(f"--plan /opt/envbuild/plans/{group}.json") > copy
    assert runtime_stage.index("COPY --from=env-builder /out/ /") < runtime_stage.index("COPY envbuild/layers/cuda/")
    cleanup = runtime_stage.index("rm -rf /opt/envbuild/installer /opt/envbuild/plans")
    assert positions[-1] < cleanup < runtime_stage.index("COPY smoke/")
    # every group's RUN installs with the env's own python, adds to the prefix, stamps only what it changed
    assert runtime_stage.count("/opt/env/bin/python -m builder.lock.install --add") == 4
    assert runtime_stage.count("-cnewer /tmp/envbuild-start") == 4


def test_ca_certificates_go_into_both_stages(tmp_path: Path) -> None:
    (tmp_path / "corp.crt").write_text(host_ca_certificate())
    spec_file = tmp_path / "team.yaml"
    spec_file.write_text(yaml.safe_dump({
        "name": "team-vision", "python": "3.11", "torch": "2.8.0", "targets": [{"cuda": "12.9"}],
        "ca_certificates": ["corp.crt"]}))
    rendered = render_target(resolve_targets(load_spec(spec_file))[0])
    assert rendered.dockerfile.count("COPY envbuild/ca/") == 2
    out = render_to(rendered, tmp_path / "out")
    assert (out / "envbuild" / "ca" / "00-corp.crt").is_file()
    assert (out / "smoke" / "__main__.py").is_file()


def test_missing_ca_file_is_a_usage_error(tmp_path: Path) -> None:
    spec_file = tmp_path / "team.yaml"
    spec_file.write_text(yaml.safe_dump({
        "name": "team-vision", "python": "3.11", "torch": "2.8.0", "targets": [{"cuda": "12.9"}],
        "ca_certificates": ["absent.crt"]}))
    with pytest.raises(UsageError, match="absent.crt"):
        render_target(resolve_targets(load_spec(spec_file))[0])


def test_label_with_quotes_and_dollar_is_escaped() -> None:
    target = resolve_targets(parse_spec({
        "name": "vision", "python": "3.11", "torch": "2.8.0", "targets": [{"cuda": "12.9"}],
        "labels": {"team": 'ml "core" $HOME \\ x'}}))[0]
    dockerfile = render_target(target).dockerfile
    assert 'team="ml \\"core\\" \\$HOME \\\\ x"' in dockerfile


BASE_SPEC = {"name": "vision", "python": "3.11", "torch": "2.8.0", "targets": [{"cuda": "12.9"}, {"cuda": "cpu"}]}


def oci_labels(**fields: str) -> list[dict[str, str]]:
    rows = []
    for target in resolve_targets(parse_spec({**BASE_SPEC, **fields})):
        text = render_target(target).dockerfile
        rows.append({key: text.split(f'{key}="', 1)[1].split('"', 1)[0] for key in
                     ("org.opencontainers.image.version", "org.opencontainers.image.licenses") if f'{key}="' in text})
    return rows


def test_version_and_licenses_labels_from_the_spec() -> None:
    assert oci_labels(version="2026.12", license="BSD-3-Clause AND (MIT OR Apache-2.0)") == [
        {"org.opencontainers.image.version": "2026.12",
         "org.opencontainers.image.licenses": "BSD-3-Clause AND (MIT OR Apache-2.0)"}] * 2


def test_without_them_the_tag_is_the_version_and_no_license_is_asserted() -> None:
    # SPDX's NOASSERTION, not a license guessed from the packages; the version the image's tag carries.
    assert oci_labels() == [
        {"org.opencontainers.image.version": "2.8.0-cuda12.9", "org.opencontainers.image.licenses": "NOASSERTION"},
        {"org.opencontainers.image.version": "2.8.0-cpu", "org.opencontainers.image.licenses": "NOASSERTION"}]


@pytest.mark.parametrize("field, value", [
    ("license", "MIT, BSD"), ("license", "MIT and BSD-3-Clause"), ("license", 'MIT"\nRUN x'),
    ("version", "1.0 beta"), ("version", "-1"),
])
def test_bad_version_or_license_is_refused(field: str, value: str) -> None:
    with pytest.raises(UsageError, match=field):
        parse_spec({**BASE_SPEC, field: value})


def test_docker_str_refuses_control_characters() -> None:
    with pytest.raises(ValueError):
        docker_str("a\nRUN evil")


@pytest.mark.parametrize("package", ["numpy\nRUN rm -rf /", "numpy && rm -rf /", "x`id`", "a$(id)", "n; ls"])
def test_injection_in_packages_is_refused(package: str) -> None:
    with pytest.raises(UsageError):
        parse_spec({"name": "vision", "python": "3.11", "torch": "2.8.0", "targets": [{"cuda": "12.9"}],
                    "conda": [package]})


def test_render_is_atomic(tmp_path: Path, monkeypatch) -> None:
    target = default_targets()[0]
    rendered = render_target(target)
    out = render_to(rendered, tmp_path / "ctx")
    before = (out / "Dockerfile").read_text()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("builder.image.render.shutil.copytree", broken)
    with pytest.raises(EnvbuildError, match="disk full"):
        render_to(rendered, tmp_path / "ctx")
    assert (out / "Dockerfile").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ctx"]

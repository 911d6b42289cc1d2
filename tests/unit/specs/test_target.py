"""Target resolution against the compatibility data: valid targets resolve, impossible ones say why."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.specs.cuda import TargetId
from builder.specs.model import load_spec, parse_spec
from builder.specs.target import Sources, resolve_targets, with_ca_certificates, with_images
from tests.paths import REPO

pytestmark = pytest.mark.unit



def spec(**changes):
    data = {"name": "vision", "python": "3.11", "torch": "2.8.0", "targets": [{"cuda": "12.9"}],
            "platforms": ["linux-64"]}
    data.update(changes)
    return parse_spec(data, "envs/vision.yaml")


def test_default_env_resolves_every_target() -> None:
    targets = resolve_targets(load_spec(REPO / "envs" / "pytorch.yaml"))
    keys = [t.key for t in targets]
    assert "cuda11.8" in keys and "cpu" in keys
    legacy = next(t for t in targets if t.key == "cuda11.8")
    assert legacy.torch == "2.7.1" and legacy.torchvision == "0.22.1"


def test_cuda_118_with_torch_28_names_last_release_and_choices() -> None:
    with pytest.raises(UsageError) as caught:
        resolve_targets(spec(route="pip", targets=[{"cuda": "11.8"}]))
    message = caught.value.message
    assert "torch 2.8 has no CUDA 11.8 build" in message
    assert "the last with 11.8 is 2.7" in message
    assert "CUDA targets for 2.8: 12.6, 12.8, 12.9" in message


def test_legacy_channel_refuses_torch_after_25() -> None:
    with pytest.raises(UsageError, match="not on the legacy pytorch channel; its last release there is 2.5"):
        resolve_targets(spec(route="pytorch-channel"))


def test_python_outside_range() -> None:
    with pytest.raises(UsageError, match="supports Python 3.9 to 3.13, not 3.8"):
        resolve_targets(spec(python="3.8"))


def test_torchvision_must_pair() -> None:
    with pytest.raises(UsageError, match="torchvision 0.22.1 does not pair with torch 2.8; use torchvision 0.23"):
        resolve_targets(spec(torchvision="0.22.1"))


def test_unknown_torch() -> None:
    with pytest.raises(UsageError, match="torch 1.9.0 is not in envbuild's compatibility data"):
        resolve_targets(spec(torch="1.9.0"))


def test_unknown_base_image_needs_glibc() -> None:
    with pytest.raises(UsageError, match="set images.runtime.glibc"):
        resolve_targets(spec(images={"runtime": {"image": "acme/base:1"}}))
    target = resolve_targets(spec(images={"runtime": {"image": "acme/base:1", "glibc": "2.31"}}))[0]
    assert target.glibc == "2.31"


def test_sources_replace_channels_and_mirror() -> None:
    target = resolve_targets(spec(), sources=Sources(mirrors=(("conda-forge", "http://127.0.0.1:1/cf"),)))[0]
    assert target.channels == ("http://127.0.0.1:1/cf",)
    target = resolve_targets(spec(), sources=Sources(channels=("http://127.0.0.1:1/x",)))[0]
    assert target.channels == ("http://127.0.0.1:1/x",)


def test_pip_route_index_per_variant() -> None:
    target = resolve_targets(spec(route="pip"))[0]
    assert target.pip_index.endswith("/cu129")
    target = resolve_targets(spec(route="pip"), sources=Sources(pip_index="http://127.0.0.1:1/simple"))[0]
    assert target.pip_index == "http://127.0.0.1:1/simple"


def test_pip_route_cuda_on_mac_is_refused() -> None:
    with pytest.raises(UsageError, match="no CUDA 12.9 torch for osx-arm64"):
        resolve_targets(spec(route="pip", platforms=["linux-64", "osx-arm64"]))


def test_unknown_target_on_command_line() -> None:
    with pytest.raises(UsageError, match="no target 11.8 in the spec"):
        resolve_targets(spec(), cuda=(TargetId.parse("11.8"),))


def test_image_override_is_validated() -> None:
    with pytest.raises(UsageError):
        with_images(spec(), runtime="bad image\nRUN x")
    replaced = with_images(spec(), runtime="local/debian:bookworm")
    assert resolve_targets(replaced)[0].glibc == "2.36"


def test_image_and_ca_overrides_update_the_valid_spec_in_place(tmp_path: Path) -> None:
    loaded = load_spec(REPO / "envs" / "pytorch.yaml")
    replaced = with_images(loaded, "debian:bookworm@sha256:" + "b" * 64)
    assert replaced.source == loaded.source and replaced.targets == loaded.targets
    assert replaced.images.runtime.digest == "sha256:" + "b" * 64 and replaced.images.builder == loaded.images.builder
    with pytest.raises(UsageError) as caught:
        with_images(loaded, "bad image", "Bad:Image")
    source = f"{loaded.source} (with --base-image/--builder-image)"
    assert caught.value.message == (
        f"{source}: images.runtime.image: 'bad image' contains characters or a form that is not allowed; "
        f"{source}: images.builder.image: 'Bad:Image' contains characters or a form that is not allowed")
    spaced = tmp_path / "my corp.pem"
    spaced.write_text("x")
    with pytest.raises(UsageError, match=r"\(with --ca-cert\): ca_certificates.0: '.*my corp.pem' contains characters"):
        with_ca_certificates(loaded, [spaced])


def test_a_target_that_changes_route_gets_that_routes_channels() -> None:
    legacy = spec(torch="2.5.1", targets=[{"cuda": "12.4", "route": "pytorch-channel"}, {"cuda": "cpu"}])
    by_key = {t.key: t for t in resolve_targets(legacy)}
    assert by_key["cuda12.4"].channels[:2] == ("pytorch", "nvidia")
    assert by_key["cpu"].channels == ("conda-forge",)


def test_image_only_spec_fields_do_not_change_the_lock_inputs() -> None:
    from builder.lock.targets import lock_inputs

    base = spec(images={"runtime": {"image": "ubuntu:24.04"}})
    same_glibc = spec(images={"runtime": {"image": "ubuntu:24.04"}, "builder": {"image": "python:3.13-slim"}},
                      user={"name": "trainer", "uid": 1234}, labels={"team": "vision"})
    other_glibc = with_images(base, "debian:bookworm")
    hashes = [lock_inputs(resolve_targets(s)[0]).input_hash for s in (base, same_glibc, other_glibc)]
    assert hashes[0] == hashes[1]
    assert hashes[0] != hashes[2]  # the runtime base's glibc is a virtual package of the lock


def test_the_target_carries_every_source_decision() -> None:
    # --pip-index is decided once, in the Target: render and the lock inputs read it from there.
    import inspect

    from builder.image.render import render_target
    from builder.lock.inputs import lock_inputs

    wheels = spec(route="pip", targets=[{"cuda": "12.6", "platforms": ["linux-64"]}])
    public = resolve_targets(wheels)[0]
    mirrored = resolve_targets(wheels, sources=Sources(pip_index="http://wheels.example/{tag}"))[0]
    assert public.allow_pypi_requests and not mirrored.allow_pypi_requests
    assert mirrored.pip_index == "http://wheels.example/cu126"
    assert "allow-pypi-requests: false" in render_target(mirrored).environment_yml
    assert "allow-pypi-requests: true" in render_target(public).environment_yml
    assert lock_inputs(public).input_hash != lock_inputs(mirrored).input_hash
    assert list(inspect.signature(lock_inputs).parameters) == ["target", "solver_name"]


def test_the_tag_names_the_target_key() -> None:
    targets = {t.key: t for t in resolve_targets(spec())}
    assert {key: t.tag.split(":")[1].split("-", 1)[1] for key, t in targets.items()} == {k: k for k in targets}

"""`features: [compile]`: the env gets a C++ compiler, the image holds its smoke suite to torch.compile,
and a spec without features renders and hashes exactly as before."""

from __future__ import annotations

import pytest
import yaml

from builder.errors import UsageError
from builder.image.render import render_target
from builder.image.smoke_run import suite_args
from builder.lock.inputs import lock_inputs
from builder.specs.features import compiles, feature_conda_packages, feature_smoke_env, load_features
from builder.specs.model import Feature, parse_spec
from builder.specs.target import resolve_targets

pytestmark = pytest.mark.unit

BASE = {"name": "vision", "python": "3.11", "torch": "2.13.0", "targets": [{"cuda": "12.9"}, {"cuda": "cpu"}]}


def targets(**extra):
    return {t.key: t for t in resolve_targets(parse_spec({**BASE, **extra}))}


def test_every_feature_has_its_data_with_a_source() -> None:
    data = load_features()
    assert set(data) == set(Feature)
    assert all(row.source for row in data.values())
    # every feature but the opt-out adds packages or holds the smoke suite to something
    assert all(row.conda or row.smoke_env for feature, row in data.items() if feature is not Feature.NO_COMPILE)


def test_compile_adds_a_compiler_to_every_targets_environment() -> None:
    for key, target in targets(features=["compile"]).items():
        dependencies = yaml.safe_load(render_target(target).environment_yml)["dependencies"]
        assert "gxx" in dependencies, key


def test_a_compiler_the_spec_already_asks_for_is_not_added_twice() -> None:
    target = targets(features=["compile"], conda=["gxx=14.*"])["cpu"]
    dependencies = yaml.safe_load(render_target(target).environment_yml)["dependencies"]
    assert [d for d in dependencies if isinstance(d, str) and d.startswith("gxx")] == ["gxx=14.*"]


def test_the_image_requires_the_compile_check_and_says_so_in_a_label() -> None:
    dockerfile = render_target(targets(features=["compile"])["cuda12.9"]).dockerfile
    assert 'ENVBUILD_REQUIRE_COMPILE="1"' in dockerfile
    assert 'io.envbuild.features="compile"' in dockerfile


def test_without_features_nothing_changes() -> None:
    plain, listed = targets(), targets(features=[])
    for key in plain:
        assert render_target(plain[key]).dockerfile == render_target(listed[key]).dockerfile
        assert lock_inputs(plain[key]).input_hash == lock_inputs(listed[key]).input_hash
    assert "io.envbuild.features" not in render_target(plain["cpu"]).dockerfile


def test_every_image_of_torch_2_gets_a_compiler_and_requires_compile() -> None:
    for key, target in targets().items():
        dockerfile = render_target(target).dockerfile
        assert "apt-get install -y -q --no-install-recommends gcc g++ libc6-dev" in dockerfile, key
        assert 'ENVBUILD_REQUIRE_COMPILE="1"' in dockerfile, key
        assert 'io.envbuild.compile="gcc"' in dockerfile, key


def test_no_compile_leaves_the_compiler_out_and_says_so() -> None:
    for key, target in targets(features=["no-compile"]).items():
        dockerfile = render_target(target).dockerfile
        assert "gcc" not in dockerfile.replace('io.envbuild.compile="no"', ""), key
        assert "ENVBUILD_REQUIRE_COMPILE" not in dockerfile, key
        assert 'io.envbuild.compile="no"' in dockerfile, key


def test_torch_before_2_has_no_compile_to_require() -> None:
    assert not compiles("1.13.1", ())
    assert compiles("2.0.0", ()) and compiles("2.14.1+cu130", ())
    assert not compiles("2.14.1", (Feature.NO_COMPILE,))


def test_the_feature_is_part_of_the_lock_inputs() -> None:
    # The compiler is solved and locked with the rest: asking for it makes the old lock stale.
    assert lock_inputs(targets()["cpu"]).input_hash != lock_inputs(targets(features=["compile"])["cpu"]).input_hash


def test_an_unknown_feature_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(UsageError) as refused:
        parse_spec({**BASE, "features": ["jit"]})
    assert "\n" not in refused.value.message and "compile" in refused.value.message


def test_a_local_smoke_run_is_told_to_require_compile() -> None:
    assert "--require-compile" in suite_args(0, "2.13.0", "cpu", None, require_compile=True)
    assert "--require-compile" not in suite_args(0, "2.13.0", "cpu", None)


def test_feature_helpers_keep_the_spec_order_and_no_repeats() -> None:
    assert feature_conda_packages([Feature.COMPILE, Feature.COMPILE]) == ["gxx"]
    assert feature_smoke_env([Feature.COMPILE]) == {"ENVBUILD_REQUIRE_COMPILE": "1"}

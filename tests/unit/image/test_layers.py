"""Which locked package goes into which image layer (builder/data/layers.yaml)."""

from __future__ import annotations

import pytest

from builder.image.layers import BOOTSTRAP, group_names, layer_groups, split_plan
from builder.lock.install import CondaArtifact, InstallPlan, PipArtifact

pytestmark = pytest.mark.unit

SHA = "0" * 64


def conda(name: str) -> CondaArtifact:
    return CondaArtifact(name, "1.0", f"http://channel.invalid/linux-64/{name}-1.0-0.conda", sha256=SHA)


def pip(name: str) -> PipArtifact:
    return PipArtifact(name, "1.0", f"http://index.invalid/{name}-1.0-py3-none-any.whl", SHA)


def names(plan: InstallPlan) -> list[str]:
    return [a.name for a in (*plan.conda, *plan.pip)]


def test_groups_in_install_order_the_last_taking_everything() -> None:
    assert group_names() == (BOOTSTRAP, "cuda", "torch", "torch-deps", "rest")
    assert layer_groups()[-1].patterns == ("*",)
    assert all(group.why for group in layer_groups())


def test_conda_route_split_follows_dependencies_for_bootstrap() -> None:
    plan = InstallPlan("linux-64", tuple(conda(n) for n in (
        "python", "libzlib", "python_abi", "numpy", "pytorch", "libtorch", "cuda-cudart", "libcublas",
        "cudnn", "nccl", "triton", "typing_extensions", "libgcc")))
    dependencies = {"python": ("libzlib", "libgcc"), "libzlib": ("libgcc",), "python_abi": (),
                    "numpy": ("python", "python_abi", "libgcc"), "pytorch": ("libtorch", "numpy")}
    split = split_plan(plan, dependencies)
    assert list(split) == ["bootstrap", "cuda", "torch", "torch-deps", "rest"]
    assert names(split["bootstrap"]) == ["python", "libzlib", "libgcc"]
    assert names(split["cuda"]) == ["cuda-cudart", "libcublas", "cudnn", "nccl"]
    assert names(split["torch"]) == ["pytorch", "libtorch", "triton"]
    # what pytorch needs, followed through numpy to python_abi; python itself is in bootstrap already
    assert names(split["torch-deps"]) == ["python_abi", "numpy"]
    assert names(split["rest"]) == ["typing_extensions"]
    every = sorted(n for part in split.values() for n in names(part))
    assert every == sorted(names(plan))  # each package once


def test_pip_route_wheels_go_with_their_group_and_pip_with_python() -> None:
    plan = InstallPlan("linux-64", (conda("python"), conda("pip"), conda("numpy")), tuple(pip(n) for n in (
        "nvidia-cublas", "nvidia_cudnn_cu13", "cuda-bindings", "torch", "torchvision", "triton", "jinja2")))
    split = split_plan(plan, {"pip": ("python",), "numpy": ("python",), "torch": ("jinja2", "nvidia-cublas"),
                              "jinja2": ("MarkupSafe",)})
    assert names(split["bootstrap"]) == ["python", "pip"]
    assert names(split["cuda"]) == ["nvidia-cublas", "nvidia_cudnn_cu13", "cuda-bindings"]
    assert names(split["torch"]) == ["torch", "torchvision", "triton"]
    assert names(split["torch-deps"]) == ["jinja2"]  # MarkupSafe is not in the lock: nothing to take
    assert names(split["rest"]) == ["numpy"]


def test_no_pip_entries_no_pip_in_bootstrap() -> None:
    plan = InstallPlan("linux-64", (conda("python"), conda("pip")))
    split = split_plan(plan, {"pip": ("python",)})
    assert names(split["bootstrap"]) == ["python"] and names(split["rest"]) == ["pip"]

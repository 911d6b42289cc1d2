"""uv's lockfile as init reads it (alone, or through a Dockerfile's `uv sync`), a project folder a Dockerfile
COPYs and pip-installs, and the CUDA of a PyTorch find-links page."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.formats.uv_lock import read_uv_lock
from builder.init.facts import file_facts
from builder.init.importer import init_spec
from builder.init.read import read_source
from builder.init.reading import find_links_cuda
from builder.userfile import MAX_LOCK_BYTES

pytestmark = pytest.mark.unit

PYTORCH = "https://download.pytorch.org/whl/cu124"
LOCK = f"""version = 1
revision = 3
requires-python = ">=3.11"

[[package]]
name = "demo"
version = "0.1.0"
source = {{ editable = "." }}
dependencies = [
    {{ name = "numpy" }},
    {{ name = "torch", version = "2.5.1", source = {{ registry = "https://pypi.example.invalid/simple" }}, marker = "sys_platform != 'linux'" }},
    {{ name = "torch", version = "2.5.1+cu124", source = {{ registry = "{PYTORCH}" }}, marker = "sys_platform == 'linux'" }},
    {{ name = "pywin32", marker = "sys_platform == 'win32'" }},
    {{ name = "mylib" }},
]

[package.optional-dependencies]
video = [
    {{ name = "av" }},
]

[package.dev-dependencies]
dev = [
    {{ name = "pytest" }},
]

[[package]]
name = "numpy"
version = "2.1.3"
source = {{ registry = "https://pypi.example.invalid/simple" }}

[[package]]
name = "torch"
version = "2.5.1"
source = {{ registry = "https://pypi.example.invalid/simple" }}

[[package]]
name = "torch"
version = "2.5.1+cu124"
source = {{ registry = "{PYTORCH}" }}

[[package]]
name = "pywin32"
version = "308"
source = {{ registry = "https://pypi.example.invalid/simple" }}

[[package]]
name = "mylib"
version = "1.0"
source = {{ git = "https://github.com/example/mylib?rev=abc#abc" }}

[[package]]
name = "av"
version = "14.0.0"
source = {{ registry = "https://pypi.example.invalid/simple" }}

[[package]]
name = "pytest"
version = "8.3.4"
source = {{ registry = "https://pypi.example.invalid/simple" }}
"""


def _notes(result: object) -> list[tuple[str, str, str]]:
    return [(n.entry, n.outcome, n.reason) for n in result.notes]  # type: ignore[attr-defined]


def test_a_uv_lock_alone_is_the_projects_direct_dependencies_as_locked_for_linux(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text(LOCK, encoding="utf-8")
    facts = file_facts(read_source(tmp_path / "uv.lock")).as_dict()
    assert (facts["torch"], facts["torch_from"], facts["cuda"]) == ("2.5.1", "pip", "12.4")
    result = init_spec(tmp_path / "uv.lock", out=tmp_path / "envs" / "spec.yaml", upgrade=True)
    spec, notes = result.spec, _notes(result)
    assert spec.torch == "2.5.1" and [str(t.cuda) for t in spec.targets] == ["12.4"]
    assert "numpy==2.1.3" in spec.pip and not any(p.startswith(("pywin32", "av", "pytest")) for p in spec.pip)
    assert spec.python.startswith("3.") and int(spec.python.split(".")[1]) >= 11
    assert any(e.startswith("mylib==1.0 (git") and o == "unmapped" for e, o, _ in notes)
    assert any(e == "demo extras video: av" and o == "dropped" for e, o, _ in notes)
    assert any(e == "demo groups dev: pytest" and o == "dropped" for e, o, _ in notes)


def test_a_uv_lock_is_refused_in_one_line_when_it_is_none_envbuild_reads(tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text(LOCK.replace("version = 1\n", "version = 7\n", 1), encoding="utf-8")
    with pytest.raises(UsageError, match="format version 7"):
        read_uv_lock(lock)
    lock.write_text(LOCK.replace('source = { editable = "." }', 'source = { registry = "x" }'), encoding="utf-8")
    with pytest.raises(UsageError, match="has none"):
        read_source(lock)
    lock.write_text("version = 1\n[[package]\n", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid TOML"):
        read_uv_lock(lock)


def test_a_uv_lock_keeps_a_cap_fit_for_real_locks(tmp_path: Path) -> None:
    assert MAX_LOCK_BYTES >= 8 * 1024 * 1024  # lerobot's is 1.1 MiB
    lock = tmp_path / "uv.lock"
    with lock.open("wb") as handle:
        handle.truncate(MAX_LOCK_BYTES + 1)
    with pytest.raises(UsageError, match="MiB"):
        read_uv_lock(lock)


DOCKERFILE_UV_SYNC = """FROM python:3.12-slim
WORKDIR /app
COPY pyproject.toml uv.lock ./
RUN uv sync --locked --extra video --no-install-project
COPY . .
RUN uv sync --locked --extra video
"""


def test_uv_sync_in_a_dockerfile_installs_the_lock_beside_it_with_the_extras_asked(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text(LOCK, encoding="utf-8")
    (tmp_path / "Dockerfile").write_text(DOCKERFILE_UV_SYNC, encoding="utf-8")
    result = init_spec(tmp_path / "Dockerfile", out=tmp_path / "envs" / "spec.yaml", upgrade=True)
    spec, notes = result.spec, _notes(result)
    assert spec.torch == "2.5.1" and spec.python == "3.12" and [str(t.cuda) for t in spec.targets] == ["12.4"]
    assert {"numpy==2.1.3", "av==14.0.0"} <= set(spec.pip)
    synced = [n for n in notes if n[0].startswith("uv sync")]
    assert len(synced) == 1 and synced[0][1] == "unmapped" and "uv.lock" in synced[0][2]  # read once


def test_uv_sync_without_a_lock_or_project_beside_it_is_named(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM python:3.12\nRUN pip install torch==2.5.1\nRUN uv sync\n",
                                         encoding="utf-8")
    notes = _notes(init_spec(tmp_path / "Dockerfile", out=tmp_path / "envs" / "spec.yaml", upgrade=True))
    assert ("uv sync", "unmapped") in [(e, o) for e, o, _ in notes]


def test_a_project_folder_the_dockerfile_copies_and_installs_is_read_with_its_extras(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text(
        '[project]\nname = "proj"\ndependencies = ["torch", "einops"]\n'
        '[project.optional-dependencies]\ncu13 = ["nvidia-cutlass-dsl[cu13]>=4.6"]\ndev = ["pytest"]\n',
        encoding="utf-8")
    (tmp_path / "Dockerfile").write_text(
        "FROM ubuntu:24.04\n"
        "RUN uv pip install --system 'torch>=2.9,<2.10' --find-links https://download.pytorch.org/whl/cu130/torch\n"
        "COPY proj/ /tmp/p/\nRUN uv pip install --system '/tmp/p[cu13]'\n", encoding="utf-8")
    result = init_spec(tmp_path / "Dockerfile", out=tmp_path / "envs" / "spec.yaml", upgrade=True)
    spec = result.spec
    assert [str(t.cuda) for t in spec.targets] == ["13.0"] and spec.torch.startswith("2.9.")
    notes = _notes(result)
    assert "einops" in spec.pip and not any(p.startswith("pytest") for p in spec.pip)  # dev was not asked for
    assert any(e.startswith("nvidia-cutlass-dsl[cu13]") for e, _, _ in notes)  # the extra's package, read
    assert any(e == "pip install /tmp/p[cu13]" and o == "unmapped" for e, o, _ in notes)


@pytest.mark.parametrize("url, cuda", [
    ("https://download.pytorch.org/whl/nightly/cu130/torch", "13.0"),
    ("https://download.pytorch.org/whl/cu111/torch_stable.html", "11.1"),
    ("https://download.pytorch.org/whl/cpu", "cpu"),
    ("https://download.pytorch.org/whl/torch_stable.html", None),
    ("https://download.pytorch.org/whl/nightly/triton", None),
    ("https://data.pyg.org/whl/torch-1.11.0+cu113.html", None),
])
def test_a_find_links_page_names_the_cuda_its_path_does(url: str, cuda: str | None) -> None:
    assert find_links_cuda(url) == cuda

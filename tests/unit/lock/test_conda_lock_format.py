"""One lockfile model: every stage reads conda-lock.yml through builder.formats.conda_lock, with one set of
messages."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from builder.errors import EnvbuildError
from builder.formats.conda_lock import LockFile, lockfile_sha256, read_lock
from builder.image.context import make_context
from builder.lock.install import export_platform_plan
from builder.specs.cuda import TargetId
from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from tests.paths import REPO

pytestmark = pytest.mark.unit

SPEC = REPO / "envs" / "pytorch.yaml"
SHA = "a" * 64
MD5 = "b" * 32


def _document(version: int = 1) -> dict:
    return {
        "version": version,
        "metadata": {"platforms": ["linux-64"], "channels": [], "content_hash": {"linux-64": "0" * 64}},
        "package": [
            {"name": "x", "version": "1.0", "manager": "conda", "platform": "linux-64", "dependencies": {},
             "url": "https://example.invalid/linux-64/x-1.0-h0_0.conda", "hash": {"md5": MD5, "sha256": SHA},
             "category": "main", "optional": False},
            {"name": "y", "version": "2.0", "manager": "pip", "platform": "linux-64", "dependencies": {},
             "url": "https://example.invalid/y-2.0-py3-none-any.whl", "hash": {"sha256": SHA}},
        ],
    }


def _write(path: Path, document: object) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.parametrize("version", [1, 2])
def test_one_read_gives_the_install_plan(tmp_path: Path, version: int) -> None:
    lock = read_lock(_write(tmp_path / "conda-lock.yml", _document(version)))
    plan = export_platform_plan(lock, "linux-64", "conda-lock.yml")
    assert [c["name"] for c in plan["conda"]] == ["x"] and [p["name"] for p in plan["pip"]] == ["y"]
    assert plan["conda"][0]["sha256"] == SHA and lock.find("x", "linux-64").build == "h0_0"


@pytest.mark.parametrize(("content", "expected"), [
    ("version: 1\npackage: [oops\n", "not valid YAML at line"),
    ("- a list\n", "not a conda-lock lockfile (expected a mapping"),
    ("version: 7\nmetadata: {}\npackage: []\n", "format version 7, expected 1"),
    ("version: 1\nmetadata: {platforms: [linux-64]}\npackage: 7\n", "not a valid conda-lock lockfile"),
])
def test_a_bad_lockfile_reads_the_same_for_every_stage(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_text(content)
    target = resolve_targets(load_spec(SPEC), (TargetId.parse("cpu"),))[0]
    messages = []
    for stage in (lambda: read_lock(path), lambda: export_platform_plan(path, "linux-64"),
                  lambda: make_context(target, path, tmp_path / "context")):
        with pytest.raises(EnvbuildError) as caught:
            stage()
        messages.append(caught.value.message)
    assert len(set(messages)) == 1, messages
    assert expected in messages[0] and str(path) in messages[0] and "\n" not in messages[0]
    assert not (tmp_path / "context").exists()


def test_a_missing_lockfile_says_to_lock(tmp_path: Path) -> None:
    with pytest.raises(EnvbuildError, match="lockfile not found; run `envbuild lock` first"):
        read_lock(tmp_path / "absent.yml")


def test_a_lock_in_json_form_reads_like_its_yaml(tmp_path: Path) -> None:
    import json

    as_json = tmp_path / "conda-lock.json"
    as_json.write_text(json.dumps(_document()))
    plan = export_platform_plan(as_json, "linux-64")
    assert [c["name"] for c in plan["conda"]] == ["x"]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    assert export_platform_plan(plan_file, "linux-64") == plan


def test_the_sha_and_the_content_are_of_the_one_read(tmp_path: Path) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_text(yaml.safe_dump(_document()), encoding="utf-8")
    first = path.read_bytes()
    lockfile = LockFile.read(path)
    path.write_text("not: [a lock", encoding="utf-8")  # replaced after the read: neither value moves
    assert lockfile.sha256 == hashlib.sha256(first).hexdigest()
    assert [p.name for p in lockfile.lock.package] == ["x", "y"]
    assert lockfile_sha256(path) != lockfile.sha256


def test_a_corrupted_lockfile_fails_only_when_its_content_is_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_text("not: [a lock", encoding="utf-8")
    lockfile = LockFile.read(path)
    assert len(lockfile.sha256) == 64  # an edited lock is told apart by its sha without parsing it
    with pytest.raises(EnvbuildError, match=r"not valid YAML.*the lockfile is corrupted; run `envbuild lock --force`"):
        _ = lockfile.lock

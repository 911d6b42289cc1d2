"""Folders envbuild writes (render --out): whole or not at all, and never over what it did not write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.errors import EnvbuildError, UsageError
from builder.generated_files import OWNED_MANIFEST, write_owned_folder

pytestmark = pytest.mark.unit


def fill(text: str = "FROM scratch\n"):
    def write(root: Path) -> None:
        (root / "Dockerfile").write_text(text)
        (root / "envbuild").mkdir()
        (root / "envbuild" / "plan.json").write_text("{}")

    return write


def test_a_new_folder_is_written_with_its_manifest(tmp_path: Path) -> None:
    out = write_owned_folder(tmp_path / "ctx", fill(), "test")
    manifest = json.loads((out / OWNED_MANIFEST).read_text())
    assert sorted(manifest["files"]) == ["Dockerfile", "envbuild/plan.json"]
    assert (out / "Dockerfile").read_text() == "FROM scratch\n"


def test_a_folder_envbuild_wrote_is_replaced_whole(tmp_path: Path) -> None:
    out = write_owned_folder(tmp_path / "ctx", fill(), "test")
    write_owned_folder(out, fill("FROM busybox\n"), "test")
    assert (out / "Dockerfile").read_text() == "FROM busybox\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx"]  # no temporary siblings left


def test_an_empty_folder_is_used(tmp_path: Path) -> None:
    (tmp_path / "ctx").mkdir()
    write_owned_folder(tmp_path / "ctx", fill(), "test")
    assert (tmp_path / "ctx" / "Dockerfile").is_file()


@pytest.mark.parametrize("foreign", ["notes.txt", "envbuild/mine.txt"])
def test_a_file_envbuild_did_not_write_stops_it_and_stays(tmp_path: Path, foreign: str) -> None:
    out = write_owned_folder(tmp_path / "ctx", fill(), "test")
    (out / foreign).write_text("mine")
    with pytest.raises(UsageError, match=f"{foreign} was not written by envbuild"):
        write_owned_folder(out, fill("FROM busybox\n"), "test")
    assert (out / foreign).read_text() == "mine"
    assert (out / "Dockerfile").read_text() == "FROM scratch\n"


def test_a_file_changed_since_envbuild_wrote_it_stops_it(tmp_path: Path) -> None:
    out = write_owned_folder(tmp_path / "ctx", fill(), "test")
    (out / "Dockerfile").write_text("FROM scratch\n# my edit\n")
    with pytest.raises(UsageError, match="Dockerfile was changed since envbuild wrote it"):
        write_owned_folder(out, fill(), "test")
    assert (out / "Dockerfile").read_text().endswith("# my edit\n")


def test_a_foreign_non_empty_folder_is_one_clear_error_and_untouched(tmp_path: Path) -> None:
    out = tmp_path / "project"
    out.mkdir()
    (out / "train.py").write_text("print('mine')\n")
    with pytest.raises(UsageError) as caught:
        write_owned_folder(out, fill(), "test")
    assert "is not empty and envbuild did not write it" in caught.value.message
    assert "\n" not in caught.value.message
    assert [p.name for p in out.iterdir()] == ["train.py"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]


def test_a_file_in_place_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ctx").write_text("a file")
    with pytest.raises(UsageError, match="is not a folder"):
        write_owned_folder(tmp_path / "ctx", fill(), "test")
    assert (tmp_path / "ctx").read_text() == "a file"


def test_a_failed_fill_keeps_the_earlier_folder(tmp_path: Path) -> None:
    out = write_owned_folder(tmp_path / "ctx", fill(), "test")

    def broken(root: Path) -> None:
        (root / "Dockerfile").write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(EnvbuildError, match="No space left on device"):
        write_owned_folder(out, broken, "test")
    assert (out / "Dockerfile").read_text() == "FROM scratch\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx"]


def test_a_file_that_appears_while_writing_is_kept(tmp_path: Path) -> None:
    out = write_owned_folder(tmp_path / "ctx", fill(), "test")

    def racing(root: Path) -> None:
        fill("FROM busybox\n")(root)
        (out / "appeared.txt").write_text("written meanwhile")  # after the first check

    with pytest.raises(UsageError, match="appeared.txt was not written by envbuild"):
        write_owned_folder(out, racing, "test")
    assert (out / "appeared.txt").read_text() == "written meanwhile"
    assert (out / "Dockerfile").read_text() == "FROM scratch\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx"]

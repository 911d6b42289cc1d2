"""Credentials in the index and channel URLs a team's files name (`user:token@`, `?token=`) never reach the
spec init writes, nor its notes: a spec is committed and its notes are printed in job logs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builder.init.importer import init_spec
from builder.init.lines import without_credentials

pytestmark = pytest.mark.unit

SECRETS = ("s3cr3t", "abc123", "glpat")


@pytest.mark.parametrize(("url", "clean"), [
    ("https://alice:s3cr3t@pypi.corp.example/simple", "https://pypi.corp.example/simple"),
    ("https://__token__:glpat-abc123@gitlab.example/api/v4/projects/1/packages/pypi/simple",
     "https://gitlab.example/api/v4/projects/1/packages/pypi/simple"),
    ("https://mirror.example/whl/cu126?token=abc123", "https://mirror.example/whl/cu126"),
    ("https://mirror.example/simple?private_token=glpat&region=eu", "https://mirror.example/simple?region=eu"),
    ("https://mirror.example/simple?api_key=abc123", "https://mirror.example/simple"),
])
def test_user_info_and_token_parameters_are_taken_out(url: str, clean: str) -> None:
    assert without_credentials(url) == (clean, True)


def test_a_url_without_credentials_is_left_as_it_is() -> None:
    url = "https://download.pytorch.org/whl/cu126"
    assert without_credentials(url) == (url, False)


def _written(result, out: Path) -> str:
    return out.read_text() + "\n".join(f"{n.entry} {n.reason}" for n in result.notes)


def test_a_requirements_file_with_tokens_gives_a_spec_without_them(tmp_path: Path) -> None:
    source = tmp_path / "requirements.txt"
    source.write_text("torch==2.7.1+cu126\n--extra-index-url https://alice:s3cr3t@pypi.corp.example/simple\n"
                      "--index-url https://mirror.corp.example/whl/cu126?token=abc123\n")
    out = tmp_path / "team.yaml"
    result = init_spec(source, out=out)
    text = _written(result, out)
    assert not any(secret in text for secret in SECRETS)
    assert "credentials removed" in text and "https://pypi.corp.example/simple" in text


def test_a_mirror_index_with_user_info_becomes_the_pip_index_without_it(tmp_path: Path) -> None:
    source = tmp_path / "environment.yml"
    source.write_text(yaml.safe_dump({"name": "mirrored", "dependencies": [
        "python=3.11", {"pip": ["--index-url https://ci:s3cr3t@pypi.corp.example/pytorch/cu121", "torch==2.3.1"]}]}))
    out = tmp_path / "mirrored.yaml"
    result = init_spec(source, out=out)
    assert result.spec.pip_index == "https://pypi.corp.example/pytorch/cu121"
    assert not any(secret in _written(result, out) for secret in SECRETS)


def test_a_channel_with_a_token_is_noted_without_it(tmp_path: Path) -> None:
    source = tmp_path / "environment.yml"
    source.write_text(yaml.safe_dump({"name": "tokened", "channels": ["https://bot:s3cr3t@conda.corp.example/main",
                                                                       "conda-forge"],
                                      "dependencies": ["python=3.11", "pytorch=2.7.1"]}))
    out = tmp_path / "tokened.yaml"
    result = init_spec(source, out=out)
    assert not any(secret in _written(result, out) for secret in SECRETS)

"""What `envbuild image --push` reports and `envbuild smoke --pull` takes: the pushed image by digest.

The engine is another helper's here, so the engine's push stream is replayed in the shape Docker's API
writes it (jsonmessage lines, the last with `aux`: PushResult {Tag, Digest, Size}); the real push and
pull by digest is tests/system/test_image_world.py::test_push_to_the_loopback_registry_and_pull_back."""

from __future__ import annotations

import pytest

from builder.errors import EnvbuildError
from builder.image.build import ImageResult, pull_reference, push_image

pytestmark = pytest.mark.unit
DIGEST = "sha256:" + "3c" * 32


class Api:
    def __init__(self, aux: dict | None) -> None:
        self.aux = aux
        self.pulled: list[tuple[str, str | None]] = []

    def tag(self, image: str, repository: str, tag: str) -> None:
        pass

    # The one layer the stream below pushes, as the engine describes the image (diff id, and the history
    # line that made it): push_image counts the bytes it sent from these.
    def inspect_image(self, image: str) -> dict:
        return {"RootFS": {"Layers": ["sha256:5f70bf18a086" + "0" * 52]}}

    def history(self, image: str) -> list[dict]:
        return [{"CreatedBy": "/bin/sh -c install", "Size": 1574}]

    def push(self, repository: str, tag: str, stream: bool, decode: bool):
        yield {"status": f"The push refers to repository [{repository}]"}
        yield {"status": "Pushed", "progressDetail": {}, "id": "5f70bf18a086"}
        yield {"status": f"{tag}: digest: {DIGEST} size: 1574"}
        if self.aux is not None:
            yield {"progressDetail": {}, "aux": self.aux}

    def pull(self, repository: str, tag: str | None, stream: bool, decode: bool):
        self.pulled.append((repository, tag))
        if repository.endswith("/missing"):
            yield {"error": "manifest unknown: manifest unknown"}
        yield {"status": f"Digest: {tag}"}


def client(aux: dict | None = None):
    return type("Client", (), {"api": Api(aux)})()


def result() -> ImageResult:
    return ImageResult("cpu", "sha256:1", ["team:2.13.0-cpu", "team:abc"], 1, None, None, None, 0.0, "abc")


def test_push_reports_the_digest_the_registry_gave() -> None:
    pushed = push_image(result(), "registry.example.org/ml", client=client({"Tag": "2.13.0-cpu", "Digest": DIGEST,
                                                                              "Size": 1574}))
    assert pushed.references == ["registry.example.org/ml/team:2.13.0-cpu", "registry.example.org/ml/team:abc"]
    assert pushed.by_digest == f"registry.example.org/ml/team@{DIGEST}"


def test_push_counts_the_bytes_it_sent() -> None:
    pushed_result = result()
    push_image(pushed_result, "registry.example.org/ml", client=client(None))
    assert (pushed_result.push_sent_bytes, pushed_result.push_reused_bytes) == (1574, 0)


@pytest.mark.parametrize("aux", [None, {"Tag": "x", "Digest": "sha256:short"}, {"Tag": "x"}])
def test_no_usable_digest_is_none_not_a_guess(aux) -> None:
    assert push_image(result(), "registry.example.org/ml", client=client(aux)).by_digest is None


@pytest.mark.parametrize("reference, expected", [
    (f"registry.example.org:5000/ml/team@{DIGEST}", ("registry.example.org:5000/ml/team", DIGEST)),
    ("registry.example.org:5000/ml/team:2.13.0-cpu", ("registry.example.org:5000/ml/team", "2.13.0-cpu")),
    ("registry.example.org:5000/ml/team", ("registry.example.org:5000/ml/team", None)),
])
def test_pull_by_reference(reference: str, expected) -> None:
    engine = client()
    assert pull_reference(reference, client=engine) == reference
    assert engine.api.pulled == [expected]


def test_a_failed_pull_is_one_line() -> None:
    with pytest.raises(EnvbuildError) as caught:
        pull_reference(f"registry.example.org/ml/missing@{DIGEST}", client=client())
    assert caught.value.message.startswith(f"pull of registry.example.org/ml/missing@{DIGEST} failed: manifest unknown")
    assert "\n" not in caught.value.message and len(caught.value.message) < 300


def test_smoke_pull_needs_an_image() -> None:
    from click.testing import CliRunner

    from builder.cli.commands import cli

    outcome = CliRunner().invoke(cli, ["smoke", "--local", "--pull"])
    assert outcome.exit_code == 2
    assert outcome.output.strip() == "Error: --pull pulls the IMAGE to test: give one, or drop --pull for --local"

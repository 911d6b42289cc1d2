"""The installer's downloads treat a lock as data: a file name is one path component, a URL is never
expanded from the environment, every request has a timeout and every file a size cap, and a dropped
connection resumes where it stopped. Real sockets, a real FIFO; no mocks of the transfer."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from builder.lock import install
from builder.lock.install import CondaArtifact, InstallError

pytestmark = pytest.mark.unit

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB


class _Flaky(BaseHTTPRequestHandler):
    """Sends half the payload and drops the connection on the first request; honours Range after."""

    calls: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # http.server's method name
        self.calls.append(self.headers.get("Range", ""))
        if len(self.calls) == 1:
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD[: len(PAYLOAD) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        start = int(self.headers["Range"].removeprefix("bytes=").rstrip("-"))
        self.send_response(206)
        self.send_header("Content-Length", str(len(PAYLOAD) - start))
        self.end_headers()
        self.wfile.write(PAYLOAD[start:])


@pytest.fixture
def flaky_server():
    _Flaky.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_dropped_connection_resumes_with_a_range_request(flaky_server: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "_RETRY_PAUSE_S", 0.0)
    sha256, _, size = install._download(f"{flaky_server}/linux-64/a-1-0.conda", tmp_path / "a.conda",
                                        time.monotonic() + 60, "a")
    assert (sha256, size) == (hashlib.sha256(PAYLOAD).hexdigest(), len(PAYLOAD))
    assert _Flaky.calls[0] == "" and _Flaky.calls[1].startswith("bytes=")
    assert (tmp_path / "a.conda").read_bytes() == PAYLOAD


def test_a_silent_server_is_given_up_on_after_the_read_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections (the kernel does), never answers
    monkeypatch.setattr(install, "_REQUEST_TIMEOUT_S", 0.5)
    monkeypatch.setattr(install, "_RETRY_PAUSE_S", 0.0)
    started = time.monotonic()
    try:
        with pytest.raises(InstallError, match="no answer.*tried 4 times"):
            install._download(f"http://127.0.0.1:{listener.getsockname()[1]}/x/a-1-0.conda", tmp_path / "a",
                              time.monotonic() + 60, "a")
    finally:
        listener.close()
    assert time.monotonic() - started < 10


def test_a_fifo_url_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "a-1-0.conda"
    os.mkfifo(fifo)
    with pytest.raises(InstallError, match="not a regular file"):
        install._download(fifo.as_uri(), tmp_path / "out", time.monotonic() + 60, "a")


def test_a_package_over_the_size_cap_stops_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "a-1-0.conda"
    source.write_bytes(PAYLOAD)
    monkeypatch.setattr(install, "_MAX_PACKAGE_BYTES", 1000)
    with pytest.raises(InstallError, match="larger than"):
        install._download(source.as_uri(), tmp_path / "out", time.monotonic() + 60, "a")


@pytest.mark.parametrize("url", ["https://conda.example/linux-64/..%2F..%2F.bashrc.conda",
                                 "https://conda.example/linux-64/a%2Fb-1-0.conda",
                                 "https://conda.example/linux-64/%2E%2E"])
def test_a_package_file_name_is_one_path_component(url: str) -> None:
    with pytest.raises(InstallError, match="not a single file name"):
        CondaArtifact("a", "1", url, sha256="0" * 64).file_name  # noqa: B018 - the property checks


@pytest.mark.parametrize("url", ["https://conda.example/${HOME}/linux-64/a-1-0.conda",
                                 "https://$SECRET@conda.example/linux-64/a-1-0.conda",
                                 "https://conda.example/linux-64/a-1-0\u2028.conda"])
def test_a_url_is_never_expanded_from_the_environment(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET", "hunter2")
    with pytest.raises(InstallError, match="placeholder|control or line") as refused:
        install._download(url, tmp_path / "out", time.monotonic() + 60, "a")
    assert "hunter2" not in str(refused.value)


class _Statuses(BaseHTTPRequestHandler):
    """Answers each request with the next status of `statuses`; a 200 sends the payload."""

    statuses: list[int] = []
    calls = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # http.server's method name
        status = self.statuses[min(type(self).calls, len(self.statuses) - 1)]
        type(self).calls += 1
        self.send_response(status)
        body = PAYLOAD if status == 200 else b"no\n"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize(("statuses", "outcome"), [([503, 429, 200], "done"), ([404], "HTTP 404"),
                                                   ([500], "HTTP 500; tried 4 times")])
def test_a_server_error_is_tried_again_and_a_missing_file_is_one_line(statuses: list[int], outcome: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _Statuses.statuses, _Statuses.calls = statuses, 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Statuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(install, "_RETRY_PAUSE_S", 0.0)
    url = f"http://127.0.0.1:{server.server_address[1]}/linux-64/a-1-0.conda"
    try:
        if outcome == "done":
            assert install._download(url, tmp_path / "a", time.monotonic() + 60, "a")[2] == len(PAYLOAD)
        else:
            with pytest.raises(InstallError, match=outcome) as refused:
                install._download(url, tmp_path / "a", time.monotonic() + 60, "a")
            assert len(str(refused.value).splitlines()) == 1
    finally:
        server.shutdown()
    assert _Statuses.calls == {"done": 3, "HTTP 404": 1}.get(outcome, 4)


def test_a_refused_connection_is_one_line(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    with pytest.raises(InstallError, match="cannot download .*refused"):
        install._download(f"http://127.0.0.1:{port}/linux-64/a-1-0.conda", tmp_path / "a", time.monotonic() + 60, "a")


def test_a_resumed_download_counts_each_byte_once(flaky_server: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "_RETRY_PAUSE_S", 0.0)
    moved: list[int] = []
    install._download(f"{flaky_server}/linux-64/a-1-0.conda", tmp_path / "a.conda", time.monotonic() + 60, "a",
                      moved=moved.append)
    assert sum(moved) == len(PAYLOAD) and all(step > 0 for step in moved)

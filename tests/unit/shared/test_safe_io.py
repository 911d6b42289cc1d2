"""builder.safe_io (reading, writing, stdout, locks): what envbuild reads and writes at the paths a user names, and its standard output.

Device nodes are private ones made with mknod in the test's folder (root only), never /dev's own."""

from __future__ import annotations

import errno
import io
import os
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from builder.errors import EnvbuildError, UsageError
from builder.safe_io.locks import exclusive_lock
from builder.safe_io.oserrors import os_error_line
from builder.safe_io.reading import input_problem, read_bounded, read_stdin
from builder.safe_io.stdout import CheckedOutput, OutputError
from builder.safe_io.writing import WriteError, write_file

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a device node needs root (mknod)")


def device(folder: Path, name: str = "full", minor: int = 7) -> Path:
    """A private character device: 1,7 is what /dev/full is, 1,5 what /dev/zero is."""
    path = folder / name
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


def unix_socket(folder: Path) -> Path:
    path = folder / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()
    return path


def leftovers(folder: Path, *expected: str) -> list[str]:
    return sorted(set(os.listdir(folder)) - set(expected))


# --- writing ---------------------------------------------------------------------------------------------

def test_a_new_file_is_written_whole_with_the_umask_mode(tmp_path: Path) -> None:
    path = write_file(tmp_path / "sub" / "out.yaml", "name: x\n")
    assert path.read_text() == "name: x\n"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert leftovers(tmp_path / "sub", "out.yaml") == []


def test_an_existing_file_needs_overwrite_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "host.json"
    path.write_text("old")
    path.chmod(0o600)
    with pytest.raises(UsageError, match="exists; pass --force"):
        write_file(path, "new")
    assert path.read_text() == "old"
    write_file(path, "new", overwrite=True)
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert leftovers(tmp_path, "host.json") == []


def test_the_data_is_synced_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    write_file(tmp_path / "out", b"data")
    assert len(synced) >= 1


@root_only
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_device_is_never_replaced(tmp_path: Path, overwrite: bool) -> None:
    node = device(tmp_path)
    with pytest.raises(UsageError, match="is a character device, not a regular file"):
        write_file(node, "{}", overwrite=overwrite)
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    assert leftovers(tmp_path, "full") == []


@root_only
def test_a_link_to_a_device_is_refused_and_both_stay(tmp_path: Path) -> None:
    node = device(tmp_path)
    link = tmp_path / "host.json"
    link.symlink_to(node)
    with pytest.raises(UsageError, match="character device"):
        write_file(link, "{}", overwrite=True)
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(node).st_mode)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=r"FIFO \(named pipe\)"):
        write_file(fifo, "x", overwrite=True)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a socket"):
        write_file(unix_socket(tmp_path), "x", overwrite=True)


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder; give a file name"):
        write_file(tmp_path, "x", overwrite=True)


def test_a_link_loop_is_said_as_one(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(UsageError, match="symbolic link loop"):
        write_file(loop, "x", overwrite=True)


def test_a_link_to_a_regular_file_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert write_file(link, "new", overwrite=True) == real
    assert link.is_symlink() and real.read_text() == "new"
    assert leftovers(tmp_path, "real.json", "link.json") == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out.yaml"
    path.write_text("old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteError, match="cannot write the JUnit report \\(No space left on device\\); the results"):
        write_file(path, "new", overwrite=True, what="the JUnit report", fix="the results above stand")
    assert path.read_text() == "old" and leftovers(tmp_path, "out.yaml") == []


def test_a_file_that_appears_meanwhile_is_not_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builder.safe_io.writing as safe_writing

    path = tmp_path / "team.yaml"
    real_link = os.link

    def racing_link(source: str, destination: str) -> None:
        Path(destination).write_text("theirs")
        real_link(source, destination)

    monkeypatch.setattr(safe_writing.os, "link", racing_link)
    with pytest.raises(UsageError, match="exists; pass --force"):
        write_file(path, "ours")
    assert path.read_text() == "theirs" and leftovers(tmp_path, "team.yaml") == []


# --- reading ---------------------------------------------------------------------------------------------

def test_a_regular_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"name: x\n")
    assert read_bounded(path, 100, "spec") == b"name: x\n"


def test_a_fifo_is_refused_at_once_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(UsageError, match=r"spec.yaml: cannot read the spec: it is a FIFO \(named pipe\), not a regular"):
        read_bounded(fifo, 100, "spec")
    assert time.monotonic() - started < 5


@root_only
def test_a_zero_device_is_refused_not_read_forever(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="it is a character device"):
        read_bounded(device(tmp_path, "zero", 5), 1 << 20, "log")


@pytest.mark.parametrize(("make", "words"), [
    (lambda p: p, "it is a directory"),
    (lambda p: (p / "loop").symlink_to(p / "loop") or p / "loop", "symbolic link loop"),
    (lambda p: (p / "dangling").symlink_to(p / "gone") or p / "dangling", "symbolic link to .*gone, which does not"),
    (lambda p: p / "absent", "it does not exist; check the path"),
])
def test_what_is_not_a_file_is_named(tmp_path: Path, make, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        read_bounded(make(tmp_path), 100, "spec")


def test_a_loop_is_not_reported_as_missing(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert "does not exist" not in (input_problem(loop) or "")


def test_the_cap_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 2048)
    with pytest.raises(EnvbuildError, match="larger than 1 kB, not a lockfile"):
        read_bounded(path, 1024, "lockfile", EnvbuildError)


def test_closed_stdin_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(UsageError, match="standard input is closed"):
        read_bounded("-", 100, "log")


class Endless(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        buffer[:] = b"y" * len(buffer)
        return len(buffer)


def test_an_endless_stdin_ends_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Endless())))
    started = time.monotonic()
    with pytest.raises(UsageError, match="standard input: more than 1 MiB, not a log"):
        read_stdin(1 << 20, "log")
    assert time.monotonic() - started < 5


def test_a_copy_that_failed_for_many_files_is_one_short_line() -> None:
    import shutil

    errors = [(f"/src/{i}", f"/tmp/ctx/rattler/{i}.py", f"[Errno 28] No space left on device: '/tmp/ctx/{i}'")
              for i in range(500)]
    line = os_error_line(shutil.Error(errors))
    assert len(line) < 300 and "No space left on device" in line and "499 more" in line


# --- standard output -----------------------------------------------------------------------------------

@root_only
def test_output_into_a_full_device_is_an_error(tmp_path: Path) -> None:
    full = open(device(tmp_path), "w")  # noqa: SIM115 - closed below, where its last flush fails too
    out = CheckedOutput(full)
    out.write("[]\n")
    with pytest.raises(OutputError, match="No space left on device"):
        out.flush()
    out.flush()  # said once: the rest is dropped
    with pytest.raises(OSError):
        full.close()


class Broken(io.StringIO):
    def __init__(self, number: int) -> None:
        super().__init__()
        self.number = number

    def write(self, text: str) -> int:
        raise OSError(self.number, os.strerror(self.number))


@pytest.mark.parametrize(("number", "words"), [(errno.EPIPE, "broken pipe"), (errno.EBADF, "is closed"),
                                               (errno.EIO, "Input/output error")])
def test_each_output_failure_is_named(number: int, words: str) -> None:
    with pytest.raises(OutputError, match=words):
        CheckedOutput(Broken(number)).write("x")


def test_a_closed_stdout_is_an_error_on_the_first_write() -> None:
    with pytest.raises(OutputError, match="standard output is closed"):
        CheckedOutput(None).write("x")


def test_click_echo_goes_through_the_checked_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    import click

    monkeypatch.setattr(sys, "stdout", CheckedOutput(Broken(errno.ENOSPC)))
    with pytest.raises(OutputError, match="No space left"):
        click.echo("hello")


# --- a lock between processes --------------------------------------------------------------------------

def test_the_lock_serialises_and_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "tags.lock"
    inside: list[int] = []
    overlap: list[bool] = []

    def hold(number: int) -> None:
        with exclusive_lock(path, 10, lambda: None, lambda: EnvbuildError("timed out")):
            inside.append(number)
            overlap.append(len(inside) > 1)
            time.sleep(0.2)
            inside.remove(number)

    threads = [threading.Thread(target=hold, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlap == [False, False, False]
    assert list(tmp_path.iterdir()) == []  # neither the lock file nor its holder's PID


def test_a_lock_held_too_long_times_out(tmp_path: Path) -> None:
    path = tmp_path / "tags.lock"
    waited: list[bool] = []
    with exclusive_lock(path, 10, lambda: None, lambda: EnvbuildError("x")):
        with pytest.raises(EnvbuildError, match="held"):
            with exclusive_lock(path, 0.3, lambda: waited.append(True), lambda: EnvbuildError("held")):
                pass
    assert waited == [True]


def test_processes_racing_for_a_lock_whose_file_goes_with_each_holder_never_overlap(tmp_path: Path) -> None:
    """The last holder removes the lock file; a waiter that opened the removed file must not hold it beside the
    one who locks the new file (filelock drops a lock on a file without a name)."""
    import subprocess
    import sys

    racer = (
        "import os, sys, time\nfrom pathlib import Path\nfrom builder.safe_io.locks import exclusive_lock\n"
        "for _ in range(40):\n"
        "    with exclusive_lock(Path(sys.argv[1]), 60, lambda: None, lambda: RuntimeError('timed out')):\n"
        "        marker = Path(sys.argv[2])\n"
        "        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # FileExistsError: two inside at once\n"
        "        time.sleep(0.002)\n"
        "        os.close(fd)\n"
        "        marker.unlink()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    racers = [subprocess.Popen([sys.executable, "-c", racer, str(tmp_path / "race.lock"), str(tmp_path / "inside")],
                               env=env, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    errors = [racer.communicate(timeout=120)[1] for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0, 0, 0], errors
    assert list(tmp_path.iterdir()) == []

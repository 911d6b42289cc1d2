"""Run one catalogued fault as a user would and judge what envbuild did.

A case is data: a command line, a setup that lays out the user's files, and what must come out (the
exit code, exactly one `Error:` line carrying given words). Every case runs `python -m builder` in
a folder of its own, with a private TMPDIR and HOME inside it, so the judgement is exact:

- left behind: a path under the folder that was not there before, anything in the private TMPDIR,
  a process still running with that TMPDIR, a container or tag that was not there before;
- lost: a path of the user's that is gone or whose bytes or mode changed;
- traceback: "Traceback" anywhere in the output;
- too long: an `Error:` line of MAX_ERROR_LINE characters or more.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

WORLD_PORT = os.environ.get("ENVBUILD_WORLD_PORT", "8765")
WORLD_CHANNEL = f"http://127.0.0.1:{WORLD_PORT}/conda/conda-forge"
RUNTIME_BASE = os.environ.get("ENVBUILD_TEST_DEBIAN_IMAGE", "local/debian:bookworm")
BUILDER_BASE = os.environ.get("ENVBUILD_TEST_BUILDER_IMAGE", "local/debian:bookworm-python")
NEEDS = ("unit", "world", "docker")
# The boundary each case tries (issue 35): a bad input or broken surroundings as before, and the trust
# boundaries a file from a pull request must not cross. `make bench-faults` prints one line per class.
BOUNDARIES = ("input", "surroundings", "data-loss", "reading-outside", "tampered-lock", "injection",
              "resource-exhaustion", "internal-error", "spec-types")
MAX_ERROR_LINE = 300  # an Error line names the cause and the fix; a longer one buries both


class Unsupported(Exception):
    """This machine cannot lay out the case (e.g. no permission to mount a small filesystem)."""


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]  # "{name}" placeholders are filled from Workspace.values
    exit: int = 1
    error: tuple[str, ...] | None = ()  # words the one Error line must carry; None: no Error line at all
    setup: Callable[[Workspace], None] | None = None
    needs: str = "unit"  # unit | world | docker
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = 120.0
    stdout: tuple[str, ...] = ()  # words stdout must carry (results that must still print)
    may_create: tuple[str, ...] = ()  # paths (relative to the case folder) the command may write
    pending: str = ""  # a known gap being fixed elsewhere: reported, expected to fail until then
    # Where the command's standard streams go: "" a pipe the harness reads (stdin: nothing), "closed" a
    # closed descriptor, else a path under the case folder (a private device node, a FIFO, a file).
    stdout_to: str = ""
    stdin_from: str = ""
    # (signal, a stderr line that says when): the signal is sent once the command printed that line.
    interrupt: tuple[int, str] | None = None
    # Further judgement after the run (the engine's state, a second process): problems, if any.
    after: Callable[[Workspace, Outcome], list[str]] | None = None
    boundary: str = "input"  # one of BOUNDARIES
    # Text that must appear nowhere the command wrote: its output and the files it created (a secret, an
    # escape sequence, an HTML tag).
    absent: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert self.needs in NEEDS, self.needs
        assert self.boundary in BOUNDARIES, self.boundary


@dataclass
class Outcome:
    case: Case
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    problems: list[str] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    traceback: bool = False
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not (self.problems or self.left_behind or self.lost or self.traceback)

    def report(self) -> str:
        parts = [f"{self.case.id}: rc={self.returncode}"]
        parts += [f"problem: {p}" for p in self.problems]
        parts += [f"left behind: {p}" for p in self.left_behind]
        parts += [f"lost: {p}" for p in self.lost]
        if self.traceback:
            parts.append("traceback in output")
        parts.append(f"stderr tail: {self.stderr[-1500:]}")
        return "\n  ".join(parts)


class Workspace:
    """The user's folder for one case: files, a private TMPDIR and HOME, helpers for odd disks."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / ".tmp"
        self.home = root / "home"
        self.bin = root / ".bin"
        for folder in (self.tmp, self.home, self.bin):
            folder.mkdir(parents=True)
        self.values: dict[str, str] = {"root": str(root), "world_channel": WORLD_CHANNEL,
                                       "runtime_base": RUNTIME_BASE, "builder_base": BUILDER_BASE}
        self.mounts: list[Path] = []
        self.stops: list[Callable[[], None]] = []
        self.background: list[subprocess.Popen] = []  # other processes a case starts beside its command

    # --- files -------------------------------------------------------------------------------

    def write(self, name: str, content: str | bytes, mode: int | None = None) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        if mode is not None:
            path.chmod(mode)
        return path

    def spec(self, name: str = "team", extra: str = "", targets: str = "[{cuda: cpu}]",
             file: str | None = None) -> Path:
        """A small valid spec for the offline world (its runtime base has a glibc envbuild knows)."""
        body = (f"name: {name}\npython: '3.11'\ntorch: '2.13.0'\ntargets: {targets}\n"
                f"images: {{runtime: {{image: '{RUNTIME_BASE}'}}, builder: {{image: '{BUILDER_BASE}'}}}}\n{extra}")
        return self.write(file or f"{name}.yaml", body)

    def tool(self, name: str, script: str) -> Path:
        """An executable on the command's PATH (a fake nvidia-smi, say)."""
        return self.write(f".bin/{name}", "#!/bin/sh\n" + script, mode=0o755)

    # --- nodes that are not files ----------------------------------------------------------------

    def device(self, name: str, major: int = 1, minor: int = 7) -> Path:
        """A private character device node (default 1,7: what /dev/full is) in the case folder; the
        real ones under /dev are never written to or renamed onto."""
        if os.geteuid() != 0:
            raise Unsupported("a device node needs root (mknod)")
        path = self.root / name
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        return path

    def fifo(self, name: str) -> Path:
        path = self.root / name
        os.mkfifo(path)
        return path

    def unix_socket(self, name: str) -> Path:
        path = self.root / name
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()  # the node stays
        return path

    def link(self, name: str, target: str) -> Path:
        path = self.root / name
        path.symlink_to(target)
        return path

    # --- odd filesystems -----------------------------------------------------------------------

    def read_only_dir(self, name: str) -> Path:
        """A folder no write reaches: a read-only filesystem (root ignores permission bits)."""
        path = self.root / name
        path.mkdir(parents=True)
        if os.geteuid() != 0:
            path.chmod(0o555)
            return path
        self._mount(path, "ro,size=64k")
        return path

    def full_dir(self, name: str, size_kb: int = 64) -> Path:
        """A folder on a filesystem with no free space left."""
        if os.geteuid() != 0:
            raise Unsupported("a full filesystem needs root (a small tmpfs)")
        path = self.root / name
        path.mkdir(parents=True)
        self._mount(path, f"size={size_kb}k")
        handle = os.open(path / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(handle, b"\0" * 4096):
                pass
        except OSError:
            pass  # full
        finally:
            os.close(handle)
        return path

    def _mount(self, path: Path, options: str) -> None:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
        if done.returncode != 0:
            raise Unsupported(f"cannot mount a tmpfs: {done.stderr.decode(errors='replace').strip()}")
        self.mounts.append(path)

    # --- servers -------------------------------------------------------------------------------

    def silent_server(self) -> str:
        """A channel URL whose server accepts connections and never answers."""
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        held: list[socket.socket] = []
        stopping = threading.Event()

        def accept() -> None:
            server.settimeout(0.2)
            while not stopping.is_set():
                try:
                    held.append(server.accept()[0])
                except OSError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()

        def stop() -> None:
            stopping.set()
            thread.join(2)
            for connection in held:
                connection.close()
            server.close()

        self.stops.append(stop)
        return f"http://127.0.0.1:{server.getsockname()[1]}/conda-forge"

    @staticmethod
    def closed_port_url() -> str:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        return f"http://127.0.0.1:{port}/conda-forge"

    def close(self) -> None:
        for stop in self.stops:
            stop()
        for process in self.background:
            process.kill()
            process.communicate()
        for path in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
        for path in self.root.rglob("*"):  # undo read-only modes so the folder can go
            if path.is_dir() and not path.is_symlink():
                try:
                    path.chmod(0o755)
                except OSError:
                    pass


# --- snapshots -------------------------------------------------------------------------------------

def snapshot(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple]:
    """Every path under root: kind, mode and (for files) size and sha256."""
    found: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in dirnames + filenames:
            path = here / name
            info = path.lstat()
            relative = str(path.relative_to(root))
            if stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest() if info.st_size < 8 << 20 else str(info.st_mtime)
                found[relative] = ("file", stat.S_IMODE(info.st_mode), info.st_size, digest)
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("dir", stat.S_IMODE(info.st_mode))
            else:
                found[relative] = ("other", stat.S_IMODE(info.st_mode))
    return found


def processes_with_tmpdir(tmp: Path) -> list[str]:
    """Processes still running whose TMPDIR lies in the case's private one (children inherit it)."""
    marker = f"TMPDIR={tmp}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            if any(item.startswith(marker) for item in environ.split(b"\0")):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(f"pid {entry.name}: {(entry / 'cmdline').read_bytes()[:120]!r}")
        except OSError:
            continue
    return found


def engine_state(env_name: str | None, owner_pid: int | None = None) -> tuple[set[str], set[str]]:
    """Containers a case's envbuild process labelled as its own, and the tags of the case's env:
    what a case may not add (other users of the engine add theirs meanwhile)."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        owner = f"io.envbuild.owner={socket.gethostname()}:{owner_pid}" if owner_pid else "io.envbuild.run"
        containers = {c["Id"] for c in client.api.containers(all=True, filters={"label": owner})}
        tags = {tag for image in client.api.images() for tag in (image.get("RepoTags") or [])
                if env_name and env_name in tag}
        client.close()
        return (containers if owner_pid else set()), tags
    except Exception:  # noqa: BLE001 - no engine here: nothing of it can be left behind
        return set(), set()


# --- one case ---------------------------------------------------------------------------------------

def run_case(case: Case, folder: Path) -> Outcome:
    """Lay out, run and judge `case` in `folder` (which must not exist yet)."""
    folder.mkdir(parents=True)
    ws = Workspace(folder)
    outcome = Outcome(case)
    try:
        if case.setup:
            case.setup(ws)
        args = [arg.format(**ws.values) for arg in case.args]
        before = snapshot(folder, (ws.tmp,))
        engine_before = engine_state(ws.values.get("env")) if case.needs == "docker" else (set(), set())
        env = {**os.environ, "CI": "true", "TMPDIR": str(ws.tmp), "HOME": str(ws.home),
               "PATH": f"{ws.bin}{os.pathsep}{os.environ.get('PATH', '')}",
               **{key: value.format(**ws.values) for key, value in case.env}}
        env.pop("ENVBUILD_DEBUG", None)
        started = time.monotonic()
        with _streams(case, folder) as (stdin, stdout_target, closing):
            process = subprocess.Popen([sys.executable, "-m", "builder", *args], cwd=folder, env=env,
                                       stdin=stdin, stdout=stdout_target, stderr=subprocess.PIPE,
                                       preexec_fn=closing)
        ws.values["pid"] = str(process.pid)
        early = _interrupt(process, case) if case.interrupt else b""
        try:
            stdout, stderr = process.communicate(timeout=case.timeout)
            outcome.returncode = process.returncode
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            outcome.problems.append(f"still running after {case.timeout:g} s (a hang)")
        outcome.stdout = (stdout or b"").decode("utf-8", errors="replace")
        outcome.stderr = (early + stderr).decode("utf-8", errors="replace")
        outcome.seconds = time.monotonic() - started
        if case.after:
            outcome.problems += case.after(ws, outcome)
        judge(outcome, ws, before, engine_before)
    except Unsupported:
        raise
    finally:
        ws.close()
    return outcome


def _stream(named: str | None, flags: int, default: int, fd: int, open_path: Callable[[str, int], int],
            to_close: list[int]) -> int | None:
    """The child's stdin (fd 0) or stdout (fd 1) as the case names it: closed, a file, or `default`."""
    if named == "closed":
        to_close.append(fd)
        return subprocess.DEVNULL if fd == 1 else default
    return open_path(named, flags) if named else default


@contextmanager
def _streams(case: Case, folder: Path):
    """stdin, stdout and a function the child runs before exec that closes what the case wants closed.
    A file named by the case is opened without blocking (a FIFO with no reader would block the open)."""
    opened: list[int] = []
    to_close: list[int] = []

    def open_path(name: str, flags: int) -> int:
        handle = os.open(folder / name, flags | os.O_NONBLOCK)
        os.set_blocking(handle, True)
        opened.append(handle)
        return handle

    stdin = _stream(case.stdin_from, os.O_RDONLY, subprocess.DEVNULL, 0, open_path, to_close)
    stdout = _stream(case.stdout_to, os.O_WRONLY, subprocess.PIPE, 1, open_path, to_close)

    def closing() -> None:
        for handle in to_close:
            os.close(handle)

    try:
        yield stdin, stdout, closing
    finally:
        for handle in opened:
            os.close(handle)


def _interrupt(process: subprocess.Popen, case: Case) -> bytes:
    """Read stderr until the case's line shows, then send its signal; what was read, for the outcome."""
    assert case.interrupt is not None and process.stderr is not None
    signum, marker = case.interrupt
    seen = []
    deadline = time.monotonic() + case.timeout
    for line in process.stderr:
        seen.append(line)
        if marker.encode() in line or time.monotonic() > deadline:
            break
    time.sleep(1)  # into the step, not at its first line
    if process.poll() is None:
        process.send_signal(signum)
    return b"".join(seen)


def judge(outcome: Outcome, ws: Workspace, before: dict[str, tuple], engine_before: tuple[set[str], set[str]]) -> None:
    _judge_output(outcome)
    _judge_leftovers(outcome, ws, before)
    if outcome.case.needs == "docker":
        containers, tags = engine_state(ws.values.get("env"), int(ws.values["pid"]))
        outcome.left_behind += [f"container {c[:12]}" for c in sorted(containers - engine_before[0])]
        outcome.left_behind += [f"tag {t}" for t in sorted(tags - engine_before[1])]


def _judge_output(outcome: Outcome) -> None:
    """Exit code, exactly one `Error:` line with the case's words (or none), stdout's words, no traceback."""
    case = outcome.case
    if outcome.returncode is not None and outcome.returncode != case.exit:
        outcome.problems.append(f"exit {outcome.returncode}, expected {case.exit}")
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("Error:")]
    if case.error is None:
        if errors:
            outcome.problems.append(f"expected no Error line, got {errors}")
    elif len(errors) != 1:
        outcome.problems.append(f"expected exactly one Error line, got {len(errors)}: {errors}")
    else:
        missing = [word for word in case.error if word.lower() not in errors[0].lower()]
        if missing:
            outcome.problems.append(f"the Error line lacks {missing}: {errors[0]}")
        if len(errors[0]) >= MAX_ERROR_LINE:
            outcome.problems.append(f"the Error line has {len(errors[0])} characters (cause and fix fit in "
                                    f"{MAX_ERROR_LINE}): {errors[0][:400]}")
    outcome.problems += [f"stdout lacks {word!r}" for word in case.stdout if word.lower() not in outcome.stdout.lower()]
    outcome.problems += [f"the output holds {text!r}" for text in case.absent if text in outcome.stdout + outcome.stderr]
    outcome.traceback = "Traceback (most recent call last)" in outcome.stdout + outcome.stderr


def _absent_from(path: Path, absent: tuple[str, ...]) -> list[str]:
    """The case's absent texts that a file the command created holds."""
    if not absent or path.is_symlink() or not path.is_file():
        return []
    text = path.read_bytes()[:1 << 22].decode("utf-8", errors="replace")
    return [f"{path.name} holds {word!r}" for word in absent if word in text]


def _judge_leftovers(outcome: Outcome, ws: Workspace, before: dict[str, tuple]) -> None:
    """Processes and temporary files left behind, files created outside what the case allows, files lost."""
    deadline = time.monotonic() + 3  # children killed by their parent's death take a moment
    while (running := processes_with_tmpdir(ws.tmp)) and time.monotonic() < deadline:
        time.sleep(0.1)
    outcome.left_behind += [f"process {p}" for p in running]
    outcome.left_behind += [f"$TMPDIR/{p.relative_to(ws.tmp)}" for p in sorted(ws.tmp.rglob("*"))]
    after = snapshot(ws.root, (ws.tmp,))
    allowed = set(outcome.case.may_create)
    for path in sorted(set(after) - set(before)):
        outcome.problems += _absent_from(ws.root / path, outcome.case.absent)
        if not any(path == a or path.startswith(a + "/") for a in allowed):
            outcome.left_behind.append(path)
    outcome.lost += [f"{path} (removed)" for path in sorted(set(before) - set(after))]
    for path in sorted(set(before) & set(after)):
        if before[path] != after[path] and not (before[path][0] == "dir" == after[path][0]):
            outcome.lost.append(f"{path} (changed)")


def world_up() -> bool:
    return bool(os.environ.get("ENVBUILD_TEST_WORLD"))


def copy_tree(source: Path, destination: Path) -> None:
    shutil.copytree(source, destination)

"""The fault catalogue: bad inputs and broken surroundings, one Case each, across every command.

Each case says what a user typed, what their folder held, and what envbuild must answer: the exit
code and the words its one `Error:` line carries (the cause, and a fix). The harness adds the
promises every case shares: no traceback, nothing left behind, nothing of the user's lost.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from tests.faults.harness import BUILDER_BASE, RUNTIME_BASE, Case, Workspace
from tests.host_ca import host_ca_certificate, private_key_block

NOT_UTF8 = b"name: team\npython: '3.11'\ndescription: caf\xe9 \xff\xfe\n"
NESTED = "name: team\nconda: " + "[" * 500 + "]" * 500 + "\n"
NESTED_MAP = "name: team\nlabels: " + "{a: " * 500 + "1" + "}" * 500 + "\n"
# 9 lists of 9 aliases of the one before: 342 bytes, 9^9 values once expanded.
ALIAS_BOMB = "\n".join(
    ['name: team', 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]" for prev, name in zip("abcdefgh", "bcdefghi", strict=True)]
) + "\n"
HOST_CA_PEM = host_ca_certificate()
KEY_SHAPED_BLOCK = private_key_block()
ENV_YML = "name: team\nchannels: [conda-forge]\ndependencies: [python=3.11, pytorch=2.13.0]\n"
# 12 ARGs, each ten references to the one before: 791 bytes, 10^13 characters once expanded.
ARG_CHAIN = "\n".join(["FROM python:3.11", "ARG V0=abcdefghij"]
                      + [f"ARG V{i}=" + f"${{V{i - 1}}}" * 10 for i in range(1, 13)]
                      + ["RUN pip install torch==2.13.0 ${V12}"]) + "\n"


# --- setups ----------------------------------------------------------------------------------------

def spec(ws: Workspace, **kwargs) -> None:
    ws.spec(**kwargs)


def with_spec(**kwargs):
    return lambda ws: ws.spec(**kwargs)


def with_file(name: str, content: str | bytes, also_spec: bool = False, **spec_kwargs):
    def setup(ws: Workspace) -> None:
        ws.write(name, content)
        if also_spec:
            ws.spec(**spec_kwargs)
    return setup


def with_ca(entry: str, files: dict[str, str]):
    def setup(ws: Workspace) -> None:
        for name, content in files.items():
            ws.write(name, content)
        ws.spec(extra=f"ca_certificates: [{entry!r}]\n")
    return setup


def with_read_only(name: str, spec_too: bool = True):
    def setup(ws: Workspace) -> None:
        if spec_too:
            ws.spec()
        ws.read_only_dir(name)
    return setup


def with_full(name: str):
    def setup(ws: Workspace) -> None:
        ws.spec()
        ws.full_dir(name)
    return setup


def with_silent_channel(ws: Workspace) -> None:
    ws.spec()
    ws.values["silent"] = ws.silent_server()


def with_closed_channel(ws: Workspace) -> None:
    ws.spec()
    ws.values["closed"] = ws.closed_port_url()


def with_looking_fresh_lock(content: bytes):
    """A lockfile whose info matches the spec's inputs but whose bytes are `content` (corrupted)."""
    def setup(ws: Workspace) -> None:
        from builder.lock.targets import INFO_FILE, LOCK_FILE, lock_inputs
        from builder.specs.model import load_spec
        from builder.specs.target import resolve_targets

        spec_file = ws.spec()
        target = resolve_targets(load_spec(spec_file))[0]
        inputs = lock_inputs(target)
        folder = ws.root / "locks" / target.key
        folder.mkdir(parents=True)
        (folder / LOCK_FILE).write_bytes(content)
        (folder / INFO_FILE).write_text(json.dumps({
            "envbuild_version": "0", "input_hash": inputs.input_hash, "env": target.name, "target": target.key,
            "torch": target.torch, "cuda": None, "platforms": list(target.platforms), "channels": [],
            "pip_repositories": [], "virtual_packages": {}, "solver": "x", "lockfile_sha256": "0" * 64,
            "torch_builds": {}, "package_counts": {}}))
    return setup


def with_nvidia_smi(script: str):
    def setup(ws: Workspace) -> None:
        ws.tool("nvidia-smi", script)
    return setup


def with_world_lock(env_prefix: str = "faults", **spec_kwargs):
    """A spec with a unique env name, locked for cpu on the world's channel into ./locks."""
    def setup(ws: Workspace) -> None:
        name = f"{env_prefix}-{uuid.uuid4().hex[:8]}"
        ws.values["env"] = name
        ws.spec(name=name, file="team.yaml", **spec_kwargs)
        lock_world(ws)
    return setup


def lock_world(ws: Workspace) -> None:
    done = subprocess.run([sys.executable, "-m", "builder", "lock", "team.yaml", "--channel", ws.values["world_channel"],
                           "--locks", "locks"], cwd=ws.root, capture_output=True, text=True, timeout=300,
                          env={"CI": "true", "PATH": "/usr/bin:/bin", "TMPDIR": str(ws.tmp), "HOME": str(ws.home)})
    assert done.returncode == 0, done.stderr[-2000:]


def with_world_lock_missing_file(ws: Workspace) -> None:
    """A lock whose one conda package URL the channel does not have (as after a mirror dropped it)."""
    from builder.formats.conda_lock import lockfile_sha256
    from builder.lock.targets import INFO_FILE, LOCK_FILE

    with_world_lock()(ws)
    folder = ws.root / "locks" / "cpu"
    text = (folder / LOCK_FILE).read_text()
    import re

    package = re.search(r"url: (http\S+?/)([^/\s]+\.(?:conda|tar\.bz2))\s", text)
    assert package, "no conda package URL in the lock"
    (folder / LOCK_FILE).write_text(text.replace(package.group(1) + package.group(2),
                                                 package.group(1) + "gone-0.0-0.conda"))
    info = json.loads((folder / INFO_FILE).read_text())
    info["lockfile_sha256"] = lockfile_sha256(folder / LOCK_FILE)
    (folder / INFO_FILE).write_text(json.dumps(info))


def with_unique_spec(ws: Workspace) -> None:
    name = f"faults-{uuid.uuid4().hex[:8]}"
    ws.values["env"] = name
    ws.spec(name=name, file="team.yaml")


def with_foreign_out(ws: Workspace) -> None:
    ws.spec()
    ws.write("out/notes.txt", "a user's notes, not envbuild's\n")


def with_existing(name: str, content: str = "keep me\n"):
    def setup(ws: Workspace) -> None:
        ws.spec()
        ws.write(name, content)
    return setup


def with_prefix_file(ws: Workspace) -> None:
    ws.spec()
    ws.write("env-here", "a file where the env would go\n")


# --- the catalogue ---------------------------------------------------------------------------------

SPEC = ("team.yaml",)
BAD_SPECS: list[tuple[str, str | bytes, tuple[str, ...]]] = [
    ("not-utf8", NOT_UTF8, ("not UTF-8", "give")),
    ("nested-500", NESTED, ("nested", "give")),
    ("nested-map-500", NESTED_MAP, ("nested", "give")),
    ("alias-bomb", ALIAS_BOMB, ("alias", "give")),
    ("empty", "", ("mapping", "name")),
    ("a-list", "- name: team\n", ("mapping",)),
    ("not-yaml", "name: [team\n", ("not valid YAML", "give")),
    ("huge", "name: team\n" + "#" * (2 << 20) + "\n", ("larger than", "give the right file")),
    ("unknown-field", "name: team\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{cuda: cpu}]\nbogus: 1\n",
     ("bogus", "not a known field")),
]
# Every command that reads a spec gets every bad spec through the same loader; each command is
# given a share of them, so all bad kinds and all commands are covered without a full product.
SPEC_COMMANDS: list[tuple[str, ...]] = [
    ("targets", "team.yaml"), ("render", "team.yaml"), ("lint", "team.yaml"), ("lock", "team.yaml"),
    ("image", "team.yaml", "--cuda", "cpu"), ("doctor", "team.yaml"), ("ci", "github", "team.yaml"),
    ("matrix", "team.yaml"), ("onboard", "team.yaml"), ("targets", "team.yaml", "--json"),
]

CASES: list[Case] = []
for index, (kind, content, words) in enumerate(BAD_SPECS):
    for command in (SPEC_COMMANDS[index % len(SPEC_COMMANDS)], SPEC_COMMANDS[(index + 3) % len(SPEC_COMMANDS)]):
        CASES.append(Case(f"spec-{kind}-{command[0]}", command, exit=2, error=words,
                          setup=with_file("team.yaml", content)))

# An unquoted float is read as written (12.65, not a rounded number); a well-formed spec, so lint
# reports the target it cannot resolve as an error finding (exit 1) where other commands refuse it.
CUDA_AS_FLOAT = "name: team\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{cuda: 12.65}]\n"
CASES += [
    Case("spec-cuda-as-float-targets", ("targets", "team.yaml", "--json"), exit=2,
         error=("12.65", "CUDA targets for 2.13"), setup=with_file("team.yaml", CUDA_AS_FLOAT)),
    Case("spec-cuda-as-float-lint", ("lint", "team.yaml"), exit=1, error=None,
         stdout=("lint.targets.unresolvable", "target 12.65"), setup=with_file("team.yaml", CUDA_AS_FLOAT)),
]

CASES += [
    # input files that are not files
    Case("spec-dev-zero", ("targets", "/dev/zero"), exit=2, error=("character device", "regular file"), timeout=30),
    Case("spec-missing", ("targets", "absent.yaml"), exit=2, error=("does not exist",)),
    Case("spec-is-a-folder", ("lint", "{root}"), exit=2, error=("is a directory",)),
    Case("init-from-not-utf8", ("init", "--from", "environment.yml", "--out", "team.yaml"), exit=2,
         error=("not UTF-8",), setup=with_file("environment.yml", b"name: x\ndependencies: [caf\xe9]\n")),
    Case("init-from-alias-bomb", ("init", "--from", "environment.yml", "--out", "team.yaml"), exit=2,
         error=("alias",), setup=with_file("environment.yml", ALIAS_BOMB)),
    Case("init-from-dev-zero", ("init", "--from", "/dev/zero", "--out", "team.yaml"), exit=2,
         error=("character device", "regular file"), timeout=30),
    Case("init-from-nested", ("init", "--from", "environment.yml", "--out", "team.yaml"), exit=2,
         error=("nested",), setup=with_file("environment.yml", NESTED)),
    # a requirements file's includes stay in its folder: a pull request's -r cannot read CI secrets
    Case("init-from-include-of-environ", ("init", "--from", "requirements.txt", "--out", "team.yaml"), exit=2,
         error=("/proc/self/environ", "outside", "--allow-outside"),
         setup=with_file("requirements.txt", "torch==2.13.0\n-r /proc/self/environ\n")),
    Case("init-from-arg-chain", ("init", "--from", "Dockerfile", "--out", "team.yaml"), exit=2,
         error=("expand past", "write the values out"), setup=with_file("Dockerfile", ARG_CHAIN), timeout=30),
    Case("lint-include-of-parent", ("lint", "requirements.txt"), exit=2, error=("../secrets.txt", "--allow-outside"),
         setup=with_file("requirements.txt", "torch==2.13.0\n-c ../secrets.txt\n")),

    # render
    Case("render-unknown-target", ("render", "team.yaml", "--cuda", "99.9"), exit=2, error=("no target 99.9",),
         setup=with_spec()),
    Case("render-out-read-only", ("render", "team.yaml", "--out", "ro/ctx"), error=("cannot write", "--out"),
         setup=with_read_only("ro")),
    Case("render-out-full-disk", ("render", "team.yaml", "--out", "full/ctx"), error=("no space", "free disk"),
         setup=with_full("full")),
    Case("render-out-is-a-file", ("render", "team.yaml", "--out", "team.yaml"), exit=2,
         error=("team.yaml",), setup=with_spec()),
    Case("render-out-foreign-folder", ("render", "team.yaml", "--out", "out"), exit=2,
         error=("not empty", "new or empty folder"), setup=with_foreign_out),
    Case("render-ca-absolute", ("render", "team.yaml"), exit=2, error=("under the spec's folder", "--ca-cert"),
         setup=with_ca("/etc/ssl/private/corp.pem", {})),
    Case("render-ca-parent", ("render", "team.yaml"), exit=2, error=("under the spec's folder",),
         setup=with_ca("../outside.crt", {})),
    Case("render-ca-private-key", ("render", "team.yaml"), exit=2, error=("private key",),
         setup=with_ca("corp.pem", {"corp.pem": KEY_SHAPED_BLOCK})),
    Case("render-ca-not-pem", ("render", "team.yaml"), exit=2, error=("not a PEM", "openssl"),
         setup=with_ca("corp.crt", {"corp.crt": "just some text\n"})),
    Case("render-ca-cert-and-key", ("render", "team.yaml"), exit=2, error=("private key",),
         setup=with_ca("both.pem", {"both.pem": HOST_CA_PEM + KEY_SHAPED_BLOCK})),
    Case("render-ca-missing", ("render", "team.yaml"), exit=2, error=("does not exist",),
         setup=with_ca("absent.crt", {})),

    # lint / targets
    Case("targets-unknown-cuda", ("targets", "team.yaml", "--json", "--bogus"), exit=2, error=("--bogus",),
         setup=with_spec()),

    # lock
    Case("lock-locks-read-only", ("lock", "team.yaml", "--locks", "ro/locks"), error=("cannot write locks", "--locks"),
         setup=with_read_only("ro")),
    Case("lock-check-not-utf8-lockfile", ("lock", "team.yaml", "--locks", "locks", "--check"),
         error=("not UTF-8", "envbuild lock"), setup=with_looking_fresh_lock(b"version: 1\nmetadata: \xff\xfe\n")),
    Case("lock-not-utf8-lockfile", ("lock", "team.yaml", "--locks", "locks"),
         error=("not UTF-8", "lock --force"), setup=with_looking_fresh_lock(b"version: 1\nmetadata: \xff\xfe\n")),
    Case("lock-alias-bomb-lockfile", ("lock", "team.yaml", "--locks", "locks", "--check"),
         error=("alias",), setup=with_looking_fresh_lock(ALIAS_BOMB.encode())),
    Case("lock-check-missing", ("lock", "team.yaml", "--locks", "locks", "--check"),
         error=("missing", "envbuild lock"), setup=with_spec()),
    Case("lock-silent-channel", ("lock", "team.yaml", "--channel", "{silent}"), error=("did not answer", "channel"),
         setup=with_silent_channel, env=(("ENVBUILD_CHANNEL_TIMEOUT", "1"),), timeout=60),
    Case("lock-closed-channel", ("lock", "team.yaml", "--channel", "{closed}"), error=("cannot reach", "channel"),
         setup=with_closed_channel),
    Case("lock-update-without-lock", ("lock", "team.yaml", "--update", "numpy", "--channel", "{world_channel}"),
         error=("--update", "envbuild lock"), setup=with_spec(extra="conda: [numpy]\n"), needs="world"),
    Case("lock-solver-not-found", ("lock", "team.yaml", "--solver", "no-such-solver", "--channel", "{world_channel}"),
         error=("no-such-solver", "not found"), setup=with_spec(), needs="world"),
    Case("lock-bad-platform", ("lock", "team.yaml", "--platform", "amiga-68k"), exit=2, error=("amiga-68k",),
         setup=with_spec()),
    Case("lock-jobs-zero", ("lock", "team.yaml", "--jobs", "0"), exit=2, error=("--jobs",), setup=with_spec()),
    Case("lock-unsatisfiable-first", ("lock", "team.yaml", "--channel", "{world_channel}"),
         error=("no candidates", "package-that-does-not-exist", "check the package"),
         setup=with_spec(extra="conda: [package-that-does-not-exist]\n"), needs="world"),
    Case("lock-into-full-disk", ("lock", "team.yaml", "--channel", "{world_channel}", "--locks", "full/locks"),
         error=("no space",), setup=with_full("full"), needs="world"),

    # image
    Case("image-no-target", ("image", "team.yaml"), exit=2, error=("--cuda",), setup=with_spec()),
    Case("image-ca-cert-not-pem", ("image", "team.yaml", "--cuda", "cpu", "--ca-cert", "corp.crt"), exit=2,
         error=("not a PEM",), setup=with_file("corp.crt", "hello\n", also_spec=True)),
    Case("image-ca-cert-private-key", ("image", "team.yaml", "--cuda", "cpu", "--ca-cert", "key.pem"), exit=2,
         error=("private key",), setup=with_file("key.pem", KEY_SHAPED_BLOCK, also_spec=True)),
    Case("image-ca-cert-empty", ("image", "team.yaml", "--cuda", "cpu", "--ca-cert", "empty.crt"), exit=2,
         error=("not a PEM",), setup=with_file("empty.crt", "", also_spec=True)),
    Case("image-bad-build-arg", ("image", "team.yaml", "--cuda", "cpu", "--build-arg", "novalue"), exit=2,
         error=("KEY=VALUE",), setup=with_spec()),
    Case("image-frozen-missing-lock", ("image", "team.yaml", "--cuda", "cpu", "--frozen", "--locks", "locks"),
         error=("missing", "envbuild lock"), setup=with_spec()),
    Case("image-bad-network", ("image", "team.yaml", "--cuda", "cpu", "--network", "moon"), exit=2,
         error=("--network",), setup=with_spec()),
    Case("image-no-engine", ("image", "team.yaml", "--cuda", "cpu", "--frozen", "--locks", "locks",
                             "--channel", "{world_channel}"),
         error=("no Docker engine", "start"), setup=with_world_lock(), needs="world",
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("image-missing-base", ("image", "team.yaml", "--cuda", "cpu", "--frozen", "--locks", "locks",
                                "--channel", "{world_channel}", "--builder-image", "local/not-here:1",
                                "--network", "host"),
         error=("local/not-here:1", "not on this engine", "--builder-image"),
         setup=with_world_lock(), needs="docker", timeout=300),
    Case("image-installer-404", ("image", "team.yaml", "--cuda", "cpu", "--frozen", "--locks", "locks",
                                 "--channel", "{world_channel}", "--network", "host"),
         error=("gone-0.0-0.conda", "relock"), setup=with_world_lock_missing_file, needs="docker", timeout=600),

    # smoke
    Case("smoke-no-image", ("smoke",), exit=2, error=("IMAGE", "--local")),
    Case("smoke-gpus-zero", ("smoke", "some-image", "--gpus", "0"), exit=2, error=("--gpus 0", "CPU-only")),
    Case("smoke-gpus-negative", ("smoke", "some-image", "--gpus", "-1"), exit=2, error=("--gpus",)),
    Case("smoke-gpus-huge", ("smoke", "some-image", "--gpus", "100000"), exit=2, error=("1 to",)),
    Case("smoke-gpus-word", ("smoke", "some-image", "--gpus", "lots"), exit=2, error=("use all",)),
    Case("smoke-gpus-auto-zero", ("smoke", "some-image", "--gpus", "auto:0"), exit=2, error=("--gpus auto:0",)),
    Case("smoke-require-gpus-without-gpus", ("smoke", "some-image", "--require-gpus", "1"), exit=2,
         error=("--require-gpus 1", "--gpus all")),
    Case("smoke-require-more-than-asked", ("smoke", "some-image", "--require-gpus", "2", "--gpus", "1"), exit=2,
         error=("at least 2",)),
    Case("smoke-bad-shm", ("smoke", "some-image", "--shm-size", "lots"), exit=2, error=("--shm-size",)),
    Case("smoke-bad-ulimit", ("smoke", "some-image", "--ulimit", "nofile=many"), exit=2, error=("--ulimit",)),
    Case("smoke-no-engine", ("smoke", "some-image"), error=("no Docker engine", "start"),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("smoke-image-absent", ("smoke", "envbuild-faults-absent:never"), error=("no image", "envbuild image"),
         needs="docker"),
    Case("smoke-junit-full-disk", ("smoke", "--local", "--only", "env.torch_version", "--junit", "full/report.xml"),
         error=("JUnit", "results above"), stdout=("env.torch_version",), setup=with_full("full"), timeout=120),
    Case("smoke-junit-read-only", ("smoke", "--local", "--only", "env.torch_version", "--junit", "ro/report.xml"),
         error=("JUnit", "writable"), stdout=("env.torch_version",), setup=with_read_only("ro", spec_too=False),
         timeout=120),
    Case("smoke-local-unknown-check", ("smoke", "--local", "--only", "no.such_check"), error=("no.such_check",),
         timeout=120),

    # images
    Case("images-no-engine", ("images", "team.yaml"), error=("no Docker engine",), setup=with_spec(),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),

    # doctor: facts, not failures: it must still report, without a traceback or an Error line
    Case("doctor-nvidia-smi-not-utf8", ("doctor",), exit=0, error=None, stdout=("host",),
         setup=with_nvidia_smi("printf 'Driver Version: 5\\377\\376 CUDA Version: 12.\\377\\n'\n"),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("doctor-nvidia-smi-hangs", ("doctor",), exit=0, error=None, stdout=("host",),
         setup=with_nvidia_smi("sleep 300 &\nsleep 300\n"),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"), ("ENVBUILD_NVIDIA_SMI_TIMEOUT", "1")), timeout=60),
    Case("doctor-nvidia-smi-fails", ("doctor",), exit=0, error=None, stdout=("host",),
         setup=with_nvidia_smi("echo 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n"),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),

    # init
    Case("init-out-exists", ("init", "--out", "team.yaml"), exit=2, error=("exists", "--force"), setup=with_spec()),
    Case("init-out-read-only", ("init", "--out", "ro/team.yaml"), error=("ro/team.yaml",),
         setup=with_read_only("ro", spec_too=False)),
    Case("init-from-missing", ("init", "--from", "absent.yml"), exit=2, error=("does not exist",)),

    # ci
    Case("ci-out-exists", ("ci", "github", "team.yaml", "--out", "pipeline.yml"), exit=2, error=("exists", "--force"),
         setup=with_existing("pipeline.yml")),
    Case("ci-out-read-only", ("ci", "gitlab", "team.yaml", "--out", "ro/.gitlab-ci.yml"), error=("ro/.gitlab-ci.yml",),
         setup=with_read_only("ro")),
    Case("ci-bad-provider", ("ci", "jenkins", "team.yaml"), exit=2, error=("jenkins",), setup=with_spec()),
    Case("ci-require-gpus-zero", ("ci", "github", "team.yaml", "--require-gpus", "0"), exit=2,
         error=("--require-gpus",), setup=with_spec()),

    # matrix
    Case("matrix-gpus-zero", ("matrix", "team.yaml", "--gpus", "0"), exit=2, error=("--gpus 0",), setup=with_spec()),
    Case("matrix-require-gpus-without-gpus", ("matrix", "team.yaml", "--require-gpus", "1"), exit=2,
         error=("--gpus all",), setup=with_spec()),
    Case("matrix-frozen-missing-lock", ("matrix", "team.yaml", "--frozen", "--locks", "locks"),
         error=("missing", "envbuild lock"), setup=with_spec(),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),

    # onboard
    Case("onboard-prefix-is-a-file", ("onboard", "team.yaml", "--prefix", "env-here", "--cuda", "cpu"),
         exit=2, error=("env-here", "is a file"), setup=with_prefix_file),
    Case("onboard-installer-missing", ("onboard", "team.yaml", "--installer", "no-such-installer", "--cuda", "cpu"),
         exit=2, error=("no-such-installer",), setup=with_spec()),
    Case("onboard-image-with-prefix", ("onboard", "team.yaml", "--image", "--prefix", "env"), exit=2,
         error=("--prefix",), setup=with_spec()),
    Case("onboard-frozen-missing-lock", ("onboard", "team.yaml", "--frozen", "--locks", "locks", "--cuda", "cpu",
                                         "--prefix", "env"),
         error=("missing", "envbuild lock"), setup=with_spec()),
    Case("onboard-prefix-read-only", ("onboard", "team.yaml", "--prefix", "ro/env", "--cuda", "cpu", "--locks", "locks"),
         error=("ro/env", "--prefix"), setup=with_read_only("ro")),
]


# --- the second catalogue: faults tried by someone other than the code's authors ---------------------
# Nodes that are not files (devices, FIFOs, sockets, link loops) given where envbuild reads or writes,
# standard streams that are full or closed, inputs that outside tools parse, settings with junk in them.

def with_node(kind: str, name: str, *args: str, spec_too: bool = True):
    """A private device node, FIFO, socket or link in the case folder (and the usual spec)."""
    def setup(ws: Workspace) -> None:
        if spec_too:
            ws.spec()
        {"device": ws.device, "fifo": ws.fifo, "socket": ws.unix_socket, "link": ws.link}[kind](name, *args)
    return setup


def with_nodes(*nodes: tuple[str, ...], spec_too: bool = True):
    def setup(ws: Workspace) -> None:
        if spec_too:
            ws.spec()
        for kind, name, *args in nodes:
            with_node(kind, name, *args, spec_too=False)(ws)
    return setup


def with_zero_device(ws: Workspace) -> None:
    ws.device("zero", 1, 5)  # what /dev/zero is: reads never end


def with_cuda_spec(ws: Workspace) -> None:
    ws.spec(targets="[{cuda: '12.9'}]")


DUPLICATE_KEY = "name: team\npython: '3.11'\ntorch: '2.13.0'\npython: '3.12'\ntargets: [{cuda: cpu}]\n"
NOT_REGULAR = ("not a regular file",)
CASES += [
    # writes: a device, FIFO or socket (or a link to one) is never replaced, --force or not
    Case("doctor-save-device", ("doctor", "--save", "full"), exit=2, error=("full", "character device", *NOT_REGULAR),
         setup=with_node("device", "full", spec_too=False), env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("doctor-save-link-to-device", ("doctor", "--save", "host.json"), exit=2, error=("character device",),
         setup=with_nodes(("device", "full"), ("link", "host.json", "full"), spec_too=False),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("doctor-save-socket", ("doctor", "--save", "sock"), exit=2, error=("socket",),
         setup=with_node("socket", "sock", spec_too=False), env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("init-out-device-force", ("init", "--out", "full", "--force"), exit=2, error=("character device",),
         setup=with_node("device", "full", spec_too=False)),
    Case("init-out-fifo", ("init", "--out", "pipe"), exit=2, error=("FIFO",), setup=with_node("fifo", "pipe", spec_too=False),
         timeout=30),
    Case("init-out-link-loop", ("init", "--out", "loop.yaml"), exit=2, error=("symbolic link loop",),
         setup=with_node("link", "loop.yaml", "loop.yaml", spec_too=False)),
    Case("ci-out-device-force", ("ci", "github", "team.yaml", "--out", "full", "--force"), exit=2,
         error=("character device",), setup=with_node("device", "full")),
    Case("ci-out-fifo-force", ("ci", "gitlab", "team.yaml", "--out", "pipe", "--force"), exit=2, error=("FIFO",),
         setup=with_node("fifo", "pipe"), timeout=30),
    Case("smoke-junit-fifo", ("smoke", "--local", "--only", "env.torch_version", "--junit", "pipe"), exit=2,
         error=("FIFO",), setup=with_node("fifo", "pipe", spec_too=False), timeout=30),
    Case("matrix-junit-device", ("matrix", "team.yaml", "--junit", "full"), exit=2, error=("character device",),
         setup=with_node("device", "full")),

    # standard output that cannot take the output: exit 1 and one line, never a silent exit 0
    Case("targets-json-into-full-device", ("targets", "team.yaml", "--json"), exit=1,
         error=("standard output", "no space left"), setup=with_node("device", "full"), stdout_to="full"),
    Case("summary-json-into-full-device", ("summary", "report.json", "--json"), exit=1,
         error=("standard output", "no space left"), setup=with_nodes(("device", "full"), spec_too=False),
         stdout_to="full"),
    Case("targets-stdout-closed", ("targets", "team.yaml"), exit=1, error=("standard output is closed",),
         setup=with_spec(), stdout_to="closed"),
    Case("lint-stdout-closed", ("lint", "team.yaml"), exit=1, error=("standard output is closed",),
         setup=with_spec(), stdout_to="closed"),
    Case("explain-json-stdout-closed", ("explain", "log.txt", "--no-host", "--json"), exit=1,
         error=("standard output is closed",), setup=with_file("log.txt", "RuntimeError: CUDA out of memory.\n"),
         stdout_to="closed"),

    # reads: only a regular file (or - for stdin), never more than a cap, never a hang
    Case("spec-fifo-targets", ("targets", "team.yaml"), exit=2, error=("FIFO", "regular file"),
         setup=with_node("fifo", "team.yaml", spec_too=False), timeout=30),
    Case("spec-fifo-lint", ("lint", "team.yaml"), exit=2, error=("FIFO",),
         setup=with_node("fifo", "team.yaml", spec_too=False), timeout=30),
    Case("init-from-fifo", ("init", "--from", "environment.yml", "--out", "team.yaml"), exit=2, error=("FIFO",),
         setup=with_node("fifo", "environment.yml", spec_too=False), timeout=30),
    Case("spec-symlink-loop", ("targets", "team.yaml"), exit=2, error=("symbolic link loop",),
         setup=with_node("link", "team.yaml", "team.yaml", spec_too=False)),
    Case("spec-dangling-link", ("render", "team.yaml"), exit=2, error=("gone.yaml", "does not exist"),
         setup=with_node("link", "team.yaml", "gone.yaml", spec_too=False)),
    Case("explain-device", ("explain", "zero", "--no-host"), exit=2, error=("character device",),
         setup=with_zero_device, timeout=30),
    Case("explain-fifo", ("explain", "pipe", "--no-host"), exit=2, error=("FIFO",),
         setup=with_node("fifo", "pipe", spec_too=False), timeout=30),
    Case("explain-stdin-closed", ("explain", "-", "--no-host"), exit=2, error=("standard input is closed",),
         stdin_from="closed"),
    # explain reads a bounded head and tail of any stream and judges the bytes: zeros are no text log.
    Case("explain-stdin-endless", ("explain", "-", "--no-host"), exit=1, error=None, stdout=("not a text log",),
         setup=with_zero_device, stdin_from="zero", timeout=60),
    Case("image-ca-cert-device", ("image", "team.yaml", "--cuda", "cpu", "--ca-cert", "zero"), exit=2,
         error=("character device",), setup=lambda ws: (ws.spec(), with_zero_device(ws))),
    Case("image-ca-cert-fifo", ("image", "team.yaml", "--cuda", "cpu", "--ca-cert", "corp.crt"), exit=2,
         error=("FIFO",), setup=with_node("fifo", "corp.crt"), timeout=30),
    Case("render-ca-in-spec-fifo", ("render", "team.yaml"), exit=2, error=("corp.crt", "FIFO"),
         setup=lambda ws: (ws.fifo("corp.crt"), ws.spec(extra="ca_certificates: [corp.crt]\n")), timeout=30),
    Case("doctor-fleet-fifo", ("doctor", "team.yaml", "--fleet", "host.json"), exit=2, error=("FIFO",),
         setup=with_node("fifo", "host.json"), timeout=30),
    Case("summary-fifo", ("summary", "report.json"), exit=0, error=None, stdout=("FIFO",),
         setup=with_node("fifo", "report.json", spec_too=False), timeout=30),

    # inputs checked before any work
    Case("spec-duplicate-key", ("lock", "team.yaml"), exit=2, error=("python", "twice", "line 4"),
         setup=with_file("team.yaml", DUPLICATE_KEY)),
    Case("image-push-with-scheme", ("image", "team.yaml", "--cuda", "cpu", "--push", "http://127.0.0.1:5000/team"),
         exit=2, error=("--push", "URL", "scheme"), setup=with_spec(),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("image-push-upper-case", ("image", "team.yaml", "--cuda", "cpu", "--push", "registry.example.org/Team"),
         exit=2, error=("--push", "lower case"), setup=with_spec(),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("onboard-pull-with-scheme", ("onboard", "team.yaml", "--image", "--pull", "https://ghcr.io/team"), exit=2,
         error=("--pull", "URL"), setup=with_spec()),
    Case("ci-k8s-bad-namespace", ("ci", "k8s", "team.yaml", "--registry", "registry.example.org/team",
                                  "--namespace", "Bad_NS;x"), exit=2, error=("--namespace", "lower-case"),
         setup=with_cuda_spec),
    Case("image-revision-newline", ("image", "team.yaml", "--cuda", "cpu", "--revision", "abc\nLABEL pwned=1"),
         exit=2, error=("--revision", "control characters"), setup=with_spec(),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("image-source-tab", ("image", "team.yaml", "--cuda", "cpu", "--source", "https://git.example/x\ty"),
         exit=2, error=("--source", "control characters"), setup=with_spec(),
         env=(("DOCKER_HOST", "unix://{root}/no-engine.sock"),)),
    Case("lock-pip-index-not-a-url", ("lock", "team.yaml", "--pip-index", "not a url"), exit=2,
         error=("--pip-index", "URL"), setup=with_spec()),
    Case("lock-check-with-update", ("lock", "team.yaml", "--check", "--update", "numpy"), exit=2,
         error=("--check", "--update"), setup=with_spec()),
    Case("lock-check-with-force", ("lock", "team.yaml", "--check", "--force"), exit=2,
         error=("--check", "--force"), setup=with_spec()),
    Case("image-all-and-cuda", ("image", "team.yaml", "--all", "--cuda", "cpu"), exit=2, error=("--all", "--cuda"),
         setup=with_spec()),
    Case("env-channel-timeout-junk", ("lock", "team.yaml"), exit=2, error=("ENVBUILD_CHANNEL_TIMEOUT", "seconds"),
         setup=with_spec(), env=(("ENVBUILD_CHANNEL_TIMEOUT", "30s"),)),
    Case("env-solve-timeout-nan", ("targets", "team.yaml"), exit=2, error=("ENVBUILD_SOLVE_TIMEOUT",),
         setup=with_spec(), env=(("ENVBUILD_SOLVE_TIMEOUT", "nan"),)),
    Case("env-nvidia-smi-timeout-negative", ("doctor",), exit=2, error=("ENVBUILD_NVIDIA_SMI_TIMEOUT",),
         env=(("ENVBUILD_NVIDIA_SMI_TIMEOUT", "-1"),)),
    Case("env-envs-dir-unknown-user", ("onboard", "team.yaml", "--name", "x", "--cuda", "cpu"), exit=2,
         error=("ENVBUILD_ENVS_DIR",), setup=with_spec(), env=(("ENVBUILD_ENVS_DIR", "~no-such-user-here/envs"),)),
]


# --- the third catalogue: trust boundaries (issue 35) --------------------------------------------------
# What arrives in a pull request (a lock, a requirements file, a spec, a CI input, a report) must not
# delete or overwrite a user's files, read outside its folder, make a tampered lock act, inject lines into
# generated files or a terminal, exhaust the machine, or end in an internal error.

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
TOKEN = "s3cr3tT0KEN"
NO_ENGINE = (("DOCKER_HOST", "unix://{root}/no-engine.sock"),)
TEAM_SPEC = ("name: team\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{cuda: cpu}]\n"
             f"images: {{runtime: {{image: '{RUNTIME_BASE}'}}, builder: {{image: '{BUILDER_BASE}'}}}}\n")


def with_spec_and_link(name: str, to: str):
    """The usual spec, and `name` a symbolic link to `to` (which need not exist)."""
    def setup(ws: Workspace) -> None:
        ws.spec(file="team.yaml")
        ws.link(name, to)
    return setup


def with_tampered_lock(edit):
    """A cpu lock of the spec whose inputs are unchanged and whose sidecar sha is refreshed after `edit`
    changed its packages: only the lock's content can tell."""
    def setup(ws: Workspace) -> None:
        import builder
        from builder.formats.conda_lock import lockfile_sha256
        from builder.lock.targets import INFO_FILE, LOCK_FILE, LockInfo, lock_inputs
        from builder.specs.model import load_spec
        from builder.specs.target import resolve_targets

        target = resolve_targets(load_spec(ws.spec(file="team.yaml")))[0]
        inputs = lock_inputs(target)
        folder = ws.root / "locks" / target.key
        folder.mkdir(parents=True)
        base = "https://conda.anaconda.org/conda-forge/linux-64"
        packages = edit([{"name": "numpy", "version": "2.1.0", "manager": "conda", "platform": "linux-64",
                          "url": f"{base}/numpy-2.1.0-py311_h1_0.conda", "hash": {"sha256": "0" * 64},
                          "dependencies": {}}])
        (folder / LOCK_FILE).write_text(json.dumps({"version": 1, "metadata": {"platforms": ["linux-64"]},
                                                    "package": packages}))
        info = LockInfo(envbuild_version=builder.__version__, input_hash=inputs.input_hash, env=target.name,
                        target=target.key, torch=target.torch, cuda=None, platforms=list(target.platforms),
                        channels=list(target.channels), pip_repositories=[], virtual_packages=inputs.virtual_packages,
                        solver="envbuild-micromamba", lockfile_sha256=lockfile_sha256(folder / LOCK_FILE),
                        torch_builds={}, package_counts={}, inputs=inputs.material)
        (folder / INFO_FILE).write_text(info.model_dump_json())
    return setup


def _url(url: str):
    return lambda packages: [{**packages[0], "url": url}]


def with_report(document: object, name: str = "report.json"):
    return with_file(name, json.dumps(document))


def with_big_spec(lines: int):
    body = "conda:\n" + "".join(f"  - pkg{i:06d}>=1.0\n" for i in range(lines))
    return lambda ws: ws.write("team.yaml", TEAM_SPEC.replace("targets: [{cuda: cpu}]",
                                                              "targets: [{cuda: cpu}, {cuda: '12.9'}]") + body)


def with_stale_staging(ws: Workspace) -> None:
    """A user's own folder at --prefix, and beside it a folder named like the backup an interrupted onboard
    leaves (anyone can make one): its owner's PID no longer runs."""
    ws.spec(file="team.yaml")
    ws.write("mine/notes.txt", "a user's folder, not an env\n")
    gone = subprocess.Popen(["true"])
    gone.wait()
    ws.write(f".mine.envbuild-old-pid{gone.pid}-x1env/conda-meta/history", "")


def no_html_on_the_page(_ws: Workspace, outcome) -> list[str]:
    """The summary as GitHub renders Markdown (HTML allowed): no tag, link or image of the report's text."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(outcome.stdout)
    return [f"the page renders {tag!r}" for tag in ("<img", "<script", "<a ") if tag in html]


LOCK_CHECK = ("lock", "team.yaml", "--locks", "locks", "--check")
BAD_SUMMARIES = {
    "no-target": [{"status": "fresh", "input_hash": "x"}],
    "summary-a-string": [{"stage": "smoke", "result": "ok", "checks": [], "target": "cpu", "summary": "lots"}],
    "checks-a-string": [{"stage": "smoke", "result": "ok", "checks": "abc", "target": "cpu"}],
    "tags-a-number": [{"image_id": "x", "tags": 5, "target": "cpu"}],
    "size-a-word": [{"image_id": "x", "tags": [], "target": "cpu", "size": "big"}],
    "smoke-summary-a-list": {"report_version": 1, "summary": [1], "checks": 5},
    "report-a-list": {"schema_version": 1, "report": ["lock"]},
}
CASES += [
    # data loss: an output never goes through a link, nor over a file envbuild did not write, without --force
    Case("doctor-save-onto-the-spec", ("doctor", "--save", "team.yaml"), exit=2,
         error=("team.yaml", "did not write", "--force"), setup=with_spec(file="team.yaml"), env=NO_ENGINE,
         boundary="data-loss"),
    Case("doctor-save-through-a-link", ("doctor", "--save", "host.json", "--force"), exit=2,
         error=("symbolic link",), setup=with_spec_and_link("host.json", "team.yaml"), env=NO_ENGINE,
         boundary="data-loss"),
    Case("matrix-junit-onto-the-spec", ("matrix", "team.yaml", "--junit", "team.yaml"), exit=2,
         error=("did not write", "--force"), setup=with_spec(file="team.yaml"), env=NO_ENGINE, boundary="data-loss"),
    Case("smoke-junit-through-a-dangling-link", ("smoke", "--local", "--junit", "report.xml", "--force"), exit=2,
         error=("symbolic link",), setup=with_spec_and_link("report.xml", "planted.xml"), boundary="data-loss"),
    Case("export-force-through-a-dangling-link", ("export", "pixi", "team.yaml", "--out", "pixi.toml", "--force"),
         exit=2, error=("symbolic link",), setup=with_spec_and_link("pixi.toml", "../planted.toml"),
         boundary="data-loss"),
    Case("schema-out-onto-the-spec", ("schema", "spec", "--out", "team.yaml"), exit=2, error=("did not write",),
         setup=with_spec(file="team.yaml"), boundary="data-loss"),
    Case("onboard-stale-staging-beside-a-users-folder", ("onboard", "team.yaml", "--prefix", "mine", "--cuda", "cpu",
                                                         "--locks", "locks", "--channel", "{world_channel}"),
         error=("mine", "not an envbuild environment", "refusing"), setup=with_stale_staging, boundary="data-loss",
         needs="world", may_create=("locks",), timeout=300),

    # reading outside: a token in an index URL is not copied into the spec, its notes or the log
    Case("init-index-url-with-a-token", ("init", "--from", "requirements.txt", "--out", "team.yaml"), exit=0,
         error=None, stdout=("credentials removed",), may_create=("team.yaml", "envbuild-spec.schema.json"),
         absent=(TOKEN,),
         setup=with_file("requirements.txt", f"torch==2.13.0\n--extra-index-url https://ci:{TOKEN}@pypi.corp.example/"
                                             f"simple\n--index-url https://mirror.corp.example/simple?token={TOKEN}\n"),
         boundary="reading-outside"),

    # tampered lock: the content is checked, not only the sidecar's sha anyone can refresh
    Case("lock-check-url-outside-the-channels", LOCK_CHECK, exit=1, error=("numpy 2.1.0 on linux-64", "channels"),
         setup=with_tampered_lock(_url("https://evil.example/conda-forge/linux-64/numpy-2.1.0-py311_h1_0.conda")),
         boundary="tampered-lock"),
    Case("lock-check-encoded-slash-in-a-file-name", LOCK_CHECK, exit=1, error=("numpy", "single file name"),
         setup=with_tampered_lock(_url("https://conda.anaconda.org/conda-forge/linux-64/..%2F..%2F.bashrc")),
         boundary="tampered-lock"),
    Case("lock-check-a-second-entry", LOCK_CHECK, exit=1, error=("numpy is locked 2 times",),
         setup=with_tampered_lock(lambda packages: packages * 2), boundary="tampered-lock"),
    Case("lock-check-another-platforms-folder", LOCK_CHECK, exit=1, error=("numpy", "linux-64/ or noarch/"),
         setup=with_tampered_lock(_url("https://conda.anaconda.org/conda-forge/win-64/numpy-2.1.0-py311_h1_0.conda")),
         boundary="tampered-lock"),

    # injection: line breaks and escapes never reach a generated file, a page or a terminal
    Case("render-channel-with-a-line-separator", ("render", "team.yaml", "--channel", "https://m.example/c\u2028x: 1"),
         exit=2, error=("--channel", "line-break"), setup=with_spec(file="team.yaml"), boundary="injection"),
    Case("lock-mirror-with-whitespace", ("lock", "team.yaml", "--mirror", "conda-forge=https://m.example/a b"),
         exit=2, error=("--mirror", "whitespace"), setup=with_spec(file="team.yaml"), boundary="injection"),
    Case("ci-install-from-with-a-line-separator", ("ci", "gitlab", "team.yaml", "--install-from",
                                                   "envbuild==1\u2028evil:\u2028  script: [x]"),
         exit=2, error=("--install-from",), setup=with_spec(file="team.yaml"), boundary="injection"),
    Case("summary-html-in-a-report", ("summary", "report.json"), exit=0, error=None, stdout=("lock check",),
         after=no_html_on_the_page, boundary="injection",
         setup=with_report([{"target": "<img src=https://evil.example/x.png>", "status": "stale", "input_hash": "h",
                             "message": "<script>alert(1)</script> [x](https://evil.example)"}])),
    Case("explain-osc52-in-a-log", ("explain", "train.log", "--no-host"), exit=0, error=None, absent=("\x1b", "\x07"),
         setup=with_file("train.log", f"step 1\n{OSC52}RuntimeError: CUDA error: no kernel image is available for "
                                      "execution on the device\n"), stdout=("no kernel image",), boundary="injection"),
    Case("lint-osc52-in-a-requirements-file", ("lint", "requirements.txt"), exit=1, error=None, absent=("\x1b",),
         setup=with_file("requirements.txt", f"torch==2.13.0\nnumpy{OSC52}\n"), boundary="injection"),

    # resource exhaustion
    Case("export-pixi-of-a-20000-line-spec", ("export", "pixi", "team.yaml", "--out", "pixi.toml"), exit=0,
         error=None, may_create=("pixi.toml",), setup=with_big_spec(20_000), timeout=60,
         boundary="resource-exhaustion"),

    # internal errors: every malformed report, manifest or number is one line
    *(Case(f"summary-malformed-{name}", ("summary", "report.json"), exit=0, error=None, stdout=("report.json",),
           setup=with_report(document), boundary="internal-error") for name, document in BAD_SUMMARIES.items()),
    Case("init-pixi-an-int-where-a-table-is", ("init", "--from", "pixi.toml", "--out", "team.yaml"), exit=2,
         error=("feature.cuda.dependencies is a number", "table"), boundary="internal-error",
         setup=with_file("pixi.toml", '[workspace]\nname = "x"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                                      '\n[feature.cuda]\ndependencies = 5\n')),
    Case("spec-a-number-of-5000-digits", ("lint", "team.yaml"), exit=2, error=("number too long",),
         setup=with_file("team.yaml", TEAM_SPEC + "user: {uid: " + "9" * 5000 + "}\n"), boundary="internal-error"),
    Case("init-line-separator-in-an-env-file", ("init", "--from", "environment.yml", "--out", "team.yaml"), exit=2,
         error=("environment.yml",), boundary="internal-error",
         setup=with_file("environment.yml", "name: x\ndependencies: [python=3.11, \"pytorch=2.7\u2028evil\"]\n")),

    # spec types: a value of the wrong type is refused, not read as another
    Case("spec-uid-true", ("targets", "team.yaml"), exit=2, error=("uid",),
         setup=with_file("team.yaml", TEAM_SPEC + "user: {name: app, uid: true}\n"), boundary="spec-types"),
    Case("spec-binary-name", ("targets", "team.yaml"), exit=2, error=("binary",),
         setup=with_file("team.yaml", TEAM_SPEC.replace("name: team", "name: !!binary dGVhbQ==")),
         boundary="spec-types"),
    Case("spec-label-over-envbuilds-own", ("targets", "team.yaml"), exit=2, error=("io.envbuild",),
         setup=with_file("team.yaml", TEAM_SPEC + "labels: {io.envbuild.lock-hash: forged}\n"), boundary="spec-types"),
]


# --- needing the engine (run by `make test`, where the offline world is up) ----------------------------

def tags_on_one_image(ws: Workspace, outcome) -> list[str]:
    """After two `image` runs of one env at once: both exit 0 and each tag of the target names one image."""
    import docker

    other = ws.values.pop("other_pid", None)
    problems = []
    if other is not None:
        process = ws.background.pop()
        _, err = process.communicate(timeout=900)
        if process.returncode != 0:
            problems.append(f"the concurrent run exited {process.returncode}: {err.decode(errors='replace')[-500:]}")
    client = docker.from_env(timeout=60)
    try:
        ids = {tag: client.api.inspect_image(tag)["Id"] for image in client.api.images()
               for tag in image.get("RepoTags") or [] if tag.startswith(ws.values["env"] + ":")}
        if len(set(ids.values())) != 1:
            problems.append(f"the env's tags name {len(set(ids.values()))} images: {ids}")
        for image_id in set(ids.values()):  # the case's own tags: judged as nothing left behind
            client.api.remove_image(image_id, force=True)
    finally:
        client.close()
    return problems


def with_concurrent_image(ws: Workspace) -> None:
    """A locked spec, and a second `envbuild image` of the same env started a moment before the case's."""
    with_world_lock()(ws)
    args = [arg.format(**ws.values) for arg in IMAGE_ARGS]
    process = subprocess.Popen([sys.executable, "-m", "builder", *args], cwd=ws.root, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env={**os.environ, "CI": "true", "TMPDIR": str(ws.tmp),
                                                            "HOME": str(ws.home)})
    ws.background.append(process)
    ws.values["other_pid"] = str(process.pid)


IMAGE_ARGS = ("image", "team.yaml", "--cuda", "cpu", "--frozen", "--locks", "locks", "--channel", "{world_channel}",
              "--network", "host")
CASES += [
    Case("image-two-runs-of-one-env", IMAGE_ARGS, exit=0, error=None, setup=with_concurrent_image,
         after=tags_on_one_image, needs="docker", timeout=900),
    Case("image-no-cache-interrupted", (*IMAGE_ARGS, "--no-cache"), exit=130, error=("interrupted", "Ctrl-C"),
         setup=with_world_lock(), interrupt=(signal.SIGINT, "builder.lock.install"), needs="docker",
         timeout=600),
    Case("image-no-cache-terminated", (*IMAGE_ARGS, "--no-cache"), exit=143, error=("interrupted", "SIGTERM"),
         setup=with_world_lock(), interrupt=(signal.SIGTERM, "builder.lock.install"), needs="docker",
         timeout=600),
]


# The boundary of the cases written before the classes, by what their id says they try.
EARLIER_BOUNDARIES = (
    ("surroundings", ("read-only", "full", "no-engine", "stdout-closed", "stdin-closed", "silent-channel",
                      "closed-channel", "env-", "interrupted", "terminated", "two-runs", "missing-base",
                      "installer-404", "nvidia-smi")),
    ("reading-outside", ("include-of", "render-ca-absolute", "render-ca-parent")),
    ("resource-exhaustion", ("alias-bomb", "nested", "huge", "arg-chain", "dev-zero", "endless")),
    ("injection", ("revision-newline", "source-tab", "with-scheme", "bad-namespace")),
    ("data-loss", ("out-exists", "save-device", "link-to-device", "out-device-force", "out-fifo", "junit-device",
                   "junit-fifo", "out-foreign-folder", "out-is-a-file", "prefix-is-a-file", "save-socket")),
    ("spec-types", ("cuda-as-float", "duplicate-key", "unknown-field")),
)


def _earlier_boundary(case: Case) -> Case:
    if case.boundary != "input":
        return case
    found = next((boundary for boundary, words in EARLIER_BOUNDARIES if any(word in case.id for word in words)), None)
    return dataclasses.replace(case, boundary=found) if found else case


CASES = [_earlier_boundary(case) for case in CASES]


def by_id() -> dict[str, Case]:
    found = {case.id: case for case in CASES}
    assert len(found) == len(CASES), "case ids must be unique"
    return found


__all__ = ["CASES", "Path", "by_id"]

"""Reading a Dockerfile for `envbuild init --from`: its base image and its pip and conda install lines.

The file is parsed by buildkit's own Dockerfile parser (the `dockerfile` package wraps
moby/buildkit's `frontend/dockerfile/parser`): instructions, continuations, flags, exec and heredoc forms.
ARG and ENV values are substituted by buildkit's rules (builder/init/dockerfile_vars.py).

`FROM pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime` names a torch and a CUDA, and any image known to bring
torch is named as its source (builder/init/base_images.py); `FROM nvidia/cuda:12.1.0-...` names only the
system CUDA (weaker evidence: a torch wheel brings its own CUDA libraries, so a `+cuXYZ` tag or a cuXYZ index
in a pip line wins). `RUN pip install ...` and `RUN conda install ... -c CHANNEL` lines are read like the lines
of a requirements.txt or an environment.yml.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from builder.init.base_images import ImageTorch, image_cuda, image_platform, image_torch
from builder.init.dockerfile_vars import BuildVariables
from builder.init.reading import Hint, Reading, read_channel_list, read_conda_text, read_pip_text, read_text_file

PIP_INSTALL = re.compile(r"^(?:\S*python[0-9.]*\s+-m\s+)?(?:uv\s+)?(?:\S*/)?pip[0-9.]*\s+install\b")
CONDA_INSTALL = re.compile(r"^(?:\S*/)?(conda|mamba|micromamba)\s+(install|create)\b")
# pip flags that take a value, and the ones of them envbuild reads
PIP_VALUE_FLAGS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-r", "--requirement",
                   "-c", "--constraint", "-e", "--editable", "-t", "--target", "--prefix", "--root",
                   "--python", "--cache-dir", "--progress-bar", "--platform", "--python-version", "--only-binary",
                   "--no-binary", "--trusted-host"}
CONDA_VALUE_FLAGS = {"-n", "--name", "-p", "--prefix", "--solver", "--file"}


def _buildkit_parser(reading: Reading) -> Any:
    # Imported here: the package is a Go extension whose wheels this project has seen only for Linux x86-64
    # and Windows (pyproject installs it there); elsewhere it builds from source with Go, or is missing.
    try:
        import dockerfile
    except ImportError:
        raise reading.fail("reading a Dockerfile needs the `dockerfile` package (buildkit's parser): "
                           "`pip install dockerfile` (it builds with Go where it has no wheel)") from None
    return dockerfile


def read_dockerfile(path: Path) -> Reading:
    return read_dockerfile_text(read_text_file(path, "Dockerfile"), str(path))


def read_dockerfile_text(text: str, source: str) -> Reading:
    reading = Reading(source, kind="Dockerfile")
    buildkit = _buildkit_parser(reading)
    try:
        commands = buildkit.parse_string(text)
    except buildkit.GoParseError as error:
        raise reading.fail(f"buildkit's parser refuses it ({str(error).splitlines()[0][:160]}); fix it until "
                           "`docker build` reads it") from None
    variables = BuildVariables(source=source)
    base: ImageTorch | None = None
    stages: set[str] = set()
    for command in commands:
        keyword = command.cmd.upper()
        if keyword == "ARG":
            variables.declare_args(command.value)
        elif keyword == "ENV":
            variables.set_env(command.value)
        elif keyword == "FROM":
            base = _read_from(reading, command, variables, stages)
        elif keyword == "RUN":
            for line in _shell_lines(command):
                for part in re.split(r"&&|\|\||;", variables.expand(line)):
                    _read_command(reading, part.strip())
    if reading.pip_torch is None and reading.conda_torch is None and base is not None:
        _read_base_image_torch(reading, base)
    return reading


def _shell_lines(command: Any) -> list[str]:
    """The shell text a RUN runs: its shell form, its exec form joined, or its heredocs' lines."""
    if command.heredocs:
        return [line for heredoc in command.heredocs for line in heredoc.content.splitlines()]
    if command.json:
        return [shlex.join(command.value)]
    return list(command.value)


def _read_from(reading: Reading, command: Any, variables: BuildVariables, stages: set[str]) -> ImageTorch | None:
    """A FROM line starts a stage afresh (the last stage's base is the image that runs): its base image,
    its platform flag, and the torch the image brings; an nvidia/cuda image is a weak hint."""
    words = [variables.expand(word) for word in command.value]
    variables.start_stage()
    reading.weak_hints.clear()
    image = words[0] if words else ""
    if len(words) >= 3 and words[1].lower() == "as":
        stages.add(words[2])
    for flag in command.flags:
        platform = image_platform(variables.expand(flag)) if flag.startswith("--platform") else None
        if platform:
            reading.platforms = [platform]
    if not image or image in stages:  # `FROM build` names an earlier stage, not an image
        return None
    reading.base_images.append(image)
    cuda = image_cuda(image)
    if cuda:
        reading.weak_hints.append(Hint(f"FROM {image}", cuda))
    return image_torch(image)


def _read_base_image_torch(reading: Reading, base: ImageTorch) -> None:
    """A file whose lines install no torch runs its base image's."""
    entry = f"FROM {base.image}"
    if base.torch is None:
        reading.torch_image = base
        if base.cuda:
            reading.hints.append(Hint(entry, base.cuda))
        return
    public = re.fullmatch(r"\d+\.\d+(\.\d+)?", base.torch)
    read_pip_text(reading, f"torch=={base.torch}" if public else f"torch=={_release_line(base.torch)}.*",
                  entry=entry)
    if base.cuda:
        reading.hints.append(Hint(entry, base.cuda))
    reading.note(entry, "assumed", f"the base image brings torch {base.torch} ({base.why}); route pip: envbuild "
                                   "builds its own environment with the PyTorch index's wheel for the same CUDA")


def _release_line(version: str) -> str:
    """`2.10.0a0+b4e4ee81d3` (an NGC build) -> `2.10`: the public release line it leads to."""
    return ".".join(version.split(".")[:2])


def _read_command(reading: Reading, command: str) -> None:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return  # an unbalanced quote in a shell line that installs nothing envbuild reads
    joined = " ".join(words)
    if PIP_INSTALL.match(joined):
        _read_pip_install(reading, words[[w.endswith("install") for w in words].index(True) + 1:])
    elif CONDA_INSTALL.match(joined):
        _read_conda_install(reading, words[2:])


def _read_pip_install(reading: Reading, words: list[str]) -> None:
    packages: list[str] = []
    options: list[str] = []
    position = 0
    while position < len(words):
        word = words[position]
        flag, sep, value = word.partition("=")
        if word.startswith("-") and flag in PIP_VALUE_FLAGS:
            if not sep:
                position += 1
                value = words[position] if position < len(words) else ""
            options.append(f"{flag} {value}")
        elif not word.startswith("-"):
            packages.append(word)
        position += 1
    # the command's options apply to all of its packages, wherever they stand on the line
    for option in options:
        read_pip_text(reading, option)
    for package in packages:
        read_pip_text(reading, package)
    reading.foreign_pip_index = None


def _read_conda_install(reading: Reading, words: list[str]) -> None:
    channels: list[str] = []
    packages: list[str] = []
    position = 0
    while position < len(words):
        word = words[position]
        if word in ("-c", "--channel"):
            position += 1
            if position < len(words):
                channels.append(words[position])
        elif word.startswith("--channel="):
            channels.append(word.split("=", 1)[1])
        elif word in CONDA_VALUE_FLAGS:
            position += 1
        elif not word.startswith("-"):
            packages.append(word)
        position += 1
    read_channel_list(reading, channels)
    for package in packages:
        read_conda_text(reading, package)

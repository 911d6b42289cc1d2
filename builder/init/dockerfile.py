"""Reading a Dockerfile for `envbuild init --from`: its base image and its pip and conda install lines.

`FROM pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime` names a torch and a CUDA; `FROM nvidia/cuda:12.1.0-...`
names only the system CUDA (weaker evidence: a torch wheel brings its own CUDA libraries, so a `+cuXYZ`
tag or a cuXYZ index in a pip line wins). `RUN pip install ...` and `RUN conda install ... -c CHANNEL` lines
are read like the lines of a requirements.txt or an environment.yml. `ARG` defaults are substituted.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from builder.init.reading import Hint, Reading, read_channel_list, read_conda_text, read_pip_text, read_text_file

PYTORCH_IMAGE = re.compile(
    r"(?:docker\.io/)?pytorch/pytorch:(\d+\.\d+(?:\.\d+)?)-cuda(\d+\.\d+)-cudnn\d+-(?:runtime|devel)"
)
CUDA_IMAGE = re.compile(r"(?:docker\.io/|nvcr\.io/)?nvidia/cuda:(\d+)\.(\d+)(?:\.\d+)?[-\w.]*")
NGC_PYTORCH_IMAGE = re.compile(r"nvcr\.io/nvidia/pytorch:\S+")
PIP_INSTALL = re.compile(r"^(?:\S*python[0-9.]*\s+-m\s+)?(?:uv\s+)?(?:\S*/)?pip[0-9.]*\s+install\b")
CONDA_INSTALL = re.compile(r"^(?:\S*/)?(conda|mamba|micromamba)\s+(install|create)\b")
# pip flags that take a value, and the ones of them envbuild reads
PIP_VALUE_FLAGS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-r", "--requirement",
                   "-c", "--constraint", "-e", "--editable", "-t", "--target", "--prefix", "--root",
                   "--python", "--cache-dir", "--progress-bar", "--platform", "--python-version", "--only-binary",
                   "--no-binary", "--trusted-host"}
CONDA_VALUE_FLAGS = {"-n", "--name", "-p", "--prefix", "--solver", "--file"}
# What a `FROM pytorch/pytorch:...` line says: the line, its torch and its CUDA.
ImageTorch = tuple[str, str, str]


def read_dockerfile(path: Path) -> Reading:
    return read_dockerfile_text(read_text_file(path, "Dockerfile"), str(path))


def read_dockerfile_text(text: str, source: str) -> Reading:
    reading = Reading(source, kind="Dockerfile")
    args: dict[str, str] = {}
    image_torch: ImageTorch | None = None
    ngc: str | None = None
    stages: set[str] = set()
    for instruction in _instructions(text):
        keyword, _, rest = instruction.partition(" ")
        keyword = keyword.upper()
        rest = _substitute(rest.strip(), args)
        if keyword == "ARG":
            name, sep, default = rest.partition("=")
            if sep:
                args[name.strip()] = default.strip().strip("\"'")
        elif keyword == "FROM":
            image_torch, ngc = _read_from(reading, rest, stages)
        elif keyword == "RUN":
            for command in re.split(r"&&|\|\||;", rest):
                _read_command(reading, command.strip())
    if reading.pip_torch is None and reading.conda_torch is None:
        _read_base_image_torch(reading, image_torch, ngc)
    return reading


def _read_from(reading: Reading, rest: str, stages: set[str]) -> tuple[ImageTorch | None, str | None]:
    """A FROM line starts a stage afresh (the last stage's base is the image that runs): its base image,
    and the torch it says (a pytorch/pytorch image, or an NGC one); an nvidia/cuda image is a weak hint."""
    reading.weak_hints.clear()
    words = rest.split()
    image = words[0] if words else ""
    if image and image not in stages:  # `FROM build` names an earlier stage, not an image
        reading.base_images.append(image)
    if len(words) >= 3 and words[1].lower() == "as":
        stages.add(words[2])
    torch_image = PYTORCH_IMAGE.fullmatch(image)
    cuda_image = CUDA_IMAGE.fullmatch(image)
    if torch_image:
        return (f"FROM {image}", torch_image[1], torch_image[2]), None
    if cuda_image:
        reading.weak_hints.append(Hint(f"FROM {image}", f"{int(cuda_image[1])}.{cuda_image[2]}"))
        return None, None
    return None, image if NGC_PYTORCH_IMAGE.fullmatch(image) else None


def _read_base_image_torch(reading: Reading, image_torch: ImageTorch | None, ngc: str | None) -> None:
    """A file whose lines install no torch runs its base image's."""
    if image_torch:
        entry, torch, cuda = image_torch
        read_pip_text(reading, f"torch=={torch}", entry=entry)
        reading.hints.append(Hint(entry, cuda))
        reading.note(entry, "assumed", "route pip: the image's torch becomes the PyTorch index's wheel for "
                                       "the same CUDA (envbuild builds its own environment)")
    elif ngc:
        reading.ngc_image = ngc  # refused when the spec is decided, read as it is by lint


def _instructions(text: str) -> list[str]:
    """Dockerfile instructions with `\\` continuations joined and comment lines dropped."""
    instructions: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined = (pending + line).strip()
        pending = ""
        if joined:
            instructions.append(joined)
    if pending.strip():
        instructions.append(pending.strip())
    return instructions


def _substitute(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], m[0]), text)


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

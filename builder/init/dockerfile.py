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

import fnmatch
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from builder.errors import UsageError
from builder.formats.conda_matchspec import CondaLine
from builder.init.base_images import ImageTorch, image_cuda, image_platform, image_python, image_torch
from builder.init.dockerfile_projects import folder_and_extras, read_project_folder, read_uv_sync
from builder.init.dockerfile_shell import Install, find_install, pip_arguments, shell_commands, stated_python
from builder.init.dockerfile_vars import BuildVariables
from builder.init.read_requirements import include_requirements, read_included_requirements
from builder.init.reading import (
    Hint,
    Reading,
    read_channel_list,
    read_conda_text,
    read_environment_dependency,
    read_pip_text,
    read_text_file,
)
from builder.specs.model import read_yaml_file

UNSET_VARIABLE = re.compile(r"\$\{?\w+\}?")  # what BuildVariables leaves of a variable it has no value for
# what may stand before such a variable in a pip target: a name (its version the variable), or a pin (its local tag)
UNSET_HEAD = re.compile(r"[A-Za-z0-9][\w.\-]*(\[[^\]]*\])?((==|>=|<=|~=|!=|<|>)[\w.]+\+)?")
CONDA_VALUE_FLAGS = {"-n", "--name", "-p", "--prefix", "--solver", "--file", "-f"}


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
    return read_dockerfile_text(read_text_file(path, "Dockerfile"), str(path), context=path.parent)


@dataclass
class _Stage:
    """What the instructions so far set up: build variables, stage names, and in the stage that runs now the
    files COPY brought from the build context, the working directory and the Python it installs."""

    context: Path | None  # the build context: the Dockerfile's folder when read from a file
    variables: BuildVariables = field(default_factory=BuildVariables)
    names: dict[str, str | None] = field(default_factory=dict)  # a stage's name -> the image it starts from
    image: str | None = None
    copies: list[tuple[str, str]] = field(default_factory=list)  # (context path, container path)
    workdir: str = "/"
    python: tuple[str, str] | None = None  # (the command, X.Y)
    cwd: str = "/"  # where the RUN line's shell stands now (`cd` moves it)
    clones: dict[str, str] = field(default_factory=dict)  # a folder `git clone` made -> its repository
    projects_read: set[Path] = field(default_factory=set)  # the uv.lock / pyproject.toml files read in place
    current: str | None = None  # the name (`AS name`) of the stage that runs now
    pythons: dict[str, tuple[str, str] | None] = field(default_factory=dict)  # a named stage's Python
    torch_upgraded: bool = False  # the pip command that named torch resolves it again (`-U`, `--force-reinstall`)

    def start(self, image: str | None) -> None:
        self.variables.start_stage()
        self.image, self.copies, self.workdir, self.python, self.clones = image, [], "/", None, {}

    def enter(self, named: str, alias: str | None) -> str | None:
        """A FROM line: the image the new stage runs on. `FROM build` names an earlier stage: it runs on
        that stage's image, with the Python that stage installed."""
        if self.current is not None:
            self.pythons[self.current] = self.python
        earlier = named in self.names
        image = self.names[named] if earlier else named or None
        self.start(image)
        if earlier:
            self.python = self.pythons.get(named)
        self.current = alias
        if alias:
            self.names[alias] = image
        return image

    def clone_of(self, target: str) -> str | None:
        """The repository a pip target's folder was cloned from, when it lies in a `git clone` folder."""
        if "://" in target or not target.startswith((".", "/")) and "/" not in target:
            return None
        where = posixpath.normpath(posixpath.join(self.cwd, target))
        return next((url for folder, url in self.clones.items()
                     if where == folder or where.startswith(folder + "/")), None)

    def read_shell_move(self, words: list[str]) -> bool:
        """`cd DIR` and `git clone URL [DIR]`: where the shell stands and what it cloned; False for others."""
        if words[:1] == ["cd"] and len(words) > 1:
            self.cwd = posixpath.normpath(posixpath.join(self.cwd, words[1]))
            return True
        if words[:2] != ["git", "clone"]:
            return False
        positional = [w for i, w in enumerate(words[2:], 2)
                      if not w.startswith("-") and words[i - 1] not in ("-b", "--branch", "--depth", "-o")]
        if positional:
            url = positional[0]
            folder = positional[1] if len(positional) > 1 else url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
            self.clones[posixpath.normpath(posixpath.join(self.cwd, folder))] = url
        return True

    def context_file(self, target: str, folder: bool = False) -> Path | None:
        """The build-context file (or with `folder`, the folder) a container path names (through the stage's
        COPY lines), when it lies inside the context; else None."""
        if self.context is None or "://" in target:
            return None
        wanted = posixpath.normpath(posixpath.join(self.cwd, target))  # the RUN shell's folder (WORKDIR, `cd`)
        candidates = [_copied_from(source, dest, wanted) for source, dest in reversed(self.copies)]
        candidates.append(target if not target.startswith("/") else None)  # a file beside the Dockerfile
        root = self.context.resolve()
        for candidate in filter(None, candidates):
            path = (self.context / candidate).resolve()
            if path.is_relative_to(root) and (path.is_dir() if folder else path.is_file()):
                return path
        return None


_GLOB = re.compile(r"[*?\[]")


def _copied_from(source: str, dest: str, wanted: str) -> str | None:
    """The context path COPY `source` `dest` put at `wanted`, or None."""
    source = source.rstrip("/") or "."
    if wanted == dest and source != "." and not _GLOB.search(source):  # COPY requirements.txt /tmp/reqs.txt
        return source
    inside = wanted.startswith(dest.rstrip("/") + "/")
    rest = wanted[len(dest.rstrip("/")) + 1:] if inside else ""
    if not inside:
        return None
    if source == ".":
        return rest
    if _GLOB.search(source):  # COPY requirements*.txt /app/: the file, when its name fits the pattern
        folder, pattern = posixpath.split(source)
        fits = "/" not in rest and fnmatch.fnmatchcase(rest, pattern) and not _GLOB.search(folder)
        return posixpath.join(folder, rest) if fits else None
    if rest == posixpath.basename(source):  # COPY requirements.txt /tmp/ (or /workspace, a folder there)
        return source
    return posixpath.join(source, rest)  # COPY requirements/ /app/requirements/


def read_dockerfile_text(text: str, source: str, context: Path | None = None) -> Reading:
    reading = Reading(source, kind="Dockerfile")
    buildkit = _buildkit_parser(reading)
    try:
        commands = buildkit.parse_string(text)
    except buildkit.GoParseError as error:
        raise reading.fail(f"buildkit's parser refuses it ({str(error).splitlines()[0][:160]}); fix it until "
                           "`docker build` reads it") from None
    stage = _Stage(context, BuildVariables(source=source))
    base: ImageTorch | None = None
    for command in commands:
        if command.cmd is None:  # a lone `\` line: buildkit's parser yields an instruction with no keyword
            continue
        keyword = command.cmd.upper()
        if keyword == "FROM":
            base = _read_from(reading, command, stage)
        else:
            _read_instruction(reading, keyword, command, stage)
    if base is not None and not stage.torch_upgraded:
        _keep_base_torch_that_meets(reading, base)
    if reading.pip_torch is None and reading.conda_torch is None and base is not None:
        _read_base_image_torch(reading, base)
    _read_stage_python(reading, stage)
    return reading


def _keep_base_torch_that_meets(reading: Reading, base: ImageTorch) -> None:
    """`pip install 'torch>=1.5'` on an image whose torch (a version its tag or NVIDIA's notes state) meets
    the range: pip keeps the image's torch ("Requirement already satisfied"), so the image's torch is read
    in place of the range, which is named. A pin with a local tag (`+cu118`) names a build: left as read."""
    written = reading.pip_torch
    if written is None or reading.conda_torch is not None or base.torch is None or base.unlisted:
        return
    image_version = Version(base.torch)
    if "+" in str(written.specifier) or not written.specifier.contains(image_version, prereleases=True):
        return
    text = reading.pip_torch_text or "torch"
    reading.pip_torch, reading.pip_torch_text = None, None
    reading.hints = [hint for hint in reading.hints if hint.entry != text]
    reading.note(text, "derived", f"the base image's torch {base.torch} meets it, so pip keeps the image's "
                                  "torch (add --upgrade to take a newer one)")


def _read_stage_python(reading: Reading, stage: _Stage) -> None:
    """The Python of the stage that runs, unless a line of the file names one: the one the stage installs
    or runs pip with, else its base image's."""
    if reading.python is not None:
        return
    if stage.python:
        reading.python = CondaLine(stage.python[0], "python", stage.python[1], None, None)
    elif stage.image and image_python(stage.image):
        reading.python = CondaLine(f"FROM {stage.image}", "python", image_python(stage.image), None, None)


def _read_instruction(reading: Reading, keyword: str, command: Any, stage: _Stage) -> None:
    """An instruction other than FROM: ARG and ENV set variables, WORKDIR and COPY place files, RUN lines
    may install."""
    variables = stage.variables
    if keyword == "ARG":
        variables.declare_args(command.value)
    elif keyword == "ENV":
        variables.set_env(command.value)
    elif keyword == "WORKDIR" and command.value:
        stage.workdir = posixpath.normpath(posixpath.join(stage.workdir, variables.expand(command.value[0])))
    elif keyword in ("COPY", "ADD") and not any(f.startswith("--from") for f in command.flags):
        words = [variables.expand(word) for word in command.value]
        dest = posixpath.normpath(posixpath.join(stage.workdir, words[-1])) if len(words) >= 2 else ""
        stage.copies += [(word, dest) for word in words[:-1]]
    elif keyword == "RUN":
        stage.cwd = stage.workdir
        for line in _shell_lines(command):
            for words in shell_commands(variables.expand(line)):
                _read_command(reading, words, stage)


def _shell_lines(command: Any) -> list[str]:
    """The shell text a RUN runs: its shell form, its exec form joined, or its heredocs' lines."""
    if command.heredocs:
        return [line for heredoc in command.heredocs for line in heredoc.content.splitlines()]
    if command.json:
        return [shlex.join(command.value)]
    return list(command.value)


def _read_from(reading: Reading, command: Any, stage: _Stage) -> ImageTorch | None:
    """A FROM line starts a stage afresh (the last stage's base is the image that runs): its base image,
    its platform flag, and the torch the image brings; an nvidia/cuda image is a weak hint."""
    words = [stage.variables.expand(word, in_from=True) for word in command.value]
    named = words[0] if words else ""
    direct = named not in stage.names
    image = stage.enter(named, words[2] if len(words) >= 3 and words[1].lower() == "as" else None)
    reading.weak_hints.clear()
    for flag in command.flags:
        expanded = stage.variables.expand(flag, in_from=True)
        platform = image_platform(expanded) if flag.startswith("--platform") else None
        if platform:
            reading.platforms = [platform]
    if image is None:
        return None
    if direct:
        reading.base_images.append(image)
    cuda = image_cuda(image)
    if cuda:
        reading.weak_hints.append(Hint(f"FROM {image}", cuda))
    return image_torch(image)


def _read_base_image_torch(reading: Reading, base: ImageTorch) -> None:
    """A file whose lines install no torch runs its base image's: the version its tag or NVIDIA's notes
    state, else an unpinned torch (the newest release fits, as for any unpinned torch) named as the image's."""
    entry = f"FROM {base.image}"
    if base.torch is None and base.unlisted:
        reading.torch_image = base  # refused by name: its torch is stated, in a row envbuild does not have
        return
    if base.torch is None:
        reading.torch_image = base
        read_pip_text(reading, "torch", entry=entry)
        reading.note(entry, "assumed", f"the base image brings torch ({base.why}), a version that moves with the "
                                       "image; pin torch==X.Y.Z in a RUN pip line to keep it")
    else:
        read_pip_text(reading, f"torch=={Version(base.torch).base_version}", entry=entry)
        reading.note(entry, "assumed", f"the base image brings torch {base.torch} ({base.why}); route pip: "
                                       "envbuild builds its own environment with the PyTorch index's wheel for the "
                                       "same CUDA")
    if base.cuda:
        reading.hints.append(Hint(entry, base.cuda))
    if base.rocm:
        reading.note(entry, "assumed", f"a ROCm {base.rocm} build of torch (AMD GPUs): the image has no CUDA; "
                                       "envbuild builds CUDA and CPU environments, so the spec's target is "
                                       "envbuild's choice, not the image's")


def _read_command(reading: Reading, words: list[str], stage: _Stage) -> None:
    command = shlex.join(words)
    if stage.read_shell_move(words):
        return
    python = stated_python(words)
    if python:
        stage.python = (command, python)
    install = find_install(words, command)
    if install is not None:
        _read_install(reading, install, stage)


def _read_install(reading: Reading, install: Install, stage: _Stage) -> None:
    if install.tool in ("pip", "mim"):
        _read_pip_install(reading, list(install.words), stage)
        if install.tool == "mim":
            reading.note(install.text, "assumed", "`mim install` picks OpenMMLab's build for the torch and CUDA it "
                                                  "finds; the spec lists the packages by name, which pip builds from "
                                                  "source")
    elif install.tool == "pip-wheel":
        _read_pip_wheel(reading, list(install.words), stage)
    elif install.tool == "uv-sync":
        _read_uv_sync(reading, install, stage)
    elif install.tool == "conda":
        _read_conda_install(reading, list(install.words))
        _read_conda_file_flags(reading, install, stage)
    else:
        _read_conda_env_file(reading, install, stage)


def _read_uv_sync(reading: Reading, install: Install, stage: _Stage) -> None:
    """`uv sync`: the uv.lock (else pyproject.toml) of the project folder it runs in (`--project DIR`,
    `--directory DIR`), as the stage's COPY lines placed it; read once, however many times the file syncs."""
    words = list(install.words)
    folder = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--project", "--directory")), ".")
    lock = stage.context_file(posixpath.join(folder, "uv.lock"))
    pyproject = stage.context_file(posixpath.join(folder, "pyproject.toml"))
    first = lock or pyproject
    if first is not None and first in stage.projects_read:
        return
    if first is not None:
        stage.projects_read.add(first)
    read_uv_sync(reading, install.text, install.words, lock, pyproject)


def _read_project_install(reading: Reading, package: str, stage: _Stage) -> bool:
    """`pip install /tmp/project[extra]`: a project folder the stage COPYed in, its pyproject.toml read in its
    place; False when the target is no such folder."""
    found = folder_and_extras(package)
    folder = stage.context_file(found[0], folder=True) if found else None
    pyproject = folder / "pyproject.toml" if folder else None
    if found is None or pyproject is None or not pyproject.is_file() or pyproject in stage.projects_read:
        return False
    stage.projects_read.add(pyproject)
    return read_project_folder(reading, pyproject, found[1], f"pip install {package}")


def _read_conda_env_file(reading: Reading, install: Install, stage: _Stage) -> None:
    """`conda env create -f environment.yml` (or `update`): the env file, read in its place when the build
    context holds it, else named."""
    words = list(install.words)
    flag = next((i for i, w in enumerate(words) if w in ("-f", "--file")), None)
    target = words[flag + 1] if flag is not None and flag + 1 < len(words) else "its environment file"
    found = stage.context_file(target) if flag is not None else None
    if found is None or not _read_env_file(reading, found, install.text):
        reading.note(install.text, "unmapped", f"the packages of {target} are installed here: run `envbuild init` "
                                               "on that file for them")


def _read_env_file(reading: Reading, path: Path, entry: str) -> bool:
    """An environment.yml the build context holds, read into the Dockerfile's reading: its channels and its
    dependencies, as if the Dockerfile listed them; False when it is no environment file."""
    try:
        data = read_yaml_file(path, "environment.yml")
    except UsageError:
        return False
    if not isinstance(data, dict) or not isinstance(data.get("dependencies"), list):
        return False
    reading.note(entry, "derived", f"its packages ({path.name}) were read in its place")
    read_channel_list(reading, data.get("channels"))
    for item in data["dependencies"]:
        read_environment_dependency(reading, item, lambda into, line: include_requirements(into, path, line))
    return True


# pip options under which an installed torch that meets the range is not kept: pip resolves it again
_RESOLVES_AGAIN = {"-U", "--upgrade", "--force-reinstall", "-I", "--ignore-installed"}


def _read_pip_install(reading: Reading, words: list[str], stage: _Stage) -> None:
    before = reading.pip_torch_text
    _read_pip_words(reading, words, stage)
    if reading.pip_torch_text != before and any(w in _RESOLVES_AGAIN for w in words):
        stage.torch_upgraded = True


def _read_pip_words(reading: Reading, words: list[str], stage: _Stage) -> None:
    options, packages = pip_arguments(words)
    # the command's options apply to all of its packages, wherever they stand on the line
    for option in options:
        _read_pip_option(reading, option, stage)
    for package in packages:
        clone = stage.clone_of(package)
        if clone:
            reading.note(f"pip install {package} (in the clone of {clone})", "unmapped",
                         "a package built from a git clone; publish it to an index and pin it by version, or "
                         "build it in your job once the env exists")
        elif not _read_project_install(reading, package, stage) and not _read_unset_part(reading, package):
            read_pip_text(reading, package)


def _read_unset_part(reading: Reading, package: str) -> bool:
    """`torch==1.13.1+${CUDA_TAG}`, `certifi${CERTIFI_VERSION}`: a requirement whose local tag or version
    clause is a variable with no value here (one the RUN line's shell sets at build time, or an ARG the stage
    does not declare), read as the requirement before it, with what was left out named; False when no
    requirement stands before the variable."""
    unset = UNSET_VARIABLE.search(package)
    head = package[:unset.start()] if unset else ""
    if unset is None or not head or not UNSET_HEAD.fullmatch(head):
        return False
    read_pip_text(reading, head.removesuffix("+"))
    if head.endswith("+"):
        reading.note(package, "assumed", f"its local tag is {unset[0]}, which the file gives no value (the RUN "
                                         f"line's shell sets it at build time): read as {head[:-1]}, its CUDA from "
                                         "the rest of the file")
    else:
        reading.note(package, "unpinned", f"its version is {unset[0]}, which the file gives no value here (an ARG "
                                          "before FROM needs `ARG NAME` again in the stage): kept without it")
    return True


def _read_pip_wheel(reading: Reading, words: list[str], stage: _Stage) -> None:
    """`pip wheel -w DIR PACKAGE`: a wheel built in the image, which a later step installs or unzips into
    site-packages; named by the folder it is built from (its clone's repository, or the folder itself)."""
    for package in pip_arguments(words)[1]:
        local = package.startswith((".", "/"))
        where = stage.clone_of(package) or (posixpath.normpath(posixpath.join(stage.cwd, package)) if local else "")
        reading.note(f"pip wheel {package}" + (f" (in {where})" if where else ""), "unmapped",
                     "a wheel built in the image and installed from it by hand; publish it to an index and pin it "
                     "by version, or build it in your job once the env exists")


def _read_pip_option(reading: Reading, option: str, stage: _Stage) -> None:
    """An option of a pip command: a requirements file the build context holds is read in its place; an
    index whose URL needs a build argument the file never gives is named, not read (it may be any index)."""
    flag, _, target = option.partition(" ")
    unset = UNSET_VARIABLE.search(target)
    if flag in ("-i", "--index-url", "--extra-index-url") and unset:
        reading.note(option, "unmapped", f"an index URL built from {unset[0]}, a build argument the file gives "
                                         "no value; pass its URL in a spec's pip_index")
        return
    if flag in ("-r", "--requirement", "-c", "--constraint") and "://" not in target:
        _read_pip_file_option(reading, option, stage)
    else:
        read_pip_text(reading, option)


def _read_pip_file_option(reading: Reading, option: str, stage: _Stage) -> None:
    """`-r FILE` and `-c FILE` of a RUN pip line: the build-context file the stage's COPY lines placed there
    (or the one beside the Dockerfile) is read in its place; a requirements file the context does not hold,
    and any constraints file, is named with what to do."""
    flag, _, target = option.partition(" ")
    found = stage.context_file(target)
    if flag in ("-r", "--requirement"):
        if found is None or not read_included_requirements(reading, found, option):
            reading.note(option, "unmapped", f"the packages of {target} are installed here, and no COPY line puts "
                                             "a file of the build context there: run `envbuild init` on that file "
                                             "for them")
        return
    where = f"{found.name} of the build context" if found is not None else "not in the build context"
    reading.note(option, "unmapped", f"a constraints file ({where}): its pins hold for the packages installed "
                                     "here, and a spec has no constraints; pin those packages in the spec")


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


def _read_conda_file_flags(reading: Reading, install: Install, stage: _Stage) -> None:
    """`conda install --file list.txt`, `micromamba install -f env.yml`: the file read in its place when the
    build context holds it (an environment.yml, or a list of conda package lines), else named."""
    words = list(install.words)
    for index, word in enumerate(words[:-1]):
        if word not in ("-f", "--file"):
            continue
        found = stage.context_file(words[index + 1])
        if found is not None and found.suffix in (".yml", ".yaml") and _read_env_file(reading, found, install.text):
            continue
        if found is not None and found.suffix not in (".yml", ".yaml"):
            for line in read_text_file(found, "conda package list").splitlines():
                if line.strip() and not line.lstrip().startswith(("#", "@")):
                    read_conda_text(reading, line.strip())
            continue
        reading.note(install.text, "unmapped", f"the packages of {words[index + 1]} are installed here: run "
                                               "`envbuild init` on that file for them")

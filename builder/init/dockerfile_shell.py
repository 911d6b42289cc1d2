"""The shell of a Dockerfile's RUN lines, read for what it installs and which Python it sets up.

A RUN line is split into its commands (`&&`, `||`, `;`) and each into words by POSIX shell rules (shlex).
Any word that runs an installer is an install, whatever stands before it: `${PY} -m pip install`,
`python3.11 -m pip install`, `uv pip install`, `micromamba run -n env pip install`, `VAR=1 pip install`,
`sudo -H pip3 install`, `mim install`, `uv sync` (the project's lock); `bash -c "..."` runs its string as
shell. A stage's Python is the one it installs or links as the default (`apt-get install python3.10`,
`update-alternatives --install ... python3.12`, `ln -s .../python3.8 /usr/bin/python3`, `uv python install
3.12`, `pyenv install 3.11.9`) or runs pip with.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

SHELLS = {"sh", "bash", "dash", "zsh"}
CONDA_TOOLS = {"conda", "mamba", "micromamba"}
SYSTEM_INSTALLERS = {"apt-get", "apt", "yum", "dnf", "apk", "microdnf"}
PYTHON_WORD = re.compile(r"python(3\.\d{1,2})")
MAX_SHELL_DEPTH = 3
# pip flags that take a value
PIP_VALUE_FLAGS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-r", "--requirement",
                   "-c", "--constraint", "-e", "--editable", "-t", "--target", "--prefix", "--root",
                   "--python", "--cache-dir", "--progress-bar", "--platform", "--python-version", "--only-binary",
                   "--no-binary", "--trusted-host", "-w", "--wheel-dir"}
# pip's general options that take a value, which may stand between `pip` and its command
# (`pip --no-cache-dir install`, `pip --timeout 60 install`): pip's `cmdoptions.general_group`
PIP_GENERAL_VALUE_FLAGS = {"--log", "--log-file", "--local-log", "--proxy", "--retries", "--timeout",
                           "--exists-action", "--trusted-host", "--cert", "--client-cert", "--cache-dir",
                           "--python", "--keyring-provider", "--use-feature", "--use-deprecated"}


@dataclass(frozen=True)
class Install:
    tool: str  # pip, pip-wheel (`pip wheel`: a wheel the image installs later), conda, conda-env (an env file), mim,
    # uv-sync (`uv sync`: the project's uv.lock, else its pyproject.toml)
    words: tuple[str, ...]  # the words after the installer's verb
    text: str  # the command as written


def shell_commands(line: str, depth: int = 0) -> list[list[str]]:
    """The commands of one shell line as their words, `bash -c "..."` strings opened up (a few levels)."""
    commands: list[list[str]] = []
    for words in _split_commands(line):
        inner = _shell_string(words)
        if inner is not None and depth < MAX_SHELL_DEPTH:
            commands += shell_commands(inner, depth + 1)
        else:
            commands.append(words)
    return commands


def _split_commands(line: str) -> list[list[str]]:
    """Words by POSIX shell quoting, cut at the control operators (`&&`, `||`, `;`, `|`, `&`) outside quotes."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="&|;")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return []  # an unbalanced quote in a shell line that installs nothing envbuild reads
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set("&|;"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [words for words in commands if words]


def _shell_string(words: list[str]) -> str | None:
    for index, word in enumerate(words[:-2]):
        if word.rsplit("/", 1)[-1] in SHELLS and words[index + 1] in ("-c", "-lc", "-ec"):
            return words[index + 2]
    return None


def find_install(words: list[str], text: str) -> Install | None:
    """The install a command runs, wherever its installer word stands; None when it installs nothing."""
    for index, word in enumerate(words):
        tool = word.rsplit("/", 1)[-1]
        at = _pip_command_at(words, index) if re.fullmatch(r"pip[0-9.]*", tool) else index + 1
        verb = words[at] if at < len(words) else ""
        rest = tuple(words[at + 1:])
        if re.fullmatch(r"pip[0-9.]*", tool) and verb in ("install", "wheel"):
            return Install("pip" if verb == "install" else "pip-wheel", rest, text)
        if tool in CONDA_TOOLS and verb in ("install", "create"):
            return Install("conda", rest, text)
        if tool in CONDA_TOOLS and verb == "env" and rest[:1] in (("create",), ("update",)):
            return Install("conda-env", rest[1:], text)
        if tool == "mim" and verb == "install":
            return Install("mim", rest, text)
        if tool == "uv" and verb == "sync":
            return Install("uv-sync", rest, text)
    return None


def _pip_command_at(words: list[str], index: int) -> int:
    """Where pip's command word stands after the `pip` at `index`, past pip's general options."""
    at = index + 1
    while at < len(words) and words[at].startswith("-"):
        flag, sep, _ = words[at].partition("=")
        at += 2 if flag in PIP_GENERAL_VALUE_FLAGS and not sep else 1
    return at


def stated_python(words: list[str]) -> str | None:
    """The Python X.Y a command installs, makes the default, or runs pip with; None when it sets none."""
    tool = words[0].rsplit("/", 1)[-1] if words else ""
    if tool in SYSTEM_INSTALLERS and "install" in words:
        found = [m[1] for w in words if (m := PYTHON_WORD.fullmatch(w))]
        return found[0] if found else None
    if tool == "update-alternatives" and "--install" in words:
        return _python_of(words[words.index("--install") + 1:])
    if tool == "ln":
        paths = [w for w in words[1:] if not w.startswith("-")]
        default = len(paths) == 2 and re.fullmatch(r"\S*/python3?", paths[1])
        return _python_of(paths[:1]) if default else None
    if words[:3] == ["uv", "python", "install"] or words[:2] == ["pyenv", "install"]:
        version = next((w for w in words[2:] if re.fullmatch(r"3\.\d{1,2}(\.\d+)?", w)), None)
        return ".".join(version.split(".")[:2]) if version else None
    pip_index = next((i for i, w in enumerate(words) if w == "-m" and words[i + 1:i + 3] == ["pip", "install"]), None)
    return _python_of(words[pip_index - 1:pip_index]) if pip_index else None


def _python_of(words: list[str] | tuple[str, ...]) -> str | None:
    """`/usr/local/bin/python3.12` -> 3.12."""
    for word in words:
        match = PYTHON_WORD.fullmatch(word.rsplit("/", 1)[-1])
        if match:
            return match[1]
    return None



def pip_arguments(words: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The words after `pip install`: its options that take a value (`--index-url URL`, `-r FILE`), each as
    one `flag value` string, and its packages; flags without a value are left out."""
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
    return options, packages

"""Files a user hands envbuild (specs, environment.yml, lockfiles), read with limits.

A spec is a few kB; a lockfile a few MB. Anything far larger is not one (`/dev/zero`, a disk image),
and YAML can be made to cost far more than its size: a 700-byte file of nested aliases expands to
millions of nodes once anything walks it, and a few hundred nested brackets exhaust the parser's
recursion. Both are refused in one line instead of hanging or crashing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from builder.safe_io.reading import read_bounded
from builder.yamlio import DuplicateKey, SafeLoader

MAX_SPEC_BYTES = 1024 * 1024
MAX_LOCK_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64
# Far above a real lockfile's values (a few hundred thousand), far below a bomb's millions.
MAX_EXPANDED_NODES = 5_000_000  # a lockfile
MAX_SPEC_NODES = 100_000  # a spec or environment.yml: a few hundred values


def read_capped(path: Path, limit: int, what: str, error: Callable[[str], Exception]) -> bytes:
    """At most `limit` bytes of the regular file `path`, or `error` saying why not (reads never run
    away on a device, nor block on a FIFO)."""
    return read_bounded(path, limit, what, error)


def decode(data: bytes, path: Path, what: str, error: Callable[[str], Exception], fix: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} is not UTF-8 text (byte {exc.start}); {fix}") from None


def load_yaml(text: str, path: Path, what: str, error: Callable[[str], Exception], fix: str,
              loader: type | None = None, max_nodes: int = MAX_SPEC_NODES) -> Any:
    """Parse YAML, then refuse documents nested deeper than MAX_DEPTH or expanding (through aliases)
    to more than MAX_EXPANDED_NODES values."""
    try:
        data = yaml.load(text, Loader=loader or SafeLoader)  # a safe loader, C or Python
    except DuplicateKey as exc:
        raise error(f"{path}: line {exc.line}: {exc.problem}") from None
    except RecursionError:
        raise error(f"{path}: the {what} is nested too deeply to read (more than {MAX_DEPTH} levels); {fix}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise error(f"{path}: not valid YAML{where}; {fix}") from None
    except ValueError:
        # Python refuses to convert an integer of more than 4300 digits (sys.get_int_max_str_digits)
        raise error(f"{path}: the {what} holds a number too long to be a value (thousands of digits); {fix}") from None
    check_shape(data, path, what, error, fix, max_nodes)
    return data


def check_shape(data: Any, path: Path, what: str, error: Callable[[str], Exception], fix: str,
                max_nodes: int = MAX_SPEC_NODES) -> None:
    """Depth, and the size the document has once its aliases are expanded (what a validator or a
    writer walks): PyYAML shares an alias's node, so the expansion is computed, never built."""
    expanded: dict[int, int] = {}
    unique = 0
    stack: list[tuple[Any, int, bool]] = [(data, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        if isinstance(node, (bytes, bytearray)):
            # `!!binary` decodes to bytes: no name, URL or label envbuild reads is binary
            raise error(f"{path}: the {what} holds a !!binary value, which is not text; {fix}")
        if not isinstance(node, (dict, list)):
            continue
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        if children_done:
            expanded[id(node)] = 1 + sum(expanded.get(id(child), 1) for child in children)
            if expanded[id(node)] > max_nodes:
                raise error(f"{path}: the {what} expands to more than {max_nodes:,} values through "
                            f"YAML aliases (an alias bomb?); {fix}")
            continue
        if depth > MAX_DEPTH:
            raise error(f"{path}: the {what} is nested deeper than {MAX_DEPTH} levels; {fix}")
        if id(node) in expanded:
            continue
        expanded[id(node)] = 1  # visiting; shared nodes are walked once
        unique += 1
        stack.append((node, depth, True))
        walked = (dict, list, bytes, bytearray)
        stack.extend((child, depth + 1, False) for child in children if isinstance(child, walked))


def read_yaml(path: Path, what: str, error: Callable[[str], Exception], fix: str,
              limit: int = MAX_SPEC_BYTES, loader: type | None = None, max_nodes: int = MAX_SPEC_NODES) -> Any:
    """A user's YAML file as data, or one `error` line naming the file, the cause and `fix`."""
    text = decode(read_capped(path, limit, what, error), path, what, error, fix)
    return load_yaml(text, path, what, error, fix, loader, max_nodes)

"""Names that outside tools parse: registries in Docker's reference grammar, Kubernetes names, label
values. Checked where they enter (the command line), so a bad one fails before a build, not after it.

Docker's grammar (distribution/reference): a name is `[domain/]path`, the domain a host name or
address with an optional port (the first part is the domain only when it has a `.` or `:` or is
`localhost`), each path part lower-case letters and digits joined by `.`, `_`, `__` or dashes.
"""

from __future__ import annotations

import re

from builder.errors import UsageError
from builder.safe_io.text import has_unsafe_characters

DOMAIN = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                    r"|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?")
PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
DNS_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
NAME_LIMIT = 255
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
REGISTRY_EXAMPLE = "e.g. ghcr.io/team or 127.0.0.1:5000/team"


def _is_domain(part: str) -> bool:
    return "." in part or ":" in part or part == "localhost"


def registry_problem(value: str) -> str | None:
    """Why `value` cannot stand before `/<env>:<tag>` as a registry and path; None when it can."""
    if "://" in value:
        return "a URL; give the registry without its scheme (the engine chooses HTTPS, or HTTP for an insecure one)"
    parts = value.rstrip("/").split("/")
    if not parts[0]:
        return "empty"
    if _is_domain(parts[0]):
        if not DOMAIN.fullmatch(parts[0]):
            return f"{parts[0]!r} is not a host name with an optional :port"
        parts = parts[1:]
    problem = next((p for p in map(_path_part_problem, parts) if p), None)
    if problem is None and len(value) > NAME_LIMIT:
        return f"longer than {NAME_LIMIT} characters"
    return problem


def _path_part_problem(part: str) -> str | None:
    if part != part.lower() and PATH_COMPONENT.fullmatch(part.lower()):
        return f"{part!r}: repository names are lower case"
    if not PATH_COMPONENT.fullmatch(part):
        return f"{part!r} is not a repository path part (lower-case letters and digits joined by . _ or -)"
    return None


def check_registry(flag: str, value: str | None) -> str | None:
    """`value` when it is a registry and path the engine can push to or pull from, else one UsageError line."""
    if value is None:
        return None
    problem = registry_problem(value)
    if problem:
        raise UsageError(f"{flag} {value!r}: {problem}; {REGISTRY_EXAMPLE}")
    return value


def check_dns_label(flag: str, value: str | None) -> str | None:
    """A Kubernetes namespace or other DNS-1123 label: lower-case letters, digits and dashes, at most 63."""
    if value is not None and not DNS_LABEL.fullmatch(value):
        raise UsageError(f"{flag} {value!r}: a Kubernetes name is lower-case letters, digits and '-', starting "
                         "and ending with a letter or digit, at most 63 (e.g. ml-team)")
    return value


def check_label_text(flag: str, value: str | None) -> str | None:
    """A value that becomes an image label: one line, no control characters (a newline would make the
    label a second line of the image's history)."""
    if value is not None and (CONTROL.search(value) or has_unsafe_characters(value)):
        raise UsageError(f"{flag} {value!r}: control characters (a newline, a tab, ...) are not allowed in a label; "
                         "give it on one line")
    return value

"""The lines of an environment file, one at a time: conda MatchSpecs, CUDA tags and build strings, versions.

Nothing here decides anything about a whole file; `builder.init.read` gathers what the lines say and
`builder.init.choose` decides. The package rules (`data/import_rules.yaml`) say what happens to the
packages that are not torch, torchvision, python or a CUDA switch.
"""

from __future__ import annotations

import fnmatch
import re
import urllib.parse
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from builder.errors import UsageError
from builder.formats.conda_matchspec import OPERATORS
from builder.specs.cuda import CPU, CudaVersion
from builder.specs.model import Route
from builder.yamlio import data_text

Outcome = Literal["derived", "assumed", "unpinned", "dropped", "unmapped", "upgraded"]
SOME_CUDA = "cuda"  # a CUDA build without a version (`pytorch-gpu`, `pytorch=*=cuda*`)

CONDA_TORCH = {"pytorch", "torch"}
CONDA_TORCH_FLAVOURS = {"pytorch-gpu": SOME_CUDA, "pytorch-cpu": CPU}


@dataclass(frozen=True)
class Note:
    """What happened to one line of the environment.yml, when it was not simply kept."""

    entry: str
    outcome: Outcome
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"entry": self.entry, "outcome": self.outcome, "reason": self.reason}



@dataclass(frozen=True)
class Rule:
    section: Literal["conda", "pip"]
    names: tuple[str, ...]
    action: Literal["keep", "unpin", "drop"]
    reason: str = ""


@dataclass(frozen=True)
class ImportRules:
    default_python: str
    rules: tuple[Rule, ...]

    def rule_for(self, section: str, name: str) -> Rule | None:
        for rule in self.rules:
            if rule.section == section and any(fnmatch.fnmatchcase(name, p) for p in rule.names):
                return rule
        return None


# Query parameters that carry a secret in an index or channel URL (`?token=`, GitLab's `private_token`, ...).
CREDENTIAL_PARAMETER = re.compile(r"(?i)(.*[_-])?(token|password|passwd|secret|api[_-]?key|key|auth|signature|sig)")
CREDENTIALS_NOTE = ("credentials removed from the URL (user:token@ or a token parameter): a spec is committed and "
                    "printed in job logs; give them to pip or conda in your job (a netrc, a keyring, PIP_INDEX_URL)")


def without_credentials(url: str) -> tuple[str, bool]:
    """`url` with its user info (`user:token@`) and its secret-carrying query parameters taken out, and
    whether there were any: init copies index URLs into a spec and its notes, and a spec is committed."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    kept = [(key, value) for key, value in query if not CREDENTIAL_PARAMETER.fullmatch(key)]
    if netloc == parts.netloc and len(kept) == len(query):
        return url, False
    clean = parts._replace(netloc=netloc, query=urllib.parse.urlencode(kept, safe="{}/"))
    return urllib.parse.urlunsplit(clean), True


@lru_cache(maxsize=1)
def load_import_rules() -> ImportRules:
    text = data_text("import_rules.yaml")
    raw = yaml.safe_load(text)
    rules = tuple(
        Rule(r["section"], tuple(r["names"]), r["action"], r.get("reason", "")) for r in raw["rules"]
    )
    return ImportRules(str(raw["default_python"]), rules)



def cuda_from_tag(tag: str) -> str | None:
    """`cu121` -> `12.1`, `cu118` -> `11.8`, `cpu` -> `cpu`: the wheel index and local-version tags."""
    if tag == CPU:
        return CPU
    try:
        return str(CudaVersion.from_tag(tag))
    except UsageError:
        return None


def cuda_from_build(build: str) -> tuple[str | None, Route | None]:
    """The CUDA a torch build string names, and the channel family the string's form belongs to.

    Legacy pytorch channel: `py3.11_cuda12.1_cudnn8.9.2_0`, `py3.11_cpu_0`. conda-forge:
    `cuda126_mkl_py311h...`, `cpu_mkl_py311h...`, and match patterns such as `cuda*` or `cuda129*`.
    """
    cuda = CudaVersion.from_build(build)
    if cuda is not None:
        dotted = re.search(r"cuda\d+\.\d+", build)  # the legacy channel writes the dot, conda-forge does not
        return str(cuda), Route.PYTORCH_CHANNEL if dotted else Route.CONDA_FORGE
    if re.match(r"py\d\.\d+_cpu", build):
        return CPU, Route.PYTORCH_CHANNEL
    if re.match(r"cuda(\*|_|$)", build):
        return SOME_CUDA, Route.CONDA_FORGE
    if re.match(r"cpu(\*|_|$)", build):
        return CPU, Route.CONDA_FORGE
    return None, None


def cuda_from_version(version: str | None) -> str | None:
    """`12.1`, `=12.1`, `12.1.105` -> `12.1` (pytorch-cuda, cudatoolkit and cuda-version pins)."""
    match = re.fullmatch(r"=*(\d+)\.(\d+)(\.[0-9.*]+)?\*?", version or "")
    return f"{match[1]}.{match[2]}" if match else None


def exact_version(version: str | None) -> str | None:
    match = re.fullmatch(r"=*(\d+\.\d+\.\d+)(\+[A-Za-z0-9.]+)?", version or "")
    return match[1] if match else None


def version_specifier(version: str | None) -> SpecifierSet | None:
    """A conda or pip version constraint as a PEP 440 set; None when it cannot be read."""
    if not version:
        return SpecifierSet()
    text = version.lstrip("=") if not version.startswith(OPERATORS[1:]) else version
    if re.fullmatch(r"\d+(\.\d+)*(\.\*)?", text):
        return SpecifierSet(f"=={text}" if text.endswith("*") else f"=={text}.*")
    try:
        return SpecifierSet(version.replace(" ", ""))
    except InvalidSpecifier:
        return None


def python_minor(version: str | None) -> str | None:
    match = re.fullmatch(r"=*(3)\.(\d+)(\.[0-9*]+)*\*?", version or "")
    return f"{match[1]}.{match[2]}" if match else None


def is_pips_default_index(url: str) -> bool:
    """Whether `url` is the public index pip installs from by default, as pip itself names it (its address
    is pip's to know: no copy of it here); False where pip is not installed."""
    try:
        from pip._internal.models.index import PyPI
    except ImportError:
        return False
    default = urllib.parse.urlsplit(PyPI.simple_url)
    given = urllib.parse.urlsplit(url)
    return given.hostname in (default.hostname, PyPI.file_storage_domain) and given.scheme in ("https", "http")

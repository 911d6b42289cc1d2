"""GPU model names to CUDA compute capabilities (`builder/data/gpus.yaml`), for `fleet:` entries and host files.

No other envbuild module is imported here, so the spec model can validate fleet entries with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import yaml

from builder.yamlio import data_text

# Words that brand a product line rather than name the GPU ("NVIDIA Tesla V100-SXM2-16GB").
BRAND_WORDS = {"NVIDIA", "TESLA", "GEFORCE", "QUADRO"}
CAPABILITY = re.compile(r"^(?:sm_?(\d{1,2})(\d)|(\d{1,2})\.(\d))$", re.IGNORECASE)


def _words(name: str) -> tuple[str, ...]:
    return tuple(word for word in re.split(r"[^A-Z0-9]+", name.upper()) if word and word not in BRAND_WORDS)


class ModelCapability(NamedTuple):
    """What a board's name tells of its compute capability, and how."""

    capability: tuple[int, int] | None
    how: str | None  # "model name", "name prefix", "generation <name>"; None: the name does not tell
    candidates: tuple[tuple[int, int], ...] = ()  # several: a cut or ambiguous name that fits boards of each


@lru_cache(maxsize=1)
def _gpu_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(data_text("gpus.yaml"))
    return data


def listed_boards() -> list[tuple[str, tuple[int, int]]]:
    """Every board of NVIDIA's CUDA GPUs list (current, legacy) with its capability, as the list names it."""
    boards: list[tuple[str, tuple[int, int]]] = []
    for section in _gpu_data()["nvidia_list"].values():
        for capability, names in section.items():
            boards.extend((name, parse_capability(str(capability))) for name in names)
    return boards


def _plain(name: str) -> str:
    for qualifier in _gpu_data()["qualifiers"]:
        name = name.replace(qualifier, " ")
    return name


def _variants(name: str) -> list[str]:
    """"Tesla C2050/C2070" names two boards: Tesla C2050 and Tesla C2070."""
    head, *others = name.split("/")
    family = head.rsplit(" ", 1)[0]
    return [head, *(f"{family} {other}" for other in others)]


@lru_cache(maxsize=1)
def _models() -> list[tuple[tuple[str, ...], tuple[tuple[int, int], ...]]]:
    """Listed names as words, each with every capability NVIDIA lists under it (two: the name is ambiguous)."""
    named: dict[tuple[str, ...], set[tuple[int, int]]] = {}
    extra = [(name, parse_capability(str(entry["capability"]))) for name, entry in _gpu_data()["not_listed"].items()]
    for name, capability in [*listed_boards(), *extra]:
        for one in _variants(name):
            named.setdefault(_words(_plain(one)), set()).add(capability)
    table = [(words, tuple(sorted(capabilities))) for words, capabilities in named.items() if words]
    # Longest name first, so "A100" wins over "A10" and "RTX 6000 ADA" over "RTX 6000".
    return sorted(table, key=lambda row: (-len(row[0]), -sum(len(word) for word in row[0])))


@lru_cache(maxsize=1)
def _generations() -> list[tuple[re.Pattern[str], tuple[int, int], str]]:
    return [(re.compile(rule["pattern"]), parse_capability(str(rule["capability"])), str(rule["generation"]))
            for rule in _gpu_data()["generations"]]


@dataclass(frozen=True)
class WrittenNames:
    """How people write boards in prose (gpus.yaml `written`): the series word a bare number leaves out, and the
    words that must stand next to a bare number or a short name."""

    series: dict[str, str]
    before: frozenset[str]
    after: frozenset[str]


@lru_cache(maxsize=1)
def written_names() -> WrittenNames:
    raw = _gpu_data()["written"]
    return WrittenNames({str(k): str(v) for k, v in raw["series"].items()},
                        frozenset(str(word).casefold() for word in raw["before"]),
                        frozenset(str(word).casefold() for word in raw["after"]))


def parse_capability(text: str) -> tuple[int, int]:
    """`8.6`, `sm_86` or `sm86` -> (8, 6); ValueError otherwise."""
    match = CAPABILITY.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a compute capability like 8.6 or sm_86")
    major, minor = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
    return int(major), int(minor)


@lru_cache(maxsize=1)
def _vgpu_type() -> re.Pattern[str]:
    return re.compile(str(_gpu_data()["vgpu_types"]["pattern"]))


def vgpu_board(name: str) -> str | None:
    """The board a vGPU type names ("GRID A100D-20C" -> "A100", "RTX6000-24Q" -> "RTX 6000"); None when the
    name is not a vGPU type's."""
    match = _vgpu_type().match(name.strip().upper())
    return None if match is None else re.sub(r"^RTX ?", "RTX ", match.group("board"))


def model_capability(name: str) -> ModelCapability:
    """The compute capability a board's name tells (as nvidia-smi or NVML print it, cut names included)."""
    board = vgpu_board(name)
    if board is not None:
        return _vgpu_capability(board)
    stripped = name.rstrip()
    if stripped.endswith("..."):
        return _cut_name_capability(stripped[:-3])
    words = _words(name)
    listed = _listed_capability(words)
    if listed is not None:
        return listed
    joined = " ".join(words)
    for pattern, capability, generation in _generations():
        if pattern.search(joined):
            return ModelCapability(capability, f"generation {generation}", (capability,))
    return ModelCapability(None, None)


def _listed_capability(words: tuple[str, ...]) -> ModelCapability | None:
    """The longest listed name among the board's words; None when no listed name is."""
    for model, capabilities in _models():
        for start in range(len(words) - len(model) + 1):
            if words[start:start + len(model)] == model:
                if len(capabilities) == 1:
                    return ModelCapability(capabilities[0], "model name", capabilities)
                return ModelCapability(None, None, capabilities)
    return None


def _vgpu_capability(board: str) -> ModelCapability:
    told = model_capability(board)
    return told._replace(how=f"vGPU type of {board}") if told.how else told


def _cut_name_capability(prefix: str) -> ModelCapability:
    """A name nvidia-smi's table cut ("GeForce GTX 105...", "NVIDIA GeForce RTX 4050 ..."): the listed boards it
    can be are those whose names start with what is left, or that what is left starts with; it tells the
    capability only when they all share one."""
    words = _words(prefix)
    partial = "" if prefix.endswith((" ", "-")) or not words else words[-1]
    whole = words[:-1] if partial else words
    fits: set[tuple[int, int]] = set()
    for model, capabilities in _models():
        longer = model[:len(whole)] == whole and (not partial or (len(model) > len(whole)
                                                                  and model[len(whole)].startswith(partial)))
        shorter = len(model) <= len(whole) and whole[:len(model)] == model
        if longer or shorter:
            fits.update(capabilities)
    joined = " ".join(words)
    for pattern, capability, _ in _generations():
        if pattern.search(" ".join(whole)) or pattern.search(joined):
            fits.add(capability)
    candidates = tuple(sorted(fits))
    if len(candidates) == 1:
        return ModelCapability(candidates[0], "name prefix", candidates)
    return ModelCapability(None, None, candidates)


def capability_of_model(name: str) -> tuple[int, int] | None:
    """The compute capability of a GPU named like nvidia-smi names it, or None for a model not in the data."""
    return model_capability(name).capability


def capability_of(entry: str) -> tuple[int, int] | None:
    """A fleet entry's GPU as a capability: `8.6` / `sm_86` directly, else by model name; None when unknown."""
    try:
        return parse_capability(entry)
    except ValueError:
        return capability_of_model(entry)


def sm_name(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


@dataclass(frozen=True)
class SupportEnded:
    """Where support for an old architecture ended (`builder/data/gpu_architectures.yaml`)."""

    architecture: str
    last_cuda: str
    last_driver_branch: str


@lru_cache(maxsize=1)
def _architecture_data() -> dict[str, object]:
    text = data_text("gpu_architectures.yaml")
    data: dict[str, object] = yaml.safe_load(text)
    return data


@lru_cache(maxsize=1)
def _architectures() -> dict[str, tuple[tuple[int, int], ...]]:
    table: dict[str, tuple[tuple[int, int], ...]] = {}
    raw = _architecture_data()["architectures"]
    assert isinstance(raw, dict)
    for name, entry in raw.items():
        capabilities = tuple(parse_capability(str(text)) for text in entry["capabilities"])
        for alias in (name, *entry.get("also", ()), *([str(entry["nvml"])] if "nvml" in entry else [])):
            table[str(alias).casefold()] = capabilities
    return table


def architecture_name(value: str | int) -> str:
    """An architecture as nvidia-smi names it: NVML's number (9) or an alias (Ada) to its name; else as given."""
    raw = _architecture_data()["architectures"]
    assert isinstance(raw, dict)
    wanted = str(value).strip().casefold()
    for name, entry in raw.items():
        if wanted in {name.casefold(), *(str(a).casefold() for a in entry.get("also", ())), str(entry.get("nvml"))}:
            return str(name)
    return str(value)


def capabilities_of_architecture(name: str | int) -> tuple[tuple[int, int], ...]:
    """The compute capabilities an architecture (`Hopper`, `Ada Lovelace`, NVML's number 9) may have; empty when
    the name is not in the data. One capability tells it; several say the architecture alone does not."""
    return _architectures().get(str(name).strip().casefold(), ())


def support_ended(capability: tuple[int, int]) -> SupportEnded | None:
    """The end of support of the architecture of `capability` when no current CUDA toolkit compiles for it."""
    entries = _architecture_data()["support_ended"]
    assert isinstance(entries, list)
    for entry in entries:
        if capability < parse_capability(str(entry["below"])):
            return SupportEnded(str(entry["architecture"]), str(entry["last_cuda"]), str(entry["last_driver_branch"]))
    return None

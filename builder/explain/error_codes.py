"""The enumerations a family's placeholders resolve to (`builder/data/error_codes.yaml`): every
cudaError_t, nvmlReturn_t and ncclResult_t with its number, enumerator name, printed text and meaning."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from builder.yamlio import load_data


@dataclass(frozen=True)
class ErrorCode:
    enum: str
    code: int
    name: str
    meaning: str
    says: str | None = None
    driver: str | None = None  # the CUresult of the same number
    legacy: int | None = None  # cudaError_t's number before CUDA 10.1
    family: str | None = None
    fix: str | None = None
    bare: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in (("enum", self.enum), ("code", self.code), ("name", self.name),
                                              ("says", self.says), ("meaning", self.meaning)) if value is not None}


@dataclass(frozen=True)
class CodeTable:
    enum: str
    family: str  # the generic family codes without one of their own are reported under
    source: dict[str, str]
    codes: tuple[ErrorCode, ...]

    @cached_property
    def _by_name(self) -> dict[str, ErrorCode]:
        names: dict[str, ErrorCode] = {}
        for entry in self.codes:
            names[entry.name.lower()] = entry
            if entry.driver:
                names[entry.driver.lower()] = entry
            if entry.name.startswith("NVML_ERROR_"):  # pynvml's exception classes: NVMLError_DriverNotLoaded
                camel = "".join(word.capitalize() for word in entry.name[len("NVML_ERROR_"):].split("_"))
                names[f"nvmlerror_{camel.lower()}"] = entry
        return names

    @cached_property
    def _by_says(self) -> list[tuple[str, ErrorCode]]:
        said = [(entry.says.lower().rstrip("."), entry) for entry in self.codes if entry.says]
        return sorted(said, key=lambda pair: -len(pair[0]))

    def by_name(self, name: str) -> ErrorCode | None:
        return self._by_name.get(name.lower())

    def by_number(self, number: int) -> ErrorCode | None:
        """The code of this number; else (cudaError_t) the code it was before CUDA 10.1 renumbered the enum
        (`cuda runtime error (59)`, the device-side assert of CUDA 9)."""
        for entry in self.codes:
            if entry.code == number:
                return entry
        for entry in self.codes:
            if entry.legacy == number:
                return entry
        return None

    def by_text(self, text: str) -> ErrorCode | None:
        """The code whose printed text starts `text` (or, for texts of 3+ words, appears in it or begins it)."""
        said = " ".join(text.lower().split()).strip(" .'\"`*")
        if not said:
            return None
        for says, entry in self._by_says:
            if said.startswith(says):
                return entry
        for says, entry in self._by_says:
            if len(says.split()) >= 3 and says in said:
                return entry
        # older NCCL releases print `unhandled system error` without the later `(run with NCCL_DEBUG=INFO ...)`
        for says, entry in self._by_says:
            if len(said.split()) >= 3 and says.startswith(said):
                return entry
        return None


@lru_cache(maxsize=1)
def load_code_tables() -> dict[str, CodeTable]:
    raw = load_data("error_codes.yaml")
    tables = {}
    for enum, body in raw["enums"].items():
        codes = tuple(ErrorCode(enum=enum, code=int(row["code"]), name=row["name"], meaning=row["meaning"],
                                says=row.get("says"), driver=row.get("driver"), legacy=row.get("legacy"),
                                family=row.get("family"), fix=row.get("fix"), bare=bool(row.get("bare")))
                      for row in body["codes"])
        tables[enum] = CodeTable(enum, body["family"], dict(body["source"]), codes)
    return tables

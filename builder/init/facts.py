"""What a foreign file states, as plain facts: its torch and where it comes from, its CUDA, its platform.

Lint's CUDA rules and the foreign-files corpus (tests/corpus/foreign-files) read these; `builder.init.choose`
decides a spec from the same `Reading`, and may move a version the file states (an upgrade, another minor).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.init.lines import SOME_CUDA
from builder.init.reading import Reading, settled_hints

BASE_IMAGE_ENTRY = "FROM "  # the entry of a torch that a Dockerfile's base image brings


@dataclass(frozen=True)
class FileFacts:
    torch: str | None  # the version as written ("2.1.0", ">=2.0"), "" without one, None when no torch is read
    torch_from: str  # pip, conda, base-image or none
    cuda: str | None  # X.Y or cpu when the file's lines agree on one, else None
    platform: str

    def as_dict(self) -> dict[str, str | None]:
        return {"torch": self.torch, "torch_from": self.torch_from, "cuda": self.cuda, "platform": self.platform}


def file_facts(reading: Reading) -> FileFacts:
    torch, source = _torch(reading)
    return FileFacts(torch, source, stated_cuda(reading), (reading.platforms or ["linux-64"])[0])


def _torch(reading: Reading) -> tuple[str | None, str]:
    if reading.pip_torch is not None:
        specifiers = list(reading.pip_torch.specifier)
        # `==2.8.0.*` is a range (every 2.8.0 build), written with its operator like any other
        exact = [s.version for s in specifiers if s.operator in ("==", "===") and not s.version.endswith(".*")]
        version = exact[0].split("+")[0] if len(specifiers) == 1 and exact else str(reading.pip_torch.specifier)
        from_image = (reading.pip_torch_text or "").startswith(BASE_IMAGE_ENTRY)
        return version, "base-image" if from_image else "pip"
    if reading.conda_torch is not None:
        # conda's `==2.1.2` is the one version 2.1.2, as `=2.1.2=build` is
        return re.sub(r"^==(?=\d[\w.+]*$)", "", reading.conda_torch.version or ""), "conda"
    if reading.torch_image is not None:  # a base image's torch whose version its tag does not state
        return "", "base-image"
    return None, "none"


def stated_cuda(reading: Reading) -> str | None:
    """The one CUDA (or cpu) the file's lines agree on; a base image's CUDA when no line names one."""
    hints = settled_hints([*reading.hints, *(reading.pip_index_hints if reading.conda_torch is None else [])])
    concrete = {h.cuda for h in hints if h.cuda != SOME_CUDA}
    if not concrete:
        concrete = {h.cuda for h in reading.weak_hints if h.cuda != SOME_CUDA}
    return concrete.pop() if len(concrete) == 1 else None

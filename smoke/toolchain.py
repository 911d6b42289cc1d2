"""What torch.compile needs besides torch, and what its absence looks like. No torch here.

Inductor turns a graph into C++ on the CPU (built by the compiler in torch._inductor.config.cpp.cxx:
$CXX, else g++; clang++ on macOS) and into Triton kernels on CUDA, whose launcher triton builds with
a C compiler ($CC, else gcc, else clang: triton/runtime/build.py). An image without them cannot
compile; whether that fails the suite depends on whether compile support was asked for
(`--require-compile`, ENVBUILD_REQUIRE_COMPILE=1, set for a spec with `features: [compile]`).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Which = Callable[[str], str | None]

INSTALL_COMPILER = ("install a compiler in the image: the spec's `features: [compile]`, or the `gxx` (conda) / "
                    "`g++` (apt) package; or point $CXX (CPU) / $CC (CUDA, triton) at one")


def inductor_cxx_candidates(environ: Mapping[str, str], platform: str = sys.platform) -> list[str]:
    """The C++ compilers inductor tries on the CPU, as torch._inductor.config.cpp.cxx lists them (its
    first entry, None, downloads gxx with conda only when TORCH_INDUCTOR_INSTALL_GXX is set: not counted)."""
    return [environ.get("CXX") or ("clang++" if platform == "darwin" else "g++")]


def triton_cc_candidates(environ: Mapping[str, str]) -> list[str]:
    """The C compilers triton builds its CUDA launcher with: $CC alone when set, else gcc, else clang."""
    if environ.get("CC"):
        return [environ["CC"]]
    return ["gcc", "clang"]


def find_compiler(candidates: Sequence[str], which: Which = shutil.which) -> str | None:
    """The first candidate that resolves to an executable (a name on PATH or a path)."""
    for candidate in candidates:
        found = which(candidate)
        if found:
            return found
    return None


@dataclass(frozen=True)
class Missing:
    """A piece of torch.compile's toolchain that is not there: what, and how to get it."""

    key: str
    cause: str
    fix: str


NO_CXX = Missing("cxx", "no C++ compiler for inductor's CPU kernels", INSTALL_COMPILER)

# The texts torch and triton raise when a piece is missing (torch/_inductor/exc.py, cpp_builder.py,
# triton/runtime/build.py), and the compiler's own word for missing Python headers.
MISSING_MARKERS = (
    ("No working C++ compiler found", NO_CXX),
    ("InvalidCxxCompiler", NO_CXX),
    ("Failed to find C compiler", Missing("cc", "no C compiler for triton's kernel launcher", INSTALL_COMPILER)),
    ("Cannot find a working triton installation",
     Missing("triton", "triton is not installed (inductor generates Triton kernels on CUDA)",
             "install the triton build that pairs with this torch (torch's CUDA wheels depend on it)")),
    ("Python.h: No such file or directory",
     Missing("python_headers", "the compiler finds no Python.h (the Python headers are not installed)",
             "install the Python development headers (python3-dev; a conda python carries them)")),
    ("which is too old to be supported by the triton GPU compiler",
     Missing("gpu_too_old", "this GPU is older than triton supports (CUDA capability < 7.0)",
             "run eager on this GPU, or compile on one of capability 7.0 or newer")),
    ("not yet supported for torch.compile",
     Missing("python", "this Python is not supported by this torch's torch.compile",
             "use a Python this torch's dynamo supports")),
)


def missing_piece(text: str) -> Missing | None:
    """Which missing piece an error text names, if any."""
    for marker, missing in MISSING_MARKERS:
        if marker in text:
            return missing
    return None


def compile_requirement(missing: Missing, required: bool) -> tuple[str, str]:
    """(status, reason) for a toolchain piece that is not there: a failure when compile support was
    required, a named skip otherwise."""
    if required:
        return "failed", f"torch.compile is required but cannot run: {missing.cause}; fix: {missing.fix}"
    return "skipped", (f"torch.compile cannot run here: {missing.cause} (not required: pass --require-compile or "
                       f"ENVBUILD_REQUIRE_COMPILE=1 to make this a failure; fix: {missing.fix})")

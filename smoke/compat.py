"""Pure compatibility logic behind the environment checks: versions, driver vs runtime, arch lists.

No torch here: the checks feed in what torch and the driver report, and tests feed in tables. What envbuild
doctor judges by too (arch coverage, NVML's CUDA encoding, nvidia-smi's failures) is smoke/gpu_compat.py's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smoke.gpu_compat import arch_coverage

# Written by envbuild into every copy of the suite it ships (image build context, `smoke --local`)
# from its compatibility data; a bare source checkout has none, and the checks that need it say so.
COMPAT_FILE = Path(__file__).with_name("data") / "compat.json"

OK = "ok"
WARN = "warn"
FAIL = "fail"


def release_parts(version: str) -> list[int]:
    """Numeric release components of a version, local suffix dropped: '2.13.0+cpu' -> [2, 13, 0]."""
    public = version.split("+", 1)[0].strip()
    parts: list[int] = []
    for piece in public.split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group(0)))
        if digits.group(0) != piece:  # '0rc1', '0a0': stop at pre-release markers
            break
    return parts


def version_matches_prefix(installed: str, expected: str) -> bool:
    """True when `expected`'s release components are a prefix of `installed`'s ('2.13' ~ '2.13.0+cpu').

    Component-wise, so '2.1' does not match '2.13.0'.
    """
    want = release_parts(expected)
    have = release_parts(installed)
    return bool(want) and have[: len(want)] == want


def parse_major_minor(text: str) -> tuple[int, int]:
    """'12.4' -> (12, 4); '12' -> (12, 0); raises ValueError on anything else."""
    match = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?(?:\.\d+)*\s*", text)
    if match is None:
        raise ValueError(f"{text!r} is not a CUDA version like 12.4")
    return int(match.group(1)), int(match.group(2) or 0)


@dataclass(frozen=True)
class CudaExpectation:
    """What `--expect-cuda` asked for: 'cpu', or a CUDA major[.minor]."""

    cpu: bool
    version: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> CudaExpectation:
        cleaned = text.strip().lower()
        if cleaned in ("cpu", "none"):
            return cls(cpu=True)
        if not re.fullmatch(r"\d+(\.\d+)?", cleaned):
            raise ValueError(f"--expect-cuda {text!r}: use a CUDA version like 12.4, or 'cpu'")
        return cls(cpu=False, version=tuple(int(p) for p in cleaned.split(".")))

    def describe(self) -> str:
        return "cpu" if self.cpu else ".".join(str(p) for p in self.version)

    def matches(self, torch_cuda: str | None) -> bool:
        """Compare with torch.version.cuda (None on CPU builds) on the components given."""
        if self.cpu:
            return torch_cuda is None
        if torch_cuda is None:
            return False
        major, minor = parse_major_minor(torch_cuda)
        return (major, minor)[: len(self.version)] == self.version


@dataclass(frozen=True)
class Verdict:
    level: str  # OK, WARN or FAIL
    message: str


def driver_verdict(driver_cuda: tuple[int, int], runtime_cuda: tuple[int, int]) -> Verdict:
    """Can a driver that supports CUDA `driver_cuda` run a torch built for `runtime_cuda`?

    CUDA's minor-version compatibility lets a driver of the same major run a newer minor runtime,
    without PTX JIT and some newer APIs; a driver of an older major cannot run it at all.
    """
    d_text = f"{driver_cuda[0]}.{driver_cuda[1]}"
    r_text = f"{runtime_cuda[0]}.{runtime_cuda[1]}"
    if driver_cuda[0] < runtime_cuda[0]:
        return Verdict(
            FAIL,
            f"driver supports CUDA {d_text} but torch is built for CUDA {r_text}: a newer driver "
            f"(CUDA {runtime_cuda[0]}.x) is needed, or an image for CUDA {driver_cuda[0]}.x",
        )
    if driver_cuda[0] == runtime_cuda[0] and driver_cuda[1] < runtime_cuda[1]:
        return Verdict(
            WARN,
            f"warning: driver supports CUDA {d_text}, torch is built for {r_text}: runs only through "
            "minor-version compatibility (no PTX JIT, newer CUDA features may fail); update the driver",
        )
    return Verdict(OK, f"driver supports CUDA {d_text} >= torch's CUDA {r_text}")


def load_compat_data(path: Path = COMPAT_FILE) -> dict[str, Any] | None:
    """The shipped compatibility data, or None when this copy of the suite carries none."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def target_expectations(data: dict[str, Any] | None) -> dict[str, Any]:
    """What the image's target must show (torch, cuda, cudnn); empty outside an image."""
    return dict((data or {}).get("target") or {})


def expected_torchvision(torch_version: str, pairs: dict[str, str]) -> str | None:
    """The torchvision major.minor that pairs with torch's major.minor; None when the data knows
    nothing about this torch."""
    parts = release_parts(torch_version)
    if len(parts) < 2:
        return None
    found = pairs.get(f"{parts[0]}.{parts[1]}")
    return str(found) if found is not None else None


def cudnn_text(version: int) -> str:
    """torch.backends.cudnn.version() as X.Y.Z: cuDNN 9 reports 92400 for 9.24.0, cuDNN 8 8907 for 8.9.7."""
    if version >= 90000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


@dataclass(frozen=True)
class ArchListDiff:
    missing: list[str]  # expected by envbuild's data, not in the build
    extra: list[str]  # in the build, not in the data

    @property
    def same(self) -> bool:
        return not self.missing and not self.extra


def compare_arch_lists(expected: list[str] | tuple[str, ...], built: list[str]) -> ArchListDiff:
    """The data's arch list against torch's own (`torch._C._cuda_getArchFlags()`), order ignored."""
    want, have = set(expected), set(built)
    return ArchListDiff(missing=[a for a in expected if a not in have], extra=[a for a in built if a not in want])


def version_text(version: tuple[int, ...] | list[int]) -> str:
    return ".".join(str(part) for part in version)


def cudnn_runtime_verdict(runtime: tuple[int, int, int], compiled: tuple[int, int, int]) -> Verdict:
    """The cuDNN loaded against the one torch was built with (torch._C._cudnn's getRuntimeVersion and
    getCompileVersion). Equal at major.minor is the build as shipped. torch itself accepts a newer minor
    of the same major (cuDNN keeps minor versions backward compatible since 7) and refuses the rest."""
    loaded, built = version_text(runtime), version_text(compiled)
    if runtime[0] != compiled[0] or runtime[1] < compiled[1]:
        return Verdict(FAIL, f"cuDNN {loaded} is loaded but torch was built with {built}: another libcudnn comes "
                             "first on the library path (LD_LIBRARY_PATH, a system cuDNN); torch refuses it")
    if runtime[1] > compiled[1]:
        return Verdict(WARN, f"warning: cuDNN {loaded} is loaded, torch was built with {built}: a newer minor of "
                             "the same major, which torch accepts, but not the pair torch was tested with")
    return Verdict(OK, f"cuDNN {loaded} is loaded, torch was built with {built}")


def package_matches_runtime(package_version: str, runtime: tuple[int, ...], parts: int = 3) -> bool:
    """A library's package version ('9.24.0.43', '2.27.3') against the version the library reports at
    run time, on the first `parts` components (packages add a build number)."""
    return release_parts(package_version)[:parts] == list(runtime[:parts])


def what_covers(capability: tuple[int, int], spec_targets: dict[str, list[str]] | None = None) -> str:
    """The arch entries a build needs for a GPU of `capability`, and which of the spec's targets carry
    them when envbuild shipped the spec's arch lists with the suite (compat.json "spec_targets")."""
    major, minor = capability
    need = (f"sm_{major}{minor} kernels (or sm_{major}x with x <= {minor}, or compute_XY PTX at or below "
            f"{major}.{minor})")
    if not spec_targets:
        return f"{need}; `envbuild targets` shows each target's arch list"
    covering = [key for key, archs in spec_targets.items() if arch_coverage(list(archs), capability).covered]
    if covering:
        return f"{need}: carried by this spec's target(s) {', '.join(covering)}"
    return f"{need}: none of this spec's targets ({', '.join(spec_targets)}) carries them"

"""torchvision (when installed): its version pairs with torch's, it is built for torch's CUDA, its
compiled ops load and run on every device, and a resnet18 (random weights, nothing downloaded) trains
a step under AMP."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import torch

from smoke.compat import expected_torchvision, load_compat_data, release_parts
from smoke.registry import Context, Outcome, check, failed, passed, skipped, verdict

NMS_BOXES = [[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [50.0, 50.0, 60.0, 60.0]]
NMS_SCORES = [0.9, 0.8, 0.7]
# Boxes 0 and 1 overlap with IoU 81/119 = 0.68 > 0.5, so box 1 is suppressed.
NMS_KEEP = [0, 2]


def installed_torchvision() -> str | None:
    """torchvision's version from its metadata, without importing it (import itself can fail)."""
    if importlib.util.find_spec("torchvision") is None:
        return None
    try:
        return importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def pairing_verdict(torch_version: str, torchvision_version: str,
                    pairs: dict[str, str] | None = None) -> tuple[bool, str]:
    """Judged by the pairing table envbuild ships with the suite (`pairs` replaces it in tests)."""
    if pairs is None:
        data = load_compat_data()
        if data is None:
            return True, (f"no compatibility data shipped with this copy of the suite; torchvision "
                          f"{torchvision_version} not judged")
        pairs = data.get("torchvision_pairs") or {}
    expected = expected_torchvision(torch_version, pairs)
    if expected is None:
        return True, f"no pairing known for torch {torch_version}; torchvision {torchvision_version} not judged"
    have = release_parts(torchvision_version)[:2]
    if [int(p) for p in expected.split(".")] == have:
        return True, f"torchvision {torchvision_version} pairs with torch {torch_version}"
    return False, (
        f"torchvision {torchvision_version} does not pair with torch {torch_version} (expects torchvision "
        f"{expected}.x): compiled ops will fail to load"
    )


def cuda_from_version_number(number: int) -> str | None:
    """CUDA_VERSION as torchvision reports it (13000 -> '13.0', 12090 -> '12.9'); -1 (CPU build) -> None."""
    if number < 0:
        return None
    return f"{number // 1000}.{number % 1000 // 10}"


def _not_installed(ctx: Context) -> Outcome:
    """A failure when the image was built to hold torchvision (its spec pins it), else a named skip."""
    if ctx.settings.expects("torchvision"):
        expected = ctx.settings.expected_version("torchvision")
        pinned = f"torchvision {expected}" if expected else "torchvision"
        return failed(f"{pinned} is pinned by the spec but not installed in this environment", expected=expected)
    return skipped("torchvision is not installed")


@check("torchvision.version",
       stands_for="upstream smoke_test.py check_version (torchvision against the release matrix)")
def version_pairs(ctx: Context) -> Outcome:
    """torchvision's major.minor is the one built against this torch (envbuild's compatibility data)."""
    version = installed_torchvision()
    if version is None:
        return _not_installed(ctx)
    ok, message = pairing_verdict(str(torch.__version__), version)
    details = {"torch": str(torch.__version__), "torchvision": version}
    return passed(message, **details) if ok else failed(message, **details)


@check("torchvision.cuda_build",
       stands_for="upstream smoke_test.py smoke_test_cuda (torchvision's extension _check_cuda_version)")
def cuda_build_agrees(ctx: Context) -> Outcome:
    """torchvision's compiled ops are built for the CUDA torch is built for (or both for CPU)."""
    if installed_torchvision() is None:
        return _not_installed(ctx)
    try:
        import torchvision  # noqa: F401  (registers torch.ops.torchvision)

        number = int(torch.ops.torchvision._cuda_version())
    except Exception as exc:  # a major mismatch already raises at import; a broken install anything  # noqa: BLE001
        return failed(f"torchvision's CUDA build cannot be read: {' '.join(str(exc).split())[:300]}")
    built_for = cuda_from_version_number(number)
    torch_cuda = torch.version.cuda
    torch_major_minor = ".".join(torch_cuda.split(".")[:2]) if torch_cuda else None
    details = {"torchvision_cuda": built_for, "torch_cuda": torch_cuda}
    if built_for == torch_major_minor:
        return passed(f"torchvision and torch are both built for {_build_name(built_for)}", **details)
    return failed(f"torchvision is built for {_build_name(built_for)} but torch for {_build_name(torch_major_minor)}",
                  **details)


def _build_name(cuda: str | None) -> str:
    return f"CUDA {cuda}" if cuda else "CPU"


@check("torchvision.ops",
       stands_for="upstream vision/test/smoke_test.py ('Is torchvision usable?': its compiled ops load)")
def compiled_ops_run(ctx: Context) -> Outcome:
    """torchvision.ops.nms loads and gives the known answer on CPU and on each GPU."""
    if installed_torchvision() is None:
        return _not_installed(ctx)
    try:
        import torchvision
        from torchvision.ops import nms
    except Exception as exc:  # "operator torchvision::nms does not exist" surfaces at import  # noqa: BLE001
        return failed(f"import torchvision failed: {' '.join(str(exc).split())[:300]}")
    devices = ["cpu"] + [f"cuda:{i}" for i in range(ctx.gpu_count)]
    problems = []
    for device in devices:
        try:
            keep = nms(torch.tensor(NMS_BOXES, device=device), torch.tensor(NMS_SCORES, device=device), 0.5)
        except Exception as exc:  # any failure on a device is that device's finding  # noqa: BLE001
            problems.append(f"nms on {device}: {' '.join(str(exc).split())[:300]}")
            continue
        if keep.tolist() != NMS_KEEP:
            problems.append(f"nms on {device} kept {keep.tolist()}, not {NMS_KEEP}")
    return verdict(problems, f"torchvision {torchvision.__version__} nms runs on {', '.join(devices)}")


@check("torchvision.resnet18_amp",
       stands_for="upstream vision/test/smoke_test.py (a resnet runs, on each device) and seed 000's AMP")
def resnet18_step(ctx: Context) -> Outcome:
    """resnet18(weights=None) does forward and backward under autocast on a tiny batch, per device."""
    if installed_torchvision() is None:
        return _not_installed(ctx)
    try:
        from torchvision.models import resnet18
    except Exception as exc:  # a broken install raises anything at import  # noqa: BLE001
        return failed(f"import torchvision failed: {' '.join(str(exc).split())[:300]}")
    runs = [("cpu", torch.bfloat16)] + [(f"cuda:{i}", torch.float16) for i in range(ctx.gpu_count)]
    problems = []
    for device, dtype in runs:
        torch.manual_seed(0)
        model = resnet18(weights=None, num_classes=10).to(device)
        images = torch.randn(2, 3, 64, 64, device=device)
        with torch.autocast(device_type=torch.device(device).type, dtype=dtype):
            logits = model(images)
        logits.float().sum().backward()
        grads = [p.grad for p in model.parameters()]
        if logits.dtype != dtype:
            problems.append(f"{device}: logits are {logits.dtype}, not {dtype}")
        if any(g is None or not bool(torch.isfinite(g).all()) for g in grads):
            problems.append(f"{device}: missing or non-finite gradients")
    shown = ", ".join(f"{d} {str(t).replace('torch.', '')}" for d, t in runs)
    return verdict(problems, f"resnet18 forward+backward under autocast: {shown}")

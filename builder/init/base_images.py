"""The torch a Dockerfile's base image brings, read from the image's name and tag.

`pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime` states torch and CUDA in its tag (the official image's tag
scheme); NGC's `nvcr.io/nvidia/pytorch:24.05-py3` states a release, whose CUDA and torch come from
data/ngc_pytorch.yaml where NVIDIA's release notes were read; any other image named for PyTorch
(`huggingface/transformers-pytorch-gpu`, `pytorch/pytorch:latest`) brings a torch whose version its tag
does not state. Other images named for PyTorch spell torch, Python, CUDA or ROCm in their tags their own way
(`rocm/pytorch:rocm7.2_ubuntu24.04_py3.12_pytorch_release_2.7.1`, `cnstark/pytorch:2.0.1-py3.9.17-cuda11.8.0-
ubuntu20.04`): each is read from its own token of the tag. A ROCm image's torch is an AMD build, not a CUDA one.
`python:3.11-slim` states only its Python, as does any tag with a `py3.X` token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import yaml

from builder.specs.compat import load_platforms
from builder.yamlio import data_text

PYTORCH_IMAGE = re.compile(
    r"(?:docker\.io/)?pytorch/pytorch:(\d+\.\d+(?:\.\d+)?)-cuda(\d+\.\d+)-cudnn\d+-(?:runtime|devel)"
)
NGC_PYTORCH_IMAGE = re.compile(r"nvcr\.io/nvidia/pytorch:(\d\d\.\d\d)-py3(?:-\w+)?")
NO_VERSION = "named for PyTorch; its tag names no torch version"
TORCH_NAMED = re.compile(r"(^|[/_-])(py)?torch([/_:-]|$)")
CUDA_IMAGE = re.compile(r"(?:docker\.io/|nvcr\.io/)?nvidia/(?:cuda|l4t-cuda):(\d+)\.(\d+)(?:\.\d+)?[-\w.]*")
PYTHON_IMAGE = re.compile(r"(?:docker\.io/)?(?:library/)?python:(3\.\d+)(?:[.-][\w.-]*)?")
# the tokens of a third-party tag, each between `_`/`-` separators (or the tag's ends)
TAG_TORCH = re.compile(r"(?:^|[_-])(?:py)?torch[_-]?(?:release[_-])?v?(\d+\.\d+(?:\.\d+)?)(?=$|[_-])")
TAG_LEADING_VERSION = re.compile(r"^v?(\d+\.\d+\.\d+)(?=$|[_-])")
TAG_PYTHON = re.compile(r"(?:^|[_-])py(?:thon)?(3)\.?(\d{1,2})(?:\.\d+)?(?=$|[_-])")
TAG_CUDA = re.compile(r"(?:^|[_-])(?:cuda(\d+\.\d+)(?:\.\d+)?|cu(\d{2})(\d))(?=$|[_-])")
TAG_ROCM = re.compile(r"(?:^|[_-])rocm(\d+\.\d+)(?:\.\d+)?(?=$|[_-])")


@dataclass(frozen=True)
class ImageTorch:
    """The torch a base image brings: its version and CUDA where the tag (or NVIDIA's notes) state them."""

    image: str
    torch: str | None
    cuda: str | None
    why: str
    python: str | None = None
    rocm: str | None = None  # an AMD ROCm build of torch: the image has no CUDA
    unlisted: bool = False  # a release whose torch NVIDIA states, missing from envbuild's table


@dataclass(frozen=True)
class NgcRelease:
    cuda: str
    torch: str | None
    source: str
    python: str | None = None


@lru_cache(maxsize=1)
def ngc_releases() -> dict[str, NgcRelease]:
    text = data_text("ngc_pytorch.yaml")
    rows = yaml.safe_load(text)["releases"]
    return {str(tag): NgcRelease(str(row["cuda"]), row["torch"], str(row["source"]),
                                 str(row["python"]) if row.get("python") else None)
            for tag, row in rows.items()}


def image_torch(image: str) -> ImageTorch | None:
    """What torch `image` brings; None for an image not known to bring one."""
    official = PYTORCH_IMAGE.fullmatch(image)
    if official:
        return ImageTorch(image, official[1], official[2], "the official image's tag names torch and CUDA")
    ngc = NGC_PYTORCH_IMAGE.fullmatch(image)
    if ngc:
        row = ngc_releases().get(ngc[1])
        if row is None:
            return ImageTorch(image, None, None, f"NGC release {ngc[1]}, not in envbuild's NGC table", unlisted=True)
        return ImageTorch(image, row.torch, row.cuda, f"NVIDIA's NGC release {ngc[1]} ({row.source})", row.python)
    name, _, tag = image.split("@", 1)[0].lower().partition(":")
    if TORCH_NAMED.search(name.rsplit("/", 1)[-1]) or TORCH_NAMED.search(name):
        return _tagged_torch(image, tag)
    return None


def _tagged_torch(image: str, tag: str) -> ImageTorch:
    """An image named for PyTorch: what its tag's tokens state (torch, Python, CUDA or ROCm), if any."""
    torch = TAG_TORCH.search(tag) or TAG_LEADING_VERSION.search(tag)
    python = TAG_PYTHON.search(tag)
    cuda = TAG_CUDA.search(tag)
    rocm = TAG_ROCM.search(tag)
    cuda_version = (cuda[1] or f"{int(cuda[2])}.{cuda[3]}") if cuda and not rocm else None
    said = [f"torch {torch[1]}" if torch else "", f"ROCm {rocm[1]}" if rocm else "",
            f"CUDA {cuda_version}" if cuda_version else "", f"Python {python[1]}.{python[2]}" if python else ""]
    why = f"its tag names {', '.join(filter(None, said))}" if torch else NO_VERSION
    return ImageTorch(image, torch[1] if torch else None, cuda_version, why,
                      f"{python[1]}.{int(python[2])}" if python else None, rocm[1] if rocm else None)


def image_python(image: str) -> str | None:
    """The Python an image runs: `python:3.11-slim`'s, an NGC release's, or the one a torch image's tag names."""
    official = PYTHON_IMAGE.fullmatch(image)
    if official:
        return official[1]
    torch = image_torch(image)
    if torch and torch.python:
        return torch.python
    tagged = TAG_PYTHON.search(image.split("@", 1)[0].partition(":")[2].lower())  # `cann:8.0-ubuntu22.04-py3.12`
    return f"{tagged[1]}.{int(tagged[2])}" if tagged else None


def image_cuda(image: str) -> str | None:
    """The system CUDA of an `nvidia/cuda` image (weak: a torch wheel brings its own CUDA libraries)."""
    match = CUDA_IMAGE.fullmatch(image)
    return f"{int(match[1])}.{match[2]}" if match else None


def image_platform(flag: str) -> str | None:
    """`--platform=linux/arm64` -> linux-aarch64; None for a variable or an unknown platform."""
    platform = (flag.split("=", 1)[1] if "=" in flag else flag).lower()
    return next((name for name, info in load_platforms().items() if platform in info.oci), None)

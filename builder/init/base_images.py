"""The torch a Dockerfile's base image brings, read from the image's name and tag.

`pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime` states torch and CUDA in its tag (the official image's tag
scheme); NGC's `nvcr.io/nvidia/pytorch:24.05-py3` states a release, whose CUDA and torch come from
data/ngc_pytorch.yaml where NVIDIA's release notes were read; any other image named for PyTorch
(`huggingface/transformers-pytorch-gpu`, `pytorch/pytorch:latest`) brings a torch whose version its tag
does not state.
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
TORCH_NAMED = re.compile(r"(^|[/_-])(py)?torch([/_:-]|$)")
CUDA_IMAGE = re.compile(r"(?:docker\.io/|nvcr\.io/)?nvidia/cuda:(\d+)\.(\d+)(?:\.\d+)?[-\w.]*")


@dataclass(frozen=True)
class ImageTorch:
    """The torch a base image brings: its version and CUDA where the tag (or NVIDIA's notes) state them."""

    image: str
    torch: str | None
    cuda: str | None
    why: str


@dataclass(frozen=True)
class NgcRelease:
    cuda: str
    torch: str | None
    source: str


@lru_cache(maxsize=1)
def ngc_releases() -> dict[str, NgcRelease]:
    text = data_text("ngc_pytorch.yaml")
    rows = yaml.safe_load(text)["releases"]
    return {str(tag): NgcRelease(str(row["cuda"]), row["torch"], str(row["source"])) for tag, row in rows.items()}


def image_torch(image: str) -> ImageTorch | None:
    """What torch `image` brings; None for an image not known to bring one."""
    official = PYTORCH_IMAGE.fullmatch(image)
    if official:
        return ImageTorch(image, official[1], official[2], "the official image's tag names torch and CUDA")
    ngc = NGC_PYTORCH_IMAGE.fullmatch(image)
    if ngc:
        row = ngc_releases().get(ngc[1])
        if row is None:
            return ImageTorch(image, None, None, f"NGC release {ngc[1]}, not in envbuild's NGC table")
        return ImageTorch(image, row.torch, row.cuda, f"NVIDIA's NGC release {ngc[1]} ({row.source})")
    name = image.split("@", 1)[0].lower()
    if TORCH_NAMED.search(name.rsplit("/", 1)[-1]) or TORCH_NAMED.search(name):
        return ImageTorch(image, None, None, "named for PyTorch; its tag names no torch version")
    return None


def image_cuda(image: str) -> str | None:
    """The system CUDA of an `nvidia/cuda` image (weak: a torch wheel brings its own CUDA libraries)."""
    match = CUDA_IMAGE.fullmatch(image)
    return f"{int(match[1])}.{match[2]}" if match else None


def image_platform(flag: str) -> str | None:
    """`--platform=linux/arm64` -> linux-aarch64; None for a variable or an unknown platform."""
    platform = (flag.split("=", 1)[1] if "=" in flag else flag).lower()
    return next((name for name, info in load_platforms().items() if platform in info.oci), None)

"""envbuild: reproducible PyTorch-CUDA environments, one image per CUDA target."""

__version__ = "0.1.0"

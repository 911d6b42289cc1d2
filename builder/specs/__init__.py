"""Spec and targets: the envs/*.yaml model, the compatibility data and a spec resolved per CUDA target.
Owns the CUDA version type and every torch/CUDA/driver/arch decision; hands a Target to the stages above.
"""

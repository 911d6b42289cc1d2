"""The GPU host: NVML/nvidia-smi readings, doctor verdicts, a team's fleet, and explain of error logs.
Takes a host and Targets; hands on findings and per-target verdicts.
"""

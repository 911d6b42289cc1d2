"""Benchmarks run by `make bench`: each prints its figures and ends with one summary line."""

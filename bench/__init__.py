"""Benchmarks: `make bench` runs each and prints the ratios measured in one run (never timed tests)."""

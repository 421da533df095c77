"""Benchmarks (scripts, not tests): ``python -m benchmarks.trainer_overhead [--quick]``."""

"""Benchmarks: `make bench` (or `python -m bench [NAME ...]`) runs them and prints ratios."""

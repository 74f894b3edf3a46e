"""Benchmarks (not part of the installed package)."""

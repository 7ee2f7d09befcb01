"""Skyward's benchmark suite: ``python benchmarks/run.py`` (see docs/benchmarks.md)."""

"""Benchmarks of csibench itself, run by hand; results live in docs/benchmarks.md."""

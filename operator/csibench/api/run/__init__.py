"""The BenchmarkRun API by part (``csibench.api.models`` is all of it, under the names every reader imports)."""

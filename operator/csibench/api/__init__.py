"""The BenchmarkRun API: pydantic models (source of truth) and the CRD generated from them."""

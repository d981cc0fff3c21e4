"""Helpers shared by the test modules (not part of the csibench package): a test module imports only from here,
never from another test module (tests/unit/test_imports.py holds this).

What the benchmarks use too (the local cluster's client view, manifests, the operator process, BenchmarkRun
helpers) lives in ``localcluster/`` instead, so that ``bench/`` imports no test code.
"""

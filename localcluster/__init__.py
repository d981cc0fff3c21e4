"""A real Kubernetes control plane on 127.0.0.1 with simulated CSI storage and nodes.

csibench's integration tests, demo and benchmarks need a real API server whose storage behaves like a CSI
driver, on machines without a container engine. This package builds etcd and the Kubernetes control plane from
Go modules (``build``), starts them (``launcher``) and runs a simulator that plays the storage vendor's and the
nodes' side (``simulator``). For the integration tests and the benchmarks alike, it also holds how they drive
that cluster: ``kube`` (a synchronous client view and ``wait_until``), ``manifests`` (object builders),
``operator_process`` (the operator as a real process) and ``runs`` (BenchmarkRuns created, awaited and checked).
They live here, not under ``tests/``, so that ``bench/`` never imports test code. The operator package never
imports any of it.
"""

"""A real Kubernetes control plane on 127.0.0.1 with simulated CSI storage and nodes.

csibench's integration tests, demo and benchmarks need a real API server whose storage behaves like a CSI
driver, on machines without a container engine. This package builds etcd and the Kubernetes control plane from
Go modules (``build``), starts them (``launcher``) and runs a simulator that plays the storage vendor's and the
nodes' side (``simulator``). The operator package never imports it.
"""

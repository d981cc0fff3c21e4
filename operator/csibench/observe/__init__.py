"""What the cluster's Prometheus says about each step's window: the CSI machinery's cost and queries of the run's own.

A layer beside kube: it reads the API models and speaks HTTP to Prometheus; the engine calls it between steps.
"""

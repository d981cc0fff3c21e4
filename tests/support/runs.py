"""Runs the way most integration tests want them: in the test's own namespace (spec.targetNamespace).

A run that creates its own namespace waits, at cleanup, for the namespace to be gone, and kube-controller-manager's
namespace controller starts on a deleted namespace only after a fixed 5 s (namespaceDeletionGracePeriod): a
two-volume run took 6.2-6.8 s that way against 0.4 s in the test's namespace, side by side on the local cluster.
The own-namespace path stays covered where it is the subject (ownership, deletion, restarts, preflight, the
database's and the data path's restricted namespaces): those modules use ``localcluster.runs`` as it is, and a test
here can ask for it with ``own_namespace=True``.
"""

from __future__ import annotations

from typing import Any

from localcluster import runs
from localcluster.kube import Kube
from localcluster.runs import PLURAL, TERMINAL


def in_test_namespace(namespace: str, body: dict[str, Any], plural: str = PLURAL) -> dict[str, Any]:
    """``body`` with spec.targetNamespace set to the test's namespace, if it is a BenchmarkRun naming none."""
    spec = body.get("spec") or {}
    if plural != PLURAL or "targetNamespace" in spec:
        return body
    return {**body, "spec": {**spec, "targetNamespace": namespace}}


def create_run(kube: Kube, namespace: str, body: dict[str, Any], plural: str = PLURAL,
               own_namespace: bool = False) -> dict[str, Any]:
    """``localcluster.runs.create_run``, the run in ``namespace`` unless ``own_namespace``."""
    return runs.create_run(kube, namespace, body if own_namespace else in_test_namespace(namespace, body, plural),
                           plural)


def run_to_end(kube: Kube, namespace: str, body: dict[str, Any], timeout: float = 180,
               own_namespace: bool = False) -> dict[str, Any]:
    create_run(kube, namespace, body, own_namespace=own_namespace)
    return runs.wait_for_phase(kube, namespace, body["metadata"]["name"], TERMINAL, timeout)

"""What the integration tests share to act on the local cluster and read it back: pods and claims created the
way a user would, a pod's phase, the ``csibench`` command line, and the type of the ``storage_class`` fixture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from localcluster import manifests
from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import REPO_ROOT, LocalCluster
from localcluster.operator_process import OPERATOR_SA
from localcluster.sidecars import NAMESPACE as SIDECAR_NAMESPACE

# The ``storage_class`` fixture (tests/integration/conftest.py): makes a simulator StorageClass, returns its name.
StorageClassFactory = Callable[..., str]


def create_pod(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    """Right after a namespace is created its default ServiceAccount may not exist yet: retry briefly."""
    deadline = time.monotonic() + 15
    while True:
        try:
            kube.core.create_namespaced_pod(namespace, body)  # type: ignore[arg-type]  # the client validates a dict body
            return
        except ApiException as error:
            if "serviceaccount" not in str(error.body) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def create_claims(kube: Kube, namespace: str, names: list[str], storage_class: str) -> None:
    """One 1 GiB claim of ``storage_class`` per name."""
    for name in names:
        kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc(name, storage_class))  # type: ignore[arg-type]  # the client validates a dict body


def bound_claims(kube: Kube, namespace: str) -> list[Any]:
    """The namespace's claims that are Bound."""
    return [c for c in kube.core.list_namespaced_persistent_volume_claim(namespace).items
            if present(c.status).phase == "Bound"]


def phase(kube: Kube, namespace: str, name: str) -> str:
    """The pod's phase."""
    return str(present(kube.core.read_namespaced_pod(name, namespace).status).phase)


def wait_pod_phase(kube: Kube, namespace: str, name: str, wanted: str, timeout: float) -> None:
    """Wait for the pod's phase; on a timeout, fail with its status and the namespace's Warning events."""
    deadline = time.monotonic() + timeout
    while phase(kube, namespace, name) != wanted:
        if time.monotonic() > deadline:
            pod = kube.core.read_namespaced_pod(name, namespace)
            warnings = [f"{e.reason}: {e.message}" for e in kube.core.list_namespaced_event(namespace).items
                        if e.type == "Warning"]
            raise AssertionError(f"pod {name} not {wanted} after {timeout:.0f}s: status {pod.status}; "
                                 f"Warnings {warnings}")
        time.sleep(0.1)


def pod_gone(kube: Kube, namespace: str, name: str) -> bool:
    """No pod of that name is left in the namespace."""
    return name not in {present(p.metadata).name for p in kube.core.list_namespaced_pod(namespace).items}


def as_operator(cluster: LocalCluster, *args: str, input_text: str | None = None) -> tuple[bool, str]:
    """kubectl as the deployed operator's ServiceAccount: (allowed, what the API server said)."""
    completed = subprocess.run([str(cluster.binaries.kubectl), f"--kubeconfig={cluster.config.kubeconfig}",
                                f"--as={OPERATOR_SA}", *args], input=input_text, capture_output=True, text=True,
                               timeout=60)
    return completed.returncode == 0, (completed.stdout + completed.stderr).strip()


def cli(cluster: LocalCluster, *args: str) -> str:
    """``csibench ARGS`` against the local cluster; its standard output (a non-zero exit fails)."""
    env = {**os.environ, "KUBECONFIG": str(cluster.config.kubeconfig)}
    completed = subprocess.run([sys.executable, "-m", "csibench", *args], capture_output=True, text=True, env=env,
                               cwd=REPO_ROOT)
    assert completed.returncode == 0, (args, completed.stderr)
    return completed.stdout


def prometheus_query(cluster: LocalCluster, promql: str) -> list[dict[str, Any]]:
    """The series of an instant query to the local cluster's Prometheus."""
    url = f"{cluster.prometheus_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def set_sidecar_timeout(cluster: LocalCluster, kube: Kube, component: str, timeout: str) -> None:
    """Restart one sidecar with this --timeout and wait until its mirror pod runs with it (the preflight reads
    the flag there)."""
    cluster.reconfigure_sidecar(component, {"timeout": timeout})

    def running_with_it() -> bool:
        pod = kube.core.read_namespaced_pod(f"{component}-sim-node-0", SIDECAR_NAMESPACE)
        return present(pod.status).phase == "Running" and f"--timeout={timeout}" in (
            present(pod.spec).containers[0].args or [])

    wait_until(running_with_it, 60, f"{component} running with --timeout={timeout}")


@dataclass(frozen=True)
class SlowAttachRun:
    """The run of an attach slower than the attach/detach controller's fixed two-minute wait (the
    ``slow_attach_run`` fixture): where it is, for the test that waits for it."""

    namespace: str
    storage_class: str
    name: str = "waited"

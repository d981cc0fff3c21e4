"""A thin, synchronous view of the local cluster for tests: typed API groups plus a polling ``wait_until``.

Tests may poll: they check outcomes, they do not produce measurements.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config

T = TypeVar("T")
SNAPSHOT_GROUP = ("snapshot.storage.k8s.io", "v1")


@dataclass
class Kube:
    api: client.ApiClient

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Kube:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=configuration)
        return cls(client.ApiClient(configuration))

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def storage(self) -> client.StorageV1Api:
        return client.StorageV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def snapshots(self, namespace: str) -> list[dict[str, Any]]:
        return self.custom.list_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots")["items"]

    def snapshot_contents(self) -> list[dict[str, Any]]:
        return self.custom.list_cluster_custom_object(*SNAPSHOT_GROUP, "volumesnapshotcontents")["items"]

    def events(self, namespace: str, reason: str) -> list[client.CoreV1Event]:
        return [e for e in self.core.list_namespaced_event(namespace).items if e.reason == reason]


def wait_until(probe: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    """Return the first truthy result of ``probe``; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T = probe()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)
        last = probe()
    return last

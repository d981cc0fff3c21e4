"""A thin, synchronous view of the local cluster for tests and benchmarks: API groups plus a polling ``wait_until``.

Tests, and the benchmarks' set-up and teardown, may poll: they check outcomes, they do not produce measurements.
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
GROUP_SNAPSHOT_GROUP = ("groupsnapshot.storage.k8s.io", "v1")
GROUP_HANDLE = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"  # the controller's, on a member's content


@dataclass
class Kube:
    api: client.ApiClient

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Kube:
        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]  # the kubernetes config loader is unannotated
            config_file=str(path), client_configuration=configuration)
        return cls(client.ApiClient(configuration))

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def storage(self) -> client.StorageV1Api:
        return client.StorageV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def coordination(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def as_json(self, model: object) -> dict[str, Any]:
        """A model of the kubernetes client as the API server's JSON (camelCase keys)."""
        return json_object(self.api.sanitize_for_serialization(model))  # type: ignore[no-untyped-call]  # unannotated

    def snapshots(self, namespace: str) -> list[dict[str, Any]]:
        return items(self.custom.list_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots"))

    def snapshot_contents(self) -> list[dict[str, Any]]:
        return items(self.custom.list_cluster_custom_object(*SNAPSHOT_GROUP, "volumesnapshotcontents"))

    def events(self, namespace: str, reason: str) -> list[client.CoreV1Event]:
        return [e for e in self.core.list_namespaced_event(namespace).items if e.reason == reason]


def present(value: T | None) -> T:
    """``value``, which must be there: the kubernetes client types every model field as optional (``metadata``,
    ``status``, ``spec``...), but the objects a test reads from the API server carry the ones it asks for."""
    assert value is not None
    return value


def json_object(answer: object) -> dict[str, Any]:
    """A custom-object API answer (typed ``object`` by the client): a JSON object."""
    assert isinstance(answer, dict), f"not a JSON object: {answer!r}"
    return answer


def items(listing: object) -> list[dict[str, Any]]:
    """The items of a custom-object list answer."""
    found = json_object(listing)["items"]
    assert isinstance(found, list)
    return found


def wait_until(probe: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1) -> T:
    """Return the first truthy result of ``probe``; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = probe()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)
        last = probe()
    return last

"""The operator under test: the real ``csibench operator`` process, against the session's local cluster."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from localcluster.launcher import REPO_ROOT, LocalCluster
from tests.support import manifests
from tests.support.kube import Kube
from tests.support.operator import OperatorProcess, OperatorStartError

StorageClassFactory = Callable[..., str]


@pytest.fixture(scope="session")
def crd(cluster: LocalCluster) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds" / "benchmarkrun.yaml"))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/benchmarkruns.csibench.io")


@pytest.fixture(scope="session")
def operator(cluster: LocalCluster, crd: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    process = OperatorProcess(cluster, Path(tmp_path_factory.mktemp("operator")) / "operator.log")
    try:
        process.start()
    except OperatorStartError as error:
        pytest.fail(str(error), pytrace=False)
    yield process
    process.stop()


@pytest.fixture
def storage_class(kube: Kube) -> Iterator[StorageClassFactory]:
    """Make simulator StorageClasses for one test: ``storage_class(binding="Immediate", **parameters)``."""
    created: list[str] = []

    def make(binding: str = "Immediate", **parameters: str) -> str:
        name = f"sim-{uuid.uuid4().hex[:8]}"
        kube.storage.create_storage_class(manifests.storage_class(name, binding, **parameters))
        created.append(name)
        return name

    yield make
    for name in created:
        try:
            kube.storage.delete_storage_class(name)
        except ApiException as error:
            if error.status != 404:  # a test may delete its class on purpose
                raise

"""Session fixtures: one real local cluster for the whole test session, a fresh namespace per test.

The cluster is started by the project's own launcher (building the binaries on first use). If it cannot
start, every test that needs it fails with the components' log tails: integration tests never skip.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.kube import Kube
from localcluster.launcher import ClusterConfig, ClusterError, LocalCluster

TEST_API_PORT = int(os.environ.get("CSIBENCH_TEST_API_PORT", "18443"))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    state_dir = Path(tmp_path_factory.mktemp("localcluster"))
    local = LocalCluster(ClusterConfig(state_dir=state_dir, api_port=TEST_API_PORT))
    try:
        local.up()
    except ClusterError as error:
        pytest.fail(f"the local cluster could not start:\n{error}", pytrace=False)
    try:
        yield local
    finally:
        local.down()


@pytest.fixture(scope="session")
def kube(cluster: LocalCluster) -> Kube:
    return Kube.from_kubeconfig(cluster.config.kubeconfig)


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = f"t-{slug}-{uuid.uuid4().hex[:5]}"
    kube.core.create_namespace({"metadata": {"name": name, "labels": {"csibench.io/test": "true"}}})  # type: ignore[arg-type]  # the client validates a dict body
    yield name
    kube.core.delete_namespace(name)

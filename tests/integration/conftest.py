"""The operator under test: the real ``csibench operator`` process, against the session's local cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.launcher import REPO_ROOT, LocalCluster
from tests.support.operator import OperatorProcess, OperatorStartError


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

"""The operator under test: the real ``csibench operator`` process, against the session's local cluster; deploy/
applied, and an operator that runs with only the ServiceAccount's rights."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from localcluster import manifests, pki
from localcluster.kube import Kube, items, wait_until
from localcluster.launcher import REPO_ROOT, LocalCluster
from localcluster.operator_process import OPERATOR_SA, OperatorProcess, OperatorStartError
from localcluster.runs import GROUP as RUN_GROUP
from localcluster.runs import PLURAL, VERSION, benchmark_run, create_run, describe_stuck_run, get_run
from tests.support.cluster import SlowAttachRun, StorageClassFactory, set_sidecar_timeout
from tests.support.runs import in_test_namespace

OPERATOR_LOG_LINES = 80


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A failed test's report carries where each BenchmarkRun of its namespace stands and the tail of every
    operator's log written during the test: a CI failure must be readable without a second run."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if call.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    kube, namespace = funcargs.get("kube"), funcargs.get("namespace")
    if isinstance(kube, Kube) and isinstance(namespace, str):
        try:
            runs = items(kube.custom.list_namespaced_custom_object(RUN_GROUP, VERSION, namespace, PLURAL,
                                                                   _request_timeout=10))
            lines = [describe_stuck_run(kube, namespace, run["metadata"]["name"]) for run in runs]
        except Exception as error:  # the report must not fail for want of a cluster
            lines = [f"could not read the runs: {error}"]
        report.sections.append(("BenchmarkRuns of the test", "\n".join(lines) or f"no BenchmarkRun in {namespace}"))
    for path, process in OperatorProcess.started.items():
        try:
            written_during_test = path.stat().st_mtime >= call.start - 1
        except OSError:
            continue
        if written_during_test:
            report.sections.append((f"operator log {path} (last {OPERATOR_LOG_LINES} lines)",
                                    process.log(OPERATOR_LOG_LINES)))


@pytest.fixture(scope="session")
def crd(cluster: LocalCluster) -> None:
    cluster.kubectl("apply", "--server-side", "-k", str(REPO_ROOT / "crds"))
    cluster.wait_established("benchmarkruns.csibench.io")
    cluster.wait_established("benchmarksuites.csibench.io")


@pytest.fixture(scope="module")
def deployed(cluster: LocalCluster, crd: None) -> None:
    """deploy/ applied, and its admission policy in force (the API server takes a moment to start enforcing a
    new policy: until then an unlabelled create by the operator's ServiceAccount would be admitted)."""
    output = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(REPO_ROOT / "deploy"))
    assert "serverside-applied" in output
    # deploy/'s Deployment names an image the simulated kubelet cannot run (it runs commands, and deploy/ gives
    # only the image's CMD): its pods would fail and be replaced over and over. These tests run the operator as a
    # host process; test_deployed_operator runs it as a pod from deploy/overlays/local.
    cluster.kubectl("scale", "deployment/csibench-operator", "-n", "csibench-system", "--replicas=0")
    probe = json.dumps(manifests.pvc("policy-probe", "csibench-sim"))

    def enforced() -> bool:
        answer = subprocess.run([str(cluster.binaries.kubectl), f"--kubeconfig={cluster.config.kubeconfig}",
                                 f"--as={OPERATOR_SA}", "create", "--dry-run=server", "-n", "default", "-f", "-"],
                                input=probe, capture_output=True, text=True)
        return answer.returncode != 0 and "created by a BenchmarkRun" in answer.stderr

    wait_until(enforced, 30, "the admission policy enforced", interval=0.5)


@pytest.fixture
def operator_as_service_account(cluster: LocalCluster, deployed: None, operator: OperatorProcess,
                                tmp_path: Path) -> Iterator[OperatorProcess]:
    """The shared operator steps aside; one with the ServiceAccount's token takes over, then hands back."""
    token = cluster.kubectl("create", "token", "csibench-operator", "-n", "csibench-system", "--duration=1h").strip()
    kubeconfig = tmp_path / "operator.kubeconfig"
    kubeconfig.write_text(pki.build_kubeconfig(cluster.config.server, cluster.config.state_dir / "pki" / "ca.crt",
                                               "csibench-operator", token, "sa"))
    operator.stop()
    restricted = OperatorProcess(cluster, tmp_path / "operator-sa.log", kubeconfig=kubeconfig)
    try:
        restricted.start()
        yield restricted
    finally:
        restricted.stop()
        operator.start()


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
        kube.storage.create_storage_class(manifests.storage_class(name, binding, **parameters))  # type: ignore[arg-type]  # the client validates a dict body
        created.append(name)
        return name

    yield make
    for name in created:
        try:
            kube.storage.delete_storage_class(name)
        except ApiException as error:
            if error.status != 404:  # a test may delete its class on purpose
                raise


@pytest.fixture(scope="session")
def slow_attach_run(cluster: LocalCluster, kube: Kube, operator: OperatorProcess) -> Iterator[SlowAttachRun]:
    """One attach of 125 s (test_retries waits for it): started by the first module that asks for it
    (test_repeats, then test_results and test_retries say they use it), so its two idle minutes on the attach/
    detach controller's fixed wait pass beside their tests instead of after them. Those tests change nothing of
    the attacher and measure nothing an idle attach disturbs; the attacher's --timeout is a vendor's 300 s until
    the session ends (its own call must not run out first)."""
    set_sidecar_timeout(cluster, kube, "csi-attacher", "300s")
    namespace = f"t-slow-attach-{uuid.uuid4().hex[:5]}"
    kube.core.create_namespace({"metadata": {"name": namespace, "labels": {"csibench.io/test": "true"}}})  # type: ignore[arg-type]  # the client validates a dict body
    slow = SlowAttachRun(namespace, f"sim-{uuid.uuid4().hex[:8]}")
    kube.storage.create_storage_class(manifests.storage_class(slow.storage_class, "Immediate", attachLatency="125s"))  # type: ignore[arg-type]  # the client validates a dict body
    try:
        create_run(kube, namespace, in_test_namespace(namespace, benchmark_run(
            slow.name, storageClassName=slow.storage_class, volumes=1,
            steps=["createVolume", "publish", "unpublish", "deleteVolume"], timeouts={"publish": 300})))

        def publishing() -> bool:  # its claim bound: the provisioner may be restarted by the tests beside it
            run = get_run(kube, namespace, slow.name) or {}
            return any(s["name"] == "publish" and s["state"] == "Running"
                       for s in (run.get("status") or {}).get("steps") or [])

        wait_until(publishing, 120, f"{slow.name}: publish running (its claim bound)", 0.5)
        yield slow
    finally:
        set_sidecar_timeout(cluster, kube, "csi-attacher", "15s")
        kube.storage.delete_storage_class(slow.storage_class)
        kube.core.delete_namespace(namespace)

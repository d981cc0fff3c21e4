"""Slow storage is not failed storage, on the real control plane and sidecars: a serial array slower than the
provisioner's --timeout is measured through its retries (counted, their cost said), with a vendor's timeout it
is measured as the array's own span, attaches slower than the attach/detach controller's two-minute wait are
waited out, and a class the driver refuses (InvalidArgument) still fails at once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.kube import Kube
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import (
    TERMINAL,
    benchmark_run,
    describe_stuck_run,
    leftovers,
    read_report,
    step,
    wait_for_phase,
)
from tests.support.cluster import SlowAttachRun, cli, set_sidecar_timeout
from tests.support.runs import run_to_end

# The slow-attach run (conftest.py) starts with the modules before this one and idles beside them.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("slow_attach_run")]
VOLUMES, CREATE_SECONDS = 4, 3.0
SHORT_TIMEOUT, SHORT_SECONDS = "1s", 1.0  # below the array's create latency: every queued call runs out


@pytest.fixture
def sidecar_timeout(cluster: LocalCluster, kube: Kube) -> Iterator[Any]:
    """``sidecar_timeout(component, "2s")`` for one test; each component is given its upstream default back."""
    defaults = {"csi-provisioner": "10s", "csi-attacher": "15s"}
    changed: list[str] = []

    def set_it(component: str, timeout: str) -> None:
        changed.append(component)
        set_sidecar_timeout(cluster, kube, component, timeout)

    yield set_it
    for component in dict.fromkeys(changed):
        set_sidecar_timeout(cluster, kube, component, defaults[component])


def array_span(cluster: LocalCluster, storage_class: str, operation: str) -> float:
    """Seconds from the array's first start of ``operation`` on this class to its last finish (ground truth)."""
    records = [json.loads(line) for line in Path(cluster.config.ground_truth).read_text().splitlines() if line]
    ops = [r for r in records if r["storageClass"] == storage_class and r["op"] == operation and r.get("finish")]
    assert ops, f"no {operation} on {storage_class} in the ground truth"
    return float(max(r["finish"] for r in ops) - min(r["start"] for r in ops))


def test_a_provisioner_timeout_below_the_arrays_latency_is_counted_and_its_cost_said(
        kube: Kube, namespace: str, operator: OperatorProcess, cluster: LocalCluster, storage_class: Any,
        sidecar_timeout: Any) -> None:
    """Serial array, 3 s a create, 4 claims, csi-provisioner --timeout=1s: calls queued behind another run out,
    say ProvisioningFailed (DeadlineExceeded) and are made again after a backoff that doubles (1, 2, 4, 8 s); the
    array creates each volume once, by 12 s, and the last claim's next try comes at about 19 s. The claims bind,
    the step Succeeds, and status and report count the retries and say the step's time past the last of them,
    with the provisioner's --timeout."""
    sidecar_timeout("csi-provisioner", SHORT_TIMEOUT)
    serial = storage_class(createVolumeLatency=f"{CREATE_SECONDS}s", concurrency="1")
    run = run_to_end(kube, namespace, benchmark_run("retried", storageClassName=serial, volumes=VOLUMES,
                                                    steps=["createVolume", "deleteVolume"],
                                                    timeouts={"createVolume": 120}), timeout=240)
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())
    create = step(run, "createVolume")
    assert (create["succeeded"], create["failed"]) == (VOLUMES, 0), create
    deadline = [w for w in create["retriedWarnings"] if (w["reason"], w["cause"]) == ("ProvisioningFailed",
                                                                                      "DeadlineExceeded")]
    assert deadline and deadline[0]["objects"] >= 2 and deadline[0]["count"] >= 2, create
    assert deadline[0]["firstTime"] <= deadline[0]["lastTime"], create
    retries = create["retries"]
    assert retries is not None and retries["warnings"] >= deadline[0]["count"], create
    assert f"csi-provisioner --timeout={SHORT_TIMEOUT}" in retries["message"], retries
    # What the step took beyond the array's own span is the retries' backoff. The last retried Warning came
    # while the array still worked on that claim's volume, so the step's time after it is at least that excess,
    # and, with a try every timeout or so while the array is busy, at most one timeout more.
    excess = create["durationSeconds"] - array_span(cluster, serial, "createVolume")
    assert excess > 2.0, (excess, create)
    assert excess - 0.5 <= retries["tailSeconds"] <= excess + SHORT_SECONDS + 0.5, (excess, retries)
    record = next(s for s in read_report(kube, run)["steps"] if s["status"]["name"] == "createVolume")
    assert sum(record["retries"]) == retries["warnings"] and sum(1 for n in record["retries"] if n) >= 2, record
    table = cli(cluster, "report", "retried", "-n", namespace)
    assert "retries (createVolume): " in table and "× ProvisioningFailed (DeadlineExceeded)" in table, table
    assert leftovers(kube, run) == {}


def test_with_a_vendors_timeout_create_volume_matches_the_arrays_span(
        kube: Kube, namespace: str, operator: OperatorProcess, cluster: LocalCluster, storage_class: Any,
        sidecar_timeout: Any) -> None:
    """The same array with the provisioner at Trident's --timeout=600s: each call waits its turn in the array's
    queue, nothing is retried, and the step takes the array's span."""
    sidecar_timeout("csi-provisioner", "600s")
    serial = storage_class(createVolumeLatency=f"{CREATE_SECONDS}s", concurrency="1")
    run = run_to_end(kube, namespace, benchmark_run("patient", storageClassName=serial, volumes=VOLUMES,
                                                    steps=["createVolume", "deleteVolume"]), timeout=240)
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())
    create = step(run, "createVolume")
    span = array_span(cluster, serial, "createVolume")
    assert create["durationSeconds"] == pytest.approx(span, abs=0.05 * span + 0.5), (span, create)
    assert create["retriedWarnings"] == [] and create.get("retries") is None, create
    assert leftovers(kube, run) == {}


def test_a_class_the_driver_refuses_still_fails_at_once(kube: Kube, namespace: str, operator: OperatorProcess,
                                                        storage_class: Any) -> None:
    """An fstype the driver does not support: CreateVolume answers InvalidArgument, which no retry fixes; the
    claim fails on that Warning, long before the step's timeout."""
    refused = storage_class(**{"csi.storage.k8s.io/fstype": "xfs"})
    run = run_to_end(kube, namespace, benchmark_run("refused", storageClassName=refused, volumes=1,
                                                    steps=["createVolume", "deleteVolume"],
                                                    timeouts={"createVolume": 120}))
    create = step(run, "createVolume")
    assert (run["status"]["phase"], create["failed"]) == ("Failed", 1), (run["status"], operator.log())
    (reason,) = create["failureReasons"]
    assert reason["reason"] == "ProvisioningFailed" and "InvalidArgument" in reason["message"], reason
    assert create["durationSeconds"] < 30, create
    assert leftovers(kube, run) == {}


def test_attaches_slower_than_the_attach_detach_controllers_wait_succeed_with_its_retries_counted(
        kube: Kube, operator: OperatorProcess, cluster: LocalCluster, slow_attach_run: SlowAttachRun) -> None:
    """One attach of 125 s, the attacher at a vendor's --timeout=300s (so its own call does not run out first):
    the attach/detach controller gives up its fixed two-minute wait ('timed out waiting for external-attacher'),
    says FailedAttachVolume and waits again; the pod starts once the array attached. publish Succeeds, within 5%
    + 0.5 s of the array's attach, with the controller's retry counted. (About three minutes, the controller's
    wait cannot be shortened: the run started two modules earlier, see ``slow_attach_run`` in conftest.py.)"""
    namespace, slow = slow_attach_run.namespace, slow_attach_run.storage_class
    try:
        run = wait_for_phase(kube, namespace, slow_attach_run.name, TERMINAL, 420)
    except AssertionError as error:
        raise AssertionError(f"{error}; {describe_stuck_run(kube, namespace, slow_attach_run.name)}\n"
                             f"operator log:\n{operator.log(80)}") from None
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())
    publish = step(run, "publish")
    assert (publish["succeeded"], publish["failed"]) == (1, 0), publish
    (waited,) = [w for w in publish["retriedWarnings"] if w["reason"] == "FailedAttachVolume"]
    assert waited["cause"] == "WaitTimedOut" and waited["objects"] == 1, publish
    assert "fixed 2m wait" in publish["retries"]["message"], publish
    span = array_span(cluster, slow, "attach")
    assert publish["durationSeconds"] == pytest.approx(span, abs=0.05 * span + 0.5), (span, publish)
    # The five seconds after the controller's Warning were the array attaching (the attachment said so), not
    # backoff: the step's time past the storage's last sign of work is only the kubelet's part.
    assert publish["retries"]["tailSeconds"] < 1.0, publish
    assert leftovers(kube, run) == {}

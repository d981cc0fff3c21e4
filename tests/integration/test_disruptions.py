"""spec.disruptions on the local cluster: the real provisioner's pod deleted halfway through a batch of creates,
its replacement waiting out the old leader's lease, and what that cost, against the array's own record."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import yaml

from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import REPO_ROOT, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import leftovers, read_report, step
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration
PROVISIONER_POD = "csi-provisioner-sim-node-0"


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    """The example's StorageClass and run."""
    listing = yaml.safe_load((REPO_ROOT / "examples" / "disruption-provisioner.yaml").read_text())
    storage_class, run = listing["items"]
    return storage_class, run


def _provisioner_lease(kube: Kube) -> tuple[str, int]:
    """(holder, transitions) of the provisioner's leader Lease."""
    for lease in kube.coordination.list_namespaced_lease("kube-system").items:
        spec = present(lease.spec)
        if (spec.holder_identity or "").startswith(f"{PROVISIONER_POD}-"):
            return spec.holder_identity or "", spec.lease_transitions or 0
    raise AssertionError("no Lease held by the provisioner")


def _seconds(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_restarting_the_provisioner_halfway_through_creates_is_measured_and_leaks_nothing(
        kube: Kube, namespace: str, operator: OperatorProcess, cluster: LocalCluster) -> None:
    storage_class, body = example()
    storage_class["metadata"]["name"] = f"csibench-sim-serial-{namespace}"[:63]
    kube.storage.create_storage_class(storage_class)  # type: ignore[arg-type]  # the client validates a dict body
    try:
        body["spec"].update(storageClassName=storage_class["metadata"]["name"], volumes=12)
        body["spec"]["disruptions"][0]["afterObjects"] = 6
        old_holder, transitions = wait_until(lambda: _provisioner_lease(kube), 30, "the provisioner's lease")
        old_uid = present(kube.core.read_namespaced_pod(PROVISIONER_POD, "kube-system").metadata).uid
        run = run_to_end(kube, namespace, body, timeout=240)
        status = run["status"]
        assert status["phase"] == "Succeeded", (status, operator.log())
        create = step(run, "createVolume")
        assert (create["succeeded"], create["failed"]) == (12, 0), create
        (result,) = status["disruptions"]
        assert result["state"] == "Recovered" and result["pods"] == [PROVISIONER_POD], (result, operator.log())
        assert result["completedBefore"] >= 6 and result["completedBefore"] + result["completedAfter"] == 12
        assert result["unrecovered"] == 0 and result["unrecoveredNames"] == []
        # The replacement pod is the one the supervisor registered, Ready when the operator says (the pod's own
        # timestamps have one-second resolution).
        new_pod = kube.core.read_namespaced_pod(PROVISIONER_POD, "kube-system")
        assert present(new_pod.metadata).uid != old_uid
        recovered = _seconds(create["startTime"]) + result["recoveredAtSeconds"]
        created = present(present(new_pod.metadata).creation_timestamp).timestamp()
        assert created - 1.0 <= recovered <= created + 2.0, (result, created)
        # The new process waited out the old leader's 15 s lease: the batch stood still longer than the pod took.
        new_holder, new_transitions = _provisioner_lease(kube)
        assert new_holder != old_holder and new_transitions == transitions + 1
        assert result["leases"] == ["sim-csibench-io"] and result["leaseTransitions"] == 1, result
        assert result["leaderSeconds"] >= 10 and result["leaderSeconds"] > result["recoverySeconds"], result
        # No create can finish without a leader: the batch stood still at least as long as it had none.
        assert result["stallSeconds"] >= result["leaderSeconds"] - 0.5, result
        # The array created each volume once and deleted each once: the restart made it do nothing twice.
        truth = [r for r in cluster.ground_truth_records() if r["storageClass"] == storage_class["metadata"]["name"]]
        for operation in ("createVolume", "deleteVolume"):
            done = [r["object"] for r in truth if r["op"] == operation and r["result"] == "ok"]
            assert len(done) == len(set(done)) == 12, (operation, done)
        # ... and its own audit after cleanup says the same: nothing held, nothing done twice.
        leaks = status["leaks"]
        assert (leaks["source"], leaks["leaked"], leaks["repeatedOperations"]) == ("Array", 0, 0), leaks
        assert result["repeatedOperations"] == 0, result  # the restart's own share of them
        # The stored report holds the figures as status has them (written before cleanup: no audit there)
        (stored,) = read_report(kube, run)["disruptions"]
        assert (stored["state"], stored["recoverySeconds"], stored["stallSeconds"]) == (
            "Recovered", result["recoverySeconds"], result["stallSeconds"]), stored
        assert leftovers(kube, run) == {}
    finally:
        kube.storage.delete_storage_class(storage_class["metadata"]["name"])

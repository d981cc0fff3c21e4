"""Generic ephemeral volumes on the local cluster: the controller-manager's ephemeral-volume controller makes each
pod's claims, the array provisions them once each, the garbage collector and the provisioner remove them with the
pod, and nothing is left."""

from __future__ import annotations

import json
import threading

import pytest

from localcluster.kube import Kube, present
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import benchmark_run, step, wait_until_nothing_left
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration


def test_pods_with_ephemeral_volumes_are_timed_until_ready_and_until_their_volumes_are_gone(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    owners: dict[str, list[str]] = {}  # each ephemeral claim seen -> the pod uids it names as its controller
    stop = threading.Event()

    def watch_claims() -> None:  # the claims live only while their pods do: seen as they come
        while not stop.is_set():
            for claim in kube.core.list_persistent_volume_claim_for_all_namespaces().items:
                meta = present(claim.metadata)
                if "-e0000" in str(meta.name):
                    owners[str(meta.name)] = [str(ref.uid) for ref in meta.owner_references or [] if ref.controller]
            stop.wait(0.2)

    watcher = threading.Thread(target=watch_claims, daemon=True)
    watcher.start()
    try:
        run = run_to_end(kube, namespace, benchmark_run(
            "eph", storageClassName="csibench-sim", volumes=1, size="64Mi",
            steps=["createEphemeral", "deleteEphemeral"], ephemeral={"pods": 3, "volumesPerPod": 2}), timeout=240)
    finally:
        stop.set()
        watcher.join(5)
    status = run["status"]
    assert status["phase"] == "Succeeded", status.get("message")
    for name in ("createEphemeral", "deleteEphemeral"):
        record = step(run, name)
        assert (record["objects"], record["succeeded"], record["failed"]) == (3, 3, 0), record
        assert record["latency"]["p50"] > 0, record
    prefix = f"{status['targetNamespace']}/eph-{run['metadata']['uid'][:5]}-e"
    records = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    creates = [r for r in records if r["op"] == "createVolume" and r["object"].startswith(prefix)]
    expected = sorted(f"{prefix}{pod:05d}-vol-{volume}" for pod in range(3) for volume in range(2))
    assert sorted(r["object"] for r in creates) == expected, creates  # each pod's two claims, provisioned once each
    volumes = {r["volume"] for r in creates}
    deletes = [r["object"] for r in records if r["op"] == "deleteVolume" and r["object"] in volumes]
    assert sorted(deletes) == sorted(volumes), deletes  # and each deleted once, within deleteEphemeral's wait
    assert owners and all(len(uids) == 1 for uids in owners.values()), owners  # owned by their pod
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")

"""spec.population on the local cluster: claims bound to statically provisioned PVs and snapshots bound to
pre-provisioned contents, all naming the seed's handles; the steps never count them, another run's cleanup never
touches them, and they go with their owner."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.kube import SNAPSHOT_GROUP, Kube, items, json_object, present, wait_until
from localcluster.operator_process import OperatorProcess
from localcluster.runs import (
    GROUP,
    PLURAL,
    POPULATION_LABEL,
    VERSION,
    benchmark_run,
    get_run,
    population_leftovers,
    run_to_end,
    step,
    unique,
    wait_until_nothing_left,
)

pytestmark = pytest.mark.integration

CLAIMS, SNAPSHOTS, VOLUMES = 12, 5, 3


def _population(kube: Kube, run: dict[str, Any]) -> tuple[list[Any], list[Any], list[dict[str, Any]],
                                                           list[dict[str, Any]]]:
    label = f"{POPULATION_LABEL}={run['metadata']['uid']}"
    namespace = run["status"]["targetNamespace"]
    claims = kube.core.list_namespaced_persistent_volume_claim(namespace, label_selector=label).items
    volumes = kube.core.list_persistent_volume(label_selector=label).items
    snapshots = items(kube.custom.list_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots",
                                                                label_selector=label))
    contents = items(kube.custom.list_cluster_custom_object(*SNAPSHOT_GROUP, "volumesnapshotcontents",
                                                            label_selector=label))
    return claims, volumes, snapshots, contents


def test_a_population_is_bound_beside_the_batch_left_alone_by_another_run_and_removed_with_its_owner(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    name = unique("pop")
    run = run_to_end(kube, namespace, benchmark_run(
        name, storageClassName="csibench-sim", volumeSnapshotClassName="csibench-sim-snapclass", volumes=VOLUMES,
        targetNamespace=namespace, cleanup="Never", steps=["createVolume", "createSnapshot", "deleteSnapshot",
                                                           "deleteVolume"],
        population={"claims": CLAIMS, "snapshots": SNAPSHOTS}), timeout=240)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status, operator.log())
    made = status["population"]
    assert (made["claims"], made["snapshots"]) == (CLAIMS, SNAPSHOTS), made
    assert made["seconds"] > 0 and made["selector"] == f"{POPULATION_LABEL}={run['metadata']['uid']}", made
    for name_of_step in ("createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"):
        counted = step(run, name_of_step)
        assert (counted["objects"], counted["succeeded"]) == (VOLUMES, VOLUMES), counted

    claims, volumes, snapshots, contents = _population(kube, run)
    seed = next(c for c in claims if present(c.metadata).name.endswith("-pop-seed"))
    seed_pv = kube.core.read_persistent_volume(present(present(seed.spec).volume_name))
    handle = present(present(seed_pv.spec).csi).volume_handle
    members = [c for c in claims if c is not seed]
    assert len(members) == CLAIMS and len(volumes) == CLAIMS, (len(members), len(volumes))
    for claim in members:  # each bound to the PV made for it, by name, not provisioned
        assert present(claim.status).phase == "Bound" and present(claim.spec).volume_name == claim.metadata.name
    for pv in volumes:
        spec = present(pv.spec)
        assert spec.persistent_volume_reclaim_policy == "Retain" and present(spec.csi).volume_handle == handle
    assert len(snapshots) == SNAPSHOTS + 1 and len(contents) == SNAPSHOTS, (len(snapshots), len(contents))
    seed_snapshot = next(s for s in snapshots if s["metadata"]["name"].endswith("-pop-seed"))
    seed_content = json_object(kube.custom.get_cluster_custom_object(
        *SNAPSHOT_GROUP, "volumesnapshotcontents", seed_snapshot["status"]["boundVolumeSnapshotContentName"]))
    assert all(s["status"]["readyToUse"] for s in snapshots), [s.get("status") for s in snapshots]
    assert {c["spec"]["deletionPolicy"] for c in contents} == {"Retain"}
    assert {c["spec"]["source"]["snapshotHandle"] for c in contents} == {seed_content["status"]["snapshotHandle"]}

    # Another run in the same namespace, cleaned up: it never touches the population.
    other = run_to_end(kube, namespace, benchmark_run(
        unique("beside"), storageClassName="csibench-sim", volumes=2, targetNamespace=namespace,
        steps=["createVolume", "deleteVolume"]), timeout=180)
    assert other["status"]["phase"] == "Succeeded", (other["status"], operator.log())
    assert [len(found) for found in _population(kube, run)] == [CLAIMS + 1, CLAIMS, SNAPSHOTS + 1, SNAPSHOTS]

    # Its owner deleted: the population, the seed and the seed's volume and snapshot content all go.
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    wait_until(lambda: get_run(kube, namespace, name) is None, 180, f"run {name} gone (its finalizer released)")
    wait_until_nothing_left(kube, run, 60, "the run's objects and its population gone")
    assert not any(population_leftovers(kube, run["metadata"]["uid"]).values())
    names = {present(pv.metadata).name for pv in kube.core.list_persistent_volume().items}
    assert present(seed_pv.metadata).name not in names, "the seed's volume was left"
    contents_left = {c["metadata"]["name"] for c in kube.snapshot_contents()}
    assert seed_content["metadata"]["name"] not in contents_left, "the seed's snapshot content was left"


def test_a_population_past_its_timeout_fails_the_run_and_is_removed(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any) -> None:
    # A class whose provisioning takes 45 s, past the population's 30 s: the seed is not Bound in time.
    slow = storage_class(createVolumeLatency="45s")
    run = run_to_end(kube, namespace, benchmark_run(
        unique("popslow"), storageClassName=slow, volumes=1, steps=["createVolume"], targetNamespace=namespace,
        population={"claims": 3, "timeoutSeconds": 30}), timeout=240)
    status = run["status"]
    assert status["phase"] == "Failed", (status, operator.log())
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "PopulationFailed" and "seed claim" in ready["message"], ready
    assert step(run, "createVolume")["state"] == "Pending", status["steps"]
    wait_until_nothing_left(kube, run, 120, "the seed removed after the failed population")

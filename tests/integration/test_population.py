"""spec.population on the local cluster: claims bound to statically provisioned PVs and snapshots bound to
pre-provisioned contents, all naming the seed's handles; the steps never count them, another run's cleanup never
touches them, and they go with their owner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localcluster.kube import SNAPSHOT_GROUP, Kube, items, json_object, present, wait_until
from localcluster.launcher import LocalCluster
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
from tests.support.chart import render_kustomize
from tests.support.cluster import as_operator

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
    seed = next(c for c in claims if present(c.metadata).name.endswith("-seed"))
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
    seed_snapshot = next(s for s in snapshots if s["metadata"]["name"].endswith("-seed"))
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


POPULATION_OBJECTS = ("csibench-population", "csibench-operator-population-is-retain")
RECLAIM_POLICY = "csibench-operator-reclaims-only-orphaned-contents"
BASE_POLICY = "csibench-operator-owns-what-it-touches"
PATCHED = (RECLAIM_POLICY, BASE_POLICY)  # deploy/base's policies the component patches


def _pv(name: str, labelled: bool = True, policy: str = "Retain", csi: bool = True) -> dict[str, Any]:
    source = {"csi": {"driver": "sim.csibench.io", "volumeHandle": "some-handle"}} if csi else \
        {"hostPath": {"path": "/etc"}}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {POPULATION_LABEL: "some-uid"} if labelled else {}},
            "spec": {**source, "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": policy,
                     "claimRef": {"namespace": "default", "name": name}}}


def _content(name: str, policy: str = "Retain") -> dict[str, Any]:
    return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
            "metadata": {"name": name, "labels": {POPULATION_LABEL: "some-uid"}},
            "spec": {"deletionPolicy": policy, "driver": "sim.csibench.io", "source": {"snapshotHandle": "h"},
                     "volumeSnapshotRef": {"namespace": "default", "name": name}}}


def _dry_create(cluster: LocalCluster, body: dict[str, Any]) -> tuple[bool, str]:
    return as_operator(cluster, "create", "--dry-run=server", "-f", "-", input_text=json.dumps(body))


def test_the_population_component_admits_only_retained_labelled_objects_and_a_run_needs_nothing_more(
        cluster: LocalCluster, kube: Kube, namespace: str, tmp_path: Path,
        operator_as_service_account: OperatorProcess) -> None:
    """deploy/components/population on the API server: as the operator's ServiceAccount, a labelled Retain CSI PV
    and content and a labelled claim are admitted, anything else of those kinds refused; then a run with a
    population as that ServiceAccount succeeds without one refusal, and leaves nothing. (The base's patched
    policies go back as they were.)"""
    (tmp_path / "with").mkdir()
    rendered = render_kustomize(["components/population"], tmp_path / "with")
    applied = [o for o in rendered if o["metadata"]["name"] in (*POPULATION_OBJECTS, *PATCHED)]
    assert len(applied) == 8, [o["metadata"]["name"] for o in applied]  # 2 RBAC, 3 policies and their bindings
    unpatched = [o for o in render_kustomize([], tmp_path) if o["metadata"]["name"] in PATCHED]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                    input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": applied}))
    try:
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
            "name": "pop-g", "namespace": namespace, "labels": {POPULATION_LABEL: "some-uid"}}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        wait_until(lambda: _dry_create(cluster, _pv("pop-probe-ok"))[0] and
                   not _dry_create(cluster, _pv("pop-probe-delete", policy="Delete"))[0] and
                   _dry_create(cluster, claim)[0], 60, "the component's rights and policies in effect")
        unlabelled_claim = {**claim, "metadata": {"name": "pop-h", "namespace": namespace}}
        for body, admitted in [(_pv("pop-a"), True), (_pv("pop-b", policy="Delete"), False),
                               (_pv("pop-c", labelled=False), False), (_pv("pop-d", csi=False), False),
                               (_content("pop-e"), True), (_content("pop-f", policy="Delete"), False),
                               (claim, True), (unlabelled_claim, False)]:
            said = _dry_create(cluster, body)
            assert said[0] == admitted, (body["metadata"]["name"], said)
            if not admitted and body["metadata"].get("labels"):
                assert "of a run's population" in said[1], said
        run = run_to_end(kube, namespace, benchmark_run(
            unique("popsa"), storageClassName="csibench-sim", volumeSnapshotClassName="csibench-sim-snapclass",
            volumes=2, targetNamespace=namespace, steps=["createVolume", "deleteVolume"],
            population={"claims": 3, "snapshots": 2}), timeout=180)
        operator = operator_as_service_account
        assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())
        forbidden = [line for line in operator.log(400).splitlines() if "forbidden" in line.lower()]
        assert not forbidden, forbidden
        wait_until_nothing_left(kube, run, 60, "the run and its population gone")
    finally:
        for kind in ("clusterrole", "clusterrolebinding"):
            cluster.kubectl("delete", kind, POPULATION_OBJECTS[0], "--ignore-not-found")
        cluster.kubectl("delete", "validatingadmissionpolicy,validatingadmissionpolicybinding",
                        POPULATION_OBJECTS[1], "--ignore-not-found")
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                        input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": unpatched}))

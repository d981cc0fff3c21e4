"""The operator end to end on the local cluster: runs, timings, failures, deletion, cleanup policies."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from csibench.api.stored_report import object_names
from localcluster.kube import Kube, items, present, wait_until
from localcluster.launcher import REPO_ROOT, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import (
    TERMINAL,
    assert_failed_without_objects,
    benchmark_run,
    get_run,
    leftovers,
    read_report,
    step,
    unique,
    wait_for_phase,
    wait_until_nothing_left,
)
from tests.support.browser import assert_run_page_drawn, render
from tests.support.cluster import cli
from tests.support.runs import create_run, run_to_end

pytestmark = pytest.mark.integration
ALL_STEPS = ["createVolume", "publish", "unpublish", "createSnapshot", "cloneFromSnapshot", "deleteClone",
             "deleteSnapshot", "deleteVolume"]



def quickstart(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((REPO_ROOT / "examples" / "quickstart.yaml").read_text())
    body["metadata"]["name"] = name
    return body


def assert_percentiles_ordered(step_status: dict[str, Any]) -> None:
    latency = step_status["latency"]
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"], latency


def test_quickstart_runs_all_eight_steps_and_leaves_nothing(kube: Kube, namespace: str,
                                                           operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, quickstart("quickstart"), own_namespace=True)  # the default path, whole
    status = run["status"]
    assert status["phase"] == "Succeeded", (status, operator.log())
    assert [s["name"] for s in status["steps"]] == ALL_STEPS
    expected_objects = {"publish": 5, "unpublish": 5}  # 20 volumes, 4 per pod
    for s in status["steps"]:
        objects = expected_objects.get(s["name"], 20)
        assert (s["state"], s["objects"], s["succeeded"], s["failed"]) == ("Succeeded", objects, objects, 0), s
        assert s["durationSeconds"] > 0 and s["throughput"] > 0
        assert_percentiles_ordered(s)
    assert status["totalStepSeconds"] == pytest.approx(sum(s["durationSeconds"] for s in status["steps"]), abs=0.01)
    assert status["conditions"][0]["type"] == "Ready" and status["conditions"][0]["status"] == "True"
    assert "currentStep" not in status and "progress" not in status
    assert status["client"]["qps"] == 100 and status["client"]["burst"] == 200
    assert status["environment"]["provisioner"] == "sim.csibench.io"
    assert leftovers(kube, run) == {}
    assert "csibench.io/finalizer" in run["metadata"]["finalizers"]
    assert not [f for f in run["metadata"]["finalizers"] if "kopf" in f]
    reasons = [e.reason for e in kube.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={run['metadata']['name']}").items]
    assert reasons.count("StepStarted") == 8 and reasons.count("StepCompleted") == 8


def test_seed_shaped_run_of_100_volumes_in_25_pods_and_its_html_report_renders_in_headless_chromium(
        kube: Kube, namespace: str, operator: OperatorProcess, cluster: LocalCluster, tmp_path: Path) -> None:
    body = yaml.safe_load((REPO_ROOT / "examples" / "seed-100.yaml").read_text())
    run = run_to_end(kube, namespace, body, timeout=300)
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())
    assert step(run, "createVolume")["succeeded"] == 100
    assert step(run, "publish")["objects"] == 25 and step(run, "publish")["succeeded"] == 25
    assert step(run, "deleteVolume")["succeeded"] == 100
    assert leftovers(kube, run) == {}
    # The HTML report of those 100 volumes, as a browser draws it: one row per step and the totals, a latency
    # plot and a histogram per step, nothing fetched from outside the page.
    page = tmp_path / "seed-100.html"
    page.write_text(cli(cluster, "report", "seed-100", "-n", namespace, "-o", "html"))
    shot = tmp_path / "seed-100.png"
    assert_run_page_drawn(render(page, shot), f"csibench {namespace}/seed-100", len(ALL_STEPS))
    if os.environ.get("CSIBENCH_SAVE_SCREENSHOT"):  # how docs/report-screenshot.png was made
        shutil.copy(shot, os.environ["CSIBENCH_SAVE_SCREENSHOT"])


def _ground_truth(cluster: LocalCluster, storage_class: str) -> dict[str, dict[str, Any]]:
    records = [json.loads(line) for line in Path(cluster.config.ground_truth).read_text().splitlines() if line]
    return {r["object"]: r for r in records if r["storageClass"] == storage_class and r["op"] == "createVolume"}


def test_serialized_storage_is_measured_as_n_times_latency_and_matches_ground_truth(
        kube: Kube, namespace: str, operator: OperatorProcess, cluster: LocalCluster, storage_class: Any) -> None:
    latency, volumes = 0.1, 20
    serial = storage_class(latency="100ms", concurrency="1")
    run = run_to_end(kube, namespace, benchmark_run("serial", storageClassName=serial, volumes=volumes,
                                                    steps=["createVolume", "deleteVolume"]))
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())
    duration = step(run, "createVolume")["durationSeconds"]
    assert duration == pytest.approx(volumes * latency, rel=0.25)

    report = read_report(kube, run)
    create = next(s for s in report["steps"] if s["status"]["name"] == "createVolume")
    truth = _ground_truth(cluster, serial)
    target = run["status"]["targetNamespace"]
    gaps = []
    names = object_names(create)
    assert len(names) == volumes and names[0].endswith("-v00000")
    for name, submit_ms, latency_ms in zip(names, create["submitMs"], create["latencyMs"], strict=True):
        bound_at = create["startWall"] + (submit_ms + latency_ms) / 1000
        backend = truth[f"{target}/{name}"]
        assert backend["start"] >= create["startWall"] + submit_ms / 1000 - 0.01  # not provisioned before submit
        gaps.append(bound_at - backend["finish"])
    # Bound is seen after the backend finished, by about the PV controller's bind time.
    assert min(gaps) >= -0.01, gaps
    assert max(gaps) < 0.5 and statistics.median(gaps) < 0.2, gaps


def test_printer_columns_and_explain(cluster: LocalCluster, crd: None) -> None:
    explained = cluster.kubectl("explain", "benchmarkrun.spec.volumes")
    assert "Number of volumes (PVCs) in the batch." in explained
    columns = json.loads(cluster.kubectl("get", "crd", "benchmarkruns.csibench.io", "-o", "json"))
    printed = [c["name"] for c in columns["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert printed == ["Phase", "Step", "Progress", "Iteration", "Duration", "Verdict", "Age"]
    assert set(columns["spec"]["names"]["shortNames"]) == {"br", "bench"}


def test_printer_columns_show_a_run(kube: Kube, namespace: str, operator: OperatorProcess,
                                    cluster: LocalCluster) -> None:
    run_to_end(kube, namespace, benchmark_run("columns", storageClassName="csibench-sim", volumes=2,
                                              steps=["createVolume", "deleteVolume"]))
    lines = cluster.kubectl("get", "br", "-n", namespace).splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "STEP", "PROGRESS", "ITERATION", "DURATION", "VERDICT", "AGE"]
    assert lines[1].split()[:2] == ["columns", "Succeeded"] and "1/1" in lines[1].split()


def test_missing_storage_class_fails_clearly_and_creates_nothing(kube: Kube, namespace: str,
                                                                 operator: OperatorProcess) -> None:
    create_run(kube, namespace, benchmark_run("nosc", storageClassName="does-not-exist", volumes=3))
    assert_failed_without_objects(kube, namespace, "nosc", "StorageClassNotFound", "'does-not-exist' does not exist")


def test_clones_without_snapshots_fail_clearly_and_create_nothing(kube: Kube, namespace: str,
                                                                  operator: OperatorProcess) -> None:
    create_run(kube, namespace, benchmark_run("noclone", storageClassName="csibench-sim", volumes=3,
                                              volumeSnapshotClassName="csibench-sim-snapclass",
                                              steps=["createVolume", "cloneFromSnapshot"]))
    assert_failed_without_objects(kube, namespace, "noclone", "InvalidSteps",
                                   "cloneFromSnapshot needs step createSnapshot")


def test_a_snapshot_class_of_another_driver_fails_naming_both_drivers_and_creates_nothing(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """Issue 41: its snapshots would never be taken and nothing would delete them (the run sat in CleaningUp)."""
    foreign = "csibench-foreign-snapclass"
    kube.custom.create_cluster_custom_object("snapshot.storage.k8s.io", "v1", "volumesnapshotclasses", {
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass", "metadata": {"name": foreign},
        "driver": "other.example.com", "deletionPolicy": "Delete"})
    try:
        create_run(kube, namespace, benchmark_run("foreign", storageClassName="csibench-sim", volumes=2,
                                                  volumeSnapshotClassName=foreign,
                                                  steps=["createVolume", "createSnapshot", "deleteSnapshot",
                                                         "deleteVolume"]))
        assert_failed_without_objects(kube, namespace, "foreign", "InvalidSpec",
                                       f"VolumeSnapshotClass '{foreign}' is for driver 'other.example.com', not "
                                       "'sim.csibench.io'")
        uid = present(get_run(kube, namespace, "foreign"))["metadata"]["uid"]
        snapshots = items(kube.custom.list_cluster_custom_object("snapshot.storage.k8s.io", "v1", "volumesnapshots",
                                                                 label_selector=f"csibench.io/run-uid={uid}"))
        assert snapshots == []
    finally:
        kube.custom.delete_cluster_custom_object("snapshot.storage.k8s.io", "v1", "volumesnapshotclasses", foreign)


@pytest.mark.parametrize(("spec", "message"), [
    ({"volumes": 0}, "spec.volumes in body should be greater than or equal to 1"),
    ({"size": "abc"}, "spec.size in body should match"),
    ({"steps": ["createVolume", "teleport"]}, 'Unsupported value: "teleport"'),
])
def test_schema_invalid_specs_are_rejected_by_the_api_server(kube: Kube, namespace: str, crd: None,
                                                            spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiException) as rejected:
        create_run(kube, namespace, benchmark_run("invalid", storageClassName="csibench-sim", **spec))
    assert rejected.value.status == 422
    assert message in json.loads(present(rejected.value.body))["message"]


def test_deleting_a_run_mid_step_removes_everything_within_60s(kube: Kube, namespace: str,
                                                               operator: OperatorProcess, storage_class: Any) -> None:
    slow = storage_class(latency="300ms", concurrency="1")
    name = unique("doomed")
    create_run(kube, namespace, benchmark_run(name, storageClassName=slow, volumes=60,
                                              steps=["createVolume", "deleteVolume"]), own_namespace=True)

    def midway() -> dict[str, Any] | None:
        run = get_run(kube, namespace, name)
        status = (run or {}).get("status") or {}
        done = int((status.get("progress") or "0/1").split("/")[0])
        return run if status.get("currentStep") == "createVolume" and done >= 3 else None

    run = wait_until(midway, 60, "the run midway through createVolume", interval=0.2)
    kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkruns", name)
    started = time.monotonic()
    wait_until(lambda: get_run(kube, namespace, name) is None, 60, "the run itself gone")
    wait_until_nothing_left(kube, run, 60 - (time.monotonic() - started),
               "every object the run created gone")
    assert time.monotonic() - started < 60, operator.log()


def test_cleanup_never_leaves_objects_and_says_where(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run("keep", storageClassName="csibench-sim", volumes=3,
                                                    steps=["createVolume"], cleanup="Never"))
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    target = status["targetNamespace"]
    assert target in status["cleanup"] and status["objectSelector"] in status["cleanup"]
    claims = kube.core.list_namespaced_persistent_volume_claim(target, label_selector=status["objectSelector"])
    assert len(claims.items) == 3 and all(present(c.status).phase == "Bound" for c in claims.items)
    # Deleting the run still removes what it created.
    kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkruns", "keep")
    wait_until_nothing_left(kube, run, 60, "objects removed once the run is deleted")


@pytest.fixture
def operator_with_short_deleted_run_cleanup(cluster: LocalCluster, operator: OperatorProcess,
                                            tmp_path: Path) -> Iterator[OperatorProcess]:
    """The shared operator steps aside for one whose deleted runs' cleanup gives up after 10 s, not 50."""
    operator.stop()
    short = OperatorProcess(cluster, tmp_path / "operator-short-cleanup.log",
                            extra_args=["--deleted-run-cleanup-seconds=10"])
    try:
        short.start()
        yield short
    finally:
        short.stop()
        operator.start()


def test_a_deleted_run_whose_cleanup_cannot_finish_names_what_is_left_in_a_warning(
        kube: Kube, namespace: str, operator_with_short_deleted_run_cleanup: OperatorProcess) -> None:
    """Issue 41: a claim someone holds with a finalizer outlives the deleted run's cleanup (10 s here); before the
    finalizer goes, a Warning Event names it, why it is left (the finalizer), and its volume."""
    run = run_to_end(kube, namespace, benchmark_run("held", storageClassName="csibench-sim", volumes=2,
                                                    steps=["createVolume"], cleanup="Never"), own_namespace=True)
    target, selector = run["status"]["targetNamespace"], run["status"]["objectSelector"]
    claims = kube.core.list_namespaced_persistent_volume_claim(target, label_selector=selector).items
    held = present(present(claims[0].metadata).name)
    hold = {"metadata": {"finalizers": ["kubernetes.io/pvc-protection", "csibench.io/test-hold"]}}
    kube.core.patch_namespaced_persistent_volume_claim(held, target, hold)
    try:
        kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkruns", "held")

        def warned() -> str | None:
            events = kube.core.list_namespaced_event(namespace, field_selector="reason=CleanupIncomplete").items
            return next((e.message for e in events if e.type == "Warning"), None)
        message = wait_until(warned, 120, "a CleanupIncomplete Warning for the deleted run")
        assert message.startswith("after the run was deleted: cleanup incomplete after"), message
        assert f"PersistentVolumeClaim {target}/{held} (deleting since " in message, message
        assert "csibench.io/test-hold" in message and "PersistentVolume pvc-" in message, message
        wait_until(lambda: get_run(kube, namespace, "held") is None, 60, "the run gone once it said so")
    finally:
        kube.core.patch_namespaced_persistent_volume_claim(held, target, {"metadata": {"finalizers": None}})
    wait_until_nothing_left(kube, run, 60, "the claim gone once released")


def test_wait_for_first_consumer_provisions_during_publish(kube: Kube, namespace: str, operator: OperatorProcess,
                                                           storage_class: Any) -> None:
    late = storage_class("WaitForFirstConsumer")
    run = run_to_end(kube, namespace, benchmark_run("late", storageClassName=late, volumes=8, pvcsPerPod=2,
                                                    steps=["createVolume", "publish", "unpublish", "deleteVolume"]))
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())
    assert "WaitForFirstConsumer" in step(run, "createVolume")["note"]
    assert "provisioning" in step(run, "publish")["note"]
    assert step(run, "publish")["succeeded"] == 4
    assert leftovers(kube, run) == {}


def test_hung_storage_times_out_the_step_and_fails_with_counts(kube: Kube, namespace: str,
                                                               operator: OperatorProcess, storage_class: Any) -> None:
    stuck = storage_class(hangOperations="createVolume")
    run = run_to_end(kube, namespace, benchmark_run("hung", storageClassName=stuck, volumes=3,
                                                    steps=["createVolume", "deleteVolume"],
                                                    timeouts={"createVolume": 3}))
    status = run["status"]
    assert status["phase"] == "Failed", status
    create = step(run, "createVolume")
    assert (create["state"], create["succeeded"], create["failed"]) == ("Failed", 0, 3)
    assert create["failureReasons"][0]["reason"] == "Timeout" and create["failureReasons"][0]["count"] == 3
    assert create["durationSeconds"] == pytest.approx(3, abs=0.5)
    assert "createVolume: 3 of 3 failed (Timeout)" in status["conditions"][0]["message"]
    assert step(run, "deleteVolume")["succeeded"] == 3  # pending claims are still deleted
    assert leftovers(kube, run) == {}


def test_storage_slower_than_the_provisioners_timeout_is_measured_not_failed(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any) -> None:
    """Creates take 13 s, external-provisioner gives up on a CreateVolume call after its 10 s --timeout, says
    ProvisioningFailed (DeadlineExceeded) and calls again, which the array answers when its create is done: the
    claims bind, and the step measures how long that took instead of counting them failed at the warning."""
    slow = storage_class(createVolumeLatency="13s")
    create_run(kube, namespace, benchmark_run("slow", storageClassName=slow, volumes=2,
                                              steps=["createVolume", "deleteVolume"], timeouts={"createVolume": 90}))
    running = wait_until(lambda: (r := get_run(kube, namespace, "slow")) and (r.get("status") or {}).get(
        "currentStep") == "createVolume" and r, 60, "createVolume under way", interval=0.2)
    target = running["status"]["targetNamespace"]
    wait_until(lambda: [e for e in kube.core.list_namespaced_event(target).items
                        if e.reason == "ProvisioningFailed" and "code = DeadlineExceeded" in (e.message or "")],
               60, "external-provisioner's DeadlineExceeded warning", interval=0.5)
    run = wait_for_phase(kube, namespace, "slow", TERMINAL, 180)
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())
    create = step(run, "createVolume")
    assert (create["succeeded"], create["failed"]) == (2, 0), create
    assert create["latency"]["p50"] >= 13, create
    assert leftovers(kube, run) == {}


def test_a_claim_someone_else_deletes_mid_step_fails_on_its_deletion_not_at_the_timeout(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """A StorageClass whose provisioner nobody serves, so every claim stays Pending without a Warning; a user
    deletes one of the run's claims. That claim fails with reason Deleted when its deletion is seen, the others
    at the step's timeout; deleteVolume deletes the two left and skips the one it did not delete."""
    unserved = unique("unserved")
    kube.storage.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",  # type: ignore[arg-type]  # the client validates a dict body
                                       "metadata": {"name": unserved}, "provisioner": "nobody.csibench.test"})
    try:
        create_run(kube, namespace, benchmark_run("undone", storageClassName=unserved, volumes=3,
                                                  steps=["createVolume", "deleteVolume"],
                                                  timeouts={"createVolume": 20}))
        running = wait_until(lambda: (r := get_run(kube, namespace, "undone")) and (r.get("status") or {}).get(
            "currentStep") == "createVolume" and r, 60, "createVolume under way", interval=0.2)
        target, selector = running["status"]["targetNamespace"], running["status"]["objectSelector"]
        claims = wait_until(lambda: (c := kube.core.list_namespaced_persistent_volume_claim(
            target, label_selector=selector).items) and len(c) == 3 and c, 30, "the run's three claims created")
        assert isinstance(claims, list)  # the probe's only truthy answer: the list of claims
        victim = sorted(claim.metadata.name for claim in claims)[1]
        kube.core.delete_namespaced_persistent_volume_claim(victim, target)
        run = wait_for_phase(kube, namespace, "undone", TERMINAL, 120)
    finally:
        kube.storage.delete_storage_class(unserved)
    create = step(run, "createVolume")
    reasons = {r["reason"]: r["count"] for r in create["failureReasons"]}
    assert (create["state"], create["failed"], reasons) == ("Failed", 3, {"Deleted": 1, "Timeout": 2}), create
    report = next(s for s in read_report(kube, run)["steps"] if s["status"]["name"] == "createVolume")
    index = object_names(report).index(victim)
    assert report["result"][index] == "Deleted" and report["latencyMs"][index] < 15_000, report
    delete = step(run, "deleteVolume")  # the user's deletion is not the step's: that claim is skipped, not counted
    assert (delete["succeeded"], delete["skipped"]) == (2, 1), delete
    assert leftovers(kube, run) == {}

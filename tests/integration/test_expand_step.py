"""The expandVolume step through the operator on the local cluster: the real external-resizer grows each claim
(ControllerExpandVolume on the simulated array) and, for the ext4 class, the simulated kubelet grows the filesystem
(NodeExpandVolume), online while the publish step's pods mount the volumes where the host allows it. The data
path after it writes files larger than the original volume, which only fit once the filesystem has grown."""

from __future__ import annotations

import json
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from localcluster import manifests
from localcluster.kube import Kube
from localcluster.launcher import FILESYSTEM_STORAGE_CLASS, REPO_ROOT, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import (
    GROUP,
    PLURAL,
    VERSION,
    assert_failed_without_objects,
    benchmark_run,
    step,
    wait_until_nothing_left,
)
from tests.support.cluster import cli
from tests.support.runs import create_run, run_to_end


def test_the_expand_example_grows_ext4_volumes_online_then_files_larger_than_the_old_size_fit(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    """examples/expand.yaml as it is: 4 volumes of 64Mi grown to 192Mi while the publish step's pods hold them,
    both halves timed; then fio lays out a 72Mi file on each, which fits only in the grown filesystem. (The publish
    pods' pause containers do not mount the image, so the node's resize2fs needs no CAP_SYS_RESOURCE here;
    test_expansion.py grows one that a running container has mounted.)"""
    body = yaml.safe_load((REPO_ROOT / "examples" / "expand.yaml").read_text())
    assert body["spec"]["storageClassName"] == FILESYSTEM_STORAGE_CLASS
    run = run_to_end(kube, namespace, body, timeout=300)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status.get("message"), operator.log()[-3000:])
    grow = step(run, "expandVolume")
    assert grow["note"].startswith("online") and grow["succeeded"] == 4, grow
    controller, node = grow["phases"]
    assert (controller["name"], controller["objects"], node["name"], node["objects"]) == (
        "controller", 4, "node", 4), grow
    assert node["latency"]["p50"] > 0 and controller["latency"]["p50"] > 0
    assert controller["latency"]["max"] + node["latency"]["max"] >= grow["latency"]["p50"]
    (row,) = status["dataPath"]
    assert row["state"] == "Succeeded" and row["volumes"] == 4 and row["writeMiBps"] > 0, row  # 72Mi files fit
    table = cli(cluster, "report", "expand", "-n", namespace)
    assert "└ controller" in table and "└ node" in table, table
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")


def test_an_array_failing_expansions_fails_each_claim_with_the_resizers_warning(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess, storage_class: Any) -> None:
    """Offline (no publish step) on a class whose volumes have no filesystem: the controller's half is all of it,
    and every ControllerExpandVolume fails on the array, which the resizer says in a VolumeResizeFailed Warning."""
    array = storage_class(failureRate="1", failureOperations="expandVolume")
    body = benchmark_run("nogrow", storageClassName=array, volumes=3, size="64Mi", expand={"by": "64Mi"},
                         steps=["createVolume", "expandVolume", "deleteVolume"], timeouts={"expandVolume": 60},
                         failAfterWarnings=1)  # the resizer retries Internal: fail on its first Warning
    run = run_to_end(kube, namespace, body)
    grow = step(run, "expandVolume")
    assert grow["note"].startswith("offline") and (grow["state"], grow["failed"]) == ("Failed", 3), grow
    (reason,) = grow["failureReasons"]
    assert reason["reason"] == "VolumeResizeFailed" and "Internal" in reason["message"], reason
    assert run["status"]["conditions"][0]["reason"] == "ObjectsFailed"
    expansions = [line for line in map(json.loads, cluster.config.ground_truth.read_text().splitlines())
                  if line["op"] == "expandVolume" and line["storageClass"] == array]
    assert expansions and {line["result"] for line in expansions} == {"error"}  # the array said no, every time
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")


def test_a_class_without_allow_volume_expansion_fails_before_anything_is_created(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    name = "csibench-fixed-size"
    kube.storage.create_storage_class(manifests.storage_class(name, allow_expansion=False))  # type: ignore[arg-type]  # the client validates a dict body
    try:
        create_run(kube, namespace, benchmark_run("fixed", storageClassName=name, volumes=2, expand={"to": "2Gi"}))
        assert_failed_without_objects(kube, namespace, "fixed", "ExpansionNotAllowed", "allowVolumeExpansion: true")
    finally:
        kube.storage.delete_storage_class(name)


def test_admission_takes_sizes_in_any_form_and_refuses_an_expansion_that_cannot_be(kube: Kube, namespace: str,
                                                                                   crd: None) -> None:
    """Server-side dry runs against the CRD's rules: whole byte counts however written (a fractional binary
    suffix, the 1Pi maximum) are admitted; a size that does not grow, or an expand without exactly one of to and
    by, is refused with the rule's own message (and no CEL evaluation error beside it)."""
    def admit(size: str, expand: dict[str, str]) -> str | None:
        body = benchmark_run("adm", storageClassName="csibench-sim", size=size, expand=expand)
        try:
            kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body, dry_run="All")
        except ApiException as error:
            return str(json.loads(error.body or "{}").get("message"))
        return None

    for size, expand in (("1Gi", {"to": "1.5Gi"}), ("1Gi", {"to": "1Pi"}), ("1Gi", {"by": "1536Mi"}),
                         ("1Ti", {"to": "100Ti"})):
        assert admit(size, expand) is None, (size, expand, admit(size, expand))
    for size, expand, words in (("1Gi", {"to": "1024Mi"}, "greater than size"),
                                ("1Gi", {}, "exactly one of to and by"),
                                ("1Gi", {"to": "2Gi", "by": "1Gi"}, "exactly one of to and by"),
                                ("1Gi", {"to": "2Pi"}, "at most 1Pi")):
        message = admit(size, expand)
        assert message is not None and words in message and "evaluating rule" not in message, (expand, message)

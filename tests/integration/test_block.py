"""Raw block volumes (volumeMode Block) on the local cluster: the lifecycle and the data path on the device, its
checksums held against the array's own device files, clones verified, nothing left. fio stays tiny."""

from __future__ import annotations

import hashlib

import pytest
from kubernetes.client.exceptions import ApiException

from localcluster.kube import Kube, json_object, present, wait_until
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import benchmark_run, create_run, get_run, read_report, step, wait_until_nothing_left
from tests.support.datapath import SIM, TINY, assert_host_clean
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration
MIB = 2**20


def test_fio_on_block_volumes_writes_the_arrays_device_and_each_clone_holds_what_its_source_held(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    workloads = [{"name": "seqWrite", "pattern": "write", "blockSize": "64Ki"},
                 {"name": "randRead", "pattern": "randread", "blockSize": "4Ki"}]
    run = run_to_end(kube, namespace, benchmark_run(
        "block", volumes=2, volumeMode="Block", cleanup="Never", targetNamespace=namespace,
        steps=["createVolume", "publish", "unpublish", "dataPath", "createSnapshot", "cloneFromSnapshot",
               "verifyClone"],
        dataPath={**TINY, "workloads": workloads, "verify": True}, **SIM), timeout=300)
    status = run["status"]
    assert status["phase"] == "Succeeded", status.get("message")
    rows = {row["name"]: row for row in status["dataPath"]}
    assert rows["seqWrite"]["writeMiBps"] > 0 and rows["seqWrite"]["readMiBps"] == 0, rows["seqWrite"]
    assert rows["randRead"]["readIOPS"] > 0 and rows["randRead"]["writeIOPS"] == 0, rows["randRead"]
    assert all(row["volumes"] == 2 and row["jobs"] == 4 for row in rows.values()), rows
    assert step(run, "verifyClone")["succeeded"] == 2

    # The ground truth: each volume's device file on the array, of the claim's size, holds what the checksum
    # pods read through the pod's device (each job's 4 MiB region, written by the layout and by seqWrite).
    report = read_report(kube, run)
    record = next(s for s in report["steps"] if s["status"]["name"] == "dataPath")
    recorded = record["extra"]["checksums"]
    claims = {present(present(c.metadata).name): c
              for c in kube.core.list_namespaced_persistent_volume_claim(namespace).items}
    for name, claim in claims.items():
        assert present(claim.spec).volume_mode == "Block", name
        if not name.endswith(("-v00000", "-v00001")):
            continue
        pv = kube.core.read_persistent_volume(present(present(claim.spec).volume_name))
        device = cluster.config.data_dir / "volumes" / present(present(pv.spec).csi).volume_handle / "block.dev"
        content = device.read_bytes()
        assert len(content) == 64 * MIB, (name, len(content))
        assert recorded[name] == {f"block.{i}": hashlib.sha256(content[i * 4 * MIB:(i + 1) * 4 * MIB]).hexdigest()
                                  for i in range(2)}, name
        assert any(content[:8 * MIB]) and not any(content[8 * MIB:9 * MIB])  # written where fio works, only there

    kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkruns", "block")
    wait_until(lambda: get_run(kube, namespace, "block") is None, 120, "run deleted")
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)


def test_block_regions_that_are_not_whole_mib_and_bad_ephemeral_parts_are_refused_by_the_api_server(
        kube: Kube, namespace: str) -> None:
    """The CRD's own CEL (the pydantic twins are unit tests'): a Block run's fileSize must be whole MiB, so each
    region starts aligned for direct I/O; an ephemeral part needs its steps listed."""
    cases = [
        (benchmark_run("unaligned", volumes=1, volumeMode="Block", dataPath={**TINY, "fileSize": "1536Ki"}, **SIM),
         "every fileSize must be a whole number of MiB"),
        (benchmark_run("unlisted", volumes=1, ephemeral={"pods": 2}, steps=["createVolume", "deleteVolume"], **SIM),
         "steps must list createEphemeral exactly when spec.ephemeral is set"),
        (benchmark_run("too-many", volumes=1, ephemeral={"pods": 2, "volumesPerPod": 17}, **SIM), "volumesPerPod"),
    ]
    for body, words in cases:
        with pytest.raises(ApiException) as refused:
            create_run(kube, namespace, body)
        assert refused.value.status == 422 and words in present(refused.value.body), (words, refused.value.body)
    filesystem = benchmark_run("files", volumes=1, dataPath={**TINY, "fileSize": "1536Ki"}, **SIM)
    admitted = json_object(kube.custom.create_namespaced_custom_object(
        "csibench.io", "v1alpha1", namespace, "benchmarkruns", filesystem, dry_run="All"))
    assert admitted["metadata"]["name"] == "files"  # files need no alignment (a dry run: nothing is created)

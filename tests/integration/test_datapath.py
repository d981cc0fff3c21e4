"""Issue 12's acceptance on the local cluster: the data path (fio in process-mode pods) end to end, its results in
status, report, metrics and compare, its failures, an operator killed inside it, and data that survives into
clones. fio jobs stay tiny (a few MiB, 1 s): these disks and cores are shared."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from localcluster import manifests
from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import FILESYSTEM_STORAGE_CLASS, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import (
    TERMINAL,
    assert_failed_without_objects,
    benchmark_run,
    get_run,
    read_report,
    step,
    wait_for_phase,
    wait_until_nothing_left,
    watch_for_phase,
)
from tests.support.cluster import cli, create_pod, pod_gone, wait_pod_phase
from tests.support.datapath import SIM, TINY, assert_host_clean, assert_latency_is_the_merge_of_the_pods
from tests.support.metrics import samples
from tests.support.runs import create_run, run_to_end

pytestmark = pytest.mark.integration
WORKLOADS = ["seqRead", "seqWrite", "randRead", "randWrite", "randReadWrite"]
def test_default_data_path_succeeds_with_five_rows_everywhere(kube: Kube, namespace: str, cluster: LocalCluster,
                                                              operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run("dp", volumes=3, dataPath=TINY, **SIM), timeout=300)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status.get("message"), operator.log()[-3000:])
    names = [s["name"] for s in status["steps"]]
    assert names.index("dataPath") == names.index("unpublish") + 1 and names.index("dataPath") < names.index(
        "createSnapshot")
    assert step(run, "dataPath")["succeeded"] == 15
    rows = {row["name"]: row for row in status["dataPath"]}
    assert list(rows) == WORKLOADS
    nodes = sorted(str(present(n.metadata).name) for n in kube.core.list_node().items)
    for name, row in rows.items():
        assert row["state"] == "Succeeded" and row["volumes"] == 3 and row["jobs"] == 6, row
        # spread: the three volumes' pods on the local cluster's three nodes, one each, adding up to the row
        assert [(n["node"], n["volumes"]) for n in row["nodes"]] == [(node, 1) for node in nodes], row
        for field, step_size in (("readMiBps", 0.001), ("writeMiBps", 0.001), ("readIOPS", 0.1), ("writeIOPS", 0.1)):
            rounding = step_size * len(row["nodes"])  # each figure is rounded to its step, the sum of three to 3 steps
            assert sum(n[field] for n in row["nodes"]) == pytest.approx(row[field], abs=rounding), (field, row)
        assert row["startSkewSeconds"] >= 0 and 0 <= row["togetherSeconds"] <= 1.1, row  # fio's 1 s runtime
        reads, writes = "Read" in name or "ReadWrite" in name, "Write" in name
        assert (row["readMiBps"] > 0 and row["readIOPS"] > 0) == reads, row
        assert (row["writeMiBps"] > 0 and row["writeIOPS"] > 0) == writes, row
        assert 0 < row["minVolumeMiBps"] <= row["maxVolumeMiBps"] and row["durationSeconds"] > 0
    report = read_report(kube, run)
    record = next(s for s in report["steps"] if s["status"]["name"] == "dataPath")
    volumes = record["extra"]["volumes"]
    assert len(volumes) == 15 and {v["workload"] for v in volumes} == set(WORKLOADS)
    assert {v["node"] for v in volumes} == set(nodes)
    for name, row in rows.items():  # the row's skew is its pods' measured windows, as the report keeps them
        windows = [(v["startMs"], v["endMs"]) for v in volumes if v["workload"] == name]
        skew = (max(s for s, _ in windows) - min(s for s, _ in windows)) / 1000
        assert row["startSkewSeconds"] == pytest.approx(skew, abs=0.001), (row, windows)
    assert all(v["readBytesPerSecond"] + v["writeBytesPerSecond"] > 0 for v in volumes)
    assert_latency_is_the_merge_of_the_pods(rows, volumes)

    text = operator.scrape()
    label = f"{namespace}/dp"
    read = samples(text, "csibench_datapath_bandwidth_bytes_per_second", run=label, workload="seqRead",
                   direction="read")
    assert read and read[0][1] == pytest.approx(rows["seqRead"]["readMiBps"] * 2**20, rel=1e-3)
    assert samples(text, "csibench_datapath_operations_per_second", run=label, workload="randReadWrite",
                   direction="write")
    assert not samples(text, "csibench_datapath_bandwidth_bytes_per_second", run=label, workload="seqRead",
                       direction="write")

    table = cli(cluster, "report", "dp", "-n", namespace)
    assert "Data path (fio)" in table and "100% read, sequential" in table and "64 KiB" in table
    compared = cli(cluster, "compare", "dp", "dp", "-n", namespace)
    row = next(line for line in compared.splitlines() if line.startswith("Random 50/50"))
    assert row.rstrip().endswith("1.00×")
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)


def test_kubectl_logs_of_a_running_workload_pod_shows_fio_as_non_root_under_restricted(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    workloads = [{"name": "seqWrite", "pattern": "write", "blockSize": "64Ki"}]
    # direct: false with a few MiB of files: the working set fits any node's page cache, which preflight says
    create_run(kube, namespace, benchmark_run("logs", volumes=1, steps=["createVolume", "dataPath", "deleteVolume"],
                                              dataPath={**TINY, "runtimeSeconds": 4, "workloads": workloads,
                                                        "direct": False},
                                              storageClassName="csibench-sim", size="64Mi"),
               own_namespace=True)  # the run's own namespace is the one labelled "restricted"

    def running_pod() -> Any:
        pods = kube.core.list_pod_for_all_namespaces(label_selector="csibench.io/workload=seqWrite").items
        return next((p for p in pods if present(p.status).phase == "Running"
                     and present(present(p.metadata).name).startswith("logs-")), None)

    pod = wait_until(running_pod, 120, "a running workload pod")
    pod_namespace = pod.metadata.namespace
    logs = wait_until(lambda: cluster.kubectl("logs", "-n", pod_namespace, pod.metadata.name), 30,
                      "fio's first status document in kubectl logs", interval=0.3)
    assert '"fio version"' in logs and '"jobname" : "seqWrite"' in logs
    labels = present(present(kube.core.read_namespace(pod_namespace).metadata).labels)
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    security = pod.spec.security_context
    assert security.run_as_non_root and security.run_as_user == 65532 and security.fs_group == 65532
    # The process really ran as that user: the kubelet's runtime put it there, and fio's files belong to it.
    owners = {line.split()[1] for line in subprocess.run(["ps", "-eo", "pid,uid,args"], capture_output=True,
                                                         text=True).stdout.splitlines() if "--name=seqWrite" in line}
    assert owners == {"65532"}, owners
    run = watch_for_phase(kube, namespace, "logs", TERMINAL, 120)  # as the benches wait: no GETs while fio runs
    assert run["status"]["phase"] == "Succeeded", run["status"].get("message")
    cache = [f for f in run["status"]["preflight"] if f["check"] == "DataPathCache"]
    assert len(cache) == 1 and cache[0]["severity"] == "Warning" and "page cache" in cache[0]["message"], cache
    assert "DataPathCache" in cli(cluster, "report", "logs", "-n", namespace)
    assert_host_clean(cluster)


def test_failing_workloads_fail_their_rows_with_the_tools_message_and_the_rest_runs(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    workloads = [{"name": "badEngine", "pattern": "read", "blockSize": "8Ki", "ioengine": "nosuchengine"},
                 {"name": "randRead", "pattern": "randread", "blockSize": "8Ki"}]
    run = run_to_end(kube, namespace, benchmark_run(
        "fails", volumes=2, steps=["createVolume", "dataPath", "deleteVolume"],
        storageClassName=FILESYSTEM_STORAGE_CLASS, size="64Mi", dataPath={**TINY, "workloads": workloads}),
        timeout=240)
    status = run["status"]
    assert (status["phase"], status["conditions"][0]["reason"]) == ("Failed", "ObjectsFailed"), status
    rows = {row["name"]: row for row in status["dataPath"]}
    assert rows["badEngine"]["state"] == "Failed" and rows["badEngine"]["failed"] == 2
    assert "engine nosuchengine not loadable" in rows["badEngine"]["message"], rows["badEngine"]
    assert rows["randRead"]["state"] == "Succeeded" and rows["randRead"]["readMiBps"] > 0
    assert step(run, "dataPath")["failed"] == 2 and "nosuchengine" in status["message"]
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)


def test_files_that_cannot_fit_the_formatted_volume_fail_the_run_before_anything_is_created(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    # On the ext4 class each volume is a real 64 MiB filesystem: two 32 MiB files pass admission (they "fit" the
    # volume's size) but not the filesystem's journal and metadata; the run says so before creating a volume.
    workloads = [{"name": "volumeFull", "pattern": "write", "blockSize": "64Ki", "fileSize": "32Mi"}]
    create_run(kube, namespace, benchmark_run(
        "unfit", volumes=2, steps=["createVolume", "dataPath", "deleteVolume"],
        storageClassName=FILESYSTEM_STORAGE_CLASS, size="64Mi", dataPath={**TINY, "workloads": workloads}))
    assert_failed_without_objects(kube, namespace, "unfit", "DataPathDoesNotFit",
                                  "(2 x 32Mi = 64Mi, every workload) does not fit volumes of 64Mi formatted ext4")


def test_a_file_size_that_exceeds_the_volume_and_verify_without_its_step_are_refused_at_admission(
        kube: Kube, namespace: str) -> None:
    body = benchmark_run("too-big", volumes=1, storageClassName="csibench-sim", size="8Mi",
                         dataPath={**TINY, "fileSize": "8Mi"})
    with pytest.raises(ApiException) as refused:
        create_run(kube, namespace, body)
    assert refused.value.status == 422
    assert "jobsPerVolume x fileSize (of every workload) must fit the volume size" in present(refused.value.body)
    # verify needs its step: the API server's own CEL rule says so (the pydantic twin is a unit test's).
    unverified = benchmark_run("unverified", volumes=1, storageClassName="csibench-sim",
                               volumeSnapshotClassName="csibench-sim-snapclass", dataPath={**TINY, "verify": True},
                               steps=["createVolume", "dataPath", "createSnapshot", "cloneFromSnapshot"])
    with pytest.raises(ApiException) as missing:
        create_run(kube, namespace, unverified)
    assert missing.value.status == 422
    assert "steps must list verifyClone exactly when spec.dataPath.verify is true" in present(missing.value.body)


def test_operator_killed_inside_the_data_path_redoes_it_honestly_and_leaves_nothing(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    create_run(kube, namespace, benchmark_run("killed", volumes=2, steps=["createVolume", "dataPath",
                                                                          "deleteVolume"],
                                              storageClassName="csibench-sim", size="64Mi",
                                              dataPath={**TINY, "runtimeSeconds": 2}), own_namespace=True)

    def second_workload_running() -> bool:
        run = get_run(kube, namespace, "killed") or {}
        rows = (run.get("status") or {}).get("dataPath") or []
        return len(rows) == 5 and rows[0]["state"] == "Succeeded" and rows[1]["state"] == "Running"

    wait_until(second_workload_running, 180, "the data path's second workload running", interval=0.05)
    time.sleep(0.5)
    operator.stop(signal.SIGKILL)
    operator.start()
    run = wait_for_phase(kube, namespace, "killed", TERMINAL, 300)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status.get("message"), operator.log()[-3000:])
    data = step(run, "dataPath")
    assert data["attempts"] == 2 and "interrupted by an operator restart" in data["restored"], data
    assert data["succeeded"] == data["objects"] == 10
    assert all(row["state"] == "Succeeded" for row in status["dataPath"])
    report = read_report(kube, run)
    assert [a["name"] for a in report["interruptedAttempts"]] == ["dataPath"]
    assert "readMiBps" not in json.dumps(report["interruptedAttempts"])  # the cut-short attempt is no measurement
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)


def test_data_written_by_the_data_path_is_in_the_clone_of_its_snapshot(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    # On the ext4 class: the snapshot copies the volume's filesystem image, the clone restores it.
    workloads = [{"name": "seqWrite", "pattern": "write", "blockSize": "64Ki"}]
    run = run_to_end(kube, namespace, benchmark_run(
        "content", volumes=1, cleanup="Never", targetNamespace=namespace,
        steps=["createVolume", "publish", "unpublish", "dataPath", "createSnapshot", "cloneFromSnapshot"],
        dataPath={**TINY, "jobsPerVolume": 1, "workloads": workloads},
        **{**SIM, "storageClassName": FILESYSTEM_STORAGE_CLASS}), timeout=240)
    assert run["status"]["phase"] == "Succeeded", run["status"].get("message")
    claims = {present(present(c.metadata).name): c
              for c in kube.core.list_namespaced_persistent_volume_claim(namespace).items}
    source = next(name for name in claims if name.endswith("-v00000"))
    clone = next(name for name in claims if name.endswith("-c00000"))
    digest = "df -B1 --output=size /data/v; ls -n /data/v; md5sum /data/v/csibench.0.0 | cut -d' ' -f1"
    for pod, claim in (("read-source", source), ("read-clone", clone)):
        body = manifests.workload_pod(pod, claim, digest)
        body["spec"]["securityContext"]["fsGroup"] = 65532
        create_pod(kube, namespace, body)
    for pod in ("read-source", "read-clone"):
        wait_pod_phase(kube, namespace, pod, "Succeeded", 60)
    source_out = cluster.kubectl("logs", "-n", namespace, "read-source").splitlines()
    clone_out = cluster.kubectl("logs", "-n", namespace, "read-clone").splitlines()
    assert any("csibench.0.0" in line and " 65532 " in line and str(4 * 2**20) in line for line in clone_out), \
        clone_out
    assert clone_out[-1] == source_out[-1] and len(clone_out[-1]) == 32  # the same bytes, written by fio
    for out in (source_out, clone_out):  # each claim is its own filesystem of the claim's size, not the host's
        assert 48 * 2**20 < int(out[1]) <= 64 * 2**20, out
    for pod in ("read-source", "read-clone"):
        kube.core.delete_namespaced_pod(pod, namespace)
        wait_until(lambda pod=pod: pod_gone(kube, namespace, pod), 30, f"{pod} gone")  # type: ignore[misc]
    kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkruns", "content")
    wait_until(lambda: get_run(kube, namespace, "content") is None, 120, "run deleted")
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)

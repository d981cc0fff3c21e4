"""Shipping: deploy/ applies cleanly, its RBAC is enough and no more, and the wheel runs from a fresh venv."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import sysconfig
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from csibench.engine.observed import CONTENT_FINALIZER
from csibench.engine.reclaim import BEING_DELETED
from localcluster import manifests
from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import GROUP_SNAPSHOT_CLASS, REPO_ROOT, LocalCluster
from localcluster.operator_process import OPERATOR_SA, OperatorProcess
from localcluster.runs import benchmark_run, create_run, get_run, leftovers, run_to_end

pytestmark = pytest.mark.integration


def test_deploy_applies_with_server_side_apply(cluster: LocalCluster, deployed: None) -> None:
    rendered = list(yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO_ROOT / "deploy"))))
    kinds = sorted(obj["kind"] for obj in rendered)
    assert kinds == sorted(["Namespace", *["CustomResourceDefinition"] * 3, "ServiceAccount",
                            "ClusterRole", "ClusterRoleBinding", "ClusterRole", "ClusterRoleBinding",
                            *["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * 4,
                            "Deployment", "Service"])
    for obj in rendered:
        namespace = obj["metadata"].get("namespace")
        args = ["get", obj["kind"].lower(), obj["metadata"]["name"], "-o", "name"]
        assert cluster.kubectl(*args, *(["-n", namespace] if namespace else [])).strip()
    deployment = next(o for o in rendered if o["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {p["name"] for p in container["ports"]} == {"metrics", "health"}
    roles = {o["metadata"]["name"]: o["rules"] for o in rendered if o["kind"] == "ClusterRole"}
    for rules in roles.values():
        assert not [r for r in rules if "*" in r["verbs"] or "*" in r["resources"] or "secrets" in r["resources"]]
    # Discovery (preflight) is read-only and separate, so it can be left out.
    assert {(tuple(r["resources"]), tuple(r["verbs"])) for r in roles["csibench-discovery"]} == {
        (("pods",), ("list",)), (("csidrivers",), ("get",))}


def _can(cluster: LocalCluster, verb: str, resource: str, namespace: str = "default") -> bool:
    # "pods/exec" would read as TYPE/NAME (a pod named exec): subresources go in --subresource.
    kind, _, subresource = resource.partition("/")
    extra = [f"--subresource={subresource}"] if subresource else []
    answer = cluster.kubectl("auth", "can-i", verb, kind, *extra, f"--as={OPERATOR_SA}", "-n", namespace,
                             check=False)
    return answer.strip() == "yes"


@pytest.mark.parametrize(("verb", "resource"), [
    ("get", "secrets"), ("list", "secrets"), ("watch", "secrets"), ("delete", "persistentvolumes"),
    ("delete", "nodes"), ("delete", "storageclasses"), ("delete", "volumeattachments"),
    ("update", "volumesnapshotcontents.snapshot.storage.k8s.io"), ("create", "deployments"),
    ("delete", "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io"),
    ("patch", "volumegroupsnapshots.groupsnapshot.storage.k8s.io"),
    ("update", "persistentvolumeclaims"), ("delete", "configmaps"),
    ("delete", "benchmarkschedules.csibench.io"), ("create", "benchmarkschedules.csibench.io"),
    ("update", "benchmarkschedules.csibench.io"),
    ("create", "clusterrolebindings"), ("update", "pods"), ("create", "pods/exec"),
    ("delete", "benchmarksuites.csibench.io"), ("create", "benchmarksuites.csibench.io"),
    ("update", "benchmarkruns.csibench.io"), ("patch", "benchmarksuites.csibench.io/finalizers"),
])
def test_rbac_denies_what_the_operator_never_needs(cluster: LocalCluster, deployed: None, verb: str,
                                                   resource: str) -> None:
    assert not _can(cluster, verb, resource)


@pytest.mark.parametrize(("verb", "resource"), [
    ("create", "persistentvolumeclaims"), ("deletecollection", "pods"), ("watch", "persistentvolumes"),
    ("create", "volumesnapshots.snapshot.storage.k8s.io"), ("patch", "benchmarkruns.csibench.io/status"),
    ("create", "namespaces"), ("create", "configmaps"), ("get", "csidrivers.storage.k8s.io"), ("get", "pods/log"),
    ("delete", "volumesnapshotcontents.snapshot.storage.k8s.io"),  # orphans only: the admission policy says which
    ("patch", "persistentvolumeclaims"),  # the run's own only (expandVolume): the admission policy says which
    ("patch", "pods"),  # the run's own, one annotation (the data path's start barrier): the policy says which
    ("create", "volumegroupsnapshots.groupsnapshot.storage.k8s.io"),
    ("watch", "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io"),
    ("create", "benchmarkruns.csibench.io"),  # a suite's or schedule's runs only: the admission policy says which
    ("delete", "benchmarkruns.csibench.io"),  # a schedule's runs only: the admission policy says which
    ("watch", "benchmarkschedules.csibench.io"), ("patch", "benchmarkschedules.csibench.io/status"),
    ("watch", "benchmarksuites.csibench.io"), ("patch", "benchmarksuites.csibench.io/status"),
    ("update", "benchmarksuites.csibench.io/finalizers"),
])
def test_rbac_allows_what_runs_use(cluster: LocalCluster, deployed: None, verb: str, resource: str) -> None:
    assert _can(cluster, verb, resource)


def test_the_operator_may_delete_a_run_only_as_a_schedules(kube: Kube, namespace: str, cluster: LocalCluster,
                                                           deployed: None) -> None:
    """RBAC gives delete on runs (a schedule's history limits); the policy admits it only for a run labelled with
    a schedule's uid and owned by that schedule: a user's run, or one carrying the label alone, is refused."""
    schedule = create_run(kube, namespace, plural="benchmarkschedules", body={
        "apiVersion": "csibench.io/v1alpha1", "kind": "BenchmarkSchedule", "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 0 1 1 *", "suspend": True,
                 "template": {"storageClassName": "csibench-sim", "steps": ["createVolume", "deleteVolume"]}}})
    uid = schedule["metadata"]["uid"]
    owner = {"apiVersion": "csibench.io/v1alpha1", "kind": "BenchmarkSchedule", "name": "nightly", "uid": uid,
             "controller": True}
    bodies = {"users": {}, "copied-label": {"labels": {"csibench.io/schedule-uid": uid}},
              "scheduled": {"labels": {"csibench.io/schedule-uid": uid}, "ownerReferences": [owner]}}
    for name, meta in bodies.items():  # an unknown class: each run fails before it creates anything
        run = benchmark_run(name, storageClassName="missing-class", steps=["createVolume", "deleteVolume"])
        run["metadata"].update(meta)
        kube.custom.create_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkruns", run)
    answers = {name: subprocess.run(
        [str(cluster.binaries.kubectl), f"--kubeconfig={cluster.config.kubeconfig}", f"--as={OPERATOR_SA}",
         "delete", "--dry-run=server", "benchmarkrun", name, "-n", namespace], capture_output=True, text=True)
        for name in bodies}
    assert answers["scheduled"].returncode == 0, answers["scheduled"].stderr
    for name in ("users", "copied-label"):
        assert answers[name].returncode != 0 and "only delete a BenchmarkRun that a BenchmarkSchedule made" in \
            answers[name].stderr, answers[name].stderr
    kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkschedules", "nightly")
    wait_until(lambda: get_run(kube, namespace, "nightly", "benchmarkschedules") is None, 60, "the schedule gone")


def test_admission_policy_keeps_the_operator_off_objects_it_did_not_create(kube: Kube, namespace: str,
                                                                         cluster: LocalCluster,
                                                                         deployed: None) -> None:
    kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc("users-data", "csibench-sim"))  # type: ignore[arg-type]  # the client validates a dict body
    denied = subprocess.run(
        [str(cluster.binaries.kubectl), f"--kubeconfig={cluster.config.kubeconfig}", f"--as={OPERATOR_SA}",
         "delete", "pvc", "users-data", "-n", namespace], capture_output=True, text=True)
    assert denied.returncode != 0
    assert "created by a BenchmarkRun" in denied.stderr, denied.stderr
    unlabelled = subprocess.run(
        [str(cluster.binaries.kubectl), f"--kubeconfig={cluster.config.kubeconfig}", f"--as={OPERATOR_SA}",
         "create", "-n", namespace, "-f", "-"], input=json.dumps(manifests.pvc("sneaky", "csibench-sim")),
        capture_output=True, text=True)
    assert unlabelled.returncode != 0 and "created by a BenchmarkRun" in unlabelled.stderr
    group = subprocess.run(  # a group snapshot without the run's label: it could select a user's claims
        [str(cluster.binaries.kubectl), f"--kubeconfig={cluster.config.kubeconfig}", f"--as={OPERATOR_SA}",
         "create", "-n", namespace, "-f", "-"], input=json.dumps(manifests.group_snapshot("sneaky", {"app": "db"})),
        capture_output=True, text=True)
    assert group.returncode != 0 and "created by a BenchmarkRun" in group.stderr, group.stderr
    # kubectl patch reads first (a get the role does not have): the PATCH itself, as the operator sends it.
    as_operator = client.ApiClient(kube.core.api_client.configuration)
    as_operator.set_default_header("Impersonate-User", OPERATOR_SA)  # type: ignore[no-untyped-call]  # the client is untyped
    with pytest.raises(ApiException) as resized:
        client.CoreV1Api(as_operator).patch_namespaced_persistent_volume_claim(
            "users-data", namespace, {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    assert resized.value.status == 403 and "created by a BenchmarkRun" in str(resized.value.body), resized.value
    users_data = kube.core.read_namespaced_persistent_volume_claim("users-data", namespace)
    assert present(users_data.metadata).name == "users-data"
    # Pods: the start barrier's annotation on the run's own pods, and nothing else.
    users_pod, run_pod = manifests.pod("users-pod", []), manifests.pod("runs-pod", [])
    run_pod["metadata"]["labels"] = {"csibench.io/run-uid": "some-run"}
    for body in (users_pod, run_pod):
        kube.core.create_namespaced_pod(namespace, body)  # type: ignore[arg-type]  # the client validates a dict body
    start = {"metadata": {"annotations": {"csibench.io/start-at": "1796289657"}}}
    for name, body in (("users-pod", start), ("runs-pod", {"metadata": {"annotations": {"other": "x"}}}),
                       ("runs-pod", {"metadata": {"labels": {"csibench.io/run-uid": "another-run"}}}),
                       ("runs-pod", {"spec": {"activeDeadlineSeconds": 5}})):
        with pytest.raises(ApiException) as refused:
            client.CoreV1Api(as_operator).patch_namespaced_pod(name, namespace, body)
        assert refused.value.status == 403 and "csibench-operator may only" in str(refused.value.body), (name, body)
    patched = client.CoreV1Api(as_operator).patch_namespaced_pod("runs-pod", namespace, start)
    assert present(patched.metadata).annotations == start["metadata"]["annotations"]


def test_admission_policy_admits_only_the_orphan_reclaim_on_snapshot_contents(kube: Kube, cluster: LocalCluster,
                                                                            deployed: None) -> None:
    """Contents carry no run label, so the policy bounds the operator by their shape: it may add the
    being-deleted mark to, then delete, a content the snapshot-controller made for a snapshot, and nothing else.
    The driver is one no sidecar here serves, so nothing but the API server acts on these contents."""
    def content(name: str, source: dict[str, str], snapshot_uid: str) -> dict[str, Any]:
        return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
                "metadata": {"name": name, "finalizers": [CONTENT_FINALIZER]},
                "spec": {"deletionPolicy": "Delete", "driver": "other.example.com", "source": source,
                         "volumeSnapshotRef": {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                                               "namespace": "default", "name": "gone", "uid": snapshot_uid}}}

    imported = content("users-import-content", {"snapshotHandle": "snap-1"}, "0e4d6c55-0000-4000-8000-000000000001")
    dynamic_uid = "0e4d6c55-0000-4000-8000-000000000002"
    dynamic = content(f"snapcontent-{dynamic_uid}", {"volumeHandle": "vol-1"}, dynamic_uid)
    for body in (imported, dynamic):
        kube.custom.create_cluster_custom_object("snapshot.storage.k8s.io", "v1", "volumesnapshotcontents", body)

    operator_api = client.ApiClient(kube.api.configuration)  # requests as the operator's ServiceAccount
    operator_api.set_default_header("Impersonate-User", OPERATOR_SA)  # type: ignore[no-untyped-call]  # kubernetes' ApiClient is untyped
    contents = client.CustomObjectsApi(operator_api)
    group = ("snapshot.storage.k8s.io", "v1", "volumesnapshotcontents")

    def annotate(name: str, **annotations: str) -> Callable[[], object]:  # a merge patch, as cleanup sends
        return lambda: contents.patch_cluster_custom_object(
            *group, name, {"metadata": {"annotations": annotations}}, _content_type="application/merge-patch+json")

    def delete(name: str) -> Callable[[], object]:
        return lambda: contents.delete_cluster_custom_object(*group, name)

    def refusal(attempt: Callable[[], object]) -> ApiException | None:
        try:
            attempt()
        except ApiException as denied:
            return denied
        return None

    names = {"import": imported["metadata"]["name"], "dynamic": dynamic["metadata"]["name"]}
    mark = {BEING_DELETED: "yes"}
    try:
        # A policy applied a moment ago may not be enforced yet: an allowed annotation harms nothing here.
        wait_until(lambda: refusal(annotate(names["import"], **mark)), 30, "the contents policy enforced", 0.5)
        for attempt in (annotate(names["import"], **mark), delete(names["import"]),
                        annotate(names["dynamic"], other="1"), annotate(names["dynamic"], other="1", **mark),
                        delete(names["dynamic"])):  # not marked yet
            denied = refusal(attempt)
            assert denied is not None and denied.status == 403, denied
            assert "may only add the volumesnapshot-being-deleted" in str(denied.body), denied.body
        annotate(names["dynamic"], **mark)()
        delete(names["dynamic"])()
        left = {c["metadata"]["name"]: c for c in kube.snapshot_contents()}
        assert "deletionTimestamp" not in left[names["import"]]["metadata"]
        assert "deletionTimestamp" in left[names["dynamic"]]["metadata"]  # its finalizer holds it: nobody serves it
    finally:
        for body in (imported, dynamic):
            name = body["metadata"]["name"]
            kube.custom.patch_cluster_custom_object(*group, name, {"metadata": {"finalizers": None}})
            with contextlib.suppress(ApiException):  # the deleted one went with its finalizer
                kube.custom.delete_cluster_custom_object(*group, name)


def test_quickstart_succeeds_with_only_the_service_accounts_rights(kube: Kube, namespace: str,
                                                                   operator_as_service_account: OperatorProcess
                                                                   ) -> None:
    body: dict[str, Any] = yaml.safe_load((REPO_ROOT / "examples" / "quickstart.yaml").read_text())
    run = run_to_end(kube, namespace, body)
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator_as_service_account.log())
    assert leftovers(kube, run) == {}
    # Any RBAC or admission-policy refusal shows as "Forbidden"/"forbidden" (403) in kopf's or csibench's log.
    forbidden = [line for line in operator_as_service_account.log(400).splitlines() if "forbidden" in line.lower()]
    assert not forbidden, forbidden


def test_expansion_the_data_path_and_group_snapshots_succeed_with_only_the_service_accounts_rights(
        kube: Kube, namespace: str, operator_as_service_account: OperatorProcess) -> None:
    """A move (the nodes listed, a pod pinned and made again), the expansion's PATCH of the run's claim, a density
    level (the CSINodes listed), the data path's pods and their pods/log reads, and a group snapshot (its create,
    watch and delete, its content's and members' watches, its class's read) pass RBAC and the admission policy
    (tiny fio jobs)."""
    body = benchmark_run("ship-dp", storageClassName="csibench-sim", volumes=1, size="64Mi", expand={"to": "96Mi"},
                         groupSnapshot={"volumesPerGroup": 1, "volumeGroupSnapshotClassName": GROUP_SNAPSHOT_CLASS},
                         move={}, density={"volumesPerNode": [1]},
                         steps=["createVolume", "publish", "moveVolume", "expandVolume", "unpublish", "density",
                                "dataPath", "createGroupSnapshot", "deleteGroupSnapshot", "deleteVolume"],
                         dataPath={"fileSize": "4Mi", "jobsPerVolume": 1, "rampSeconds": 0, "runtimeSeconds": 1,
                                   "workloads": [{"name": "randRead", "pattern": "randread", "blockSize": "8Ki"}]})
    run = run_to_end(kube, namespace, body)
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator_as_service_account.log())
    assert run["status"]["dataPath"][0]["readMiBps"] > 0 and run["status"]["dataPath"][0]["startAt"] > 0
    assert [(s["name"], s["succeeded"]) for s in run["status"]["steps"]] == [
        (name, 1) for name in body["spec"]["steps"]], run["status"]["steps"]
    assert run["status"]["density"][0]["state"] == "Succeeded", run["status"]["density"]
    assert leftovers(kube, run) == {}
    forbidden = [line for line in operator_as_service_account.log(400).splitlines() if "forbidden" in line.lower()]
    assert not forbidden, forbidden


def test_a_target_namespace_enforcing_restricted_pod_security(kube: Kube, namespace: str,
                                                             operator: OperatorProcess) -> None:
    kube.core.patch_namespace(namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})
    run = run_to_end(kube, namespace, benchmark_run(
        "restricted", storageClassName="csibench-sim", volumes=6, pvcsPerPod=3, targetNamespace=namespace,
        steps=["createVolume", "publish", "unpublish", "deleteVolume"]))
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["steps"][1]["succeeded"] == 2
    assert leftovers(kube, run) == {}
    assert present(kube.core.read_namespace(namespace).status).phase == "Active"  # a given namespace is never deleted


def test_the_wheel_installs_into_a_fresh_venv_and_the_operator_starts(cluster: LocalCluster, crd: None,
                                                                     kube: Kube, namespace: str,
                                                                     tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO_ROOT)], check=True,
                   capture_output=True)
    (wheel,) = dist.glob("csibench-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # The dependencies are the project venv's: scripts/bootstrap installs them at requirements.lock's pins, the
    # image's (test_packaging holds that), and a fresh pip install of them took two minutes of this test on a loaded
    # machine. A path line in a .pth file puts that site-packages after the fresh venv's own, and .pth files there
    # are not read, so the project's editable csibench stays out of reach: csibench comes from the wheel alone.
    (site_packages,) = (venv / "lib").glob("python3*/site-packages")
    project_site = Path(sysconfig.get_paths()["purelib"])
    (site_packages / "project-dependencies.pth").write_text(f"{project_site}\n")
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--ignore-installed", str(wheel)], check=True)
    loaded = subprocess.run([str(venv / "bin" / "python"), "-c", "import csibench; print(csibench.__file__)"],
                            check=True, capture_output=True, text=True).stdout.strip()
    assert Path(loaded).is_relative_to(site_packages), loaded
    entry = venv / "bin" / "csibench"
    crd_text = subprocess.run([str(entry), "crd"], check=True, capture_output=True, text=True).stdout
    assert crd_text == (REPO_ROOT / "crds" / "benchmarkrun.yaml").read_text()
    suite_crd = subprocess.run([str(entry), "crd", "--kind", "BenchmarkSuite"], check=True, capture_output=True,
                               text=True).stdout
    assert suite_crd == (REPO_ROOT / "crds" / "benchmarksuite.yaml").read_text()
    assert (venv / "bin" / "kubectl-csibench").exists()
    # Watch one empty namespace only, so it does not compete with the shared operator.
    installed = OperatorProcess(cluster, tmp_path / "installed.log", command=[str(entry)],
                                extra_args=["--namespace", namespace])
    installed.start()
    try:
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{installed.metrics_port}/metrics", timeout=5).read()
        assert b"# TYPE csibench_object_latency_seconds histogram" in metrics
        wait_until(lambda: "Initial authentication has finished" in installed.log(), 30, "the operator logged in")
    finally:
        installed.stop()

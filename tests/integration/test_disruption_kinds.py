"""ScaleDown and PauseApiServer on the local cluster: a paused API server and a controller scaled to zero inside
one batch, measured against the pauser's own stamps and the array's record; and a controller scaled down by a run
that is deleted, or whose operator is killed, given back its replicas."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import REPO_ROOT, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import (
    TERMINAL,
    benchmark_run,
    describe_stuck_run,
    get_run,
    leftovers,
    read_report,
    step,
    wait_for_phase,
)
from tests.support.chart import render_kustomize
from tests.support.cluster import as_operator, cli
from tests.support.runs import create_run, run_to_end

pytestmark = pytest.mark.integration
STAND_IN = "csi-controller"
SCALED_BY = "csibench.io/scaled-down-by"


def stand_in(namespace: str, replicas: int = 2) -> dict[str, Any]:
    """A controller Deployment whose pods the simulated kubelet runs as processes (sleep): what a driver's
    controller Deployment is to ScaleDown, without being the CSI machinery the other tests share."""
    labels = {"app": STAND_IN}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": STAND_IN, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "controller", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                                         "command": ["sleep", "3600"]}]}}}}


def deploy_stand_in(kube: Kube, namespace: str, replicas: int = 2) -> None:
    kube.apps.create_namespaced_deployment(namespace, stand_in(namespace, replicas))  # type: ignore[arg-type]  # a dict body
    wait_until(lambda: (present(kube.apps.read_namespaced_deployment(STAND_IN, namespace).status).ready_replicas
                        or 0) == replicas, 60, "the stand-in controller's pods Ready")


def scale_of(kube: Kube, namespace: str) -> tuple[int, str | None]:
    """(spec.replicas, the run uid its scaled-down-by annotation names)."""
    deployment = kube.apps.read_namespaced_deployment(STAND_IN, namespace)
    annotations = present(deployment.metadata).annotations or {}
    return present(deployment.spec).replicas or 0, annotations.get(SCALED_BY)


def waited(kube: Kube, namespace: str, name: str, operator: OperatorProcess, probe: Any, what: str) -> None:
    """wait_until, failing with the run's status and the operator's log (a CI failure must be readable)."""
    try:
        wait_until(probe, 60, what)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{describe_stuck_run(kube, namespace, name)}\n{operator.log()}") from None


def scale_down(namespace: str, **fields: Any) -> dict[str, Any]:
    return {"step": "createVolume", "kind": "ScaleDown", "seconds": 2,
            "workload": {"kind": "Deployment", "namespace": namespace, "name": STAND_IN}, **fields}


def test_a_paused_api_server_and_a_controller_scaled_to_zero_inside_one_batch_are_measured_and_undone(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any, cluster: LocalCluster) -> None:
    """examples/disruption-apiserver.yaml, smaller (6 pods, 3 s, as publish starts: on a busy machine 6 pods were
    all Running before a pause after the second came in), with a ScaleDown of a stand-in beside it."""
    deploy_stand_in(kube, namespace)
    array = storage_class(latency="100ms", concurrency="1")  # publish takes over a second: the pause lands inside
    body = yaml.safe_load((REPO_ROOT / "examples" / "disruption-apiserver.yaml").read_text())
    body["spec"].update(storageClassName=array, volumes=6)
    body["spec"]["disruptions"][0].update(afterObjects=0, seconds=3)
    body["spec"]["disruptions"].append(scale_down(namespace, step="publish", afterSeconds=0.2))
    run = run_to_end(kube, namespace, body, timeout=180)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status, operator.log())
    pause, scaled = status["disruptions"]
    assert pause["state"] == "Recovered" and pause["pods"] == ["kube-apiserver-sim-node-0"], (pause, operator.log())
    assert pause["momentAtSeconds"] <= pause["injectedAtSeconds"] and pause["completedAfter"] == 6, pause
    # The pauser's own stamps: frozen 3 s (its clock and the operator's are this machine's; the upper bounds leave
    # room for its reaction and its answer on a busy machine)
    frozen = pause["restoredAtSeconds"] - pause["injectedAtSeconds"]
    assert 2.9 <= frozen <= 5.0, pause
    assert 0 <= pause["recoverySeconds"] < 5, pause
    # No pod could be reported Running while the API server answered nothing
    assert pause["stallSeconds"] >= 2.9, pause
    # 3 s is under the sidecars' 10 s renew deadline: none lost its lease, none restarted
    assert pause["containerRestarts"] == 0 and pause["leaseTransitions"] == 0, pause
    assert scaled["state"] == "Recovered" and scaled["replicasBefore"] == 2, (scaled, operator.log())
    assert 1.9 <= scaled["restoredAtSeconds"] - scaled["injectedAtSeconds"] <= 6, scaled
    assert scale_of(kube, namespace) == (2, None)
    publish = step(run, "publish")
    assert (publish["succeeded"], publish["failed"]) == (6, 0), publish
    truth = [r for r in cluster.ground_truth_records() if r["storageClass"] == array and r["result"] == "ok"]
    for operation in ("createVolume", "deleteVolume"):
        done = [r["object"] for r in truth if r["op"] == operation]
        assert len(done) == len(set(done)) == 6, (operation, done)
    assert status["verdict"] == "Pass", status.get("thresholds")
    report = read_report(kube, run)
    assert [d["kind"] for d in report["disruptions"]] == ["PauseApiServer", "ScaleDown"], report.get("disruptions")
    assert leftovers(kube, run) == {}


def test_an_array_failing_every_create_for_a_window_and_a_leak_made_on_purpose_are_measured_exactly(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any, cluster: LocalCluster) -> None:
    """examples/disruption-array.yaml, smaller (6 volumes, 3 s, as the step starts), on a class whose array also
    acknowledges every 3rd delete of a volume and of a snapshot without doing it (one run for both, to keep the
    suite short). Every CreateVolume the array starts in the window fails; the provisioner retries each claim
    until the window closed, and each volume is created once; the array's own stamps bound the window. Six of
    each deleted, two of each leaked: Kubernetes shows nothing left (the PVs and contents went, the driver said
    done); the array's audit names all four, exactly as its ground truth has them, and the leaked bound breaks."""
    array = storage_class(createVolumeLatency="100ms", leakEvery="3", leakOperations="deleteVolume,deleteSnapshot")
    body = yaml.safe_load((REPO_ROOT / "examples" / "disruption-array.yaml").read_text())
    body["spec"].update(storageClassName=array, volumes=6, volumeSnapshotClassName="csibench-sim-snapclass",
                        steps=["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"])
    body["spec"]["disruptions"][0].update(afterObjects=0, seconds=3)
    run = run_to_end(kube, namespace, body, timeout=180)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status, operator.log())
    (fault,) = status["disruptions"]
    assert fault["state"] == "Recovered" and fault["target"] == "the array: 100% failing on createVolume", fault
    window = fault["restoredAtSeconds"] - fault["injectedAtSeconds"]
    assert 2.9 <= window <= 4.0, fault  # 3 s by the array's clock, from the request leaving to its close
    assert 0 <= fault["recoverySeconds"] < 1.0, fault  # read every 20 ms once the close is due
    assert fault["stallSeconds"] >= 2.9 and fault["unrecovered"] == 0, fault
    assert any(w["reason"] == "ProvisioningFailed" for w in fault["warnings"]), fault["warnings"]
    truth = [r for r in cluster.ground_truth_records() if r["storageClass"] == array]
    creates = [r for r in truth if r["op"] == "createVolume"]
    failed = [r for r in creates if r["result"] == "error"]
    assert failed and all(r.get("fault") for r in failed), creates
    assert fault["arrayOperations"] == len([r for r in truth if r.get("fault")]), (fault, truth)
    created = [r["object"] for r in creates if r["result"] == "ok"]
    assert len(created) == len(set(created)) == 6, creates
    # The leaks, against the array's record
    leaked = sorted(r["object"].split("@", 1)[0] for r in truth
                    if r["op"] in ("deleteVolume", "deleteSnapshot") and r.get("leaked"))
    assert len(leaked) == 4 and sum(name.startswith("pvc-") for name in leaked) == 2, truth
    leaks = status["leaks"]
    assert leaks["source"] == "Array" and (leaks["volumes"], leaks["snapshots"], leaks["leaked"]) == (2, 2, 4), (
        leaks, operator.log())
    assert sorted(leaks["names"]) == leaked and leaks["repeatedOperations"] == 0, leaks  # failed creates: done once
    assert fault["repeatedOperations"] == 0, fault  # the window's share of them: none either
    assert status["verdict"] == "Fail", status.get("thresholds")
    judged = {t["metric"]: t for t in status["thresholds"]}
    assert judged["unrecovered"]["met"] is True and "disruption 0 leaked 4 > 0 (max)" in judged["leaked"]["message"]
    assert leftovers(kube, run) == {}  # Kubernetes holds nothing of the run: only the array does
    assert "Left after cleanup" in cli(cluster, "report", run["metadata"]["name"], "-n", namespace)


def test_a_run_without_disruptions_bounded_on_what_it_leaked_is_audited_exactly(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any, cluster: LocalCluster) -> None:
    """No disruption, a bound on the whole run ({metric: leaked, max: 0}): the array acknowledges one delete in
    three without doing it; the run's cleanup is audited as a disrupted run's is, and the count is the array's
    ground truth, exactly."""
    leaky = storage_class(leakEvery="3", leakOperations="deleteVolume")
    run = run_to_end(kube, namespace, benchmark_run("leaky", storageClassName=leaky, volumes=6,
                                                    steps=["createVolume", "deleteVolume"],
                                                    thresholds=[{"metric": "leaked", "max": 0}]), timeout=180)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status, operator.log())
    truth = [r for r in cluster.ground_truth_records() if r["storageClass"] == leaky]
    leaked = sorted(r["object"] for r in truth if r["op"] == "deleteVolume" and r.get("leaked"))
    assert len(leaked) == 2, truth
    leaks = status["leaks"]
    assert leaks["source"] == "Array" and (leaks["volumes"], leaks["leaked"]) == (2, 2), (leaks, operator.log())
    assert sorted(leaks["names"]) == leaked, leaks
    (judged,) = status["thresholds"]
    assert status["verdict"] == "Fail" and judged["message"] == "run leaked 2 > 0 (max)", judged
    assert leftovers(kube, run) == {}


def test_a_drained_node_s_volumes_follow_their_pods_to_another_node_and_the_node_is_given_back(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any, cluster: LocalCluster) -> None:
    """examples/drain.yaml, smaller (4 pods): once all 4 run, the node running the most of them is cordoned and
    its pods of the run made again; the scheduler places them on other nodes, and the array shows each of their
    volumes detached from the drained node and attached to another one. The node ends schedulable, unmarked."""
    array = storage_class()
    body = yaml.safe_load((REPO_ROOT / "examples" / "drain.yaml").read_text())
    body["spec"].update(storageClassName=array, volumes=4)
    body["spec"]["disruptions"][0].update(afterObjects=4)
    run = run_to_end(kube, namespace, body, timeout=180)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status, operator.log())
    (drain,) = status["disruptions"]
    assert drain["state"] == "Recovered" and drain["target"].startswith("node "), (drain, operator.log())
    drained = drain["target"].removeprefix("node ")
    assert drain["podsDeleted"] >= 1 and len(drain["pods"]) == drain["podsDeleted"], drain
    # The failover is from the cordon to the last pod Running elsewhere; the node is given back after it
    assert 0 < drain["recoverySeconds"] <= drain["restoredAtSeconds"] - drain["injectedAtSeconds"], drain
    assert drain["completedBefore"] == 4 and drain["unrecovered"] == 0, drain
    node = kube.core.read_node(drained)
    assert not present(node.spec).unschedulable, node.spec
    assert "csibench.io/cordoned-by" not in (present(node.metadata).labels or {}), node.metadata
    truth = [r for r in cluster.ground_truth_records() if r["storageClass"] == array and r["result"] == "ok"]
    attached: dict[str, list[str]] = {}
    for record in (r for r in truth if r["op"] == "attach"):
        volume, _, on = record["object"].rpartition(":")
        attached.setdefault(volume, []).append(on)
    moved = {volume: nodes for volume, nodes in attached.items() if len(nodes) > 1}
    assert len(moved) == drain["podsDeleted"], attached
    assert all(nodes[0] == drained and drained not in nodes[1:] for nodes in moved.values()), attached
    detached = {r["object"] for r in truth if r["op"] == "detach"}
    assert all(f"{volume}:{drained}" in detached for volume in moved), (detached, moved)
    publish = step(run, "publish")
    assert (publish["succeeded"], publish["failed"]) == (4, 0), publish
    assert [d["kind"] for d in read_report(kube, run)["disruptions"]] == ["DrainNode"]
    assert leftovers(kube, run) == {}


def test_a_controller_scaled_down_is_given_back_when_the_run_is_deleted_or_its_operator_killed(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any) -> None:
    deploy_stand_in(kube, namespace)
    array = storage_class()

    def down_by(name: str) -> bool:
        run = get_run(kube, namespace, name) or {}
        return scale_of(kube, namespace) == (0, run.get("metadata", {}).get("uid"))

    # Deleted while the controller is down: the run's cleanup gives it back before the run goes.
    create_run(kube, namespace, benchmark_run("deleted", storageClassName=array, volumes=2,
                                              disruptions=[scale_down(namespace, afterObjects=0, seconds=300)]))
    waited(kube, namespace, "deleted", operator, lambda: down_by("deleted"), "the controller scaled down")
    kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkruns", "deleted")
    wait_until(lambda: get_run(kube, namespace, "deleted") is None, 90, "the deleted run gone")
    assert scale_of(kube, namespace) == (2, None), operator.log()

    # The operator killed while it is down: nothing gives it back until an operator starts again; that one gives
    # it back before it fails the run (restartPolicy Fail).
    create_run(kube, namespace, benchmark_run("killed", storageClassName=array, volumes=2, restartPolicy="Fail",
                                              disruptions=[scale_down(namespace, afterObjects=0, seconds=300)]))
    waited(kube, namespace, "killed", operator, lambda: down_by("killed"), "the controller scaled down")
    operator.stop(signal.SIGKILL)
    assert scale_of(kube, namespace)[0] == 0
    operator.start()
    run = wait_for_phase(kube, namespace, "killed", TERMINAL, 120)
    assert (run["status"]["phase"], run["status"]["conditions"][0]["reason"]) == ("Failed", "OperatorRestarted")
    assert scale_of(kube, namespace) == (2, None), operator.log()
    wait_until(lambda: (present(kube.apps.read_namespaced_deployment(STAND_IN, namespace).status).ready_replicas
                        or 0) == 2, 60, "the stand-in controller's pods Ready again")
    assert leftovers(kube, run) == {}


COMPONENT_OBJECTS = ("csibench-disruptions", "csibench-operator-disrupts-only-csi-components",
                     "csibench-disruptions-drain", "csibench-operator-cordons-only-with-its-mark")
BASE_POLICY = "csibench-operator-owns-what-it-touches"


CONTROLLER = "csibench-test-csi-controller"


def controller_deployment() -> dict[str, Any]:
    """A CSI controller's Deployment in kube-system (a sidecar's image; its pod runs sleep) for the policy to
    judge."""
    body = stand_in("kube-system", replicas=1)
    body["metadata"]["name"] = CONTROLLER
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0"
    return body


def test_the_disruptions_component_grants_its_rights_for_csi_components_only(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """deploy/components/disruptions on the API server, checked as the operator's ServiceAccount with server-side
    dry runs: the rights in kube-system only, a CSI sidecar's pod deletable, a control-plane pod not, a pause request
    the only change to a pausable pod. (deploy/base's own policy, patched by the component, goes back as it was.)"""
    (tmp_path / "with").mkdir()
    rendered = render_kustomize(["components/disruptions"], tmp_path / "with")
    applied = [o for o in rendered if o["metadata"]["name"] in (*COMPONENT_OBJECTS, BASE_POLICY)]
    base_policy = [o for o in render_kustomize([], tmp_path) if o["metadata"]["name"] == BASE_POLICY]
    had_base = bool(cluster.kubectl("get", "validatingadmissionpolicies", "--ignore-not-found", "-o", "name",
                                    f"--field-selector=metadata.name={BASE_POLICY}").strip())
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                    input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": applied}))
    try:
        # Both policies in effect: the component's (etcd's pod refused) and the base's patched one (a sidecar's
        # pod no longer refused for want of a run's label); each takes its own moment to load.
        wait_until(lambda: not as_operator(cluster, "delete", "pod", "-n", "kube-system", "etcd-sim-node-0",
                                           "--dry-run=server")[0] and
                   as_operator(cluster, "delete", "pod", "-n", "kube-system", "csi-provisioner-sim-node-0",
                               "--dry-run=server")[0], 60, "the component's policies in effect")
        denied = as_operator(cluster, "delete", "pod", "-n", "kube-system", "etcd-sim-node-0", "--dry-run=server")
        assert "may only delete a CSI component's pod" in denied[1], denied
        allowed = as_operator(cluster, "delete", "pod", "-n", "kube-system", "csi-provisioner-sim-node-0",
                              "--dry-run=server")
        assert allowed[0], allowed
        labelled = as_operator(cluster, "delete", "pod", "-n", "kube-system", "csi-sim-node-sim-node-1",
                               "--dry-run=server")  # labelled csibench.io/disruptable by the one who runs it
        assert labelled[0], labelled
        asked = as_operator(cluster, "annotate", "--overwrite", "pod", "-n", "kube-system",
                            "kube-apiserver-sim-node-0", 'csibench.io/pause-request={"id":"dry","seconds":1}',
                            "--dry-run=server")  # --overwrite: an earlier test's pause left its request there
        assert asked[0], asked
        other = as_operator(cluster, "annotate", "pod", "-n", "kube-system", "kube-apiserver-sim-node-0", "x=1",
                            "--dry-run=server")
        assert not other[0] and "may only write the csibench.io/pause-request annotation" in other[1], other
        for verb, resource, namespace, answer in [("delete", "pods", "kube-system", "yes"),
                                                  ("patch", "deployments.apps", "kube-system", "yes"),
                                                  ("list", "leases.coordination.k8s.io", "kube-system", "yes"),
                                                  ("patch", "deployments.apps --subresource=scale", "kube-system",
                                                   "no"),
                                                  # (deploy/base's ClusterRole, if the deployed operator's
                                                  # tests left it, grants deleting pods everywhere: its policy
                                                  # admits only a run's own)
                                                  ("patch", "deployments.apps", "default", "no")]:
            assert as_operator(cluster, "auth", "can-i", verb, *resource.split(), "-n", namespace)[1] == answer, \
                (verb, resource, namespace)
        # A CSI controller's replicas change only with a run's mark: to 0 recording what it had, and nothing else
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(controller_deployment()))
        mark = {"csibench.io/scaled-down-by": "some-run-uid", "csibench.io/replicas-before": "1"}
        for patch, admitted in [({"metadata": {"annotations": mark}, "spec": {"replicas": 0}}, True),
                                ({"spec": {"replicas": 0}}, False),
                                ({"metadata": {"annotations": {**mark, "csibench.io/replicas-before": "3"}},
                                  "spec": {"replicas": 0}}, False),
                                ({"metadata": {"annotations": mark}, "spec": {"replicas": 0, "minReadySeconds": 5}},
                                 False)]:
            said = as_operator(cluster, "patch", "deployment", "-n", "kube-system", CONTROLLER, "--type=merge",
                               "-p", json.dumps(patch), "--dry-run=server")
            assert said[0] == admitted, (patch, said)
        # A node is cordoned only together with a run's mark, and nothing else of it changes
        assert as_operator(cluster, "auth", "can-i", "patch", "nodes")[1].splitlines()[0] == "yes"
        wait_until(lambda: not as_operator(cluster, "patch", "node", "sim-node-1", "--type=merge", "-p",
                                           '{"spec":{"unschedulable":true}}', "--dry-run=server")[0], 60,
                   "the component's node policy in effect")
        cordon = {"metadata": {"labels": {"csibench.io/cordoned-by": "some-run-uid"}}, "spec": {"unschedulable": True}}
        for patch, admitted in [(cordon, True), ({"spec": {"unschedulable": True}}, False),
                                ({**cordon, "spec": {"unschedulable": True, "podCIDR": "10.9.0.0/24"}}, False),
                                ({"metadata": {"labels": {"csibench.io/cordoned-by": "x", "zone": "z"}},
                                  "spec": {"unschedulable": True}}, False)]:
            said = as_operator(cluster, "patch", "node", "sim-node-1", "--type=merge", "-p", json.dumps(patch),
                               "--dry-run=server")
            assert said[0] == admitted, (patch, said)
    finally:
        cluster.kubectl("delete", "deployment", "-n", "kube-system", CONTROLLER, "--ignore-not-found")
        for kind, namespace in [("role", "kube-system"), ("rolebinding", "kube-system")]:
            cluster.kubectl("delete", kind, "-n", namespace, COMPONENT_OBJECTS[0], "--ignore-not-found")
        for kind, name in [("clusterrole", COMPONENT_OBJECTS[2]), ("clusterrolebinding", COMPONENT_OBJECTS[2])]:
            cluster.kubectl("delete", kind, name, "--ignore-not-found")
        for kind in ("validatingadmissionpolicy", "validatingadmissionpolicybinding"):
            for name in (COMPONENT_OBJECTS[1], COMPONENT_OBJECTS[3]):
                cluster.kubectl("delete", kind, name, "--ignore-not-found")
        if had_base:
            cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                            input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": base_policy}))
        else:
            cluster.kubectl("delete", "validatingadmissionpolicy,validatingadmissionpolicybinding", BASE_POLICY,
                            "--ignore-not-found")

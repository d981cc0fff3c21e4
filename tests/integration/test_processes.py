"""The simulated kubelet runs non-pause pods for real: processes as the pod's user, volumes at their mountPath in
a private mount namespace, logs through the API server, exit codes, SIGTERM on delete, nothing left on the host."""

from __future__ import annotations

import time
from typing import Any

import pytest

from localcluster import manifests
from localcluster.kube import SNAPSHOT_GROUP, Kube, json_object, present, wait_until
from localcluster.launcher import LocalCluster
from tests.support.cluster import bound_claims, create_claims, create_pod, phase, pod_gone
from tests.support.hostcheck import SANDBOX_MODULE, host_mounts_under, processes_with

pytestmark = pytest.mark.integration


@pytest.fixture
def restricted(kube: Kube, namespace: str) -> str:
    """The test's namespace, enforcing Pod Security "restricted"."""
    kube.core.patch_namespace(namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})
    return namespace


def container_state(kube: Kube, namespace: str, name: str) -> Any:
    return present(present(kube.core.read_namespaced_pod(name, namespace).status).container_statuses)[0].state


def assert_nothing_left(cluster: LocalCluster, marker: str) -> None:
    wait_until(lambda: not processes_with(marker), 10, f"no process running {marker!r}")
    wait_until(lambda: not processes_with(SANDBOX_MODULE), 10, "no sandbox helper left")
    assert host_mounts_under(cluster.config.state_dir) == []


def test_pod_runs_as_its_user_with_its_volume_env_and_logs(cluster: LocalCluster, kube: Kube,
                                                         restricted: str) -> None:
    namespace = restricted
    create_claims(kube, namespace, ["data"], "csibench-sim")
    wait_until(lambda: bound_claims(kube, namespace), 30, "PVC Bound")
    script = 'id -u; id -G; echo "greeting=$GREETING"; echo written > /data/v/file && cat /data/v/file; ' \
             'ls -ld /data/v; echo marker-run-as-user'
    create_pod(kube, namespace, manifests.workload_pod("work", "data", script, env={"GREETING": "hello"}))
    wait_until(lambda: phase(kube, namespace, "work") == "Succeeded", 60, "pod Succeeded")
    terminated = container_state(kube, namespace, "work").terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")

    logs = cluster.kubectl("logs", "-n", namespace, "work")  # through the API server to the node's endpoint
    lines = logs.splitlines()
    assert lines[0] == "1234"
    assert "2345" in lines[1].split()  # fsGroup is a supplementary group
    assert "greeting=hello" in lines and "written" in lines
    kube.core.delete_namespaced_pod("work", namespace)
    wait_until(lambda: pod_gone(kube, namespace, "work"), 30, "pod gone")
    assert_nothing_left(cluster, "marker-run-as-user")


def test_delete_sends_sigterm_before_unmounting_and_leaves_nothing(cluster: LocalCluster, kube: Kube,
                                                                   restricted: str) -> None:
    namespace = restricted
    create_claims(kube, namespace, ["data"], "csibench-sim")
    wait_until(lambda: bound_claims(kube, namespace), 30, "PVC Bound")
    script = ('trap "echo term-seen > /data/v/term; exit 0" TERM; echo started-marker-term; '
              'while true; do sleep 0.2; done')
    create_pod(kube, namespace, manifests.workload_pod("loop", "data", script, grace=20))
    wait_until(lambda: phase(kube, namespace, "loop") == "Running", 60, "pod Running")
    wait_until(lambda: "started-marker-term" in cluster.kubectl("logs", "-n", namespace, "loop"), 30,
               "the container's first line in kubectl logs")
    assert processes_with("started-marker-term")
    kube.core.delete_namespaced_pod("loop", namespace)
    wait_until(lambda: pod_gone(kube, namespace, "loop"), 30, "pod gone")
    assert_nothing_left(cluster, "started-marker-term")
    # The trap wrote into the volume while it was still mounted: SIGTERM came before the unmount.
    reader = manifests.workload_pod("reader", "data", "cat /data/v/term")
    create_pod(kube, namespace, reader)
    wait_until(lambda: phase(kube, namespace, "reader") in ("Succeeded", "Failed"), 60, "reader done")
    assert cluster.kubectl("logs", "-n", namespace, "reader").strip() == "term-seen"


def test_non_zero_exit_fails_the_pod_with_its_exit_code(cluster: LocalCluster, kube: Kube,
                                                        restricted: str) -> None:
    namespace = restricted
    create_claims(kube, namespace, ["data"], "csibench-sim")
    wait_until(lambda: bound_claims(kube, namespace), 30, "PVC Bound")
    create_pod(kube, namespace, manifests.workload_pod("fails", "data", "echo boom-marker >&2; exit 7"))
    wait_until(lambda: phase(kube, namespace, "fails") == "Failed", 60, "pod Failed")
    terminated = container_state(kube, namespace, "fails").terminated
    assert (terminated.exit_code, terminated.reason) == (7, "Error")
    assert "boom-marker" in cluster.kubectl("logs", "-n", namespace, "fails")


def test_a_pod_without_a_non_root_user_gets_a_warning_and_fails(cluster: LocalCluster, kube: Kube,
                                                                namespace: str) -> None:
    create_claims(kube, namespace, ["data"], "csibench-sim")
    wait_until(lambda: bound_claims(kube, namespace), 30, "PVC Bound")
    body = manifests.workload_pod("rootish", "data", "echo never-runs-marker", user=None)
    body["spec"]["securityContext"].pop("runAsNonRoot")
    create_pod(kube, namespace, body)
    wait_until(lambda: phase(kube, namespace, "rootish") == "Failed", 60, "pod Failed")
    events = wait_until(lambda: kube.events(namespace, "Failed"), 30, "Failed event")
    assert events[0].type == "Warning" and "root" in present(events[0].message)
    assert container_state(kube, namespace, "rootish").waiting.reason == "CreateContainerConfigError"
    assert not processes_with("never-runs-marker")


def test_data_written_before_a_snapshot_is_in_the_clone(cluster: LocalCluster, kube: Kube, restricted: str) -> None:
    namespace = restricted
    create_claims(kube, namespace, ["source"], "csibench-sim")
    wait_until(lambda: bound_claims(kube, namespace), 30, "PVC Bound")
    token = f"content-{time.time_ns()}"
    create_pod(kube, namespace, manifests.workload_pod("writer", "source", f"echo {token} > /data/v/token"))
    wait_until(lambda: phase(kube, namespace, "writer") == "Succeeded", 60, "writer Succeeded")
    kube.core.delete_namespaced_pod("writer", namespace)
    wait_until(lambda: pod_gone(kube, namespace, "writer"), 30, "writer gone")
    kube.custom.create_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots",
                                                manifests.snapshot("snap", "source"))
    wait_until(lambda: (json_object(kube.custom.get_namespaced_custom_object(
        *SNAPSHOT_GROUP, namespace, "volumesnapshots", "snap")).get("status") or {}).get("readyToUse"),
               60, "snapshot ready")
    kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc("clone", "csibench-sim",  # type: ignore[arg-type]  # the client validates a dict body
                                                                                 snapshot="snap"))
    wait_until(lambda: len(bound_claims(kube, namespace)) == 2, 60, "clone Bound")
    create_pod(kube, namespace, manifests.workload_pod("reader", "clone", "cat /data/v/token"))
    wait_until(lambda: phase(kube, namespace, "reader") == "Succeeded", 60, "reader Succeeded")
    assert cluster.kubectl("logs", "-n", namespace, "reader").strip() == token

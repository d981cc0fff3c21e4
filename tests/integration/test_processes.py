"""The simulated kubelet runs non-pause pods for real: processes as the pod's user, volumes at their mountPath in
a private mount namespace, logs through the API server, exit codes, SIGTERM on delete, nothing left on the host."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
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


RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                  "seccompProfile": {"type": "RuntimeDefault"}}
IN_CLUSTER = """
import json, os
from kubernetes import client, config
config.load_incluster_config()
mounted = "/var/run/secrets/kubernetes.io/serviceaccount"
namespace = open(f"{mounted}/namespace").read()
print("pods:", ",".join(p.metadata.name for p in client.CoreV1Api().list_namespaced_pod(namespace).items))
try:
    client.CoreV1Api().list_namespaced_secret(namespace)
except client.ApiException as error:
    print("secrets:", error.status, json.loads(error.body)["message"])
token = os.stat(f"{mounted}/token")
print("token:", oct(token.st_mode & 0o777), token.st_uid)
try:
    open(f"{mounted}/token", "a")
except OSError as error:
    print("write:", error.strerror)
print("path:", os.environ["PATH"].split(":")[0], os.environ["KUBERNETES_SERVICE_HOST"])
"""


def test_a_pod_with_a_service_account_token_reaches_the_api_with_in_cluster_config(
        cluster: LocalCluster, kube: Kube, restricted: str) -> None:
    """The API server's admission adds kube-api-access-*; the kubelet fills it (a TokenRequest bound to the pod, the
    cluster's CA, the namespace) and sets KUBERNETES_SERVICE_*, so the Python client's in-cluster config works, as
    the ServiceAccount (it may list pods through its RoleBinding, not secrets), from the image's PATH (the venv)."""
    namespace = restricted
    cluster.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    cluster.kubectl("create", "rolebinding", "reader-view", "--clusterrole=view",
                    f"--serviceaccount={namespace}:reader", "-n", namespace)
    create_pod(kube, namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "in-cluster"}, "spec": {
        "serviceAccountName": "reader", "restartPolicy": "Never", "securityContext": RESTRICTED_POD,
        "containers": [{"name": "client", "image": "csibench/operator:test", "command": ["python", "-c", IN_CLUSTER],
                        "securityContext": RESTRICTED_CONTAINER}]}})
    wait_until(lambda: phase(kube, namespace, "in-cluster") in ("Succeeded", "Failed"), 90, "pod done")
    logs = cluster.kubectl("logs", "-n", namespace, "in-cluster")
    assert phase(kube, namespace, "in-cluster") == "Succeeded", logs
    lines = dict(line.split(": ", 1) for line in logs.splitlines() if ": " in line)
    assert lines["pods"] == "in-cluster"
    assert lines["secrets"].startswith("403 ") and f"system:serviceaccount:{namespace}:reader" in lines["secrets"]
    assert lines["token"] == "0o600 65532"  # the pod's one user's, as a kubelet's FsUserFrom gives it
    assert lines["write"] == "Read-only file system"
    venv_bin, host = lines["path"].split()
    assert venv_bin.endswith("/.venv/bin") and host == "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        return int(probe.getsockname()[1])


def test_probes_drive_ready_and_restarts_and_a_service_reaches_the_pod_at_the_hosts_address(
        cluster: LocalCluster, kube: Kube, restricted: str) -> None:
    """A web server with an httpGet readiness probe by port name goes Ready; its Service's EndpointSlice holds the
    pod's IP (the host's address, not loopback) and a GET there reaches it. An exec readiness probe runs in the
    container's own /tmp. A liveness probe on a port nobody serves restarts its container, in the kubelet's words."""
    namespace = restricted
    port = _free_port()

    def pod(name: str, command: list[str], **container: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": {
            "automountServiceAccountToken": False, "securityContext": RESTRICTED_POD,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": name, "image": "csibench/workload:test", "command": command,
                            "securityContext": RESTRICTED_CONTAINER, **container}]}}

    create_pod(kube, namespace, pod("web", ["python", "-m", "http.server", str(port), "--directory", "/tmp"],
                                    ports=[{"name": "http", "containerPort": port}],
                                    readinessProbe={"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                                    livenessProbe={"tcpSocket": {"port": port}, "periodSeconds": 2}))
    create_pod(kube, namespace, pod("gate", ["sh", "-c", "sleep 2; touch /tmp/ready; exec sleep 3600"],
                                    readinessProbe={"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1}))
    create_pod(kube, namespace, pod("sick", ["sleep", "3600"], livenessProbe={
        "httpGet": {"path": "/healthz", "port": 1}, "periodSeconds": 1, "failureThreshold": 2}))
    kube.core.create_namespaced_service(namespace, {  # type: ignore[arg-type]  # the client validates a dict body
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})

    def ready(name: str) -> bool:
        conditions = present(kube.core.read_namespaced_pod(name, namespace).status).conditions or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    wait_until(lambda: phase(kube, namespace, "gate") == "Running", 60, "gate Running")
    assert not ready("gate")  # its exec probe fails until the container made /tmp/ready
    wait_until(lambda: ready("web") and ready("gate"), 60, "web and gate Ready")
    pod_ip = str(present(kube.core.read_namespaced_pod("web", namespace).status).pod_ip)
    assert not pod_ip.startswith("127.")

    def endpoint_addresses() -> list[str]:
        slices = json.loads(cluster.kubectl("get", "endpointslices", "-n", namespace, "-l",
                                            "kubernetes.io/service-name=web", "-o", "json"))["items"]
        return [a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]
                if (e.get("conditions") or {}).get("ready")]

    assert wait_until(endpoint_addresses, 30, "the Service's ready endpoint") == [pod_ip]
    with urllib.request.urlopen(f"http://{pod_ip}:{port}/", timeout=5) as answer:
        assert answer.status == 200

    def restarted() -> bool:
        statuses = present(kube.core.read_namespaced_pod("sick", namespace).status).container_statuses or []
        return bool(statuses) and (statuses[0].restart_count or 0) >= 1

    wait_until(restarted, 60, "sick restarted by its liveness probe")
    sick_ip = str(present(kube.core.read_namespaced_pod("sick", namespace).status).pod_ip)
    messages = {(e.reason, e.message) for e in kube.core.list_namespaced_event(namespace).items
                if e.involved_object.name == "sick"}
    assert ("Unhealthy", f'Liveness probe failed: Get "http://{sick_ip}:1/healthz": dial tcp {sick_ip}:1: '
                         "connect: connection refused") in messages
    assert ("Killing", "Container sick failed liveness probe, will be restarted") in messages
    for name in ("web", "gate", "sick"):
        kube.core.delete_namespaced_pod(name, namespace)
    wait_until(lambda: all(pod_gone(kube, namespace, n) for n in ("web", "gate", "sick")), 60, "pods gone")
    wait_until(lambda: not processes_with(f"http.server {port}"), 10, "no web server left")

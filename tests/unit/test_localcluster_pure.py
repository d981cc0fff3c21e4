"""Pure parts of the local cluster: backend parameters, the sidecars' command lines, RBAC and mirror pods, the
build recipe's go.mod, the kubelet's CSI requests, and how the launcher tells whether a child it spawned still
runs (with short-lived local processes, no cluster)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import build, launcher, pauser, sidecars, staticpod, versions
from localcluster.csi import csi_pb2 as csi
from localcluster.launcher import ClusterConfig, ClusterError, LocalCluster, describe_exit
from localcluster.simulator import api, kubelet
from localcluster.simulator.config import (
    Operation,
    ParameterError,
    class_of_handle,
    parse_backend_model,
    parse_duration,
    pv_name_of_handle,
    volume_handle,
)


@pytest.mark.parametrize(("text", "seconds"), [("100ms", 0.1), ("1.5s", 1.5), ("2m", 120.0), ("0", 0.0), ("3", 3.0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["fast", "-1s", "1h", ""])
def test_bad_durations_are_rejected(bad: str) -> None:
    with pytest.raises(ParameterError):
        parse_duration(bad)


def test_backend_model_from_parameters() -> None:
    model = parse_backend_model({"latency": "100ms", "attachLatency": "2s", "concurrency": "1",
                                 "failureRate": "0.1", "failureOperations": "createVolume,attach",
                                 "hangOperations": "deleteSnapshot", "seed": "3"})
    assert model.latency(Operation.CREATE_VOLUME) == pytest.approx(0.1)
    assert model.latency(Operation.ATTACH) == pytest.approx(2.0)
    assert model.concurrency == 1 and model.failure_rate == pytest.approx(0.1) and model.seed == 3
    assert model.failure_operations == {Operation.CREATE_VOLUME, Operation.ATTACH}
    assert model.hang_operations == {Operation.DELETE_SNAPSHOT}


def test_backend_model_defaults_are_instant_and_unlimited() -> None:
    model = parse_backend_model(None)
    assert all(model.latency(op) == 0 for op in Operation)
    assert model.concurrency == 0 and model.failure_rate == 0 and not model.hang_operations
    assert parse_backend_model({"hangOperations": "all"}).hang_operations == set(Operation)


@pytest.mark.parametrize("params", [{"failureRate": "1.5"}, {"concurrency": "-1"}, {"concurrency": "x"},
                                    {"hangOperations": "format"}, {"leakEvery": "-1"}, {"leakEvery": "1/50"},
                                    {"leakEvery": "2", "leakOperations": "createVolume"}])
def test_bad_backend_parameters_are_rejected(params: dict[str, str]) -> None:
    with pytest.raises(ParameterError):
        parse_backend_model(params)


def test_handles_carry_class_and_pv_name() -> None:
    handle = volume_handle("1234-abcd", "fast-array")
    assert class_of_handle(handle) == "fast-array"
    assert pv_name_of_handle(handle) == "pvc-1234-abcd"
    assert class_of_handle("foreign-handle") == ""


def test_sidecar_command_lines_wire_the_driver_and_raise_client_limits_unless_upstream() -> None:
    provisioner = next(s for s in sidecars.SIDECARS if s.name == "csi-provisioner")
    args = sidecars.command_args(provisioner, Path("/s/p.kubeconfig"), Path("/s/csi/controller.sock"),
                                 {"worker-threads": "20", "kube-api-qps": "50"})
    assert args[:5] == ["--kubeconfig=/s/p.kubeconfig", "--leader-election=true",
                        "--leader-election-namespace=kube-system", "--v=2", "--csi-address=/s/csi/controller.sock"]
    assert "--extra-create-metadata=true" in args  # the driver finds the claim, hence the class
    # Go keeps the last of a repeated flag: the caller's value wins over the raised default.
    assert args[-3:] == ["--kube-api-qps=50", "--kube-api-burst=1000", "--worker-threads=20"]
    controller = next(s for s in sidecars.SIDECARS if s.name == "snapshot-controller")
    upstream = sidecars.command_args(controller, Path("/k"), None, {}, upstream_defaults=True)
    assert upstream == ["--kubeconfig=/k", "--leader-election=true", "--leader-election-namespace=kube-system",
                        "--v=2"]
    single = sidecars.command_args(controller, Path("/k"), None, {}, leader_election=False)
    assert single[:3] == ["--kubeconfig=/k", "--leader-election=false", "--v=2"]


def test_sidecar_options_from_the_command_line() -> None:
    assert sidecars.parse_sidecar_option("snapshot-controller:kube-api-qps=100,--kube-api-burst=200") == (
        "snapshot-controller", {"kube-api-qps": "100", "kube-api-burst": "200"})
    for bad in ("csi-unknown:timeout=1s", "csi-attacher:timeout", "csi-attacher:", "csi-attacher"):
        with pytest.raises(ValueError):
            sidecars.parse_sidecar_option(bad)


def test_a_vendors_sidecar_timeout_reaches_every_sidecar_that_makes_csi_calls() -> None:
    """--sidecar-timeout 600s (or the profile trident) sets --timeout on the four sidecars that call CSI, not on
    snapshot-controller; a --sidecar option's own timeout for one component wins."""
    flags = sidecars.timeout_flags("trident", {"csi-attacher": {"timeout": "30s", "worker-threads": "20"}})
    assert flags == {"csi-provisioner": {"timeout": "600s"}, "csi-snapshotter": {"timeout": "600s"},
                     "csi-resizer": {"timeout": "600s"}, "csi-attacher": {"timeout": "30s", "worker-threads": "20"}}
    provisioner = next(s for s in sidecars.SIDECARS if s.name == "csi-provisioner")
    args = sidecars.command_args(provisioner, Path("/k"), Path("/s.sock"), sidecars.timeout_flags("10m")[
        "csi-provisioner"])
    assert args[-1] == "--timeout=10m"
    for bad in ("600", "ten minutes", ""):
        with pytest.raises(ValueError):
            sidecars.timeout_flags(bad)


def test_upstream_rbac_moves_to_kube_system() -> None:
    manifest = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: csi-attacher, namespace: default}
---
kind: ClusterRoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata: {name: csi-attacher-role}
subjects: [{kind: ServiceAccount, name: csi-attacher, namespace: default}]
roleRef: {kind: ClusterRole, name: external-attacher-runner, apiGroup: rbac.authorization.k8s.io}
---
kind: RoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata: {name: cfg}
subjects: [{kind: ServiceAccount, name: csi-attacher}]
roleRef: {kind: Role, name: cfg, apiGroup: rbac.authorization.k8s.io}
"""
    account, cluster_binding, binding = sidecars.rbac_objects(manifest)
    assert account["metadata"]["namespace"] == "kube-system"
    assert "namespace" not in cluster_binding["metadata"]
    assert cluster_binding["subjects"][0]["namespace"] == binding["subjects"][0]["namespace"] == "kube-system"
    assert binding["metadata"]["namespace"] == "kube-system"


def test_sidecar_identities_are_their_service_accounts() -> None:
    from localcluster import pki

    users = {identity.name: identity for identity in pki.IDENTITIES}
    for sidecar in sidecars.SIDECARS:
        assert users[sidecar.name].user == f"system:serviceaccount:kube-system:{sidecar.service_account}"
        assert "system:serviceaccounts:kube-system" in users[sidecar.name].groups


def test_mirror_pod_records_the_command_line() -> None:
    attacher = next(s for s in sidecars.SIDECARS if s.name == "csi-attacher")
    pod = sidecars.mirror_pod(attacher, "sim-node-0", "uid-1", "/bin/csi-attacher", ["--timeout=30s"])
    assert pod["metadata"]["name"] == "csi-attacher-sim-node-0" and pod["metadata"]["namespace"] == "kube-system"
    # Restarted by its supervisor when deleted: not marked as a static pod's mirror, whose deletion restarts nothing.
    assert pod["metadata"]["annotations"]["csibench.io/host-process"] == "csi-attacher"
    assert "kubernetes.io/config.mirror" not in pod["metadata"]["annotations"]
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["/bin/csi-attacher"] and container["args"] == ["--timeout=30s"]
    assert container["image"] == f"registry.k8s.io/sig-storage/csi-attacher:{versions.ATTACHER.version}"


def test_sidecar_wrapper_module_pins_the_published_client_instead_of_a_local_path() -> None:
    go_mod: dict[str, object] = {"Replace": [
        {"Old": {"Path": "github.com/kubernetes-csi/external-snapshotter/client/v8"}, "New": {"Path": "./client"}},
        {"Old": {"Path": "k8s.io/api"}, "New": {"Path": "k8s.io/api", "Version": "v0.37.0"}},
    ]}
    assert build.sidecar_replaces(go_mod, versions.SNAPSHOTTER) == [
        "\tgithub.com/kubernetes-csi/external-snapshotter/client/v8 => "
        "github.com/kubernetes-csi/external-snapshotter/client/v8 v8.7.0",
        "\tk8s.io/api => k8s.io/api v0.37.0"]
    with pytest.raises(build.BuildError):
        build.sidecar_replaces({"Replace": [{"Old": {"Path": "x"}, "New": {"Path": "../x"}}]}, versions.ATTACHER)


def test_kubelet_requests_name_paths_and_capabilities_like_a_kubelet() -> None:
    root = Path("/state/data/kubelet/sim-node-0")
    staging = kubelet.staging_path(root, "u-1@sc")
    assert staging.startswith(f"{root}/plugins/kubernetes.io/csi/sim.csibench.io/")
    assert staging.endswith("/globalmount") and staging == kubelet.staging_path(root, "u-1@sc")
    assert kubelet.target_path(root, "pod-uid", "pvc-u-1") == (
        f"{root}/pods/pod-uid/volumes/kubernetes.io~csi/pvc-u-1/mount")
    block = kubelet.volume_capability({"spec": {"accessModes": ["ReadWriteMany"], "volumeMode": "Block"}})
    assert block.HasField("block") and block.access_mode.mode == csi.VolumeCapability.AccessMode.MULTI_NODE_MULTI_WRITER
    mount = kubelet.volume_capability({"spec": {}})
    assert mount.HasField("mount")
    assert mount.access_mode.mode == csi.VolumeCapability.AccessMode.SINGLE_NODE_MULTI_WRITER
    assert mount.mount.fs_type == ""  # no fsType: the driver keeps an unlimited directory
    ext4 = kubelet.volume_capability({"spec": {"csi": {"driver": "sim.csibench.io", "fsType": "ext4"}}})
    assert ext4.mount.fs_type == "ext4"


def test_committed_csi_stubs_match_the_pinned_spec() -> None:
    from localcluster.csi import generate

    assert generate.main(["--check"]) == 0


def test_go_mod_replaces_every_staging_module() -> None:
    upstream = ("replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n"
                "\tk8s.io/kubectl => ./staging/src/k8s.io/kubectl\n)")
    replaces = build.staging_replaces(upstream, "v0.36.3")
    assert replaces == ["\tk8s.io/api => k8s.io/api v0.36.3", "\tk8s.io/kubectl => k8s.io/kubectl v0.36.3"]
    text = build.build_go_mod("m", {"k8s.io/kubernetes": "v1.36.3"}, replaces)
    assert "require (\n\tk8s.io/kubernetes v1.36.3\n)" in text and "k8s.io/kubectl v0.36.3" in text
    with pytest.raises(build.BuildError):
        build.staging_replaces("module k8s.io/kubernetes", "v0.36.3")


@pytest.fixture
def spawner(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=1))
    cluster.config.log_dir.mkdir()
    yield cluster
    cluster.down()


def _python(spawner: LocalCluster, name: str, code: str) -> launcher.ProcessRecord:
    return spawner._spawn(name, sys.executable, ["-c", code])


def test_a_child_checked_right_after_spawning_runs_whatever_proc_shows(spawner: LocalCluster,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Right after Popen returns, /proc/<pid>/cmdline can still be empty (execve under way): the /proc check
    # would call the child dead. Our own children are judged by their handle only.
    monkeypatch.setattr(launcher, "pid_runs", lambda record: False)
    record = _python(spawner, "sleeper", "import time; time.sleep(60)")
    assert spawner.exit_of(record) is None
    spawner._check_alive()  # does not raise
    assert spawner.running() and spawner.status()["components"] == {"sleeper": "running"}


def test_a_child_that_exits_is_reported_with_its_exit_code(spawner: LocalCluster) -> None:
    record = _python(spawner, "failing", "import sys; print('bad flag', flush=True); sys.exit(3)")
    spawner._children[record.pid].wait(10)
    assert spawner.exit_of(record) == "exit code 3"
    with pytest.raises(ClusterError, match=r"failing exited during start-up \(exit code 3\); log tail:\nbad flag"):
        spawner._check_alive()


def test_a_killed_child_is_reported_with_its_signal(spawner: LocalCluster) -> None:
    record = _python(spawner, "victim", "import time; time.sleep(60)")
    spawner._children[record.pid].send_signal(signal.SIGKILL)
    spawner._children[record.pid].wait(10)
    assert spawner.exit_of(record) == "killed by signal SIGKILL"
    assert not spawner.running()


def test_down_stops_and_reaps_its_children(spawner: LocalCluster) -> None:
    records = [_python(spawner, f"child-{i}", "import time; time.sleep(60)") for i in range(2)]
    handles = [spawner._children[r.pid] for r in records]
    spawner.down()
    assert [h.returncode for h in handles] == [-signal.SIGTERM, -signal.SIGTERM]
    assert not spawner._children and not (spawner.config.state_dir / "state.json").exists()


def test_processes_of_another_invocation_are_checked_through_proc(spawner: LocalCluster) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE)
    try:
        assert other.stdout is not None and other.stdout.readline() == b"up\n"  # its execve is long done
        record = launcher.ProcessRecord("other", other.pid, sys.executable, "/dev/null")
        assert spawner.exit_of(record) is None
        other.kill()
        other.wait()
        assert spawner.exit_of(record) == "not running"
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize(("code", "text"), [(0, "exit code 0"), (3, "exit code 3"),
                                            (-9, "killed by signal SIGKILL"), (-15, "killed by signal SIGTERM")])
def test_exit_descriptions(code: int, text: str) -> None:
    assert describe_exit(code) == text


def _va(rv: int, uid: str = "u1", **status: object) -> api.Obj:
    return {"kind": "VolumeAttachment", "metadata": {"name": "va", "uid": uid, "resourceVersion": str(rv)},
            "status": status}


def cached(informer: api.Informer, key: str) -> api.Obj:
    """The informer's cached object, which must be there."""
    found = informer.get(key)
    assert found is not None, f"{key} is not cached"
    return found


def _informer() -> api.Informer:
    return api.Informer(None, api.VOLUME_ATTACHMENT)  # type: ignore[arg-type]  # never lists or watches here


def test_own_write_is_cached_at_once_and_older_watch_events_do_not_undo_it() -> None:
    informer, seen = _informer(), []
    informer.handlers.append(lambda kind, obj: seen.append((kind, obj["metadata"]["resourceVersion"])))
    informer._dispatch("ADDED", _va(10))
    informer.observe(_va(12, attached=True))  # the answer to our status patch
    assert cached(informer, "va")["status"] == {"attached": True}
    informer._dispatch("MODIFIED", _va(11))  # the watch event of our earlier finalizer patch, late
    assert cached(informer, "va")["metadata"]["resourceVersion"] == "12"
    informer._dispatch("MODIFIED", _va(12, attached=True))
    informer._dispatch("MODIFIED", _va(13, attached=True))
    assert cached(informer, "va")["metadata"]["resourceVersion"] == "13"
    assert seen == [("ADDED", "10"), ("MODIFIED", "11"), ("MODIFIED", "12"), ("MODIFIED", "13")]  # handlers: all
    informer.observe({"kind": "Status", "metadata": {}})
    informer.observe(None)
    assert cached(informer, "va")["metadata"]["resourceVersion"] == "13"


def test_own_delete_removes_the_object_until_its_deleted_event_and_a_new_one_is_taken() -> None:
    informer = _informer()
    informer._dispatch("ADDED", _va(10))
    informer.observe_deleted(_va(10), {"kind": "Status", "metadata": {}})
    assert informer.get("va") is None
    informer._dispatch("MODIFIED", _va(11))  # still in flight from before the delete
    assert informer.get("va") is None
    informer._dispatch("DELETED", _va(12))
    informer._dispatch("ADDED", _va(20, uid="u2"))  # re-created under the same name
    assert cached(informer, "va")["metadata"]["uid"] == "u2"


def test_own_delete_of_an_object_held_by_finalizers_caches_the_answer() -> None:
    informer = _informer()
    informer._dispatch("ADDED", _va(10))
    held = _va(11)
    held["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["f"])
    informer.observe_deleted(_va(10), held)
    assert cached(informer, "va")["metadata"]["deletionTimestamp"]


def test_a_supervised_restart_and_a_pause_request_read_as_a_kubelet_and_the_operator_write_them() -> None:

    pod = {"metadata": {"name": "csi-provisioner-sim-node-0", "uid": "u1"},
           "spec": {"containers": [{"name": "csi-provisioner", "image": "csi-provisioner"}]}}
    status = staticpod.build_restarted_status(pod, 3, 1, "2026-12-06T10:00:00Z", "2026-12-06T10:00:02Z")["status"]
    (container,) = status["containerStatuses"]
    assert container["restartCount"] == 3 and container["lastState"]["terminated"]["exitCode"] == 1
    assert container["state"] == {"running": {"startedAt": "2026-12-06T10:00:02Z"}} and container["ready"]

    def asking(request: object, answer: object = None) -> dict[str, object]:
        annotations = {pauser.REQUEST_ANNOTATION: request if isinstance(request, str) else json.dumps(
            request)}
        if answer is not None:
            annotations[pauser.ANSWER_ANNOTATION] = json.dumps(answer)
        return {"metadata": {"annotations": annotations}}
    assert pauser.request_of(asking({"id": "a", "seconds": 3})) == ("a", 3.0)
    assert pauser.request_of(asking({"id": "a", "seconds": 3}, {"id": "a"})) is None  # answered: never twice
    assert pauser.request_of(asking({"id": "a", "seconds": 3}, {"id": "older"})) == ("a", 3.0)
    for bad in ({"id": "a", "seconds": 0}, {"id": "a", "seconds": 601}, {"id": "a", "seconds": True},
                {"id": 7, "seconds": 3}, "{not json", ["a", 3]):
        assert pauser.request_of(asking(bad)) is None, bad


def test_a_standby_replica_runs_the_same_command_on_the_second_node_without_the_metrics_port(tmp_path: Path) -> None:
    """Its pod and its process are its own (a hostname per pod: its own leader candidate); the component's metrics
    port stays its first replica's."""
    cluster = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=18443, standby_sidecars=("csi-provisioner",)))
    provisioner = next(s for s in sidecars.SIDECARS if s.name == "csi-provisioner")
    _, first = cluster.sidecar_command(provisioner)
    _, second = cluster.sidecar_command(provisioner, standby=True)
    assert [a for a in first if not a.startswith("--http-endpoint=")] == second
    assert any(a.startswith("--http-endpoint=") for a in first)
    pod = cluster.sidecar_pod(provisioner, {"metadata": {"name": launcher.STANDBY_NODE, "uid": ""}}, standby=True)
    assert pod["metadata"]["name"] == "csi-provisioner-sim-node-1" and "ports" not in pod["spec"]["containers"][0]
    one_node = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=18443, nodes=1,
                                          standby_sidecars=("csi-provisioner",)))
    with pytest.raises(launcher.ClusterError, match="second node"):
        one_node._start_sidecars()
    unknown = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=18443, standby_sidecars=("csi-nothing",)))
    with pytest.raises(launcher.ClusterError, match="unknown components"):
        unknown._start_sidecars()

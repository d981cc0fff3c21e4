"""Pure parts of the simulated kubelet's process mode: who runs, where volumes go, what the log endpoint serves."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from localcluster.simulator.logserver import parse_log_path, select_text
from localcluster.simulator.runtime import (
    ContainerConfigError,
    Identity,
    Runtime,
    command_of,
    downward_files,
    empty_dirs,
    env_of,
    identity_of,
    is_pause_image,
    mount_paths,
    pod_phase,
    runs_processes,
    with_user,
)
from localcluster.simulator.sandbox import Action, plan_root


def pod(security: dict[str, Any] | None = None, image: str = "csibench/workload:1") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"nodeName": "n0", "securityContext": security or {},
                     "containers": [{"name": "c", "image": image, "command": ["fio"], "args": ["--version"]}]}}


def test_pause_pods_stay_status_only_and_everything_else_runs() -> None:
    assert is_pause_image("registry.k8s.io/pause:3.10") and is_pause_image("pause")
    assert is_pause_image("example.com/mirror/pause@sha256:abc")
    assert not runs_processes(pod(image="registry.k8s.io/pause:3.10"))
    assert runs_processes(pod(image="example.com/pause-not/fio:1"))


def test_identity_comes_from_the_container_over_the_pod_and_never_root() -> None:
    who = identity_of(pod({"runAsUser": 1000, "runAsGroup": 1001, "fsGroup": 2000, "supplementalGroups": [7]}),
                      {"name": "c", "securityContext": {"runAsUser": 1500}})
    assert (who.uid, who.gid, who.groups, who.fs_group) == (1500, 1001, (1001, 7, 2000), 2000)
    assert identity_of(pod({"runAsUser": 1000}), {"name": "c"}).fs_group is None
    with pytest.raises(ContainerConfigError, match="will run as root"):
        identity_of(pod({}), {"name": "c"})
    with pytest.raises(ContainerConfigError, match="breaks non-root policy"):
        identity_of(pod({"runAsUser": 0}), {"name": "c"})


def test_env_command_and_mounts() -> None:
    p = pod()
    container = {"name": "c", "command": ["fio"], "args": ["--output-format=json"],
                 "env": [{"name": "A", "value": "1"},
                         {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                 "volumeMounts": [{"name": "v", "mountPath": "/data/v/"}, {"name": "cfg", "mountPath": "/etc/x"}]}
    assert env_of(p, container) == {"A": "1", "POD": "p"}
    assert command_of(container) == ["fio", "--output-format=json"]
    assert mount_paths(p, container, {"v": "/srv/vol"}) == {"/data/v": "/srv/vol"}
    with pytest.raises(ContainerConfigError, match="no command"):
        command_of({"name": "c", "args": ["x"]})
    with pytest.raises(ContainerConfigError):
        mount_paths(p, {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/"}]}, {"v": "/srv"})


def test_pod_phase_follows_restart_policy() -> None:
    assert pod_phase("Never", [0, 0]) == "Succeeded"
    assert pod_phase("Never", [0, 3]) == "Failed"
    assert pod_phase("Never", [0, None]) is None
    assert pod_phase("OnFailure", [1]) is None and pod_phase("OnFailure", [0]) == "Succeeded"
    assert pod_phase("Always", [0]) is None


def test_root_plan_makes_mount_paths_inside_the_tmpfs_and_binds_the_rest() -> None:
    host = {"/": [("usr", "dir", ""), ("bin", "symlink", "usr/bin"), ("tmp", "dir", ""), ("var", "dir", ""),
                  ("etc", "dir", "")],
            "/var": [("lib", "dir", ""), ("log", "dir", "")], "/var/lib": [("dpkg", "dir", "")]}
    actions = plan_root({"/data/v": "/srv/a", "/var/lib/pg": "/srv/b"}, lambda d: host.get(d, []))
    assert Action("bind", "/usr", "/usr") in actions and Action("symlink", "/bin", "usr/bin") in actions
    assert Action("tmpfs", "/tmp") in actions  # private, never the host's /tmp
    assert Action("bind", "/var/log", "/var/log") in actions and Action("bind", "/var/lib/dpkg",
                                                                        "/var/lib/dpkg") in actions
    assert Action("bind", "/var", "/var") not in actions  # shadowed: a mountPath goes below it
    assert actions[-2:] == [Action("dir", "/var/lib/pg"), Action("volume", "/var/lib/pg", "/srv/b")]
    assert Action("volume", "/data/v", "/srv/a") in actions


def test_empty_dirs_are_mounted_like_volumes_and_shm_and_passwd_are_the_containers_own() -> None:
    p = pod()
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
                            {"name": "scratch", "emptyDir": {}}, {"name": "mem", "emptyDir": {"medium": "Memory"}}]
    assert empty_dirs(p) == ["scratch", "mem"]
    container = {"name": "c", "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                               {"name": "scratch", "mountPath": "/scratch"}]}
    assert mount_paths(p, container, {"data": "/k/csi/pv/mount", "scratch": "/k/empty-dir/scratch"}) == {
        "/data": "/k/csi/pv/mount", "/scratch": "/k/empty-dir/scratch"}
    host = {"/": [("dev", "dir", ""), ("etc", "dir", "")], "/dev": [("shm", "dir", ""), ("null", "other", "")]}
    actions = plan_root({"/scratch": "/k/s"}, lambda d: host.get(d, []), {"/etc/passwd": "/k/c/passwd"})
    assert Action("bind", "/dev", "/dev") in actions and Action("tmpfs", "/dev/shm") in actions
    assert actions.index(Action("tmpfs", "/dev/shm")) > actions.index(Action("bind", "/dev", "/dev"))
    assert Action("bind", "/etc/passwd", "/k/c/passwd") in actions
    assert actions.index(Action("bind", "/etc/passwd", "/k/c/passwd")) > actions.index(Action("bind", "/etc", "/etc"))
    assert Action("tmpfs", "/dev/shm") not in plan_root({}, lambda d: {"/": [("dev", "dir", "")]}.get(d, []))


def test_a_user_the_host_does_not_know_gets_an_entry_in_the_containers_passwd_only() -> None:
    passwd = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    group = "root:x:0:\nnogroup:x:65534:\n"
    added_passwd, added_group = with_user(passwd, group, Identity(65532, 65532, (65532,)))
    assert added_passwd is not None and added_passwd.startswith(passwd)
    assert added_passwd.endswith("user65532:x:65532:65532:pod user:/tmp:/usr/sbin/nologin\n")
    assert added_group == group + "group65532:x:65532:\n"
    assert with_user(passwd, group, Identity(65534, 65534, ())) == (None, None)  # known: the host's files stay


def test_log_endpoint_paths_and_selection() -> None:
    assert parse_log_path("/containerLogs/ns/pod-1/work?follow=true") == ("ns", "pod-1", "work")
    assert parse_log_path("/containerLogs/ns/pod") is None
    assert parse_log_path("/containerLogs/ns/%2e%2e/x") is None
    assert parse_log_path("/metrics") is None
    assert select_text(b"a\nb\nc\n", 2, None) == b"b\nc\n"
    assert select_text(b"abcdef", None, 3) == b"abc"
    assert select_text(b"a\n", 0, None) == b""


def test_downward_api_files_follow_the_pods_annotations_and_labels() -> None:
    """A downwardAPI volume's items: one annotation (empty until it is set, as a kubelet writes a missing one), the
    name, all labels as key="value" lines; a path that leaves the volume, or an unknown field, is refused."""
    shaped = pod()
    shaped["metadata"]["labels"] = {"b": "2", "a": "x\"y"}
    shaped["spec"]["volumes"] = [{"name": "barrier", "downwardAPI": {"items": [
        {"path": "start", "fieldRef": {"fieldPath": "metadata.annotations['csibench.io/start-at']"}},
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}, {"name": "scratch", "emptyDir": {}}]
    assert downward_files(shaped) == {"barrier": {"start": "", "name": "p", "labels": 'a="x\\"y"\nb="2"'}}
    shaped["metadata"]["annotations"] = {"csibench.io/start-at": "1796289657"}
    assert downward_files(shaped)["barrier"]["start"] == "1796289657"
    for path, field in (("../escape", "metadata.name"), ("a/b", "metadata.name"), ("x", "spec.nodeName")):
        shaped["spec"]["volumes"][0]["downwardAPI"]["items"] = [{"path": path, "fieldRef": {"fieldPath": field}}]
        with pytest.raises(ContainerConfigError):
            downward_files(shaped)


def _process_pod(init: list[str], main: list[str]) -> dict[str, Any]:
    shaped = pod({"runAsUser": 4321, "runAsGroup": 4321})
    shaped["metadata"]["annotations"] = {"start": "42"}
    mounts = [{"name": "scratch", "mountPath": "/scratch"}, {"name": "barrier", "mountPath": "/barrier"}]
    shaped["spec"]["initContainers"] = [{"name": "layout", "image": "i", "command": init, "volumeMounts": mounts}]
    shaped["spec"]["containers"] = [{"name": "c", "image": "i", "command": main, "volumeMounts": mounts}]
    shaped["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}, {"name": "barrier", "downwardAPI": {"items": [
        {"path": "start", "fieldRef": {"fieldPath": "metadata.annotations['start']"}}]}}]
    return shaped


def test_init_containers_run_to_their_end_first_and_a_stopped_pod_starts_nothing(tmp_path: Path) -> None:
    """Real processes in the sandbox: the init container's work is there when the container starts, which also
    sees its downwardAPI file, rewritten when the pod changes; a pod stopped during its init container starts no
    container and leaves no process."""
    async def scenario() -> None:
        runtime = Runtime(tmp_path)
        shaped = _process_pod(["sh", "-c", "echo laid-out > /scratch/file"],
                              ["sh", "-c", "cat /scratch/file; while [ \"$(cat /barrier/start)\" = 42 ]; do "
                                           "sleep 0.05; done; cat /barrier/start"])
        group = await runtime.start(shaped, {})
        assert group.init_failed is None and group.init_containers["layout"].exit_code == 0
        shaped["metadata"]["annotations"]["start"] = "43"
        runtime.refresh(shaped)
        assert await asyncio.wait_for(runtime.wait(group, "c"), 20) == 0
        assert group.containers["c"].log_path.read_text().split() == ["laid-out", "43"]
        runtime.forget(group.uid)
        held = _process_pod(["sleep", "30"], ["true"])
        held["metadata"]["uid"] = "u2"
        starting = asyncio.create_task(runtime.start(held, {}))
        while "layout" not in getattr(runtime.pods.get("u2"), "init_containers", {}):
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        await runtime.stop("u2", 1.0)
        stopped = await asyncio.wait_for(starting, 10)
        assert stopped.init_failed == "layout" and stopped.containers == {}
        assert stopped.init_containers["layout"].process is not None
        assert stopped.init_containers["layout"].process.returncode is not None
        runtime.forget("u2")

    asyncio.run(scenario())


def test_a_stop_signals_only_processes_not_yet_ended_never_a_pid_reaped_earlier(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pid_max is 32768 on these machines and containers spawn many processes: an init container's pid, reaped
    when it ended, can be a new container's (a group leader) by the time its pod stops. A stop signals the group
    of a process it has not seen end, once; never the finished init container's, nor anything on a retried stop
    (the kubelet retries a pod's termination until its volumes are unmounted)."""
    import localcluster.simulator.runtime as runtime_module

    signalled: list[tuple[int, int]] = []
    real_kill_group = runtime_module._kill_group

    def recording(pgid: int, sig: Any) -> None:
        signalled.append((pgid, int(sig)))
        real_kill_group(pgid, sig)

    async def scenario() -> None:
        runtime = Runtime(tmp_path)
        group = await runtime.start(_process_pod(["true"], ["sleep", "30"]), {})
        init, main = group.init_containers["layout"].process, group.containers["c"].process
        assert init is not None and init.returncode == 0 and main is not None and main.returncode is None
        watching = asyncio.create_task(runtime.wait(group, "c"))
        monkeypatch.setattr(runtime_module, "_kill_group", recording)
        await runtime.stop("u1", 0.5)
        assert await asyncio.wait_for(watching, 10) in (143, 137)
        assert signalled and {pgid for pgid, _ in signalled} == {main.pid}, (signalled, init.pid, main.pid)
        signalled.clear()
        await runtime.stop("u1", 0.5)  # retried: everything ended already
        assert signalled == []
        runtime.forget("u1")

    asyncio.run(scenario())


def test_a_stop_returns_only_once_the_containers_leftovers_are_ended_whoever_saw_the_exit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet's wait usually sees a stopped container exit first and starts ending what it left; the stop
    must still wait for that end, or the kubelet would unmount volumes a leftover process (fio's workers, a
    daemon) still holds."""
    import localcluster.simulator.runtime as runtime_module

    ended: list[float] = []
    real_end = runtime_module.end_leftovers

    def slow_end(*args: Any) -> None:
        time.sleep(0.5)
        real_end(*args)
        ended.append(time.monotonic())

    async def scenario() -> None:
        runtime = Runtime(tmp_path)
        group = await runtime.start(_process_pod(["true"], ["sleep", "30"]), {})
        watching = asyncio.create_task(runtime.wait(group, "c"))
        await asyncio.sleep(0.1)
        monkeypatch.setattr(runtime_module, "end_leftovers", slow_end)
        await runtime.stop("u1", 0.5)
        stopped = time.monotonic()
        assert len(ended) == 1 and ended[0] <= stopped, (ended, stopped)
        await asyncio.wait_for(watching, 10)
        assert len(ended) == 1  # once, whoever asked
        runtime.forget("u1")

    asyncio.run(scenario())

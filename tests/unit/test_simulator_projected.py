"""The simulated kubelet's projected volumes and in-cluster environment: what a pod's program finds at
/var/run/secrets/kubernetes.io/serviceaccount and in its environment, how a failure is told, when a token is renewed."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from localcluster.simulator import api
from localcluster.simulator.projected import (
    FileProjection,
    ProjectionError,
    Projector,
    Token,
    downward_projection,
    fs_user,
    keyed_files,
    mount_failure,
    refresh_delay,
    token_file,
    token_request,
    with_fs_group,
    write_files,
)
from localcluster.simulator.runtime import (
    IMAGE_PATH,
    Identity,
    container_env,
    image_dirs,
    mounts_service_account_token,
    reachable,
    read_only_paths,
    service_env,
)
from localcluster.simulator.sandbox import Action, plan_root

ACCESS = "kube-api-access-x7k2p"
MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def admitted_pod(user: int | None = 65532, fs_group: int | None = None) -> dict[str, Any]:
    """A pod as the API server's ServiceAccount admission leaves it: the kube-api-access volume, mounted read-only."""
    security: dict[str, Any] = {} if user is None else {"runAsUser": user}
    if fs_group is not None:
        security["fsGroup"] = fs_group
    return {"metadata": {"name": "op-1", "namespace": "csibench-system", "uid": "uid-1"},
            "spec": {"nodeName": "sim-node-0", "serviceAccountName": "csibench-operator", "securityContext": security,
                     "containers": [{"name": "operator", "image": "csibench/operator:0.1.0", "command": ["csibench"],
                                     "volumeMounts": [{"name": ACCESS, "mountPath": MOUNT, "readOnly": True}]}],
                     "volumes": [{"name": ACCESS, "projected": {"defaultMode": 420, "sources": [
                         {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                         {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                         {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                             "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}]}}


def test_the_token_request_is_bound_to_the_pod_with_the_sources_audience_or_the_apis_default() -> None:
    pod = admitted_pod()
    source = pod["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]
    assert token_request(pod, source) == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
        "expirationSeconds": 3607, "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "op-1",
                                                      "uid": "uid-1"}}}
    assert token_request(pod, {"audience": "vault", "path": "t"})["spec"]["audiences"] == ["vault"]
    assert token_request(pod, {"path": "t"})["spec"]["expirationSeconds"] == 3600  # the API's default


def test_the_token_is_the_pods_one_users_with_mode_0600_else_default_mode() -> None:
    assert token_file("t", admitted_pod(), 0o644) == FileProjection(b"t", 0o600, uid=65532)
    assert token_file("t", admitted_pod(user=None), 0o644) == FileProjection(b"t", 0o644, uid=None)
    two_users = admitted_pod()
    two_users["spec"]["containers"].append({"name": "side", "securityContext": {"runAsUser": 1000}})
    assert fs_user(two_users) is None  # a kubelet's FsUserFrom: no single user
    grouped = with_fs_group({"token": token_file("t", admitted_pod(user=None, fs_group=2000), 0o644)}, 2000)
    assert grouped["token"] == FileProjection(b"t", 0o640, uid=None, gid=2000)  # group-read through fsGroup


def test_config_map_and_secret_items_and_their_errors_in_the_kubelets_words() -> None:
    config_map = {"data": {"ca.crt": "PEM", "other": "x"}, "binaryData": {"bin": base64.b64encode(b"\0").decode()}}
    source = {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert keyed_files("configmap", source, config_map, 0o644) == {"ca.crt": FileProjection(b"PEM", 0o644)}
    every = keyed_files("configmap", {"name": "c"}, config_map, 0o400)
    assert set(every) == {"ca.crt", "other", "bin"} and every["bin"].data == b"\0" and every["other"].mode == 0o400
    moded = keyed_files("configmap", {"name": "c", "items": [{"key": "other", "path": "d/o", "mode": 0o600}]},
                        config_map, 0o644)
    assert moded == {"d/o": FileProjection(b"x", 0o600)}
    with pytest.raises(ProjectionError, match=r'^configmap "kube-root-ca\.crt" not found$'):
        keyed_files("configmap", source, None, 0o644)
    assert keyed_files("configmap", {**source, "optional": True}, None, 0o644) == {}
    with pytest.raises(ProjectionError, match=r"^configmap references non-existent config key: missing$"):
        keyed_files("configmap", {"name": "c", "items": [{"key": "missing", "path": "m"}]}, config_map, 0o644)
    secret = {"data": {"password": base64.b64encode(b"s3cret").decode()}}
    assert keyed_files("secret", {"name": "s"}, secret, 0o644) == {"password": FileProjection(b"s3cret", 0o644)}
    with pytest.raises(ProjectionError, match="must be relative"):
        keyed_files("configmap", {"name": "c", "items": [{"key": "other", "path": "../escape"}]}, config_map, 0o644)


def test_downward_items_and_the_failed_mount_message() -> None:
    pod = admitted_pod()
    source = pod["spec"]["volumes"][0]["projected"]["sources"][2]["downwardAPI"]
    assert downward_projection(pod, source, 0o644) == {"namespace": FileProjection(b"csibench-system", 0o644)}
    with pytest.raises(ProjectionError, match="not supported"):
        downward_projection(pod, {"items": [{"path": "n", "fieldRef": {"fieldPath": "spec.nodeName"}}]}, 0o644)
    assert mount_failure(ACCESS, ['failed to fetch token: serviceaccounts "x" not found']) == (
        'MountVolume.SetUp failed for volume "kube-api-access-x7k2p" : failed to fetch token: serviceaccounts "x" '
        'not found')
    assert mount_failure("v", ["a", "b"]).endswith(" : [a, b]")  # Go's aggregate of several errors


def test_a_token_is_renewed_at_80_percent_of_its_lifetime_or_after_24_hours() -> None:
    now = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    hour = Token("v", "token", 3607, now + dt.timedelta(seconds=3607))
    assert refresh_delay(hour, now, 0.0) == pytest.approx(3607 * 0.8)
    assert refresh_delay(hour, now, 10.0) == pytest.approx(3607 * 0.8 - 10)
    week = Token("v", "token", 7 * 86400, now + dt.timedelta(days=7))
    assert refresh_delay(week, now, 0.0) == pytest.approx(86400)  # at most a day old
    assert refresh_delay(hour, now + dt.timedelta(hours=2), 0.0) == 0.0  # overdue: at once


def test_files_are_replaced_atomically_with_their_modes_and_stale_ones_go(tmp_path: Path) -> None:
    directory = tmp_path / "v"
    write_files(directory, {"token": FileProjection(b"one", 0o600), "ca.crt": FileProjection(b"PEM", 0o644)}, set())
    first = (directory / "token").stat().st_ino
    assert stat.S_IMODE((directory / "token").stat().st_mode) == 0o600
    assert stat.S_IMODE((directory / "ca.crt").stat().st_mode) == 0o644
    write_files(directory, {"token": FileProjection(b"two", 0o600)}, {"token", "ca.crt"})
    assert (directory / "token").read_bytes() == b"two" and (directory / "token").stat().st_ino != first  # renamed over
    assert not (directory / "ca.crt").exists()
    assert sorted(os.listdir(directory)) == ["token"]  # no temporary file left


class FakeClient:
    """TokenRequest and reads, as the API server answers them; ``fail_token`` first answers 404."""

    def __init__(self, fail_token: int = 0, ca: bool = True) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.fail_token = fail_token
        self.ca = ca

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        self.requests.append((method, path, body))
        if self.fail_token:
            self.fail_token -= 1
            raise api.ApiError(404, 'serviceaccounts "csibench-operator" not found')
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=body["spec"]["expirationSeconds"])
        return {"status": {"token": f"token-{len(self.requests)}",
                           "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}

    async def get(self, path: str) -> dict[str, Any] | None:
        self.requests.append(("GET", path, None))
        return {"data": {"ca.crt": "PEM"}} if self.ca else None


def test_the_projector_makes_the_volume_or_says_why_not_in_a_failed_mount_warning(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []

    async def event(obj: Any, reason: str, message: str, component: str) -> None:
        events.append((reason, message))

    async def scenario() -> None:
        client = FakeClient(fail_token=1, ca=False)
        projector = Projector(client, event, tmp_path)  # type: ignore[arg-type]
        pod = admitted_pod()
        assert not await projector.set_up(pod)
        assert events == [("FailedMount", f'MountVolume.SetUp failed for volume "{ACCESS}" : [failed to fetch token: '
                                          'serviceaccounts "csibench-operator" not found, configmap "kube-root-ca.crt" '
                                          'not found]')]
        client.ca = True
        assert await projector.set_up(pod)  # the retry
        directory = Path(projector.volume_dirs(pod)[ACCESS])
        assert directory == tmp_path / "sim-node-0" / "pods" / "uid-1" / "volumes" / "kubernetes.io~projected" / ACCESS
        assert (directory / "token").read_text() == "token-3"
        assert (directory / "ca.crt").read_text() == "PEM"
        assert (directory / "namespace").read_text() == "csibench-system"
        token = (directory / "token").stat()
        assert (token.st_uid, stat.S_IMODE(token.st_mode)) == (65532, 0o600)
        assert client.requests[-2][:2] == (
            "POST", "/api/v1/namespaces/csibench-system/serviceaccounts/csibench-operator/token")
        pod["metadata"]["labels"] = {"a": "b"}
        projector.changed(pod)  # nothing of it shows labels: nothing rewritten
        assert (directory / "token").stat().st_ino == token.st_ino
        projector.forget("uid-1")
        assert not directory.exists() and not projector.holds("uid-1")

    if os.geteuid() != 0:
        pytest.skip("the token file is chowned to the pod's user: needs root, as the simulator runs")
    asyncio.run(scenario())


def test_the_token_is_written_again_before_it_expires_until_the_pod_goes(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-second token (the API allows no less than 600 s; short here to see it) is asked for again at 80 % of
    its life and the file replaced; the refresh ends once the pod is forgotten."""
    monkeypatch.setattr("localcluster.simulator.projected.MAX_JITTER_SECONDS", 0.0)

    async def event(*_: Any) -> None:
        raise AssertionError("no failure expected")

    async def scenario() -> None:
        client = FakeClient()
        projector = Projector(client, event, tmp_path)  # type: ignore[arg-type]
        pod = admitted_pod(user=None)
        pod["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] = 1
        assert await projector.set_up(pod)
        token = Path(projector.volume_dirs(pod)[ACCESS]) / "token"
        first = token.read_text()
        refresh = asyncio.create_task(projector.refresh_tokens("uid-1"))
        for _ in range(100):
            if token.read_text() != first:
                break
            await asyncio.sleep(0.05)
        assert token.read_text() != first
        projector.forget("uid-1")
        await asyncio.wait_for(refresh, 5)  # ends by itself: nothing left to refresh

    asyncio.run(scenario())


def test_containers_of_a_pod_with_a_token_get_the_in_cluster_environment_and_every_container_the_images_path() -> None:
    service = service_env("https://127.0.0.1:20443")
    assert service == {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "20443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "20443", "KUBERNETES_PORT": "tcp://127.0.0.1:20443",
        "KUBERNETES_PORT_20443_TCP": "tcp://127.0.0.1:20443", "KUBERNETES_PORT_20443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_20443_TCP_PORT": "20443", "KUBERNETES_PORT_20443_TCP_ADDR": "127.0.0.1"}
    pod = admitted_pod()
    container = pod["spec"]["containers"][0]
    assert mounts_service_account_token(pod)
    env = container_env(pod, container, service)
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1" and env["PATH"] == IMAGE_PATH
    assert IMAGE_PATH.startswith(str(Path(sys.executable).parent) + ":")  # the checkout's venv: csibench is there
    container["env"] = [{"name": "PATH", "value": "/bin"}, {"name": "KUBERNETES_SERVICE_PORT", "value": "1"}]
    assert container_env(pod, container, service)["PATH"] == "/bin"  # the container's own env wins
    assert container_env(pod, container, service)["KUBERNETES_SERVICE_PORT"] == "1"
    pod["spec"]["volumes"] = []
    assert not mounts_service_account_token(pod)
    assert "KUBERNETES_SERVICE_HOST" not in container_env(pod, container, service)  # no token: no in-cluster env
    assert read_only_paths(admitted_pod()["spec"]["containers"][0], {MOUNT: "/k/p"}) == [MOUNT]


def fake_stat(modes: dict[str, tuple[int, int, int]]) -> Any:
    def lookup(path: str) -> os.stat_result:
        mode, uid, gid = modes.get(path, (0o755, 0, 0))
        return os.stat_result((stat.S_IFDIR | mode, 0, 0, 0, uid, gid, 0, 0, 0, 0))
    return lookup


def test_the_images_interpreter_is_exposed_only_where_the_user_cannot_reach_it() -> None:
    who = Identity(65532, 65532, (65532,))
    private_root = fake_stat({"/root": (0o700, 0, 0)})
    assert not reachable("/root/.pyenv/versions/3.11.7", who, private_root)
    assert reachable("/usr", who, private_root)
    assert reachable("/root/x", Identity(0o700, 5, ()), fake_stat({"/root": (0o710, 9, 5)}))  # through the group
    image = ("/usr/local/lib/python3.11", "/work/co/.venv", "/work/co/operator")
    assert image_dirs(who, fake_stat({}), image) == []  # everything world-traversable: nothing changes
    # A checkout under /tmp (a CI clone) is hidden by the container's private /tmp: shown, whatever its modes.
    assert image_dirs(who, fake_stat({}), ("/usr/lib/python3", "/tmp/co/.venv", "/tmp/co/operator")) == [
        "/tmp/co/.venv", "/tmp/co/operator"]


def test_an_exposed_directory_under_tmp_is_bound_after_the_pods_emptydir_at_tmp() -> None:
    host = {"/": [("usr", "dir", ""), ("tmp", "dir", "")], "/tmp": [("co", "dir", ""), ("other", "dir", "")]}
    with_empty_dir = plan_root({"/tmp": "/k/empty-dir/tmp"}, lambda d: host.get(d, []), exposed=["/tmp/co/.venv"])
    volume = with_empty_dir.index(Action("volume", "/tmp", "/k/empty-dir/tmp"))
    assert with_empty_dir.index(Action("bind", "/tmp/co/.venv", "/tmp/co/.venv")) > volume
    assert not [a for a in with_empty_dir if a.path == "/tmp/other"]
    alone = plan_root({}, lambda d: host.get(d, []), exposed=["/tmp/co/.venv"])
    tmpfs = alone.index(Action("tmpfs", "/tmp"))  # /tmp is still the container's own tmpfs (mode 1777)
    assert alone.index(Action("bind", "/tmp/co/.venv", "/tmp/co/.venv")) > tmpfs


def test_the_sandbox_root_shows_an_exposed_directory_alone_and_remounts_read_only_mounts() -> None:
    host = {"/": [("usr", "dir", ""), ("root", "dir", ""), ("var", "dir", ""), ("tmp", "dir", "")],
            "/root": [(".ssh", "dir", ""), (".pyenv", "dir", "")],
            "/var": [("log", "dir", ""), ("run", "symlink", "/run")]}
    actions = plan_root({MOUNT: "/k/projected/access", "/tmp": "/k/empty-dir/tmp"}, lambda d: host.get(d, []),
                        read_only=[MOUNT], exposed=["/root/.pyenv/versions/3.11.7"])
    assert Action("bind", "/root/.pyenv/versions/3.11.7", "/root/.pyenv/versions/3.11.7") in actions
    assert Action("dir", "/root") in actions and not [a for a in actions if a.path == "/root/.ssh"]  # nothing else
    assert Action("bind", "/usr", "/usr") in actions and Action("bind", "/var/log", "/var/log") in actions
    assert actions.index(Action("readonly", MOUNT)) == actions.index(Action("volume", MOUNT, "/k/projected/access")) + 1
    assert Action("readonly", "/tmp") not in actions
    # A pod with no volume at all still sees the host's root (it used to get an empty one).
    assert Action("bind", "/usr", "/usr") in plan_root({}, lambda d: host.get(d, []))

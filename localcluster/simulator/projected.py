"""Projected volumes of process-mode pods: what a program in a pod finds at /var/run/secrets/kubernetes.io/....

Why: the deployed operator runs as a pod of the local cluster and reaches the API server with in-cluster
configuration, exactly as in a real cluster. The API server's ServiceAccount admission plugin gives every pod
(unless ``automountServiceAccountToken: false``) a projected volume ``kube-api-access-xxxxx``: a
serviceAccountToken source (expirationSeconds 3607, path ``token``), the ``kube-root-ca.crt`` ConfigMap's
``ca.crt`` and the pod's namespace (downwardAPI), mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount.
As a kubelet does, the simulated kubelet materialises it before the pod's containers start:

- the token from the TokenRequest API (``POST .../serviceaccounts/<sa>/token``), bound to the pod (boundObjectRef:
  the pod's name and uid, so it dies with the pod) with the source's audience (none: the API's default audiences)
  and expirationSeconds; the request is the simulator's own identity's (the admin kubeconfig, ``system:masters``),
  where a kubelet's is its node's;
- configMap and secret items read through the API, downwardAPI items with the runtime's downward helpers;
- each file written beside its target and renamed over it (a reader sees the old file or the new one), with the
  item's mode or the volume's defaultMode (0644); the token 0600 and owned by the pod's user when all its
  containers run as one user (a kubelet's ``FsUserFrom``), group-readable by fsGroup when the pod has one.

A failure (no such ServiceAccount, the ConfigMap not published yet in a new namespace) is a ``FailedMount``
Warning with the kubelet's wording (``MountVolume.SetUp failed for volume "kube-api-access-x" : failed to fetch
token: ...``) and is retried with the kubelet controller's backoff; the pod does not start until every projected
volume is ready. The token is then refreshed before it expires, as the kubelet's token manager does: once 80 % of
its lifetime has passed or it is 24 h old, less a jitter of up to 10 s; the whole volume is written again then (a
ConfigMap that changed is picked up too), and its downwardAPI items follow the pod's labels and annotations at once.

Pause pods never get here: they are status only, and an API call per pod would slow the lifecycle benchmarks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import os
import random
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from localcluster.simulator import api
from localcluster.simulator.runtime import ContainerConfigError, downward_value

log = logging.getLogger("simulator.projected")
PROJECTED_PLUGIN = "kubernetes.io~projected"  # where a kubelet keeps a pod's projected volumes
DEFAULT_MODE = 0o644  # the API's default for defaultMode (420)
DEFAULT_EXPIRATION_SECONDS = 3600  # the API's default for a serviceAccountToken source
MAX_TOKEN_AGE_SECONDS = 24 * 3600.0  # the kubelet's token manager refreshes a token at least this often
REFRESH_REMAINING_FRACTION = 0.2  # ... or when this much of its lifetime is left
MAX_JITTER_SECONDS = 10.0
RETRY_INITIAL_SECONDS, RETRY_MAX_SECONDS = 1.0, 60.0
MIN_REFRESH_SECONDS = 0.5

EventSink = Callable[[api.Obj, str, str, str], Awaitable[None]]  # (object, reason, message, component)


class ProjectionError(ValueError):
    """One source of a projected volume could not be made (the kubelet's words, e.g. ``configmap "x" not found``)."""


@dataclass(frozen=True)
class FileProjection:
    """One file of a projected volume: its content, mode and owner (None: the kubelet's, root)."""

    data: bytes
    mode: int
    uid: int | None = None
    gid: int | None = None


@dataclass(frozen=True)
class Token:
    """A token written into a volume, and when to ask for the next one."""

    volume: str
    path: str
    expiration_seconds: int
    expires_at: dt.datetime


def projected_volumes(pod: api.Obj) -> list[api.Obj]:
    """The pod's projected volumes (pure)."""
    return [v for v in pod["spec"].get("volumes") or [] if "projected" in v]


def mounts_service_account_token(pod: api.Obj) -> bool:
    """Whether the pod has a projected ServiceAccount token: its containers then get the in-cluster environment
    (``KUBERNETES_SERVICE_HOST`` ...) (pure)."""
    return any("serviceAccountToken" in source for volume in projected_volumes(pod)
               for source in (volume["projected"] or {}).get("sources") or [])


def service_account_name(pod: api.Obj) -> str:
    return str(pod["spec"].get("serviceAccountName") or pod["spec"].get("serviceAccount") or "default")


def token_request_path(pod: api.Obj) -> str:
    return f"/api/v1/namespaces/{pod['metadata']['namespace']}/serviceaccounts/{service_account_name(pod)}/token"


def token_request(pod: api.Obj, source: api.Obj) -> api.Obj:
    """The TokenRequest a kubelet sends for a serviceAccountToken source (pure): bound to the pod, the source's
    audience or none (the API server's default audiences), its expirationSeconds."""
    spec: api.Obj = {
        "expirationSeconds": int(source.get("expirationSeconds") or DEFAULT_EXPIRATION_SECONDS),
        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"],
                           "uid": pod["metadata"]["uid"]},
    }
    if source.get("audience"):
        spec["audiences"] = [source["audience"]]
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def fs_user(pod: api.Obj) -> int | None:
    """The one user all the pod's (init) containers run as, else None: a kubelet's ``FsUserFrom`` (pure)."""
    pod_context = pod["spec"].get("securityContext") or {}
    found: int | None = None
    for container in (pod["spec"].get("initContainers") or []) + (pod["spec"].get("containers") or []):
        user = (container.get("securityContext") or {}).get("runAsUser", pod_context.get("runAsUser"))
        if user is None or (found is not None and int(user) != found):
            return None
        found = int(user)
    return found


def fs_group(pod: api.Obj) -> int | None:
    value = (pod["spec"].get("securityContext") or {}).get("fsGroup")
    return int(value) if value is not None else None


def item_path(path: str) -> str:
    """A file's path inside its volume: relative, never leaving it (pure)."""
    normal = os.path.normpath(path)
    if not path or path.startswith("/") or normal == "." or normal.split("/")[0] == ".." or normal.startswith(".."):
        raise ProjectionError(f"invalid path {path!r}: must be relative and may not contain '..'")
    return normal


def token_file(token: str, pod: api.Obj, default_mode: int) -> FileProjection:
    """The token's file: 0600 owned by the pod's one user (or group-read through fsGroup), else defaultMode (pure)."""
    user, group = fs_user(pod), fs_group(pod)
    mode = 0o600 if user is not None or group is not None else default_mode
    return FileProjection(token.encode(), mode, uid=user)


def keyed_files(kind: str, source: api.Obj, obj: api.Obj | None, default_mode: int) -> dict[str, FileProjection]:
    """A configMap or secret source's files (pure): its items (key -> path, optional mode), or every key; a missing
    object is an error unless the source is optional, as a kubelet words it."""
    name = source.get("name", "")
    if obj is None:
        if source.get("optional"):
            return {}
        raise ProjectionError(f'{kind} "{name}" not found')
    if kind == "secret":
        data = {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}
    else:
        data = {key: str(value).encode() for key, value in (obj.get("data") or {}).items()}
        data.update({key: base64.b64decode(value) for key, value in (obj.get("binaryData") or {}).items()})
    items = source.get("items")
    if not items:
        return {item_path(key): FileProjection(value, default_mode) for key, value in data.items()}
    files = {}
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            what = "config" if kind == "configmap" else "secret"
            raise ProjectionError(f"{kind} references non-existent {what} key: {item['key']}")
        files[item_path(item["path"])] = FileProjection(data[item["key"]], int(item.get("mode", default_mode)))
    return files


def downward_projection(pod: api.Obj, source: api.Obj, default_mode: int) -> dict[str, FileProjection]:
    """A downwardAPI source's files (pure): fieldRef items with the runtime's downward helper."""
    files = {}
    for item in source.get("items") or []:
        field_path = (item.get("fieldRef") or {}).get("fieldPath", "")
        try:
            value = downward_value(pod, field_path)
        except ContainerConfigError as error:
            raise ProjectionError(str(error).removeprefix("Error: ")) from None
        files[item_path(item["path"])] = FileProjection(value.encode(), int(item.get("mode", default_mode)))
    return files


def with_fs_group(files: dict[str, FileProjection], group: int | None) -> dict[str, FileProjection]:
    """fsGroup on a read-only volume: the files go to the group, which may read them (a kubelet's
    SetVolumeOwnership with its read-only mask) (pure)."""
    if group is None:
        return files
    return {path: FileProjection(f.data, f.mode | 0o440, f.uid, group) for path, f in files.items()}


def mount_failure(volume: str, errors: list[str]) -> str:
    """The FailedMount message: one error as it is, several as Go prints an aggregate (pure)."""
    text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f'MountVolume.SetUp failed for volume "{volume}" : {text}'


def parse_time(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def refresh_delay(token: Token, now: dt.datetime, jitter: float) -> float:
    """Seconds until a kubelet asks for a new token (pure): when it is 24 h old or 80 % of its lifetime has passed,
    each less the jitter; the lifetime is what was asked for, as the answer's expirationTimestamp says (the API
    server may sign a longer-lived token for 3607 s, and the kubelet still refreshes on the requested one)."""
    issued = token.expires_at - dt.timedelta(seconds=token.expiration_seconds)
    by_age = issued + dt.timedelta(seconds=MAX_TOKEN_AGE_SECONDS - jitter)
    by_lifetime = token.expires_at - dt.timedelta(seconds=token.expiration_seconds * REFRESH_REMAINING_FRACTION
                                                  + jitter)
    return max(0.0, (min(by_age, by_lifetime) - now).total_seconds())


def write_files(directory: Path, files: dict[str, FileProjection], previous: set[str]) -> None:
    """Each file whose content, mode or owner changed, written beside its target and renamed over it; files of the
    previous projection that are no longer in it removed."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    for path, wanted in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            current = target.stat()
            if (target.read_bytes() == wanted.data and current.st_mode & 0o7777 == wanted.mode
                    and current.st_uid == (wanted.uid if wanted.uid is not None else os.getuid())
                    and (wanted.gid is None or current.st_gid == wanted.gid)):
                continue
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(handle, "wb") as file:
            file.write(wanted.data)
        os.chown(temporary, wanted.uid if wanted.uid is not None else -1, wanted.gid if wanted.gid is not None else -1)
        os.chmod(temporary, wanted.mode)
        os.replace(temporary, target)
    for path in previous - set(files):
        (directory / path).unlink(missing_ok=True)


@dataclass
class _PodVolumes:
    """What the projector made for one pod."""

    pod: api.Obj
    root: Path  # the pod's projected-volume directory
    files: dict[str, dict[str, FileProjection]] = field(default_factory=dict)  # volume -> path -> file
    tokens: dict[tuple[str, str], Token] = field(default_factory=dict)  # (volume, path) -> token


class Projector:
    """Makes, refreshes and removes the projected volumes of process-mode pods."""

    def __init__(self, client: api.Client, event: EventSink, root: Path, component: str = "kubelet") -> None:
        self._client = client
        self._event = event
        self._root = root
        self._component = component
        self._pods: dict[str, _PodVolumes] = {}  # pod uid -> its volumes

    def directory(self, pod: api.Obj) -> Path:
        node, uid = str(pod["spec"]["nodeName"]), str(pod["metadata"]["uid"])
        pod_dir = self._root / node / "pods" / uid
        # The pod's directory is the pod's alone (0700, the runtime's too) before a token is written under it:
        # process containers see the host's paths, and another pod's user must not reach this one's token.
        pod_dir.mkdir(parents=True, exist_ok=True)
        pod_dir.chmod(0o700)
        return pod_dir / "volumes" / PROJECTED_PLUGIN

    def volume_dirs(self, pod: api.Obj) -> dict[str, str]:
        """The pod's projected volumes by name -> their directory (whether or not they are made yet)."""
        return {v["name"]: str(self.directory(pod) / v["name"]) for v in projected_volumes(pod)}

    def holds(self, uid: str) -> bool:
        return uid in self._pods

    async def set_up(self, pod: api.Obj) -> bool:
        """Make every projected volume of the pod; False (a FailedMount Warning said why) when one failed."""
        state = self._pods.setdefault(pod["metadata"]["uid"], _PodVolumes(pod, self.directory(pod)))
        ready = True
        for volume in projected_volumes(pod):
            if volume["name"] in state.files:
                continue  # made by an earlier pass
            ready = await self._make(state, pod, volume) and ready
        return ready

    async def refresh_tokens(self, uid: str) -> None:
        """Until cancelled (the pod stops): write each volume again when one of its tokens is due."""
        attempt = 0
        while True:
            state = self._pods.get(uid)
            if state is None or not state.tokens:
                return
            now = dt.datetime.now(dt.UTC)
            due = {token.volume: refresh_delay(token, now, random.uniform(0, MAX_JITTER_SECONDS))
                   for token in state.tokens.values()}
            volume_name, delay = min(due.items(), key=lambda item: item[1])
            await asyncio.sleep(max(delay, MIN_REFRESH_SECONDS))  # a token born expired (clocks) never spins
            volume = next((v for v in projected_volumes(state.pod) if v["name"] == volume_name), None)
            if volume is None or uid not in self._pods:
                return
            if await self._make(state, state.pod, volume):
                attempt = 0
                continue
            await asyncio.sleep(min(RETRY_INITIAL_SECONDS * 2 ** attempt, RETRY_MAX_SECONDS))
            attempt += 1

    def changed(self, pod: api.Obj) -> None:
        """The pod changed: its projected downwardAPI items follow its labels and annotations at once."""
        state = self._pods.get(pod["metadata"].get("uid", ""))
        if state is None:
            return
        state.pod = pod
        for volume in projected_volumes(pod):
            written = state.files.get(volume["name"])
            if written is None:
                continue
            spec = volume["projected"] or {}
            default_mode = int(spec.get("defaultMode", DEFAULT_MODE))
            try:
                downward = {path: f for source in spec.get("sources") or [] if "downwardAPI" in source
                            for path, f in downward_projection(pod, source["downwardAPI"], default_mode).items()}
            except ProjectionError:
                continue
            updated = {**written, **with_fs_group(downward, fs_group(pod))}
            if updated != written:
                try:
                    write_files(state.root / volume["name"], updated, set(written))
                except OSError as error:
                    log.warning("projected volume %s of %s: %s", volume["name"], api.key_of(pod), error)
                    continue
                state.files[volume["name"]] = updated

    def forget(self, uid: str) -> None:
        """The pod is gone: its projected volumes go with it."""
        state = self._pods.pop(uid, None)
        if state is not None:
            shutil.rmtree(state.root, ignore_errors=True)

    async def _make(self, state: _PodVolumes, pod: api.Obj, volume: api.Obj) -> bool:
        files, tokens, errors = await self._collect(pod, volume)
        if not errors:
            try:
                write_files(state.root / volume["name"], files, set(state.files.get(volume["name"], {})))
            except OSError as error:
                errors.append(f"failed to write projected volume: {error}")
        if errors:
            await self._event(pod, "FailedMount", mount_failure(volume["name"], errors), self._component)
            return False
        if pod["metadata"]["uid"] not in self._pods:  # forgotten meanwhile: nothing stays on the host
            shutil.rmtree(state.root, ignore_errors=True)
            return False
        state.files[volume["name"]] = files
        state.tokens = {key: token for key, token in state.tokens.items() if key[0] != volume["name"]}
        state.tokens.update({(volume["name"], token.path): token for token in tokens})
        return True

    async def _collect(self, pod: api.Obj, volume: api.Obj) -> tuple[dict[str, FileProjection], list[Token],
                                                                       list[str]]:
        """Every source's files (fetched through the API), the tokens among them, and what failed."""
        spec = volume["projected"] or {}
        default_mode = int(spec.get("defaultMode", DEFAULT_MODE))
        namespace = pod["metadata"]["namespace"]
        files: dict[str, FileProjection] = {}
        tokens: list[Token] = []
        errors: list[str] = []
        for source in spec.get("sources") or []:
            try:
                if "serviceAccountToken" in source:
                    wanted = source["serviceAccountToken"] or {}
                    path = item_path(wanted.get("path", ""))
                    token, expires_at = await self._token(pod, wanted)
                    files[path] = token_file(token, pod, default_mode)
                    tokens.append(Token(volume["name"], path, int(wanted.get("expirationSeconds")
                                                                  or DEFAULT_EXPIRATION_SECONDS), expires_at))
                elif "configMap" in source or "secret" in source:
                    kind = "configmap" if "configMap" in source else "secret"
                    wanted = source.get("configMap") or source.get("secret") or {}
                    plural = "configmaps" if kind == "configmap" else "secrets"
                    obj = await self._read(f"/api/v1/namespaces/{namespace}/{plural}/{wanted.get('name', '')}")
                    files.update(keyed_files(kind, wanted, obj, default_mode))
                elif "downwardAPI" in source:
                    files.update(downward_projection(pod, source["downwardAPI"] or {}, default_mode))
                else:
                    kinds = ", ".join(sorted(source)) or "empty"
                    errors.append(f"projected source {kinds} is not supported by the simulated kubelet")
            except ProjectionError as error:
                errors.append(str(error))
        return with_fs_group(files, fs_group(pod)), tokens, errors

    async def _token(self, pod: api.Obj, source: api.Obj) -> tuple[str, dt.datetime]:
        try:
            answer = await self._client.request("POST", token_request_path(pod), token_request(pod, source))
            status = answer.get("status") or {}
            return str(status["token"]), parse_time(status["expirationTimestamp"])
        except api.ApiError as error:
            raise ProjectionError(f"failed to fetch token: {error.message}") from None
        except (aiohttp.ClientError, OSError, TimeoutError, KeyError, ValueError) as error:
            raise ProjectionError(f"failed to fetch token: {error}") from None

    async def _read(self, path: str) -> api.Obj | None:
        try:
            return await self._client.get(path)
        except api.ApiError as error:
            raise ProjectionError(error.message) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            raise ProjectionError(str(error)) from None


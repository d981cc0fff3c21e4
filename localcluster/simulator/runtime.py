"""The simulated kubelet's container runtime: pods whose containers are not the pause image run as host processes.

A pause pod only has to look Running, so it stays a status patch (the lifecycle benchmarks depend on that speed).
Any other pod really runs: each container's ``command`` + ``args`` as a process (``sandbox.py`` gives it a
private mount namespace, its CSI volumes and emptyDirs at their mountPath, and the pod's
runAsUser/runAsGroup/fsGroup), in a process group of its own so that stopping it reaches every process it
started. Its stdout and stderr go to a log file the node's log server (``logserver.py``) serves as
``/containerLogs/<ns>/<pod>/<container>``. An emptyDir is a directory of the pod's own on the node (mode 0777,
given to fsGroup like a volume), shared by its containers and removed with the pod, as a kubelet's is. Init
containers run first, one after the other, each to its end (one that fails fails the pod, as for restartPolicy
Never; the pod is Running only after them). A downwardAPI volume is a directory of files holding the pod's name,
namespace, uid, labels or annotations; the kubelet rewrites them (each atomically) when the pod changes, at once
rather than on a kubelet's next sync. There is
no image to bring its own ``/etc/passwd``: when the container's user is not in the host's, the container gets a
copy with that user added (bound over ``/etc/passwd`` in its namespace only), as an image's user would be there
(PostgreSQL's initdb refuses a user it cannot look up).

There is no image either to bring its software: "the image" is the checkout's virtualenv, where the simulator runs
from (the operator image's entrypoint ``csibench`` is installed there), so a container's PATH is that
virtualenv's bin directory, then the system's, unless the container sets PATH; when the virtualenv's interpreter
lies where the container's user cannot walk (a pyenv under a 0700 /root), the sandbox shows that directory alone on
the way to it. A pod with a projected ServiceAccount token (``projected.py`` makes it; its directory is mounted
like any volume, read-only as the admission plugin asks) gets the ``kubernetes`` Service's variables pointing at the
API server, so in-cluster configuration works. The prober (``prober.py``) sets a container's readiness and
started state (``ready_gate``, ``start_gate``), stops a container whose liveness probe failed (``kill``: it is then
restarted per restartPolicy) and runs exec probes in a running container's namespaces (``exec_in``).

What is decided from the pod spec alone is pure and unit-tested: whether a pod runs processes, who a container
runs as (never root: a container without a non-root runAsUser is refused with the kubelet's wording), its
environment, its command line, and the container and pod status a kubelet reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from localcluster.simulator import api, qos
from localcluster.simulator.sandbox import in_private_tmpfs
from localcluster.simulator.volumes import SYSTEM_PATH

log = logging.getLogger("simulator.runtime")
PAUSE_IMAGE_NAME = "pause"
# A pod that stands for a process the local cluster runs on the host (status only, for this kubelet), which its
# supervisor restarts when the pod is deleted, as a Deployment's or DaemonSet's would be (a static pod's mirror,
# also status only, is restarted by nothing).
HOST_PROCESS_ANNOTATION = "csibench.io/host-process"
DEFAULT_GRACE_SECONDS = 30.0
EMPTY_DIR_PLUGIN = "kubernetes.io~empty-dir"  # where a kubelet keeps a pod's emptyDirs
DOWNWARD_API_PLUGIN = "kubernetes.io~downward-api"
# "The image's PATH": there are no images, the checkout's virtualenv is the operator image's installed software
# (its entrypoint ``csibench`` is there), then the system's. The simulator runs from that virtualenv's python.
IMAGE_BIN = str(Path(sys.executable).parent)
IMAGE_PATH = f"{IMAGE_BIN}:{SYSTEM_PATH}"
# Where the virtualenv's editable install of csibench reads its source (the checkout's operator/): part of "the
# image" too. A checkout under /tmp (a CI clone) is hidden by every container's private /tmp unless shown.
IMAGE_SOURCE = str(Path(__file__).resolve().parents[2] / "operator")


class ContainerConfigError(ValueError):
    """A container the kubelet will not start (the reason a kubelet reports: CreateContainerConfigError)."""


def is_pause_image(image: str) -> bool:
    """``registry.k8s.io/pause:3.10`` and the like: the image's last path component is ``pause`` (pure)."""
    name = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    return name == PAUSE_IMAGE_NAME


def runs_processes(pod: api.Obj) -> bool:
    """A pod with any container that is not a pause image runs for real (pure). Mirror pods stay status-only: they
    stand for processes the launcher runs itself (the CSI sidecars), like a kubelet's static pods."""
    annotations = pod["metadata"].get("annotations") or {}
    if "kubernetes.io/config.mirror" in annotations or HOST_PROCESS_ANNOTATION in annotations:
        return False
    containers = (pod["spec"].get("initContainers") or []) + (pod["spec"].get("containers") or [])
    return any(not is_pause_image(c.get("image", "")) for c in containers)


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...]
    fs_group: int | None = None  # the sandbox gives the volumes to this group (fsGroupPolicy File)


def identity_of(pod: api.Obj, container: api.Obj) -> Identity:
    """Who a container runs as: the container's securityContext over the pod's (pure). No runAsUser, or 0, is
    refused: this kubelet has no image metadata to fall back on and runs nothing as root."""
    pod_context = pod["spec"].get("securityContext") or {}
    own = container.get("securityContext") or {}
    uid = own.get("runAsUser", pod_context.get("runAsUser"))
    gid = own.get("runAsGroup", pod_context.get("runAsGroup"))
    where = f"(pod: \"{pod['metadata']['name']}_{pod['metadata']['namespace']}({pod['metadata'].get('uid', '')})\", " \
            f"container: {container['name']})"
    if uid is None:
        raise ContainerConfigError(f"Error: container has runAsNonRoot and image will run as root {where}: the "
                                   "simulated kubelet runs nothing as root; set a non-root runAsUser")
    if int(uid) == 0:
        raise ContainerConfigError(f"Error: container's runAsUser breaks non-root policy {where}")
    groups = [int(g) for g in pod_context.get("supplementalGroups") or []]
    if pod_context.get("fsGroup") is not None:
        groups.append(int(pod_context["fsGroup"]))
    group = int(gid) if gid is not None else int(uid)
    fs_group = pod_context.get("fsGroup")
    return Identity(int(uid), group, tuple(dict.fromkeys([group, *groups])),
                    int(fs_group) if fs_group is not None else None)


def env_of(pod: api.Obj, container: api.Obj) -> dict[str, str]:
    """The container's environment: literal values and the downward API's pod name/namespace/uid (pure)."""
    meta = pod["metadata"]
    fields = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"],
              "metadata.uid": meta.get("uid", ""), "spec.nodeName": pod["spec"].get("nodeName", "")}
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        else:
            path = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
            if path in fields:
                env[item["name"]] = fields[path]
    return env


def mounts_service_account_token(pod: api.Obj) -> bool:
    """Whether the pod has a projected ServiceAccount token (``kube-api-access-xxxxx``, added by the API server's
    ServiceAccount admission plugin unless automountServiceAccountToken is false) (pure)."""
    return any("serviceAccountToken" in source for volume in pod["spec"].get("volumes") or []
               for source in (volume.get("projected") or {}).get("sources") or [])


def service_env(server: str) -> dict[str, str]:
    """The ``kubernetes`` Service's variables a kubelet gives every container, pointing at the API server itself
    (pure): the real values are the Service's ClusterIP and port 443, which nothing routes here, so they are the
    host and port of the API server (its certificate has IP SAN 127.0.0.1). ``load_incluster_config`` reads
    ``KUBERNETES_SERVICE_HOST`` and ``KUBERNETES_SERVICE_PORT``."""
    url = urllib.parse.urlsplit(server)
    host, port = url.hostname or "127.0.0.1", str(url.port or 443)
    address = f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"
    prefix = f"KUBERNETES_PORT_{port}_TCP"
    return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "KUBERNETES_SERVICE_PORT_HTTPS": port,
            "KUBERNETES_PORT": address, prefix: address, f"{prefix}_PROTO": "tcp", f"{prefix}_PORT": port,
            f"{prefix}_ADDR": host}


def container_env(pod: api.Obj, container: api.Obj, service: dict[str, str]) -> dict[str, str]:
    """Everything a container's process gets (pure): the ``kubernetes`` Service's variables when the pod mounts a
    ServiceAccount token, the image's PATH, then the container's own env, which wins (it may set PATH)."""
    base = dict(service) if mounts_service_account_token(pod) else {}
    return {**base, "PATH": IMAGE_PATH, **env_of(pod, container)}


def read_only_paths(container: api.Obj, mounts: dict[str, str]) -> list[str]:
    """The container's mountPaths mounted read-only (``readOnly: true``), among those it has (pure)."""
    found = []
    for mount in container.get("volumeMounts") or []:
        path = os.path.normpath("/" + mount["mountPath"].lstrip("/"))
        if mount.get("readOnly") and path in mounts:
            found.append(path)
    return sorted(found)


StatFn = Callable[[str], os.stat_result]


def reachable(path: str, who: Identity, lookup: StatFn = os.stat) -> bool:
    """Whether ``who`` may walk down to ``path`` (execute permission on it and on every directory above) (pure
    given ``lookup``)."""
    parts = [part for part in path.split("/") if part]
    for depth in range(len(parts) + 1):
        found = lookup("/" + "/".join(parts[:depth]))
        bits = 0o001
        if found.st_uid == who.uid:
            bits = 0o100
        elif found.st_gid in (who.gid, *who.groups):
            bits = 0o010
        if not found.st_mode & bits:
            return False
    return True


def image_dirs(who: Identity, lookup: StatFn = os.stat, image: tuple[str, ...] | None = None) -> list[str]:
    """The interpreter the image's virtualenv points at, when the container's user could not reach it on the host
    (a pyenv under /root, mode 0700): the sandbox then shows that directory alone on the way to it, as an image
    would hold its Python where its user can run it (pure given ``lookup``)."""
    wanted = sorted(set(image) if image is not None else
                    {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), IMAGE_SOURCE})
    return [path for path in wanted if in_private_tmpfs(path) or not reachable(path, who, lookup)]


def command_of(container: api.Obj) -> list[str]:
    """``command`` + ``args``; there are no images here, so a container must name its command (pure)."""
    command = [str(part) for part in (container.get("command") or []) + (container.get("args") or [])]
    if not container.get("command"):
        raise ContainerConfigError(f"Error: container {container['name']} has no command: the simulated kubelet "
                                   "runs host binaries and has no image entrypoint to fall back on")
    return command


def mount_paths(pod: api.Obj, container: api.Obj, volume_dirs: dict[str, str]) -> dict[str, str]:
    """mountPath -> host data directory for the container's mounts of CSI volumes (pure; ``volume_dirs`` maps
    the pod's volume names to directories)."""
    return _paths_in_container(container.get("volumeMounts") or [], "mountPath", volume_dirs)


def device_paths(container: api.Obj, volume_dirs: dict[str, str]) -> dict[str, str]:
    """devicePath -> the kubelet's target path for the container's raw block volumes (``volumeDevices``; pure).
    The target path leads to the array's device file, which the sandbox binds at the devicePath."""
    return _paths_in_container(container.get("volumeDevices") or [], "devicePath", volume_dirs)


def _paths_in_container(uses: list[api.Obj], key: str, volume_dirs: dict[str, str]) -> dict[str, str]:
    """The container's path (``key`` of each use of a volume) -> what the volume is on the host; a path that is
    the root or climbs out of it is refused as a runtime refuses it."""
    found = {}
    for use in uses:
        source = volume_dirs.get(use["name"])
        if source is not None:
            path = os.path.normpath("/" + use[key].lstrip("/"))
            if path == "/" or ".." in path.split("/"):
                raise ContainerConfigError(f"Error: {key} {use[key]!r} is not usable")
            found[path] = source
    return found


DOWNWARD_FIELDS = ("metadata.name", "metadata.namespace", "metadata.uid")
DOWNWARD_KEYED = re.compile(r"^metadata\.(annotations|labels)\['([^']*)'\]$")


def downward_value(pod: api.Obj, field_path: str) -> str:
    """What a downwardAPI volume's item holds for a fieldRef, as a kubelet writes it (pure): a name, namespace or
    uid; one label or annotation (empty while it is not set); or all of them, ``key="value"`` lines in key order."""
    meta = pod["metadata"]
    if field_path in DOWNWARD_FIELDS:
        return str(meta.get(field_path.split(".", 1)[1], ""))
    if field_path in ("metadata.labels", "metadata.annotations"):
        found = meta.get(field_path.split(".", 1)[1]) or {}
        return "\n".join(f"{key}={json.dumps(value)}" for key, value in sorted(found.items()))
    keyed = DOWNWARD_KEYED.match(field_path)
    if keyed is None:
        raise ContainerConfigError(f"Error: downwardAPI fieldPath {field_path!r} is not supported by the simulated "
                                   "kubelet")
    return str((meta.get(keyed.group(1)) or {}).get(keyed.group(2), ""))


def downward_files(pod: api.Obj) -> dict[str, dict[str, str]]:
    """The pod's downwardAPI volumes (pure): volume name -> {path inside the volume: content}. They change with the
    pod: a kubelet rewrites them when the pod's labels or annotations change (``Runtime.refresh``)."""
    volumes: dict[str, dict[str, str]] = {}
    for volume in pod["spec"].get("volumes") or []:
        if "downwardAPI" not in volume:
            continue
        files = volumes.setdefault(volume["name"], {})
        for item in (volume["downwardAPI"] or {}).get("items") or []:
            path = os.path.normpath(item["path"])
            if path.startswith(("/", "..")) or "/" in path:
                raise ContainerConfigError(f"Error: downwardAPI path {item['path']!r} is not usable (one file name)")
            files[path] = downward_value(pod, (item.get("fieldRef") or {}).get("fieldPath", ""))
    return volumes


def empty_dirs(pod: api.Obj) -> list[str]:
    """The pod's emptyDir volumes, by name (pure). Every medium is a directory on the node here: a tmpfs would
    live in one container's mount namespace and could not be shared by the pod's containers."""
    return [v["name"] for v in pod["spec"].get("volumes") or [] if "emptyDir" in v]


def with_user(passwd: str, group: str, who: Identity) -> tuple[str | None, str | None]:
    """/etc/passwd and /etc/group for a container whose user or group the host does not know (pure): the host's
    files with an entry added, or None where nothing is missing."""
    def known(text: str, number: int) -> bool:
        return any(len(fields) > 2 and fields[2] == str(number) for fields in
                   (line.split(":") for line in text.splitlines()))
    entry = f"user{who.uid}:x:{who.uid}:{who.gid}:pod user:/tmp:/usr/sbin/nologin"
    added_passwd = None if known(passwd, who.uid) else passwd.rstrip("\n") + f"\n{entry}\n"
    added_group = None if known(group, who.gid) else group.rstrip("\n") + f"\ngroup{who.gid}:x:{who.gid}:\n"
    return added_passwd, added_group


def termination_reason(exit_code: int) -> str:
    return "Completed" if exit_code == 0 else "Error"


def pod_phase(restart_policy: str, exit_codes: list[int | None]) -> str | None:
    """The phase once containers ended (None: some still run, or will be restarted) (pure)."""
    if any(code is None for code in exit_codes):
        return None
    if restart_policy == "Always":
        return None
    if all(code == 0 for code in exit_codes):
        return "Succeeded"
    return "Failed" if restart_policy == "Never" else None


@dataclass
class Container:
    """One container of a process-mode pod."""

    name: str
    image: str
    log_path: Path
    process: asyncio.subprocess.Process | None = None
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    waiting: tuple[str, str] | None = None  # (reason, message) of a container that could not start
    # The prober's verdicts (None: no such probe): a container is ready once its readiness probe passed and started
    # once its startup probe passed; both go back to False at each (re)start.
    ready_gate: bool | None = None
    start_gate: bool | None = None
    started_monotonic: float = 0.0  # the event loop's clock at its (re)start: initialDelaySeconds counts from there
    probe_killed: bool = False  # stopped by a failed liveness or startup probe: restarted even after exit 0
    # Ending what its process left once it exited (``end_leftovers``, started by whoever saw the exit first: the
    # kubelet's wait or a stop; both await it). From then on its pid, the process group's number, may be another
    # process's (pid_max is 32768 here and containers spawn many), so it is never signalled again.
    ending: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.exit_code is None and self.waiting is None

    def status(self, uid: str) -> api.Obj:
        if self.waiting is not None:
            state: api.Obj = {"terminated": {"exitCode": 128, "reason": self.waiting[0], "message": self.waiting[1],
                                             "startedAt": self.started_at, "finishedAt": self.finished_at}}
        elif self.exit_code is not None:
            state = {"terminated": {"exitCode": self.exit_code, "reason": termination_reason(self.exit_code),
                                    "startedAt": self.started_at, "finishedAt": self.finished_at,
                                    "containerID": f"sim://{uid}-{self.name}"}}
        else:
            state = {"running": {"startedAt": self.started_at}}
        started = self.exit_code is None and self.start_gate is not False
        return {"name": self.name, "image": self.image, "imageID": "", "containerID": f"sim://{uid}-{self.name}",
                "ready": self.exit_code is None and self.waiting is None and started and self.ready_gate is not False,
                "started": started, "restartCount": self.restarts, "state": state}


@dataclass
class PodProcesses:
    """The containers of one pod, and where their logs and roots live."""

    uid: str
    namespace: str
    name: str
    directory: Path
    containers: dict[str, Container] = field(default_factory=dict)
    stopping: bool = False
    scratch: dict[str, str] = field(default_factory=dict)  # emptyDir name -> its directory on the node
    downward: dict[str, str] = field(default_factory=dict)  # downwardAPI volume name -> its directory on the node
    init_containers: dict[str, Container] = field(default_factory=dict)  # run to their end, in order, first
    init_failed: str | None = None  # the init container that failed (or was stopped): no container started

    @property
    def empty_dir_root(self) -> Path:
        return self.directory / "volumes" / EMPTY_DIR_PLUGIN


class Runtime:
    """Starts, watches and stops the containers of process-mode pods on all simulated nodes."""

    def __init__(self, root: Path, service: dict[str, str] | None = None) -> None:
        self._root = root
        self.service = service or {}  # the ``kubernetes`` Service's variables (service_env)
        self.pods: dict[str, PodProcesses] = {}  # pod uid -> its processes
        self.logs: dict[tuple[str, str, str], Path] = {}  # (namespace, pod, container) -> log file

    def log_path(self, namespace: str, pod: str, container: str) -> Path | None:
        return self.logs.get((namespace, pod, container))

    async def start(self, pod: api.Obj, volume_dirs: dict[str, str]) -> PodProcesses:
        """Run the pod's init containers one after the other, each to its end, then start its containers
        (ContainerConfigError: nothing started). An init container that fails (or a pod stopped meanwhile) leaves
        ``init_failed`` set and no container started, as a kubelet does for restartPolicy Never."""
        meta = pod["metadata"]
        directory = self._root / pod["spec"]["nodeName"] / "pods" / meta["uid"]
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)  # its emptyDirs, logs and roots are the pod's alone: other pods see the host's paths
        group = PodProcesses(meta["uid"], meta["namespace"], meta["name"], directory)
        group.scratch = {name: str(group.empty_dir_root / name) for name in empty_dirs(pod)}
        files = downward_files(pod)
        group.downward = {name: str(directory / "volumes" / DOWNWARD_API_PLUGIN / name) for name in files}
        dirs = {**volume_dirs, **group.scratch, **group.downward}
        inits = [self._plan(pod, container, dirs) for container in pod["spec"].get("initContainers") or []]
        plans = [self._plan(pod, container, dirs) for container in pod["spec"].get("containers") or []]
        self.pods[meta["uid"]] = group
        await asyncio.to_thread(_make_empty_dirs, list(group.scratch.values()))
        if not group.stopping:  # stopped meanwhile: nothing more is written or started
            await asyncio.to_thread(_write_downward, group.downward, files)
        for plan in inits:
            entry = self._entry(group, plan[0], group.init_containers)
            await self._spawn(group, entry, *plan)
            if entry.process is None or await self.wait(group, entry.name, group.init_containers) != 0 or \
                    group.stopping:
                group.init_failed = entry.name
                return group
        for plan in plans:
            await self._spawn(group, self._entry(group, plan[0], group.containers), *plan)
        return group

    def _plan(self, pod: api.Obj, container: api.Obj, dirs: dict[str, str]) -> tuple[
            api.Obj, Identity, list[str], dict[str, str], dict[str, str], dict[str, str]]:
        return (container, identity_of(pod, container), command_of(container),
                container_env(pod, container, self.service), mount_paths(pod, container, dirs),
                device_paths(container, dirs))

    def _entry(self, group: PodProcesses, container: api.Obj, into: dict[str, Container]) -> Container:
        entry = Container(container["name"], container.get("image", ""),
                          group.directory / "logs" / f"{container['name']}.log",
                          ready_gate=False if container.get("readinessProbe") else None,
                          start_gate=False if container.get("startupProbe") else None)
        into[entry.name] = entry
        self.logs[(group.namespace, group.name, entry.name)] = entry.log_path
        return entry

    def refresh(self, pod: api.Obj) -> None:
        """The pod changed: rewrite its downwardAPI files whose content changed (a kubelet's volume manager does
        it on the pod's next sync; here at once), each replaced atomically, so a reader sees old or new."""
        group = self.pods.get(pod["metadata"].get("uid", ""))
        if group is None or not group.downward or group.stopping:
            return
        try:
            files = downward_files(pod)
        except ContainerConfigError:
            return
        _write_downward(group.downward, files)

    async def _spawn(self, group: PodProcesses, entry: Container, container: api.Obj, who: Identity,
                     command: list[str], env: dict[str, str], mounts: dict[str, str],
                     devices: dict[str, str]) -> None:
        if group.stopping:  # deleted while it started: nothing more starts
            return
        root = group.directory / "containers" / entry.name / "rootfs"
        root.mkdir(parents=True, exist_ok=True)
        entry.log_path.parent.mkdir(parents=True, exist_ok=True)
        files = await asyncio.to_thread(_identity_files, root.parent, who)
        exposed = await asyncio.to_thread(image_dirs, who)
        _namespace_file(group, entry).unlink(missing_ok=True)
        env = {**env, CONTAINER_MARK: _mark(group, entry)}  # whose leftovers are whose (end_leftovers)
        spec = {"namespaceFile": str(_namespace_file(group, entry)),
                "throttleFile": str(_namespace_file(group, entry).with_name("throttled-devices")),
                "command": command, "env": env,
                "workingDir": container.get("workingDir") or "/", "uid": who.uid,
                "gid": who.gid, "groups": list(who.groups), "fsGroup": who.fs_group, "root": str(root),
                "volumes": mounts, "files": files, "readOnly": read_only_paths(container, mounts),
                "exposed": exposed, "devices": devices}
        with entry.log_path.open("ab") as log_file:
            entry.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "localcluster.simulator.sandbox", json.dumps(spec),
                stdin=asyncio.subprocess.DEVNULL, stdout=log_file, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True, env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.defpath})
        if group.stopping:  # stop() came while it started and found no process: it must not outlive the pod
            _kill_group(entry.process.pid, signal.SIGKILL)
        entry.started_at = api.now_rfc3339()
        entry.started_monotonic = asyncio.get_running_loop().time()
        entry.exit_code = None
        entry.finished_at = None
        entry.ending = None
        entry.probe_killed = False
        entry.ready_gate = False if entry.ready_gate is not None else None
        entry.start_gate = False if entry.start_gate is not None else None

    async def wait(self, group: PodProcesses, name: str, among: dict[str, Container] | None = None) -> int:
        """Wait for a container's process to exit; then stop what it left in its process group."""
        entry = (group.containers if among is None else among)[name]
        assert entry.process is not None
        code = await entry.process.wait()
        await self._end_leftovers(group, entry, reaped_now=True)
        entry.exit_code = code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as a runtime reports
        entry.finished_at = api.now_rfc3339()
        return entry.exit_code

    async def restart(self, group: PodProcesses, pod: api.Obj, name: str, volume_dirs: dict[str, str]) -> None:
        container = next(c for c in pod["spec"]["containers"] if c["name"] == name)
        entry = group.containers[name]
        entry.restarts += 1
        dirs = {**volume_dirs, **group.scratch, **group.downward}
        await self._spawn(group, entry, *self._plan(pod, container, dirs))

    async def kill(self, group: PodProcesses, name: str, grace_seconds: float) -> None:
        """Stop one container (a failed liveness probe): SIGTERM its process group, SIGKILL after the grace period.
        Its watcher then sees the exit and restarts it per restartPolicy."""
        entry = group.containers[name]
        process = entry.process
        if process is None or process.returncode is not None:
            return
        entry.probe_killed = True
        _kill_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), timeout=grace_seconds)
        if process.returncode is None:  # once reaped its number may be another process's
            _kill_group(process.pid, signal.SIGKILL)

    async def exec_in(self, group: PodProcesses, pod: api.Obj, name: str, command: list[str],
                      timeout: float) -> tuple[int | None, str]:
        """Run ``command`` in a running container, as an exec probe does: in its mount and IPC namespaces, chrooted
        into its root, as its user, with its environment. (exit code or None on a timeout, its output)."""
        entry = group.containers[name]
        container = next(c for c in pod["spec"]["containers"] if c["name"] == name)
        if entry.process is None or entry.process.returncode is not None:
            raise OSError(f"container {name} is not running")
        who = identity_of(pod, container)
        env = {**container_env(pod, container, self.service), CONTAINER_MARK: _mark(group, entry)}
        spec = {"join": entry.process.pid, "command": command, "env": env, "uid": who.uid, "gid": who.gid,
                "groups": list(who.groups), "workingDir": container.get("workingDir") or "/",
                "root": str(group.directory / "containers" / name / "rootfs")}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "localcluster.simulator.sandbox", json.dumps(spec),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True, env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.defpath})
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout=timeout)
        except TimeoutError:
            if process.returncode is None:  # once reaped, its number may be another process's
                _kill_group(process.pid, signal.SIGKILL)
            await process.wait()
            return None, ""
        code = process.returncode if process.returncode is not None else -1
        return (code if code >= 0 else 128 - code), output.decode(errors="replace")

    async def stop(self, uid: str, grace_seconds: float) -> None:
        """SIGTERM every container's process group, SIGKILL what is left after the grace period, and wait."""
        group = self.pods.get(uid)
        if group is None:
            return
        group.stopping = True
        every = [*group.init_containers.values(), *group.containers.values()]
        running = [c.process for c in every if c.process is not None and c.process.returncode is None]
        for process in running:
            _kill_group(process.pid, signal.SIGTERM)
        if running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(p.wait() for p in running)), timeout=grace_seconds)
        for entry in every:
            child = entry.process
            if child is None:
                continue
            if entry.ending is not None:  # ended (or being ended) by whoever saw the exit: wait for it, signal nothing
                await asyncio.shield(entry.ending)
                continue
            alive = child.returncode is None  # not reaped: its pid, the group's number, is still its own
            if alive:
                _kill_group(child.pid, signal.SIGKILL)
                await child.wait()
            await self._end_leftovers(group, entry, reaped_now=alive)

    @staticmethod
    async def _end_leftovers(group: PodProcesses, entry: Container, reaped_now: bool) -> None:
        """Once per exit: what the container's process left (``end_leftovers``), awaited by every caller. Its
        process group is signalled only by a caller that reaped its leader just now (``reaped_now``; a group's
        number is not reused while a member lives, and a reaped leader's only after pids wrap); a leader reaped
        earlier may have a new owner of that number by now, so its leftovers are ended by their mark alone."""
        process = entry.process
        if process is None:
            return
        if entry.ending is None:
            entry.ending = asyncio.ensure_future(asyncio.to_thread(
                end_leftovers, process.pid if reaped_now else None, _namespace_file(group, entry),
                _mark(group, entry)))
        await asyncio.shield(entry.ending)

    def forget(self, uid: str) -> None:
        """After the pod's volumes are unmounted: drop its logs and directories (nothing stays on the host)."""
        group = self.pods.pop(uid, None)
        if group is None:
            return
        for name in [*group.init_containers, *group.containers]:
            self.logs.pop((group.namespace, group.name, name), None)
        shutil.rmtree(group.directory / "logs", ignore_errors=True)
        shutil.rmtree(group.directory / "containers", ignore_errors=True)
        shutil.rmtree(group.empty_dir_root, ignore_errors=True)  # emptyDirs go with the pod
        shutil.rmtree(group.directory / "volumes" / DOWNWARD_API_PLUGIN, ignore_errors=True)


def _namespace_file(group: PodProcesses, entry: Container) -> Path:
    """Where the sandbox records the container's mount namespace (``mnt:[inode]``)."""
    return group.directory / "containers" / entry.name / "mnt-namespace"


CONTAINER_MARK = "CSIBENCH_SIM_CONTAINER"  # in every container's environment: which container a process is of


def _mark(group: PodProcesses, entry: Container) -> str:
    return f"{group.uid}/{entry.name}/{entry.restarts}"


def end_leftovers(pgid: int | None, namespace_file: Path, mark: str | None = None) -> None:
    """After a container's main process ended: SIGKILL its process group (fio's workers) and every process
    still in its mount namespace, including those that left the group with setsid (a daemonized server): they
    would keep its volumes mounted, and an image's loop device with them. Only processes that carry the
    container's ``mark`` in their environment: once the namespace is gone the kernel reuses its inode number for
    the next one made, another pod's container, whose fio this would otherwise kill (exit 137). The group is
    signalled only by a caller that reaped its leader just now (``pgid``; None: by the mark alone): a pid reaped
    earlier may be a new container's by then, whose group has that number."""
    if pgid is not None:
        _kill_group(pgid, signal.SIGKILL)
    try:
        namespace = namespace_file.read_text()
    except FileNotFoundError:
        return  # the sandbox failed before it made the namespace
    try:
        _end_namespace(namespace, mark)
    finally:  # the volumes' QoS rules the sandbox set on their loop devices go with the container
        qos.release(namespace_file.with_name("throttled-devices"))


def _end_namespace(namespace: str, mark: str | None) -> None:
    if not namespace or namespace == os.readlink("/proc/self/ns/mnt"):
        return  # never the simulator's own namespace, whatever the file says
    for _attempt in range(3):  # a process may fork while the first pass kills
        found = False
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(entry / "ns" / "mnt") == namespace and (
                            mark is None or f"{CONTAINER_MARK}={mark}".encode() in
                            (entry / "environ").read_bytes().split(b"\0")):
                        os.kill(int(entry.name), signal.SIGKILL)
                        found = True
        if not found:
            return


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _make_empty_dirs(directories: list[str]) -> None:
    for directory in directories:
        os.makedirs(directory, exist_ok=True)
        os.chmod(directory, 0o777)  # a kubelet's emptyDir mode; fsGroup then gives it to the pod's group


def _write_downward(directories: dict[str, str], files: dict[str, dict[str, str]]) -> None:
    """Each downwardAPI file whose content changed, written beside and renamed over (readable by the pod)."""
    for name, directory in directories.items():
        os.makedirs(directory, mode=0o755, exist_ok=True)
        for path, content in files.get(name, {}).items():
            target = Path(directory) / path
            if target.exists() and target.read_text() == content:
                continue
            handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path}.")  # its own name: two writers
            with os.fdopen(handle, "w") as file:
                file.write(content)
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)


def _identity_files(directory: Path, who: Identity) -> dict[str, str]:
    """Write /etc/passwd and /etc/group copies for the container when its user or group is unknown here."""
    passwd, group = with_user(Path("/etc/passwd").read_text(), Path("/etc/group").read_text(), who)
    files = {}
    for path, text in (("/etc/passwd", passwd), ("/etc/group", group)):
        if text is not None:
            target = directory / path.rsplit("/", 1)[-1]
            target.write_text(text)
            target.chmod(0o644)
            files[path] = str(target)
    return files

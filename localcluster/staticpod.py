"""Run one CSI component as the local cluster's stand-in for a controller Deployment's pod.

``python -m localcluster.staticpod --kubeconfig ADMIN --pod POD.json -- EXECUTABLE ARGS...``

On a real cluster the CSI sidecars run in a Deployment: deleting their pod stops the container (SIGTERM, then
SIGKILL after the grace period) and a replacement pod starts, with a new uid and a new hostname, which is the
identity it campaigns for its leader Leases with. A storage benchmark that restarts a component mid-batch
measures exactly that, so the local cluster does the same for the processes it runs on the host:

- the component runs as a child of this supervisor, in a UTS namespace of its own whose hostname is unique per
  pod (``<pod name>-<5 characters>``, as a ReplicaSet names pods), so the process of a new pod is a new leader
  candidate and waits for the old lease to expire, as it would on a real cluster;
- the supervisor registers the component's pod (the mirror pod the launcher describes, owned by the node) and
  watches it: when the pod is deleted, the child gets SIGTERM, SIGKILL after the pod's grace period, and a new
  pod (new uid) is registered for a new child;
- a child that exits by itself is started again in the same pod (same hostname: it takes its lease back at once)
  after a back-off (1 s doubling to 10 s), as a kubelet restarts a crashed container;
- SIGTERM to the supervisor (the launcher stopping or reconfiguring the component) stops the child the same way,
  then releases the Leases the child held, as the sidecars' ``ReleaseLeaderElectionOnExit`` gate would, so the
  launcher's own restarts cost no lease expiry. Deleting the pod releases nothing: that is the disruption.

The child is bound to the supervisor (``PR_SET_PDEATHSIG``): a supervisor killed with SIGKILL takes it along.
The simulated kubelet writes the pod's status (Running, Ready) as it does for every mirror pod.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from localcluster.simulator import api

log = logging.getLogger("staticpod")
Obj = dict[str, Any]
NAMESPACE = "kube-system"
LEASE = api.Resource("/apis/coordination.k8s.io/v1", "leases", True, "Lease")
DEFAULT_GRACE_SECONDS = 30.0
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 10.0
BACKOFF_RESET_SECONDS = 60.0  # a child that ran this long before exiting starts the back-off afresh
RELEASE_SECONDS = 2.0  # at most this long releasing the stopped child's Leases
_PR_SET_PDEATHSIG = 1
_CLONE_NEWUTS = 0x04000000
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # a ReplicaSet's pod-name suffix alphabet


def start_hostname(pod_name: str, token: str | None = None) -> str:
    """The hostname one start of the component runs with: the pod's name and a 5-character suffix, cut to a DNS
    label (63 characters) (pure, given ``token``)."""
    suffix = token if token is not None else "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(5))
    return f"{pod_name[:57]}-{suffix}"


def with_node_owner(pod: Obj, node: Obj) -> Obj:
    """``pod`` owned by ``node`` (a mirror pod is), without server-set fields, ready to create (pure)."""
    meta = {k: v for k, v in pod["metadata"].items() if k not in ("uid", "resourceVersion", "creationTimestamp")}
    meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"],
                                "uid": node["metadata"]["uid"], "controller": True}]
    return {**pod, "metadata": meta}


def build_restarted_status(pod: Obj, restarts: int, exit_code: int | None, finished: str, started: str) -> Obj:
    """The status patch a kubelet sends when a pod's (only) container was restarted: its restartCount, the run
    that ended (lastState) and the one that runs now (pure)."""
    container = pod["spec"]["containers"][0]
    return {"status": {"containerStatuses": [{
        "name": container["name"], "image": container.get("image", ""), "imageID": "", "ready": True,
        "started": True, "restartCount": restarts,
        "containerID": f"sim://{pod['metadata'].get('uid', '')}-{container['name']}-{restarts}",
        "lastState": {"terminated": {"exitCode": exit_code if exit_code is not None else -1,
                                     "reason": "Error" if exit_code else "Completed", "finishedAt": finished}},
        "state": {"running": {"startedAt": started}},
    }]}}


def held_leases(leases: list[Obj], identity: str) -> list[Obj]:
    """The Leases whose holder is ``identity`` (pure)."""
    return [lease for lease in leases if (lease.get("spec") or {}).get("holderIdentity") == identity]


def grace_of(pod: Obj | None) -> float:
    """How long the child may take to stop: the deletion's grace period, else the pod's (pure)."""
    meta = (pod or {}).get("metadata") or {}
    if meta.get("deletionGracePeriodSeconds") is not None:
        return float(meta["deletionGracePeriodSeconds"])
    value = ((pod or {}).get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(value) if value is not None else DEFAULT_GRACE_SECONDS


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: a forked child of a threaded process must not dlopen


def _in_own_uts_namespace(hostname: str, parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: die with the supervisor (``parent``), and run under ``hostname`` in a new UTS namespace."""
    def prepare() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the supervisor died before the line above: nobody would stop this child
            os._exit(1)
        if _LIBC.unshare(_CLONE_NEWUTS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
        socket.sethostname(hostname)
    return prepare


class Supervisor:
    """One component's process and its pod."""

    def __init__(self, client: api.Client, pod: Obj, command: list[str]) -> None:
        self.client = client
        self.template = pod
        self.name: str = pod["metadata"]["name"]
        self.node_name: str = pod["spec"]["nodeName"]
        self.command = command
        self.child: subprocess.Popen[bytes] | None = None
        self.hostname = ""
        self.uid = ""
        self.started = 0.0  # when the current child started (monotonic)
        self.restarts = 0  # of the child in the current pod (a container's restartCount)
        self.stopping = asyncio.Event()

    # -- the child ------------------------------------------------------------------------------------------
    def start_child(self) -> None:
        """Start the component under the current pod's hostname (a crashed container restarts in its pod)."""
        self.child = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=sys.stdout, stderr=sys.stderr,
                                      preexec_fn=_in_own_uts_namespace(self.hostname, os.getpid()))
        self.started = time.monotonic()
        log.info("started %s as %s (pid %d)", self.name, self.hostname, self.child.pid)

    async def stop_child(self, grace: float) -> None:
        child = self.child
        if child is None or child.poll() is not None:
            return
        child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while child.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if child.poll() is None:
            child.kill()
            await asyncio.to_thread(child.wait)
        log.info("%s (%s) stopped: exit %s", self.name, self.hostname, child.returncode)

    # -- the pod --------------------------------------------------------------------------------------------
    async def register(self) -> None:
        """Create the pod anew (a leftover of an earlier supervisor is replaced) and remember its uid; retried
        until it is done or the supervisor stops (the API server may be away: a test stops it, or pauses it)."""
        path = api.POD.path(NAMESPACE, self.name)
        while not self.stopping.is_set():
            try:
                node = await self.client.get(api.NODE.path(name=self.node_name))
                if node is not None:
                    old = await self.client.get(path)
                    if old is not None:
                        await self.client.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions",
                                                        "gracePeriodSeconds": 0,
                                                        "preconditions": {"uid": old["metadata"]["uid"]}})
                    created = await self.client.create(api.POD, with_node_owner(self.template, node), NAMESPACE)
                    if created is not None:
                        self.uid = created["metadata"]["uid"]
                        self.restarts = 0
                        self.hostname = start_hostname(self.name)
                        log.info("registered pod %s/%s uid %s", NAMESPACE, self.name, self.uid)
                        return
            except (api.ApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
                log.warning("registering pod %s: %s; retrying", self.name, error)
            await asyncio.sleep(0.5)

    async def report_restart(self, exit_code: int | None, finished: str) -> None:
        """The pod's container status says the child was restarted (restartCount, lastState), as a kubelet's
        does: what a benchmark reads to count a component's restarts. Best effort (the API server may be away)."""
        pod = {**self.template, "metadata": {**self.template["metadata"], "uid": self.uid}}
        try:
            await self.client.request("PATCH", api.POD.path(NAMESPACE, self.name, "status"),
                                      build_restarted_status(pod, self.restarts, exit_code, finished,
                                                             api.now_rfc3339()),
                                      content_type="application/merge-patch+json")
        except (api.ApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
            log.warning("reporting the restart of %s: %s", self.name, error)

    async def release_leases(self) -> None:
        listing = await self.client.request("GET", LEASE.path(NAMESPACE))
        for lease in held_leases(listing.get("items", []), self.hostname):
            name = lease["metadata"]["name"]
            with contextlib.suppress(api.ApiError):
                await self.client.delete(LEASE.path(NAMESPACE, name), {
                    "apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"resourceVersion": lease["metadata"]["resourceVersion"]}})
                log.info("released lease %s held by %s", name, self.hostname)

    async def pod_deleted(self) -> Obj:
        """Wait until our pod (this uid) is deleted or marked for deletion; return it as last seen."""
        path = api.POD.path(NAMESPACE)
        selector = {"fieldSelector": f"metadata.name={self.name}"}
        while True:
            try:
                listing = await self.client.request("GET", path, params=selector)
                ours = [p for p in listing.get("items", []) if p["metadata"]["uid"] == self.uid]
                if not ours:
                    return {"metadata": {"name": self.name, "uid": self.uid}}
                if ours[0]["metadata"].get("deletionTimestamp"):
                    marked: Obj = ours[0]
                    return marked
                async for event in self.client.watch_lines(path, listing["metadata"]["resourceVersion"], selector):
                    pod = event["object"]
                    if pod.get("metadata", {}).get("uid") != self.uid:
                        continue  # another pod of the name, or a bookmark
                    if event["type"] == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                        return pod  # type: ignore[no-any-return]  # JSON
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the API server restarts in tests; keep watching
                log.warning("watching pod %s: %s", self.name, error)
                await asyncio.sleep(0.5)

    # -- the loop -------------------------------------------------------------------------------------------
    async def run(self) -> None:
        await self.register()
        if self.stopping.is_set():
            return
        self.start_child()
        backoff = BACKOFF_FIRST
        while not self.stopping.is_set():
            deleted = asyncio.create_task(self.pod_deleted())
            exited = asyncio.create_task(asyncio.to_thread(self._wait_child))
            stop = asyncio.create_task(self.stopping.wait())
            done, _ = await asyncio.wait({deleted, exited, stop}, return_when=asyncio.FIRST_COMPLETED)
            for task in (deleted, exited, stop):
                if task not in done:
                    task.cancel()
            if stop in done:
                break
            if deleted in done:
                pod = deleted.result()
                log.info("pod %s (uid %s) deleted: restarting %s", self.name, self.uid, self.hostname)
                await self.stop_child(grace_of(pod))
                backoff = BACKOFF_FIRST
                await self.register()
                if self.stopping.is_set():
                    break
                self.start_child()
                continue
            if time.monotonic() - self.started >= BACKOFF_RESET_SECONDS:
                backoff = BACKOFF_FIRST  # it ran well for a while: this is a new failure, not the same one again
            finished = api.now_rfc3339()
            log.warning("%s (%s) exited by itself (%s); restarting in %.0f s", self.name, self.hostname,
                        self.child.returncode if self.child else None, backoff)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), backoff)
            backoff = min(BACKOFF_MAX, backoff * 2)
            await self.api_server_ready()
            if not self.stopping.is_set():
                exit_code = self.child.returncode if self.child else None
                self.start_child()
                self.restarts += 1
                await self.report_restart(exit_code, finished)
        await self.stop_child(grace_of(self.template))
        # Bounded: when the whole cluster stops, the API server may be going away too, and a request to it can hang
        # until the launcher's SIGKILL (it cost every `down` 10 s).
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.release_leases(), RELEASE_SECONDS)

    async def api_server_ready(self) -> None:
        """Wait until the API server answers /readyz (or the supervisor stops). A sidecar that starts while it is
        away may decide for its whole life that an API is missing (csi-snapshotter turns group snapshots off when
        it cannot list their CRDs), and a sidecar that lost its lease while the launcher restarted the API server
        would otherwise be restarted into the outage. A kubelet does not wait so; this keeps the local cluster
        usable across its own restarts of the API server."""
        while not self.stopping.is_set():
            try:
                async with self.client.session.get(self.client.server + "/readyz") as response:
                    if response.status == 200:
                        return
            except (aiohttp.ClientError, OSError, TimeoutError) as error:
                log.info("waiting for the API server before restarting %s: %s", self.name, error)
            await asyncio.sleep(0.5)

    def _wait_child(self) -> None:
        """Block until the current child exits (polled, so a cancelled wait ends within a tenth of a second)."""
        child = self.child
        while child is not None and child.poll() is None and not self.stopping.is_set():
            time.sleep(0.1)


async def main(kubeconfig: Path, pod_file: Path, command: list[str]) -> None:
    pod = json.loads(pod_file.read_text())
    async with api.Client(kubeconfig) as client:
        supervisor = Supervisor(client, pod, command)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, supervisor.stopping.set)
        await supervisor.run()


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m localcluster.staticpod", description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True, help="a kubeconfig that may write kube-system pods")
    parser.add_argument("--pod", type=Path, required=True, help="the pod to register (JSON), with spec.nodeName")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- EXECUTABLE ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s staticpod %(levelname)s %(message)s")
    os.environ.pop("KUBECONFIG", None)  # the child has its own --kubeconfig
    asyncio.run(main(args.kubeconfig, args.pod, command))


if __name__ == "__main__":
    cli()

"""Freeze the local cluster's API server or etcd when a run asks through the API (PauseApiServer, PauseEtcd).

``python -m localcluster.pauser --kubeconfig ADMIN --state-dir DIR --node NODE``

A slow or stalled control plane is what makes sidecars lose their leases and restart over and over; on a real
cluster nobody offers a benchmark the means to cause it, so only the local cluster does, and only through the
API, as the operator does everything else. This process registers a static pod's mirror for each of the two
processes (``etcd-<node>``, ``kube-apiserver-<node>`` in kube-system, kubeadm's names and ``component``/``tier``
labels) marked ``csibench.io/pausable``, and watches them. A request (the annotation
``csibench.io/pause-request``: ``{"id", "seconds"}``) freezes the process with SIGSTOP, and after the seconds by
this process's own clock SIGCONT resumes it, whatever the requester does meanwhile (a pause always ends: a
stopped pauser resumes the process on its way out, and a detached ``sleep; kill -CONT`` started with each pause
resumes it a second later even if the pauser was killed). One pause of a process at a time; the pid is the
launcher's record, checked against the process's own command line. Then it answers on the pod
(``csibench.io/paused``: the id, when it stopped and resumed, RFC 3339 with microseconds), retrying while the API
server recovers. A request is answered once: one already answered on the pod (the pauser restarted) is not
paused again.

The process to freeze is read from the launcher's ``state.json`` at the time of the request, so a restarted API
server (the launcher's own restarts) is found under its new pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

from localcluster.simulator import api

log = logging.getLogger("pauser")
Obj = dict[str, Any]
NAMESPACE = "kube-system"
PAUSABLE_COMPONENTS = ("etcd", "kube-apiserver")
PAUSABLE_ANNOTATION = "csibench.io/pausable"
REQUEST_ANNOTATION = "csibench.io/pause-request"
ANSWER_ANNOTATION = "csibench.io/paused"
MAX_PAUSE_SECONDS = 600.0
ANSWER_RETRY_SECONDS = 120.0
RESUME_MARGIN_SECONDS = 1.0  # the detached resumer's SIGCONT, this long after the pauser's own


def control_plane_pod(component: str, node: Obj) -> Obj:
    """The mirror pod a kubelet would write for the component's static pod on ``node`` (pure)."""
    name = node["metadata"]["name"]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{component}-{name}", "namespace": NAMESPACE,
            "labels": {"component": component, "tier": "control-plane"},
            "annotations": {"kubernetes.io/config.mirror": component, "kubernetes.io/config.source": "file",
                            PAUSABLE_ANNOTATION: component},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"],
                                 "controller": True}],
        },
        "spec": {"nodeName": name, "priorityClassName": "system-node-critical", "hostNetwork": True,
                 "containers": [{"name": component, "image": f"registry.k8s.io/{component}:local"}]},
    }


def request_of(pod: Obj) -> tuple[str, float] | None:
    """(id, seconds) of the pause the pod asks for, unless it is answered already or malformed (pure)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        request = json.loads(annotations.get(REQUEST_ANNOTATION) or "null")
        answer = json.loads(annotations.get(ANSWER_ANNOTATION) or "null")
    except ValueError:
        return None
    if not isinstance(request, dict) or not isinstance(request.get("id"), str):
        return None
    seconds = request.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= MAX_PAUSE_SECONDS:
        return None
    if isinstance(answer, dict) and answer.get("id") == request["id"]:
        return None
    return request["id"], float(seconds)


def stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pid_of(state_dir: Path, component: str) -> int | None:
    """The component's pid as the launcher recorded it last, if that process still runs the component's binary
    (a recycled pid is another process: never stopped)."""
    try:
        state = json.loads((state_dir / "state.json").read_text())
    except (OSError, ValueError):
        return None
    pid = next((int(p["pid"]) for p in state.get("processes", []) if p.get("name") == component), None)
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode() if pid else ""
    except OSError:
        return None
    return pid if Path(argv0).name == component else None


def resume_later(pid: int, seconds: float) -> None:
    """A detached ``sleep; kill -CONT``: the process is resumed even if this pauser dies meanwhile (SIGKILL)."""
    subprocess.Popen(["sh", "-c", f"sleep {seconds + RESUME_MARGIN_SECONDS:.1f}; kill -CONT {pid} 2>/dev/null"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)


class Pauser:
    def __init__(self, client: api.Client, state_dir: Path, node_name: str) -> None:
        self.client = client
        self.state_dir = state_dir
        self.node_name = node_name
        self.handled: set[str] = set()
        self.paused: dict[int, str] = {}  # pid -> component, while frozen (resumed on the way out)

    async def register(self) -> None:
        """The two mirror pods, created anew (leftovers of an earlier pauser replaced), retried until done."""
        while True:
            try:
                node = await self.client.get(api.NODE.path(name=self.node_name))
                if node is not None:
                    for component in PAUSABLE_COMPONENTS:
                        pod = control_plane_pod(component, node)
                        path = api.POD.path(NAMESPACE, pod["metadata"]["name"])
                        if await self.client.get(path) is not None:
                            await self.client.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions",
                                                            "gracePeriodSeconds": 0})
                        await self.client.create(api.POD, pod, NAMESPACE)
                    return
            except (api.ApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
                log.warning("registering the control plane's pods: %s; retrying", error)
            await asyncio.sleep(0.5)

    async def watch(self) -> None:
        path = api.POD.path(NAMESPACE)
        selector = {"labelSelector": f"component in ({','.join(PAUSABLE_COMPONENTS)})"}
        while True:
            try:
                listing = await self.client.request("GET", path, params=selector)
                for pod in listing.get("items", []):
                    self.consider(pod)
                async for event in self.client.watch_lines(path, listing["metadata"]["resourceVersion"], selector):
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.consider(event["object"])
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the API server restarts (or is paused) in tests: keep watching
                log.warning("watching the control plane's pods: %s", error)
                await asyncio.sleep(0.5)

    def consider(self, pod: Obj) -> None:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        component = annotations.get(PAUSABLE_ANNOTATION)
        request = request_of(pod)
        if component not in PAUSABLE_COMPONENTS or request is None or request[0] in self.handled:
            return
        self.handled.add(request[0])
        asyncio.get_running_loop().create_task(self.pause(pod["metadata"]["name"], component, *request))

    async def pause(self, pod_name: str, component: str, request_id: str, seconds: float) -> None:
        pid = pid_of(self.state_dir, component)
        if pid is None or pid in self.paused:
            log.error("pause %s of %s refused: %s", request_id, component,
                      "no such process running" if pid is None else "it is paused already")
            return
        resume_later(pid, seconds)
        stopped = dt.datetime.now(dt.UTC)
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            log.error("pause %s of %s: pid %d is gone", request_id, component, pid)
            return
        self.paused[pid] = component
        log.info("%s (pid %d) paused for %.1f s (request %s)", component, pid, seconds, request_id)
        try:
            await asyncio.sleep(seconds)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self.paused.pop(pid, None)
        resumed = dt.datetime.now(dt.UTC)
        log.info("%s (pid %d) resumed", component, pid)
        await self.answer(pod_name, {"id": request_id, "stoppedAt": stamp(stopped), "resumedAt": stamp(resumed)})

    async def answer(self, pod_name: str, answer: Obj) -> None:
        body = {"metadata": {"annotations": {ANSWER_ANNOTATION: json.dumps(answer, sort_keys=True)}}}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ANSWER_RETRY_SECONDS
        while loop.time() < deadline:
            try:
                await self.client.patch(api.POD.path(NAMESPACE, pod_name), body)
                return
            except (api.ApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
                log.warning("answering pause %s: %s; retrying", answer["id"], error)
                await asyncio.sleep(0.2)

    def resume_all(self) -> None:
        for pid, component in list(self.paused.items()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            log.info("%s (pid %d) resumed: the pauser stops", component, pid)


async def main(kubeconfig: Path, state_dir: Path, node_name: str) -> None:
    async with api.Client(kubeconfig) as client:
        pauser = Pauser(client, state_dir, node_name)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        try:
            await pauser.register()
            watching = asyncio.create_task(pauser.watch())
            await stopping.wait()
            watching.cancel()
        finally:
            pauser.resume_all()


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m localcluster.pauser", description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True, help="a kubeconfig that may write kube-system pods")
    parser.add_argument("--state-dir", type=Path, required=True, help="the launcher's state directory (state.json)")
    parser.add_argument("--node", required=True, help="the node the control plane's pods stand on")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s pauser %(levelname)s %(message)s")
    asyncio.run(main(args.kubeconfig, args.state_dir, args.node))


if __name__ == "__main__":
    cli()

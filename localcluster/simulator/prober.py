"""The simulated kubelet's prober: runs the startup, liveness and readiness probes of process-mode pods.

Why: the deployed operator is a Deployment's pod with HTTP liveness and readiness probes; a rollout, ``kubectl
wait --for=condition=Ready`` and a Service's endpoints depend on readiness, and a hung operator is restarted only
by its liveness probe. What to decide is in ``probes.py`` (pure); this module does the I/O and acts:

- one task per probe of each container, started once the pod is reported Running and cancelled when the pod stops
  (the kubelet keeps them with the pod's other tasks); each waits initialDelaySeconds from the container's (re)start,
  then probes every periodSeconds with timeoutSeconds (liveness and readiness only once a startup probe passed);
- httpGet over aiohttp (no keep-alive, certificates not verified, as a kubelet's prober), tcpSocket by connecting,
  exec in the container's namespaces and as its user (``Runtime.exec_in``: one short-lived helper process per
  probe, so exec probes cost a Python start each, some tens of milliseconds of CPU); a grpc probe (or any handler
  this kubelet lacks) is an error, which a kubelet counts as a failure: such a readiness probe keeps its pod
  unready and such a liveness probe restarts its container, each with a Warning that says why;
- every failed probe is an ``Unhealthy`` Warning in the kubelet's words; a readiness or startup result that changes
  is one status patch (containerStatuses[].ready / started, the Ready and ContainersReady conditions), nothing
  else is patched; a liveness (startup) probe that failed failureThreshold times in a row is a ``Killing`` event
  and the container is stopped (SIGTERM, SIGKILL after the probe's or the pod's terminationGracePeriodSeconds)
  and restarted by its watcher per restartPolicy (a Never pod's container stays stopped), its restartCount + 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import aiohttp

from localcluster.simulator import api
from localcluster.simulator.probes import (
    CHANGED,
    HTTP_TIMEOUT,
    KILL,
    MAX_OUTPUT,
    ProbeError,
    ProbeSpec,
    ProbeState,
    dial_failure,
    errored_event,
    exec_timeout,
    failed_event,
    http_failure,
    http_request,
    http_status_failure,
    http_success,
    killing_event,
    probe_specs,
    resolve_port,
    tcp_target,
    unsupported,
)
from localcluster.simulator.runtime import DEFAULT_GRACE_SECONDS, PodProcesses, Runtime

log = logging.getLogger("simulator.prober")
COMPONENT = "kubelet"
IDLE_SECONDS = 1.0  # how often a probe looks again while its container is not running or not started


class Events(Protocol):
    async def event(self, obj: api.Obj, reason: str, message: str, component: str, warning: bool = True,
                    field_path: str | None = None) -> None: ...


Report = Callable[[api.Obj, PodProcesses], Awaitable[None]]


class Prober:
    def __init__(self, runtime: Runtime, events: Events, report: Report) -> None:
        self._runtime = runtime
        self._events = events
        self._report = report
        self._session: aiohttp.ClientSession | None = None

    def probes(self, pod: api.Obj, group: PodProcesses, pod_ip: str) -> list[Coroutine[Any, Any, None]]:
        """The pod's probe loops, to be run as its tasks."""
        return [self._loop(pod, group, container, spec, pod_ip)
                for container in pod["spec"].get("containers") or [] if container["name"] in group.containers
                for spec in probe_specs(container)]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _loop(self, pod: api.Obj, group: PodProcesses, container: api.Obj, spec: ProbeSpec,
                    pod_ip: str) -> None:
        name = container["name"]
        state = ProbeState(spec)
        generation: int | None = None
        loop = asyncio.get_running_loop()
        while not group.stopping:
            entry = group.containers[name]
            if not entry.running:
                await asyncio.sleep(IDLE_SECONDS)
                continue
            if entry.restarts != generation:  # (re)started: the probe starts over
                generation = entry.restarts
                state.reset()
            gated = entry.start_gate is False if spec.kind != "startup" else bool(entry.start_gate)
            if state.on_hold or gated:
                await asyncio.sleep(IDLE_SECONDS)
                continue
            wait = entry.started_monotonic + spec.initial_delay - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            ok, message = await self.run(spec, pod, group, container, pod_ip)
            if group.stopping or entry.restarts != generation or not entry.running:
                continue  # the container went meanwhile: this result is not its
            if message:
                await self._events.event(pod, "Unhealthy", message, COMPONENT, field_path=_field(name))
            outcome = state.record(ok)
            if outcome == KILL:
                await self._kill(pod, group, name, spec)
            elif outcome == CHANGED:
                if spec.kind == "readiness":
                    entry.ready_gate = ok
                else:
                    entry.start_gate = ok
                await self._report(pod, group)
            await asyncio.sleep(spec.period)

    async def run(self, spec: ProbeSpec, pod: api.Obj, group: PodProcesses, container: api.Obj,
                  pod_ip: str) -> tuple[bool, str | None]:
        """One probe: passed, and the event message when it did not."""
        try:
            if spec.handler == "httpGet":
                return await self._http(spec, container, pod_ip)
            if spec.handler == "tcpSocket":
                return await self._tcp(spec, container, pod_ip)
            if spec.handler == "exec":
                return await self._exec(spec, pod, group, container["name"])
            raise ProbeError(unsupported(spec))
        except ProbeError as error:
            return False, errored_event(spec, str(error))

    async def _http(self, spec: ProbeSpec, container: api.Obj, pod_ip: str) -> tuple[bool, str | None]:
        url, headers = http_request(spec.action, container, pod_ip)
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True, ssl=False))
        try:
            async with self._session.get(url, headers=headers, allow_redirects=True,
                                         timeout=aiohttp.ClientTimeout(total=spec.timeout)) as response:
                await response.content.read(MAX_OUTPUT)
                status = response.status
        except TimeoutError:
            return False, failed_event(spec, http_failure(url, HTTP_TIMEOUT))
        except aiohttp.ClientConnectorError as error:
            host = str(spec.action.get("host") or pod_ip)
            port = resolve_port(spec.action.get("port", 0), container)
            return False, failed_event(spec, http_failure(url, dial_failure(host, port, error.os_error)))
        except (aiohttp.ClientError, OSError) as error:
            return False, failed_event(spec, http_failure(url, str(error) or type(error).__name__))
        return (True, None) if http_success(status) else (False, failed_event(spec, http_status_failure(status)))

    @staticmethod
    async def _tcp(spec: ProbeSpec, container: api.Obj, pod_ip: str) -> tuple[bool, str | None]:
        host, port = tcp_target(spec.action, container, pod_ip)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=spec.timeout)
        except TimeoutError:
            return False, failed_event(spec, dial_failure(host, port, None))
        except OSError as error:
            return False, failed_event(spec, dial_failure(host, port, error))
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True, None

    async def _exec(self, spec: ProbeSpec, pod: api.Obj, group: PodProcesses, name: str) -> tuple[bool, str | None]:
        command = [str(part) for part in spec.action.get("command") or []]
        if not command:
            raise ProbeError("exec probe has no command")
        try:
            code, output = await self._runtime.exec_in(group, pod, name, command, spec.timeout)
        except OSError as error:
            raise ProbeError(str(error)) from None
        if code is None:
            return False, failed_event(spec, exec_timeout(command))
        return (True, None) if code == 0 else (False, failed_event(spec, output))

    async def _kill(self, pod: api.Obj, group: PodProcesses, name: str, spec: ProbeSpec) -> None:
        restart = pod["spec"].get("restartPolicy", "Always") != "Never"
        await self._events.event(pod, "Killing", killing_event(name, spec.kind, restart), COMPONENT, warning=False,
                                 field_path=_field(name))
        grace = spec.grace
        if grace is None:
            value = pod["spec"].get("terminationGracePeriodSeconds")
            grace = float(value) if value is not None else DEFAULT_GRACE_SECONDS
        await self._runtime.kill(group, name, grace)


def _field(container: str) -> str:
    return f"spec.containers{{{container}}}"

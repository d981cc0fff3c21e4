"""What a kubelet decides about a container's probes, from the pod spec and the results alone (pure).

Why: a Deployment's pod is Ready only when its readiness probe passes, and a container whose liveness probe fails
is restarted; the deployed operator (``deploy/deployment.yaml``: both probes on ``:8081/healthz``) must behave
as in a real cluster, and the decisions that make it so are worth testing without processes. ``prober.py`` runs
the probes and acts on what this module decides.

- ``probe_specs``: a container's startup, liveness and readiness probes with the API's defaults (periodSeconds 10,
  timeoutSeconds 1, successThreshold 1, failureThreshold 3) and the handler each uses (httpGet, tcpSocket, exec;
  any other, grpc, is run as a kubelet runs a probe whose handler it lacks: an error, which counts as a failure).
- ``http_request`` and ``tcp_target``: where a probe goes (host: the pod's IP unless the probe names one; a port by
  number or by the container's port name; scheme HTTP; path ``/``; the kubelet's User-Agent and Accept headers,
  which the probe's httpHeaders override).
- ``ProbeState``: the kubelet's probe worker's counting. Each result extends a run of equal results; a run of
  failureThreshold failures (successThreshold successes) settles the probe's result. Readiness starts failed,
  liveness succeeded, startup unknown. A settled liveness or startup failure means "kill the container" and puts
  the probe on hold until the container restarts, when everything starts over.
- The kubelet's words for events: ``Liveness probe failed: Get "http://...": ...``, ``Container x failed liveness
  probe, will be restarted``.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from localcluster.simulator import api
from localcluster.versions import KUBERNETES_VERSION

KINDS = ("startup", "liveness", "readiness")  # the order a kubelet gates them in: startup first
HANDLERS = ("httpGet", "tcpSocket", "exec")  # what this kubelet runs; grpc is not among them
MAX_OUTPUT = 10 * 1024  # a kubelet keeps at most this much of a probe's body or output


class ProbeError(ValueError):
    """A probe that cannot be run as written (an unknown port name): a kubelet's probe error, counted as failure."""


@dataclass(frozen=True)
class ProbeSpec:
    """One probe of a container, with the API's defaults applied."""

    kind: str  # "startup" | "liveness" | "readiness"
    handler: str  # "httpGet" | "tcpSocket" | "exec" | another (unsupported) handler's name
    action: api.Obj  # the handler's fields
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3
    grace: float | None = None  # the probe's own terminationGracePeriodSeconds (liveness, startup)

    @property
    def title(self) -> str:
        return self.kind.capitalize()


def probe_specs(container: api.Obj) -> list[ProbeSpec]:
    """The container's probes, startup first (pure)."""
    found = []
    for kind in KINDS:
        probe = container.get(f"{kind}Probe")
        if not probe:
            continue
        handler = next((name for name in HANDLERS if name in probe), None) or next(
            (name for name in sorted(probe) if name not in _TIMING), "none")
        grace = probe.get("terminationGracePeriodSeconds")
        found.append(ProbeSpec(
            kind, handler, probe.get(handler) or {}, float(probe.get("initialDelaySeconds") or 0),
            float(probe.get("periodSeconds") or 10), float(probe.get("timeoutSeconds") or 1),
            int(probe.get("successThreshold") or 1), int(probe.get("failureThreshold") or 3),
            float(grace) if grace is not None else None))
    return found


_TIMING = frozenset({"initialDelaySeconds", "periodSeconds", "timeoutSeconds", "successThreshold",
                     "failureThreshold", "terminationGracePeriodSeconds"})


def resolve_port(port: int | str, container: api.Obj) -> int:
    """A probe's port: a number, or the name of one of the container's ports (pure)."""
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        number = int(port)
    else:
        number = next((int(p["containerPort"]) for p in container.get("ports") or [] if p.get("name") == port), 0)
        if not number:
            raise ProbeError(f"unable to find port {port!r} in container {container['name']!r}")
    if not 0 < number < 65536:
        raise ProbeError(f"invalid port number: {number}")
    return number


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def http_request(action: api.Obj, container: api.Obj, pod_ip: str) -> tuple[str, dict[str, str]]:
    """An httpGet probe's URL and headers, as a kubelet builds them (pure)."""
    scheme = str(action.get("scheme") or "HTTP").lower()
    host = action.get("host") or pod_ip
    path = str(action.get("path") or "/")
    if not path.startswith("/"):
        path = "/" + path
    url = f"{scheme}://{host_port(host, resolve_port(action.get('port', 0), container))}{path}"
    major_minor = ".".join(KUBERNETES_VERSION.lstrip("v").split(".")[:2])
    headers = {"User-Agent": f"kube-probe/{major_minor}", "Accept": "*/*"}
    for header in action.get("httpHeaders") or []:
        known = next((k for k in headers if k.lower() == str(header["name"]).lower()), None)
        if known is not None:
            del headers[known]
        headers[str(header["name"])] = str(header.get("value", ""))
    return url, headers


def tcp_target(action: api.Obj, container: api.Obj, pod_ip: str) -> tuple[str, int]:
    return str(action.get("host") or pod_ip), resolve_port(action.get("port", 0), container)


def http_success(status: int) -> bool:
    """2xx and 3xx pass, as for a kubelet (pure)."""
    return 200 <= status < 400


def http_status_failure(status: int) -> str:
    return f"HTTP probe failed with statuscode: {status}"


def dial_failure(host: str, port: int, error: OSError | None) -> str:
    """Go's words for a failed connection: ``dial tcp 10.0.0.1:8081: connect: connection refused``; None: a
    timeout (pure)."""
    if error is None:
        return f"dial tcp {host_port(host, port)}: i/o timeout"
    reason = {errno.ECONNREFUSED: "connection refused", errno.EHOSTUNREACH: "no route to host",
              errno.ENETUNREACH: "network is unreachable"}.get(error.errno or 0)
    if reason is None:
        reason = os.strerror(error.errno).lower() if error.errno else str(error)
    return f"dial tcp {host_port(host, port)}: connect: {reason}"


def http_failure(url: str, reason: str) -> str:
    """A failed GET as Go's http client says it (pure)."""
    return f'Get "{url}": {reason}'


HTTP_TIMEOUT = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"


def exec_timeout(command: list[str]) -> str:
    return f'command "{" ".join(command)}" timed out'


def failed_event(spec: ProbeSpec, output: str) -> str:
    return f"{spec.title} probe failed: {output[:MAX_OUTPUT]}"


def errored_event(spec: ProbeSpec, error: str) -> str:
    return f"{spec.title} probe errored and resulted in unknown state: {error}"


def killing_event(container: str, kind: str, restart: bool) -> str:
    """The Killing event of a container a liveness or startup probe failed (pure)."""
    message = f"Container {container} failed {kind} probe"
    return f"{message}, will be restarted" if restart else message


def unsupported(spec: ProbeSpec) -> str:
    return f"{spec.handler} probes are not supported by the simulated kubelet"


KILL = "kill"  # a liveness or startup probe failed for good: stop the container (restart per restartPolicy)
CHANGED = "changed"  # the probe's settled result changed: readiness or started, reported in the pod's status


class ProbeState:
    """The kubelet's probe worker's counting for one probe of one container."""

    def __init__(self, spec: ProbeSpec) -> None:
        self.spec = spec
        self.result: bool | None = None
        self.last: bool | None = None
        self.run = 0
        self.on_hold = False
        self.reset()

    def reset(self) -> None:
        """The container (re)started: readiness fails until a probe passes, liveness passes, startup is unknown."""
        self.result = {"readiness": False, "liveness": True}.get(self.spec.kind)
        self.last, self.run, self.on_hold = None, 0, False

    def record(self, ok: bool) -> str | None:
        """One probe's result; what the kubelet must do now (KILL, CHANGED or nothing)."""
        if self.on_hold:
            return None
        if self.last == ok:
            self.run += 1
        else:
            self.last, self.run = ok, 1
        if (not ok and self.run < self.spec.failure_threshold) or (ok and self.run < self.spec.success_threshold):
            return None
        changed = self.result != ok
        self.result = ok
        if not ok and self.spec.kind in ("liveness", "startup"):
            self.on_hold, self.run = True, 0
            return KILL
        return CHANGED if changed and self.spec.kind != "liveness" else None

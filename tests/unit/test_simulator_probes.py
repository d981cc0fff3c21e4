"""The simulated kubelet's probes and pod addresses: where a probe goes, how results settle into Ready or a restart,
the kubelet's words for it, and which IP a pod gets."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web

from localcluster.simulator.kubelet import choose_pod_ip, readiness_conditions
from localcluster.simulator.nodes import usable_pod_address
from localcluster.simulator.prober import Prober
from localcluster.simulator.probes import (
    CHANGED,
    KILL,
    ProbeError,
    ProbeSpec,
    ProbeState,
    dial_failure,
    http_request,
    killing_event,
    probe_specs,
    resolve_port,
)
from localcluster.simulator.runtime import Container, PodProcesses

OPERATOR = {"name": "operator", "ports": [{"name": "metrics", "containerPort": 8080},
                                          {"name": "health", "containerPort": 8081}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "health"}, "initialDelaySeconds": 10,
                              "periodSeconds": 20, "timeoutSeconds": 5},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 10}}


def test_probe_specs_take_the_apis_defaults_and_name_their_handler() -> None:
    liveness, readiness = probe_specs(OPERATOR)
    assert (liveness.kind, liveness.handler, liveness.initial_delay, liveness.period, liveness.timeout) == (
        "liveness", "httpGet", 10.0, 20.0, 5.0)
    assert (readiness.kind, readiness.period, readiness.timeout, readiness.success_threshold,
            readiness.failure_threshold) == ("readiness", 10.0, 1.0, 1, 3)
    startup, = probe_specs({"name": "c", "startupProbe": {"grpc": {"port": 9000}, "failureThreshold": 30}})
    assert (startup.kind, startup.handler, startup.failure_threshold) == ("startup", "grpc", 30)
    assert [s.kind for s in probe_specs({"name": "c", "readinessProbe": {"exec": {"command": ["true"]}},
                                         "startupProbe": {"tcpSocket": {"port": 1}}})] == ["startup", "readiness"]


def test_http_probes_go_to_the_pod_ip_and_the_named_port_with_the_kubelets_headers() -> None:
    url, headers = http_request(OPERATOR["livenessProbe"]["httpGet"], OPERATOR, "192.0.2.2")  # type: ignore[index]
    assert url == "http://192.0.2.2:8081/healthz"
    assert headers["Accept"] == "*/*" and headers["User-Agent"].startswith("kube-probe/1.")
    url, headers = http_request({"port": 8443, "scheme": "HTTPS", "host": "fd00::1", "path": "ready",
                                 "httpHeaders": [{"name": "user-agent", "value": "mine"},
                                                 {"name": "X-Probe", "value": "1"}]}, OPERATOR, "192.0.2.2")
    assert url == "https://[fd00::1]:8443/ready"
    assert headers == {"Accept": "*/*", "user-agent": "mine", "X-Probe": "1"}  # the probe's header replaces ours
    assert resolve_port("8080", OPERATOR) == 8080 and resolve_port("metrics", OPERATOR) == 8080
    with pytest.raises(ProbeError, match="unable to find port"):
        resolve_port("grpc", OPERATOR)


def test_readiness_settles_after_its_thresholds_and_reports_only_changes() -> None:
    state = ProbeState(ProbeSpec("readiness", "httpGet", {}, success_threshold=2, failure_threshold=3))
    assert state.result is False  # not Ready until a probe passed
    assert [state.record(ok) for ok in (True, True, True)] == [None, CHANGED, None]
    assert [state.record(ok) for ok in (False, False, True, False, False, False)] == [None, None, None, None, None,
                                                                                     CHANGED]
    assert state.result is False


def test_liveness_kills_after_failure_threshold_then_holds_until_the_container_restarts() -> None:
    state = ProbeState(ProbeSpec("liveness", "httpGet", {}, failure_threshold=2))
    assert state.result is True
    assert [state.record(ok) for ok in (False, True, False, False)] == [None, None, None, KILL]
    assert state.on_hold and state.record(False) is None  # no second kill while the container stops
    state.reset()
    assert (state.on_hold, state.result) == (False, True)
    startup = ProbeState(ProbeSpec("startup", "exec", {}, failure_threshold=1))
    assert startup.result is None and startup.record(True) == CHANGED and startup.result is True
    startup.reset()
    assert startup.record(False) == KILL


def test_the_kubelets_words() -> None:
    assert dial_failure("192.0.2.2", 8081, ConnectionRefusedError(111, "Connection refused")) == \
        "dial tcp 192.0.2.2:8081: connect: connection refused"
    assert dial_failure("192.0.2.2", 8081, None) == "dial tcp 192.0.2.2:8081: i/o timeout"
    assert killing_event("operator", "liveness", True) == "Container operator failed liveness probe, will be restarted"
    assert killing_event("operator", "startup", False) == "Container operator failed startup probe"


def test_pod_ips_host_network_the_node_process_pods_the_host_pause_pods_loopback() -> None:
    loopback = (f"127.2.0.{i}" for i in itertools.count(1))
    pause = {"metadata": {}, "spec": {"containers": [{"name": "p", "image": "registry.k8s.io/pause:3.10"}]}}
    process = {"metadata": {}, "spec": {"containers": [{"name": "w", "image": "csibench/workload:1"}]}}
    mirror = {"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}},
              "spec": {"hostNetwork": True, "containers": [{"name": "s", "image": "csi-provisioner"}]}}
    assert choose_pod_ip(pause, 0, "192.0.2.2", loopback) == "127.2.0.1"
    assert choose_pod_ip(process, 0, "192.0.2.2", loopback) == "192.0.2.2"
    assert choose_pod_ip(mirror, 2, "192.0.2.2", loopback) == "127.0.1.3"  # node_address(2)
    assert choose_pod_ip(process, 0, None, loopback) == "127.2.0.2"  # no usable host address: loopback, as before
    assert [usable_pod_address(a) for a in ("192.0.2.2", "10.1.2.3", "127.0.0.1", "169.254.1.1", "0.0.0.0",
                                            "fd00::1", "eth0")] == [True, True, False, False, False, False, False]


def test_container_status_and_ready_conditions_follow_the_probes() -> None:
    entry = Container("operator", "i", Path("/nonexistent"), process=SimpleNamespace(), ready_gate=False,  # type: ignore[arg-type]
                      start_gate=None)
    assert entry.status("u")["ready"] is False and entry.status("u")["started"] is True
    assert [c["status"] for c in readiness_conditions([entry.status("u")])] == ["False", "False"]
    entry.ready_gate = True
    assert entry.status("u")["ready"] is True
    assert [(c["type"], c["status"]) for c in readiness_conditions([entry.status("u")])] == [
        ("ContainersReady", "True"), ("Ready", "True")]
    entry.start_gate = False
    assert entry.status("u")["started"] is False and entry.status("u")["ready"] is False


class FakeRuntime:
    def __init__(self) -> None:
        self.killed: list[tuple[str, float]] = []

    async def kill(self, group: PodProcesses, name: str, grace: float) -> None:
        self.killed.append((name, grace))
        group.containers[name].exit_code = 143


def test_the_prober_makes_a_pod_ready_once_its_endpoint_answers_and_restarts_a_container_that_stops_answering(
        tmp_path: Path) -> None:
    """Real HTTP against a local server: readiness fails (500) then passes (one status report), liveness on a port
    nobody listens on fails twice, is a Killing event and a kill with the pod's grace period."""
    answers = iter([500, 200])
    events: list[tuple[str, str, str | None]] = []
    reports: list[bool] = []

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(status=next(answers, 200))

    async def scenario() -> None:
        app = web.Application()
        app.router.add_get("/healthz", healthz)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        container = {"name": "op", "ports": [{"name": "health", "containerPort": port}],
                     "readinessProbe": {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 0.05},
                     "livenessProbe": {"tcpSocket": {"port": 1}, "periodSeconds": 0.05, "failureThreshold": 2,
                                       "initialDelaySeconds": 0.3}}
        pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
               "spec": {"terminationGracePeriodSeconds": 7, "containers": [container]}}
        group = PodProcesses("u", "ns", "p", tmp_path)
        group.containers["op"] = Container("op", "i", tmp_path / "log", process=SimpleNamespace(),  # type: ignore[arg-type]
                                           ready_gate=False, started_monotonic=asyncio.get_running_loop().time())

        async def event(obj: Any, reason: str, message: str, component: str, warning: bool = True,
                        field_path: str | None = None) -> None:
            events.append((reason, message, field_path))

        async def report(_: Any, probed: PodProcesses) -> None:
            reports.append(probed.containers["op"].status("u")["ready"])

        runtime = FakeRuntime()
        prober = Prober(runtime, SimpleNamespace(event=event), report)  # type: ignore[arg-type]
        tasks = [asyncio.create_task(probe) for probe in prober.probes(pod, group, "127.0.0.1")]
        for _ in range(1500):  # at most 30 s: a busy machine's unit run (15 min under two burners) missed 4 s
            if runtime.killed and reports:
                break
            await asyncio.sleep(0.02)
        group.stopping = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await prober.close()
        await runner.cleanup()
        assert reports[:1] == [True]
        assert runtime.killed == [("op", 7.0)]

    asyncio.run(scenario())
    messages = [(reason, message) for reason, message, _ in events]
    assert ("Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 500") in messages
    assert ("Unhealthy", "Liveness probe failed: dial tcp 127.0.0.1:1: connect: connection refused") in messages
    assert ("Killing", "Container op failed liveness probe, will be restarted") in messages
    assert all(path == "spec.containers{op}" for _, _, path in events)

"""What every benchmark shares: a dedicated local cluster, the CRD, the operator process, raw-client helpers.

Benchmarks run by hand (never in CI as timed assertions): ``.venv/bin/python -m bench.<name> [options]``.
Each prints a Markdown block with the machine facts and the exact command, to paste into docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shlex
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from csibench.kube.client import KubeClient, TokenBucket, load_configuration
from localcluster import manifests
from localcluster.kube import Kube
from localcluster.launcher import REPO_ROOT, ClusterConfig, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import TERMINAL, benchmark_run, create_run, watch_for_phase
from localcluster.versions import ATTACHER, ETCD_VERSION, KUBERNETES_VERSION, PROVISIONER, RESIZER, SNAPSHOTTER

BENCH_NAMESPACE = "bench"


def machine_facts() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                         if line.startswith("MemTotal")))
    return (f"{os.cpu_count()} cores ({cpu}), {memory_kb / 1024 / 1024:.0f} GiB, Python {platform.python_version()}, "
            f"Kubernetes {KUBERNETES_VERSION}, etcd {ETCD_VERSION}, local cluster with the real CSI sidecars "
            f"(external-provisioner {PROVISIONER.version}, external-attacher {ATTACHER.version}, "
            f"external-snapshotter {SNAPSHOTTER.version}, external-resizer {RESIZER.version}) and the csibench "
            "simulated driver")


def command_line(module: str) -> str:
    """The exact command that produced a result, for docs/benchmarks.md."""
    return " ".join([".venv/bin/python", "-m", module, *(shlex.quote(a) for a in sys.argv[1:])])


@contextmanager
def bench_cluster(api_port: int | None = None, nodes: int = 3, sidecar_flags: dict[str, dict[str, str]] | None = None,
                  state_dir: Path | None = None, standby_sidecars: tuple[str, ...] = (),
                  scrape_control_plane: bool = False) -> Iterator[tuple[LocalCluster, OperatorProcess, Kube]]:
    # CSIBENCH_BENCH_API_PORT: a second checkout's benchmarks on the same machine need a port of their own.
    port = api_port or int(os.environ.get("CSIBENCH_BENCH_API_PORT", "20443"))
    cluster = LocalCluster(ClusterConfig(state_dir=state_dir or REPO_ROOT / ".localcluster" / "bench", api_port=port,
                                         nodes=nodes, sidecar_flags=sidecar_flags or {},
                                         standby_sidecars=standby_sidecars,
                                         scrape_control_plane=scrape_control_plane))
    cluster.up()
    operator = OperatorProcess(cluster, cluster.config.log_dir / "operator.log")
    try:
        # Every CRD before the operator starts: kopf did not serve a kind whose CRD came after it (a suite bench
        # applied benchmarksuites later and its suite was never picked up, 2026-12-07).
        for crd, kind in (("benchmarkrun", "benchmarkruns"), ("benchmarksuite", "benchmarksuites"),
                          ("benchmarkschedule", "benchmarkschedules")):
            cluster.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds" / f"{crd}.yaml"))
            cluster.wait_established(f"{kind}.csibench.io")
        operator.start()
        kube = Kube.from_kubeconfig(cluster.config.kubeconfig)
        kube.core.create_namespace({"metadata": {"name": BENCH_NAMESPACE}})  # type: ignore[arg-type]  # the client validates a dict body
        yield cluster, operator, kube
    finally:
        operator.stop()
        cluster.down()


def storage_class(kube: Kube, **parameters: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    kube.storage.create_storage_class(manifests.storage_class(name, **parameters))  # type: ignore[arg-type]  # the client validates a dict body
    return name


def operator_run(kube: Kube, name: str, timeout: float, **spec: Any) -> dict[str, Any]:
    create_run(kube, BENCH_NAMESPACE, benchmark_run(name, **spec))
    run = watch_for_phase(kube, BENCH_NAMESPACE, name, TERMINAL, timeout)
    if run["status"]["phase"] != "Succeeded":
        raise RuntimeError(f"run {name} ended {run['status']['phase']}: {run['status'].get('message')}")
    return run


def step_seconds(run: dict[str, Any], step: str) -> float:
    return float(next(s["durationSeconds"] for s in run["status"]["steps"] if s["name"] == step))


def ground_truth(cluster: LocalCluster) -> list[dict[str, Any]]:
    return [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines() if line]


class RawClient:
    """The minimal client a benchmark would write by hand: threads, a token bucket, one watch, raw JSON.

    It shares the operator's HTTP transport (so the comparison isolates the operator's engine: trackers,
    status writes, events), but nothing else: no step machinery, no reports.
    """

    def __init__(self, cluster: LocalCluster, qps: float, burst: int, threads: int) -> None:
        self.client = KubeClient(load_configuration(str(cluster.config.kubeconfig)), qps, burst, threads)
        self.client.limiter = TokenBucket(qps, burst)
        self.threads = threads

    def close(self) -> None:
        asyncio.run(self.client.close())

    def _watch(self, path: str, done: threading.Event, on_event: Any, ready: threading.Event,
               query: dict[str, str] | None = None) -> None:
        listing = self.client.request_sync("GET", path, query=query)
        version = listing["metadata"]["resourceVersion"]
        ready.set()
        while not done.is_set():
            response = self.client.stream(path, {**(query or {}), "watch": "true", "resourceVersion": version,
                                                  "timeoutSeconds": "60"})
            buffer = b""
            try:
                for chunk in response.stream(None):
                    at = time.monotonic()
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        event = json.loads(line)
                        version = event["object"]["metadata"].get("resourceVersion", version)
                        on_event(event["type"], event["object"], at)
                    if done.is_set():
                        break
            except Exception:
                if done.is_set():  # the measurement is over and the cluster is going away: not an error
                    return
                raise
            response.release_conn()

    def _parallel(self, calls: list[Any]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.threads) as pool:
            for future in [pool.submit(call) for call in calls]:
                future.result()

    def create_and_wait_bound(self, namespace: str, storage_class: str, count: int) -> float:
        """Create ``count`` PVCs; return seconds from the first send to the last Bound event."""
        bound: set[str] = set()
        done, ready = threading.Event(), threading.Event()
        last = [0.0]

        def on_event(kind: str, obj: dict[str, Any], at: float) -> None:
            if (obj.get("status") or {}).get("phase") == "Bound" and obj["metadata"]["name"] not in bound:
                bound.add(obj["metadata"]["name"])
                last[0] = at
                if len(bound) == count:
                    done.set()

        path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
        watcher = threading.Thread(target=self._watch, args=(path, done, on_event, ready), daemon=True)
        watcher.start()
        ready.wait(30)
        first = time.monotonic()
        self._parallel([lambda i=i: self.client.request_sync("POST", path, manifests.pvc(f"raw-{i:05d}",
                                                                                        storage_class))
                        for i in range(count)])
        done.wait(3600)
        return last[0] - first

    def delete_and_wait_gone(self, namespace: str, count: int) -> float:
        """Delete the PVCs; return seconds from the first send until every PVC and its PV are gone."""
        claims = {f"raw-{i:05d}" for i in range(count)}
        volumes = {c["metadata"]["name"]: c["spec"]["volumeName"] for c in self.client.request_sync(
            "GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims")["items"]}
        pending = set(claims) | {volumes[c] for c in claims if volumes.get(c)}
        done, ready = threading.Event(), threading.Event()
        last = [0.0]

        def on_event(kind: str, obj: dict[str, Any], at: float) -> None:
            if kind == "DELETED" and obj["metadata"]["name"] in pending:
                pending.discard(obj["metadata"]["name"])
                last[0] = at
                if not pending:
                    done.set()

        threads = [threading.Thread(target=self._watch, args=(path, done, on_event, ready), daemon=True)
                   for path in (f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", "/api/v1/persistentvolumes")]
        for thread in threads:
            ready.clear()
            thread.start()
            ready.wait(30)
        first = time.monotonic()
        self._parallel([lambda c=c: self.client.request_sync(
            "DELETE", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{c}") for c in sorted(claims)])
        done.wait(3600)
        return last[0] - first


def kubectl(cluster: LocalCluster, *args: str, input_text: str | None = None) -> str:
    completed = subprocess.run([str(cluster.binaries.kubectl), f"--kubeconfig={cluster.config.kubeconfig}", *args],
                               input=input_text, capture_output=True, text=True, check=True)
    return completed.stdout

"""One component's client limits side by side: a batch with the component at upstream's QPS 5 / burst 10, then
the same batch with it restarted at raised limits, on one cluster, compared by ``csibench compare``.

The storage is instant (no latency, no concurrency limit) and every other component runs with raised client
limits, so what differs between the two runs is the component throttling its own API writes. Used by
``bench/snapshot_limits.py`` (the snapshot-controller) and ``bench/resizer_limits.py`` (csi-resizer).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any

from bench.harness import BENCH_NAMESPACE, bench_cluster, command_line, machine_facts, operator_run, storage_class
from localcluster.launcher import REPO_ROOT

UPSTREAM = {"kube-api-qps": "5", "kube-api-burst": "10"}
OPERATOR_CLIENT = {"qps": 200, "burst": 400, "maxInFlight": 16}


@dataclass(frozen=True)
class Comparison:
    markdown: str  # csibench compare's table, run A at upstream limits, run B raised
    throttled: dict[str, int]  # run name -> the component's log lines reporting client-side throttling
    steps: dict[str, dict[str, float]]  # run name -> step -> seconds


def compare_client_limits(component: str, qps: str, burst: str, spec: dict[str, Any],
                          extra_flags: dict[str, str] | None = None) -> Comparison:
    """Run ``spec`` twice on an instant class: ``component`` at upstream limits, then at ``qps``/``burst``
    (``extra_flags`` of the component stay the same in both)."""
    throttled: dict[str, int] = {}
    steps: dict[str, dict[str, float]] = {}
    with bench_cluster(sidecar_flags={component: {**UPSTREAM, **(extra_flags or {})}}) as (cluster, _operator, kube):
        instant = storage_class(kube)
        log = cluster.config.log_dir / f"{component}.log"
        for name in ("upstream-limits", "raised-limits"):
            if name == "raised-limits":
                cluster.reconfigure_sidecar(component, {"kube-api-qps": qps, "kube-api-burst": burst})
            start = log.stat().st_size
            run = operator_run(kube, name, 3600, storageClassName=instant, client=OPERATOR_CLIENT, **spec)
            steps[name] = {s["name"]: s.get("durationSeconds") or 0.0 for s in run["status"]["steps"]}
            with log.open("rb") as text:
                text.seek(start)
                throttled[name] = text.read().count(b"client-side throttling")
        markdown = subprocess.run(
            [str(REPO_ROOT / ".venv" / "bin" / "csibench"), "compare", f"{BENCH_NAMESPACE}/upstream-limits",
             f"{BENCH_NAMESPACE}/raised-limits", "-o", "markdown"],
            env={"KUBECONFIG": str(cluster.config.kubeconfig), "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=True).stdout
    return Comparison(markdown, throttled, steps)


def print_comparison(title: str, module: str, component: str, comparison: Comparison) -> None:
    print(f"\n### {title}\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line(module)}`\n")
    print(comparison.markdown)
    print(f"\n{component} log lines reporting client-side throttling: upstream limits "
          f"{comparison.throttled['upstream-limits']}, raised limits {comparison.throttled['raised-limits']}")

"""Snapshot-controller client limits: createSnapshot of N snapshots with upstream's QPS 5 / burst 10 against
raised limits, side by side on one cluster.

The storage is instant (no latency, no concurrency limit), every other component runs with raised client limits,
and only the snapshot-controller changes between the two runs: first with upstream's defaults
(``--kube-api-qps=5 --kube-api-burst=10``), then restarted with ``--kube-api-qps=Q --kube-api-burst=B``. What the
difference shows is the snapshot-controller throttling itself (each snapshot costs it several API writes: the
content, the snapshot's finalizers, status), the effect users see on real clusters at hundreds of snapshots.
"""

from __future__ import annotations

import argparse
import subprocess

from bench.harness import BENCH_NAMESPACE, bench_cluster, command_line, machine_facts, operator_run, storage_class
from localcluster.launcher import REPO_ROOT

UPSTREAM = {"kube-api-qps": "5", "kube-api-burst": "10"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--snapshots", type=int, default=200)
    parser.add_argument("--qps", default="100", help="the raised --kube-api-qps of the snapshot-controller")
    parser.add_argument("--burst", default="200", help="the raised --kube-api-burst of the snapshot-controller")
    args = parser.parse_args()
    spec = {"volumes": args.snapshots, "volumeSnapshotClassName": "csibench-sim-snapclass",
            "steps": ["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"],
            "client": {"qps": 200, "burst": 400, "maxInFlight": 16}}
    throttled = {}
    with bench_cluster(sidecar_flags={"snapshot-controller": dict(UPSTREAM)}) as (cluster, _operator, kube):
        instant = storage_class(kube)
        log = cluster.config.log_dir / "snapshot-controller.log"
        for name in ("upstream-limits", "raised-limits"):
            if name == "raised-limits":
                cluster.reconfigure_sidecar("snapshot-controller",
                                            {"kube-api-qps": args.qps, "kube-api-burst": args.burst})
            start = log.stat().st_size
            operator_run(kube, name, 3600, storageClassName=instant, **spec)
            with log.open("rb") as text:
                text.seek(start)
                throttled[name] = text.read().count(b"client-side throttling")
        compared = subprocess.run(
            [str(REPO_ROOT / ".venv" / "bin" / "csibench"), "compare", f"{BENCH_NAMESPACE}/upstream-limits",
             f"{BENCH_NAMESPACE}/raised-limits", "-o", "markdown"],
            env={"KUBECONFIG": str(cluster.config.kubeconfig), "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=True).stdout
    print(f"\n### Snapshot-controller client limits (N={args.snapshots}: upstream 5/10 vs {args.qps}/{args.burst})\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.snapshot_limits')}`\n")
    print(compared)
    print(f"\nsnapshot-controller log lines reporting client-side throttling: upstream limits "
          f"{throttled['upstream-limits']}, raised limits {throttled['raised-limits']}")


if __name__ == "__main__":
    main()

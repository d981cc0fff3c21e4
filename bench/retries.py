"""Replay the seed's "concurrency OFF" rates through the real sidecars, at their local defaults and at a vendor's
call timeouts, and hold what csibench measured against what the array did.

The class is the published OFF column: the array does one operation at a time (``concurrency: 1``), a create
takes 4.17 s, an attach 1.4 s (``--latency op=seconds`` adds or changes one; ``--scale`` multiplies them all, 1.0
is full time). The same batch (100 volumes in 25 pods by default) runs twice on one cluster: first with every
sidecar's ``--timeout`` at a vendor's value (``--vendor-timeout``, Trident's 600 s by default: each call waits its
turn in the array's queue), then restarted at upstream's defaults (provisioner 10 s, attacher 15 s, ...), where
calls queued behind the array run out and are retried. Per step it prints csibench's time, the array's span from
the ground truth, the retried Warnings and the step's time after the last of them (``status.steps[].retries``).
Results go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.harness import bench_cluster, command_line, ground_truth, machine_facts, operator_run, storage_class
from localcluster import sidecars

OFF_RATES = {"createVolume": 4.17, "attach": 1.4}  # seconds per operation, one at a time (the seed's OFF column)
STEP_OPERATION = {"createVolume": "createVolume", "publish": "attach", "unpublish": "detach",
                  "deleteVolume": "deleteVolume"}
UPSTREAM_TIMEOUTS = {"csi-provisioner": "10s", "csi-attacher": "15s", "csi-snapshotter": "1m", "csi-resizer": "10s"}


def class_parameters(rates: dict[str, float], scale: float) -> dict[str, str]:
    """The simulator's StorageClass parameters for these per-operation seconds, serialized (pure)."""
    return {"concurrency": "1", **{f"{op}Latency": f"{seconds * scale:.3f}s" for op, seconds in rates.items()}}


def array_spans(records: list[dict[str, Any]], storage_class: str) -> dict[str, float]:
    """operation -> seconds from its first start to its last finish on this class (pure)."""
    spans: dict[str, float] = {}
    for op in {r["op"] for r in records if r["storageClass"] == storage_class}:
        done = [r for r in records if r["storageClass"] == storage_class and r["op"] == op and r.get("finish")]
        if done:
            spans[op] = max(r["finish"] for r in done) - min(r["start"] for r in done)
    return spans


def rows(run: dict[str, Any], spans: dict[str, float]) -> list[str]:
    lines = []
    for step in run["status"]["steps"]:
        span = spans.get(STEP_OPERATION.get(step["name"], ""))
        retries = step.get("retries") or {}
        lines.append(f"| {run['metadata']['name']} | {step['name']} | {step.get('durationSeconds') or 0:.1f} s | "
                     + (f"{span:.1f} s" if span is not None else "-") + " | "
                     + f"{retries.get('warnings', 0)} on {retries.get('objects', 0)} | "
                     + (f"{retries['tailSeconds']:.1f} s" if retries else "-") + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=100)
    parser.add_argument("--pvcs-per-pod", type=int, default=4)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every latency (1.0: full time)")
    parser.add_argument("--latency", action="append", default=[], metavar="OP=SECONDS",
                        help="add or change one operation's latency, e.g. cloneVolume=4.6")
    parser.add_argument("--vendor-timeout", default="trident", help="--sidecar-timeout of the first run")
    args = parser.parse_args()
    rates = dict(OFF_RATES)
    for item in args.latency:
        op, _, seconds = item.partition("=")
        rates[op] = float(seconds)
    spec = {"volumes": args.volumes, "pvcsPerPod": args.pvcs_per_pod,
            "steps": ["createVolume", "publish", "unpublish", "deleteVolume"], "timeouts": {"default": 7200}}
    lines = ["| run | step | csibench | array span | retried Warnings | time after the last |",
             "|---|---|---|---|---|---|"]
    with bench_cluster(sidecar_flags=sidecars.timeout_flags(args.vendor_timeout)) as (cluster, _operator, kube):
        for name in ("vendor-timeouts", "upstream-timeouts"):
            if name == "upstream-timeouts":
                for component, timeout in UPSTREAM_TIMEOUTS.items():
                    cluster.reconfigure_sidecar(component, {"timeout": timeout})
            off = storage_class(kube, **class_parameters(rates, args.scale))
            run = operator_run(kube, name, 4 * 7200, storageClassName=off, **spec)
            lines += rows(run, array_spans(ground_truth(cluster), off))
            for step in run["status"]["steps"]:
                if (step.get("retries") or {}).get("message"):
                    print(f"{name}: {step['retries']['message']}")
    print(f"\n### Retries: the seed's OFF rates at vendor and upstream sidecar timeouts (N={args.volumes})\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.retries')}`\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

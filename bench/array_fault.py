"""Slow storage is not failed storage: what the same window costs a batch when the array is slow in it and when it
fails in it, side by side on one local cluster (examples/disruption-array.yaml and its variants).

Each round creates ``--volumes`` volumes on an array that creates ``--concurrency`` at a time, 200 ms each, so the
batch's creates start over its whole step (a window touches only operations the array starts inside it; on an
array without a limit every create of a batch starts at once). Once a quarter are Bound, the array opens a
``--seconds`` window on createVolume: ``latency`` adds ``--latency-ms`` to each create it starts in the window,
``failures`` fails each one (the provisioner retries with its backoff), and ``none`` is the same batch without a
window (the baseline, taken between the two so that drift shows). Per round it prints the step's duration, what
status.disruptions says (the window by the array's stamps, stall, operations touched, retried Warnings by reason
and cause) and the array's own record of the creates (attempts, failures, creates done once). Results go in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.harness import (
    bench_cluster,
    command_line,
    ground_truth,
    machine_facts,
    operator_run,
    step_seconds,
    storage_class,
)


def fault_of(kind: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    if kind == "none":
        return []
    fault = {"latencyMs": args.latency_ms} if kind == "latency" else {"failureRate": 1}
    return [{"step": "createVolume", "afterObjects": args.volumes // 4, "kind": "ArrayFault",
             "seconds": args.seconds, "arrayFault": {**fault, "operations": ["createVolume"]}}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=40)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--latency-ms", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    lines = ["| round | window | createVolume | window (array) | stall | touched | retried Warnings | "
             "creates tried / failed / done |", "|---|---|---|---|---|---|---|---|"]
    with bench_cluster() as (cluster, _operator, kube):
        for round_ in range(1, args.rounds + 1):
            for kind in ("latency", "none", "failures"):
                array = storage_class(kube, createVolumeLatency="200ms", concurrency=str(args.concurrency))
                run = operator_run(kube, f"array-{kind}-{round_}", 900, storageClassName=array,
                                   volumes=args.volumes, steps=["createVolume", "deleteVolume"],
                                   disruptions=fault_of(kind, args), timeouts={"default": 600})
                creates = [r for r in ground_truth(cluster)
                           if r["storageClass"] == array and r["op"] == "createVolume"]
                failed = sum(r["result"] == "error" for r in creates)
                done = len({r["object"] for r in creates if r["result"] == "ok"})
                cells = ["-", "-", "-", "-"]
                if run["status"]["disruptions"]:
                    (result,) = run["status"]["disruptions"]
                    warnings = ", ".join(f"{w['count']} {w['reason']} ({w.get('cause') or '-'})"
                                         for w in result.get("warnings") or []) or "0"
                    cells = [f"{result['restoredAtSeconds'] - result['injectedAtSeconds']:.2f} s",
                             f"{result['stallSeconds']:.2f} s", str(result.get("arrayOperations")), warnings]
                lines.append(f"| {round_} | {kind} | {step_seconds(run, 'createVolume'):.2f} s | "
                             + " | ".join(cells) + f" | {len(creates)} / {failed} / {done} |")
                print(lines[-1], flush=True)
    print(f"\n### A {args.seconds} s window on createVolume, {args.volumes} volumes created {args.concurrency} at a "
          f"time: slow (+{args.latency_ms} ms) against failing (every create)\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.array_fault')}`\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

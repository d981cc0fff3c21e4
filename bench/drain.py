"""What losing a node costs the volumes attached to it: examples/drain.yaml on a fresh local cluster, repeated.

Each round publishes ``--pods`` pods (a volume each) on an array that attaches in ``--attach-latency``, and once
every pod runs drains the node running the most of them. Per round it prints what status.disruptions says (the
node, pods moved, the failover: from the cordon to the last pod Running elsewhere, and when the node was given
back) beside the array's record: for each moved volume its detach from the drained node and its attach to the new
one, so the failover can be split into the array's part and the rest. Results go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.harness import bench_cluster, command_line, ground_truth, machine_facts, operator_run, storage_class


def moves(records: list[dict[str, Any]], array: str, drained: str) -> tuple[int, float, float]:
    """(volumes attached to a second node, the array's longest detach from the drained node, its longest attach
    to the new one), from the ground truth (pure)."""
    mine = [r for r in records if r["storageClass"] == array and r["result"] == "ok"]
    attaches: dict[str, list[dict[str, Any]]] = {}
    for record in (r for r in mine if r["op"] == "attach"):
        attaches.setdefault(record["object"].rpartition(":")[0], []).append(record)
    moved = {volume: records for volume, records in attaches.items() if len(records) > 1}
    detaches = [r for r in mine if r["op"] == "detach" and r["object"].rpartition(":")[0] in moved
                and r["object"].endswith(f":{drained}")]
    longest_detach = max((r["finish"] - r["start"] for r in detaches), default=0.0)
    longest_attach = max((rs[-1]["finish"] - rs[-1]["start"] for rs in moved.values()), default=0.0)
    return len(moved), longest_detach, longest_attach


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=12)
    parser.add_argument("--attach-latency", default="500ms")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lines = ["| round | node | pods moved | failover | node given back | publish | array: volumes moved, longest "
             "detach, longest attach |", "|---|---|---|---|---|---|---|"]
    with bench_cluster() as (cluster, _operator, kube):
        for round_ in range(1, args.rounds + 1):
            array = storage_class(kube, attachLatency=args.attach_latency, detachLatency=args.attach_latency)
            run = operator_run(kube, f"drain-{round_}", 900, storageClassName=array, volumes=args.pods,
                               steps=["createVolume", "publish", "unpublish", "deleteVolume"],
                               disruptions=[{"step": "publish", "afterObjects": args.pods, "kind": "DrainNode"}],
                               timeouts={"default": 600})
            (drain,) = run["status"]["disruptions"]
            node = drain["target"].removeprefix("node ")
            moved, detach, attach = moves(ground_truth(cluster), array, node)
            publish = next(s for s in run["status"]["steps"] if s["name"] == "publish")
            lines.append(f"| {round_} | {node} | {drain.get('podsDeleted')} | {drain.get('recoverySeconds')} s | "
                         f"{drain['restoredAtSeconds'] - drain['injectedAtSeconds']:.2f} s after the cordon | "
                         f"{publish['durationSeconds']:.2f} s | {moved}, {detach:.2f} s, {attach:.2f} s |")
            print(lines[-1], flush=True)
    print(f"\n### A node drained once {args.pods} pods run (attach and detach {args.attach_latency} each)\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.drain')}`\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""The moveVolume handoff against the array's ground truth: where each of the four parts the tool reports ends,
beside the simulated driver's record of the operation that ends it.

Per moved pod the tool reports four parts from its watch events (gone, detach, attach, ready). Three of them end
on an operation the array records: the old pod is gone after the simulated kubelet unstaged its volume on the old
node (``unmount``); the detach part ends when the VolumeAttachment to the old node is gone, after the array's
``detach``; the attach part ends when the one to the new node says attached, after the array's ``attach``; the pod
is Ready after its volume is staged on the new node (``mount``). The tool's boundary minus the array's finish is
how late the tool saw each (the control plane's reaction plus watch delivery), never negative unless the tool
were wrong about the order.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.harness import bench_cluster, command_line, ground_truth, machine_facts, operator_run, storage_class
from csibench.engine.timing import nearest_rank
from localcluster.runs import read_report

PARTS = ("gone", "detach", "attach", "ready")
ENDED_BY = {"gone": "unmount", "detach": "detach", "attach": "attach", "ready": "mount"}


def _by_volume(records: list[dict[str, Any]], storage: str) -> dict[str, list[dict[str, Any]]]:
    """PV -> its node-side and attach records on the class, oldest first ('pv:node' objects)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for record in sorted(records, key=lambda r: r["finish"]):
        if record["storageClass"] == storage and record["op"] in ENDED_BY.values() and record["result"] == "ok":
            found.setdefault(record["object"].rsplit(":", 1)[0], []).append(record)
    return found


def lateness(report: dict[str, Any], records: list[dict[str, Any]], storage: str,
             target: str) -> dict[str, list[float]]:
    """Per part, the tool's boundary minus the finish of the array's operation that ends it, per object (s)."""
    move = next(s for s in report["steps"] if s["status"]["name"] == "moveVolume")
    prefix, origin = move["objectPrefix"], float(move["startWall"])
    claims = {r["object"].split("/", 1)[1]: r["volume"] for r in records
              if r["op"] == "createVolume" and r["object"].startswith(f"{target}/")}
    history = _by_volume(records, storage)
    late: dict[str, list[float]] = {part: [] for part in PARTS}
    volume_prefix = prefix[:-1] + "v"  # "<run>-<uid5>-p" -> "-v": pod i mounts volume i (one per pod)
    for index, (sent, parts) in enumerate(zip(move["submitMs"], move["phaseMs"], strict=True)):
        if parts is None:
            continue
        pv = claims[f"{volume_prefix}{index:05d}"]
        start = origin + sent / 1000
        ends = [start + sum(parts[: i + 1]) / 1000 for i in range(len(PARTS))]
        for part, end in zip(PARTS, ends, strict=True):
            # The array's operation of this kind that finished during the move (after it was sent).
            ops = [r for r in history[pv] if r["op"] == ENDED_BY[part] and r["finish"] >= start - 0.01]
            late[part].append(end - ops[0]["finish"])
    return late


def signed(values: list[float]) -> str:
    """min / p50 / p90 / p99 / max in ms, signs kept (a negative value: the tool saw the end first)."""
    ordered = sorted(values)
    picks = [ordered[0], *(nearest_rank(ordered, p) for p in (50, 90, 99)), ordered[-1]]
    return " / ".join(f"{value * 1000:+.1f}" for value in picks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=60, help="volumes, one per publish pod, all moved")
    parser.add_argument("--latency", default="200ms", help="attach, detach, mount and unmount latency on the array")
    args = parser.parse_args()
    with bench_cluster() as (cluster, _operator, kube):
        storage = storage_class(kube, attachLatency=args.latency, detachLatency=args.latency,
                                mountLatency=args.latency, unmountLatency=args.latency)
        run = operator_run(kube, "move", 1800, storageClassName=storage, volumes=args.volumes, pvcsPerPod=1,
                           move={}, steps=["createVolume", "publish", "moveVolume", "unpublish", "deleteVolume"])
        late = lateness(read_report(kube, run), ground_truth(cluster), storage, run["status"]["targetNamespace"])
        move = next(s for s in run["status"]["steps"] if s["name"] == "moveVolume")
    print(f"\n### moveVolume against the array (N={args.volumes}, one volume per pod, {args.latency} per attach, "
          "detach, mount and unmount)\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.move_handoff')}`\n")
    print("| part | objects | tool's p50 (s) | compared with the array's | tool's end - array's finish, min / p50 / "
          "p90 / p99 / max (ms) |")
    print("|---|---|---|---|---|")
    for phase in move["phases"]:
        part = phase["name"]
        print(f"| {part} | {phase['objects']} | {phase['latency']['p50']:.3f} | {ENDED_BY[part]} | "
              f"{signed(late[part])} |")
    print(f"\nMove Volume: {move['durationSeconds']:.2f} s, p50 {move['latency']['p50']:.3f} s; retried: "
          f"{[(w['reason'], w['count']) for w in move.get('retriedWarnings', [])]}")


if __name__ == "__main__":
    main()

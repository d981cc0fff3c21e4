"""Steady churn for half an hour: examples/churn.yaml on a fresh local cluster, on a steady class and, side by
side, on one whose array acknowledges one delete in ``--leak-every`` without doing it.

Each run starts a wave of ``--wave`` volumes every ``--every`` seconds for ``--minutes`` minutes (each volume:
claim Bound, a pod Ready, the pod gone and detached, the claim and its volume gone), windows of ``--window``
seconds, the CSI components' memory from the local Prometheus, and the drift verdict. Printed per run: the windows
(per phase completions, p50 and p99; leaks; the provisioner's memory), the drift, the verdict, and for the leaky
class the leaks per window beside the array's own record of each delete it leaked (by when the array answered
it). Also the operator's peak RSS and the run's status size. Results go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml

from bench.harness import BENCH_NAMESPACE, bench_cluster, command_line, ground_truth, machine_facts, storage_class
from localcluster.launcher import REPO_ROOT
from localcluster.runs import TERMINAL, create_run, watch_for_phase


def epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def phase_cell(row: dict[str, Any], phase: str) -> str:
    found = next((p for p in row.get("phases", []) if p["phase"] == phase), None)
    if found is None or "latency" not in found:
        return "-"
    latency = found["latency"]
    return f"{found['completed']} / {latency['p50']:.2f} / {latency['p99']:.2f}"


def memory_cell(row: dict[str, Any], component: str) -> str:
    found = next((m["bytes"] for m in row.get("memory", []) if m["component"] == component), None)
    return f"{found / 2**20:.0f}" if found is not None else "-"


def windows_table(run: dict[str, Any], truth: list[float] | None) -> list[str]:
    started = epoch(next(s for s in run["status"]["steps"] if s["name"] == "churn")["startTime"])
    head = "| window | waves (late) | create n / p50 / p99 s | publish | unpublish | delete | leaked (total) |"
    head += " array's leaks (total) |" if truth is not None else ""
    head += " provisioner MiB | attacher MiB |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in run["status"]["churn"]:
        leaks = row.get("leaks") or {}
        name = "tail" if row.get("tail") else str(row["index"])
        line = (f"| {name} ({row['startSeconds']:.0f}-{row['endSeconds']:.0f} s) | {row['wavesStarted']} "
                f"({row['wavesLate']}) | " + " | ".join(phase_cell(row, p) for p in ("create", "publish", "unpublish",
                                                                                    "delete"))
                + f" | {row.get('leaked', '-')} ({leaks.get('volumes', '-')}) |")
        if truth is not None:
            end = started + row["endSeconds"]
            begin = started + row["startSeconds"]
            line += f" {sum(begin <= t < end for t in truth)} ({sum(t < end for t in truth)}) |"
        line += f" {memory_cell(row, 'csi-provisioner')} | {memory_cell(row, 'csi-attacher')} |"
        lines.append(line)
    return lines


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--wave", type=int, default=5)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--window", type=int, default=60)
    parser.add_argument("--in-flight", type=int, default=3)
    parser.add_argument("--leak-every", type=int, default=50)
    parser.add_argument("--save", type=Path, help="a directory to write each run's object to (<name>.json)")
    args = parser.parse_args()
    example = yaml.safe_load((REPO_ROOT / "examples" / "churn.yaml").read_text())
    with bench_cluster() as (cluster, operator, kube):
        steady_class = storage_class(kube)
        leaky_class = storage_class(kube, leakEvery=str(args.leak_every), leakOperations="deleteVolume")
        names = {"churn-steady": steady_class, "churn-leaky": leaky_class}
        for name, storage in names.items():
            body = json.loads(json.dumps(example))
            body["metadata"] = {"name": name}
            body["spec"].update(storageClassName=storage, collect={"prometheusUrl": cluster.prometheus_url})
            body["spec"]["churn"].update(durationSeconds=args.minutes * 60, waveSize=args.wave,
                                         everySeconds=args.every, windowSeconds=args.window,
                                         maxWavesInFlight=args.in_flight)
            create_run(kube, BENCH_NAMESPACE, body)
        runs = {name: watch_for_phase(kube, BENCH_NAMESPACE, name, TERMINAL, args.minutes * 60 + 1800)
                for name in names}
        assert operator.process is not None
        rss = peak_rss_mib(operator.process.pid)
        truth = sorted(r["finish"] for r in ground_truth(cluster)
                       if r["storageClass"] == leaky_class and r["op"] == "deleteVolume" and r.get("leaked"))
        deletes = sum(1 for r in ground_truth(cluster) if r["storageClass"] == leaky_class and r["op"] ==
                      "deleteVolume")
    print(f"\n### Churn: a wave of {args.wave} every {args.every} s for {args.minutes} min, windows of "
          f"{args.window} s, at most {args.in_flight} waves at once; a steady class and one leaking 1 delete in "
          f"{args.leak_every}, side by side\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.churn')}`\n")
    for name, run in runs.items():
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"{name}.json").write_text(json.dumps(run, indent=1))
        status = run["status"]
        drift = status.get("churnDrift") or {}
        print(f"#### {name}: {status['phase']}, verdict {status.get('verdict')}\n")
        print("\n".join(windows_table(run, truth if name == "churn-leaky" else None)))
        print(f"\n- Drift: {drift.get('change')}: {drift.get('message')}")
        print(f"- Memory growth: {drift.get('memoryGrowthPercent')}% ({drift.get('memoryComponent')})")
        for threshold in status.get("thresholds", []):
            print(f"- Threshold: {threshold['message']}")
        print(f"- Whole-run audit after cleanup: {json.dumps(status.get('leaks'))}")
        print(f"- Status size: {len(json.dumps(run)) / 1024:.1f} KiB")
        if name == "churn-leaky":
            print(f"- Array's record: {deletes} deletes asked, {len(truth)} leaked")
        print()
    print(f"Operator peak RSS (VmHWM): {rss:.0f} MiB")


if __name__ == "__main__":
    main()

"""Shared volume: cross-node visibility through csibench's sharedVolume step against an independent writer/reader
pair run directly on the same filesystem.

csibench's side is a run of the step with two probe pods (on two of the local cluster's nodes, each in its own
mount namespace, the array's volume directory bound in), visibility only (every other phase at its least): in
round k pod k mod 2 creates a file, the other polls every millisecond until it sees it and answers; the writer
polls for the answer, and half the round trip is the sample. The direct side is a pair of plain processes written
here, not the probe: in round k process k mod 2 creates ``<k>`` in a directory beside the array's volumes, the
other polls ``os.path.exists`` every millisecond and creates ``<k>.ack``, the writer times the round trip on its
own clock and halves it; exact percentiles (statistics.quantiles), where csibench's come from fio's bins (within
1/128). Trials alternate (ABBA); the bench prints each trial's p50 and p99 and, per figure, the ratio of geometric
means with its 90% interval. The local array shares one filesystem between its "nodes", so what both sides
measure is the polling loop and the filesystem's lookup: what the acceptance asks is that csibench's figure is the
one an independent pair gets, not what a networked share would show.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import bench_cluster, command_line, machine_facts, operator_run
from csibench.api.stats import ratio_interval
from localcluster.kube import Kube

PAIR = r"""
import os, sys, time
me, root, rounds, poll = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) / 1000
halves = []
for k in range(rounds):
    mine, answer = os.path.join(root, str(k)), os.path.join(root, f"{k}.ack")
    if k % 2 == me:
        began = time.monotonic_ns()
        open(mine, "x").close()
        while not os.path.exists(answer):
            time.sleep(poll)
        halves.append((time.monotonic_ns() - began) / 2e6)
    else:
        while not os.path.exists(mine):
            time.sleep(poll)
        open(answer, "x").close()
        while not os.path.exists(answer):
            time.sleep(poll)
print(" ".join(f"{h:.6f}" for h in halves))
"""


def direct_trial(folder: Path, rounds: int, poll_ms: int) -> tuple[float, float]:
    """The independent pair on a fresh directory under ``folder``: (p50, p99) of half the round trip, ms."""
    folder.mkdir(parents=True, exist_ok=True)
    root = tempfile.mkdtemp(dir=folder)
    pair = [subprocess.Popen([sys.executable, "-c", PAIR, str(me), root, str(rounds), str(poll_ms)],
                             stdout=subprocess.PIPE, text=True) for me in (0, 1)]
    halves = [float(value) for process in pair for value in process.communicate(timeout=600)[0].split()]
    cuts = statistics.quantiles(halves, n=100, method="inclusive")
    return cuts[49], cuts[98]


def csibench_trial(kube: Kube, name: str, rounds: int, poll_ms: int) -> tuple[float, float]:
    run = operator_run(kube, name, 900, storageClassName="csibench-sim", steps=["sharedVolume"],
                       shared={"pods": 2, "size": "64Mi", "files": rounds, "pollMilliseconds": poll_ms,
                               "lockRounds": 1, "smallFiles": 1, "listFiles": 0})
    row = next(row for row in run["status"]["shared"] if row["phase"] == "visibility")
    return float(row["latency"]["p50"]), float(row["latency"]["p99"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=400, help="visibility rounds per trial")
    parser.add_argument("--poll-ms", type=int, default=1)
    parser.add_argument("--trials", type=int, default=4, help="trials of each side (ABBA order)")
    parser.add_argument("--api-port", type=int, default=22443)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"csibench": [], "direct": []}
    with bench_cluster(api_port=args.api_port) as (cluster, _operator, kube):
        order = ["direct", "csibench", "csibench", "direct"] * ((args.trials + 1) // 2)
        for trial, side in enumerate(order[: 2 * args.trials]):
            found = (direct_trial(cluster.config.data_dir / "direct", args.rounds, args.poll_ms) if side == "direct"
                     else csibench_trial(kube, f"shared-{trial}", args.rounds, args.poll_ms))
            results[side].append(found)
            print(f"trial {trial} {side}: p50 {found[0]:.3f} ms, p99 {found[1]:.3f} ms", flush=True)
    print(f"\n### Shared volume: visibility, csibench vs an independent pair ({machine_facts()})\n")
    print(f"{args.rounds} rounds per trial, {args.poll_ms} ms polling, {args.trials} trials a side (ABBA); "
          f"`{command_line('bench.shared')}`\n")
    print("| figure | csibench (median of trials) | direct (median of trials) | csibench / direct [90% interval] |")
    print("|---|---|---|---|")
    for index, figure in enumerate(("p50 ms", "p99 ms")):
        a = [trial[index] for trial in results["direct"]]
        b = [trial[index] for trial in results["csibench"]]
        interval = ratio_interval(a, b)
        print(f"| {figure} | {statistics.median(b):.3f} | {statistics.median(a):.3f} | "
              f"{interval.ratio:.2f} [{interval.low:.2f}, {interval.high:.2f}] |")


if __name__ == "__main__":
    main()

"""Concurrent runs: K BenchmarkRuns of N volumes at once (createVolume + deleteVolume), against K = 1.

What it answers: does the operator's CPU stay proportional to the work when several runs share it (one
shared watch per cluster-scoped kind, so no run reads the others' PV events), and does every run still
Succeed with step times a raw client alone would recognise? For each K it reports the operator's CPU from
the first run's creation to the last run's end, the CPU per object-step, the ratio to K times the K = 1
figure (below 1: sub-linear), and each run's step times against a raw client's alone on the same cluster
(the runs share the array and the API server, so with K > 1 each one is expected to be slower).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path

from bench.harness import (
    BENCH_NAMESPACE,
    RawClient,
    bench_cluster,
    command_line,
    machine_facts,
    step_seconds,
    storage_class,
)
from bench.profile import sampled, summary
from bench.scale import cpu_seconds
from localcluster.runs import TERMINAL, benchmark_run, create_run, get_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=1000, help="volumes per run")
    parser.add_argument("--runs", default="1,5", help="numbers of concurrent runs to measure, in order (repeat "
                        "them, 1,5,1,5, for rounds: the ratio is to the median of the K = 1 rounds)")
    parser.add_argument("--qps", type=float, default=200)
    parser.add_argument("--burst", type=int, default=400)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--profile", type=Path, help="record the operator with py-spy while each K runs, into "
                        "FILE with K before its suffix (concurrent.txt -> concurrent.5.txt)")
    args = parser.parse_args()
    counts = [int(k) for k in args.runs.split(",")]
    rows: list[tuple[int, float, float, list[tuple[str, str, float, float]]]] = []
    with bench_cluster() as (_cluster, operator, kube):
        assert operator.process is not None
        pid = operator.process.pid
        fast = storage_class(kube)
        kube.core.create_namespace({"metadata": {"name": "raw-alone"}})  # type: ignore[arg-type]  # the client validates a dict body
        raw = RawClient(_cluster, args.qps, args.burst, args.threads)
        raw_create = raw.create_and_wait_bound("raw-alone", fast, args.volumes)
        raw_delete = raw.delete_and_wait_gone("raw-alone", args.volumes)
        raw.close()
        print(f"raw client alone: create {raw_create:.2f}s delete {raw_delete:.2f}s", flush=True)
        for k in counts:
            names = [f"concurrent-{k}-{i}" for i in range(k)]  # a round's runs are deleted before the next round
            profile = args.profile.with_suffix(f".{k}{args.profile.suffix}") if args.profile else None
            before, started = cpu_seconds(pid), time.monotonic()
            with sampled(pid, profile) if profile else contextlib.nullcontext():
                for name in names:
                    create_run(kube, BENCH_NAMESPACE, benchmark_run(
                        name, storageClassName=fast, volumes=args.volumes, steps=["createVolume", "deleteVolume"],
                        client={"qps": args.qps, "burst": args.burst, "maxInFlight": args.threads},
                        timeouts={"default": 3600}))
                while True:
                    runs = [get_run(kube, BENCH_NAMESPACE, name) or {} for name in names]
                    if all((run.get("status") or {}).get("phase") in TERMINAL for run in runs):
                        break
                    time.sleep(2)
            cpu, wall = cpu_seconds(pid) - before, time.monotonic() - started
            if profile:
                print(summary(profile, f"Operator CPU by py-spy, {k} runs of {args.volumes} volumes"), flush=True)
            outcomes = [(run["metadata"]["name"], run["status"]["phase"],
                         step_seconds(run, "createVolume") if run["status"]["phase"] == "Succeeded" else 0.0,
                         step_seconds(run, "deleteVolume") if run["status"]["phase"] == "Succeeded" else 0.0)
                        for run in runs]
            rows.append((k, cpu, wall, outcomes))
            print(f"{k} runs: {cpu:.1f} s CPU in {wall:.0f} s; " + ", ".join(
                f"{name} {phase} {c:.1f}/{d:.1f}s" for name, phase, c, d in outcomes), flush=True)
            for name in names:
                kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", BENCH_NAMESPACE,
                                                            "benchmarkruns", name)
            while any(get_run(kube, BENCH_NAMESPACE, name) for name in names):
                time.sleep(1)
    print(f"\n### Concurrent runs (N={args.volumes} volumes each, qps {args.qps:g}, burst {args.burst}, "
          f"{args.threads} in flight per run)\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.concurrent')}`\n")
    print(f"Raw client alone on the same cluster: createVolume {raw_create:.1f} s, deleteVolume {raw_delete:.1f} s.\n")
    print("| runs | every run Succeeded | operator CPU | per object-step | CPU / (runs x CPU of 1 run) | "
          "createVolume per run (s; / raw alone) | deleteVolume per run (s; / raw alone) |")
    print("|---|---|---|---|---|---|---|")
    ones = [cpu for k, cpu, _, _ in rows if k == 1]  # --runs 1,5,1,5: the median of the K = 1 rounds
    single = statistics.median(ones) if ones else None
    for k, cpu, _wall, outcomes in rows:
        ok = all(phase == "Succeeded" for _, phase, _, _ in outcomes)
        relative = f"{cpu / (k * single):.2f}" if single else "n/a"
        creates = ", ".join(f"{c:.1f}" for _, _, c, _ in outcomes)
        deletes = ", ".join(f"{d:.1f}" for _, _, _, d in outcomes)
        worst_create = max(c for _, _, c, _ in outcomes) / raw_create
        worst_delete = max(d for _, _, _, d in outcomes) / raw_delete
        print(f"| {k} | {'yes' if ok else 'NO'} | {cpu:.1f} s | {cpu / (2 * k * args.volumes) * 1000:.2f} ms | "
              f"{relative} | {creates} (max {worst_create:.2f}x) | {deletes} (max {worst_delete:.2f}x) |")


if __name__ == "__main__":
    main()

"""Overhead: the operator's createVolume/deleteVolume step times against a minimal raw client, side by side.

Simulator with zero latency and no concurrency limit, so that what remains is Kubernetes plus the client.
Trials alternate raw and operator (ABBA order) on the same cluster at the same QPS/burst/threads; the ratio of
medians is reported. Target: operator <= 1.15x raw.
"""

from __future__ import annotations

import argparse
import statistics

from bench.harness import (
    BENCH_NAMESPACE,
    RawClient,
    bench_cluster,
    command_line,
    machine_facts,
    operator_run,
    step_seconds,
    storage_class,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=4, help="trials of each side (ABBA order)")
    parser.add_argument("--qps", type=float, default=200)
    parser.add_argument("--burst", type=int, default=400)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {"raw": {"create": [], "delete": []},
                                                  "operator": {"create": [], "delete": []}}
    with bench_cluster() as (cluster, _operator, kube):
        fast = storage_class(kube)
        order = ["raw", "operator", "operator", "raw"] * ((args.trials + 1) // 2)
        for trial, side in enumerate(order[: 2 * args.trials]):
            if side == "raw":
                namespace = f"raw-{trial}"
                kube.core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]  # the client validates a dict body
                raw = RawClient(cluster, args.qps, args.burst, args.threads)
                results["raw"]["create"].append(raw.create_and_wait_bound(namespace, fast, args.volumes))
                results["raw"]["delete"].append(raw.delete_and_wait_gone(namespace, args.volumes))
                raw.close()
                kube.core.delete_namespace(namespace)
            else:
                run = operator_run(kube, f"overhead-{trial}", 3600, storageClassName=fast, volumes=args.volumes,
                                   steps=["createVolume", "deleteVolume"],
                                   client={"qps": args.qps, "burst": args.burst, "maxInFlight": args.threads})
                results["operator"]["create"].append(step_seconds(run, "createVolume"))
                results["operator"]["delete"].append(step_seconds(run, "deleteVolume"))
                kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", BENCH_NAMESPACE,
                                                            "benchmarkruns", f"overhead-{trial}")
            print(f"trial {trial} {side}: create {results[side]['create'][-1]:.2f}s "
                  f"delete {results[side]['delete'][-1]:.2f}s", flush=True)
    print(f"\n### Overhead (N={args.volumes}, qps {args.qps:g}, burst {args.burst}, {args.threads} threads)\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.overhead')}`\n")
    print("| step | raw client (s, each trial) | operator (s, each trial) | operator / raw (medians) |")
    print("|---|---|---|---|")
    for step in ("create", "delete"):
        raw_times, op_times = results["raw"][step], results["operator"][step]
        ratio = statistics.median(op_times) / statistics.median(raw_times)
        print(f"| {step}Volume | {', '.join(f'{t:.2f}' for t in raw_times)} | "
              f"{', '.join(f'{t:.2f}' for t in op_times)} | {ratio:.3f}× |")


if __name__ == "__main__":
    main()

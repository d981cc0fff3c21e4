"""Ceiling: the operator's best createVolume submit rate against the API server's raw PVC create rate.

The raw rate is the physical limit here: N PVC creates from many threads with no client-side rate limit. The
operator runs the same N with an unthrottled client (qps 10000) and the same number of threads. Both are
counted the same way, from the first request's send to the last request's send (the operator records send
times per object). Trials alternate ABBA, each on a settled cluster: the previous batch is bound, deleted and
its volumes gone before the next starts, so neither side pays for the other's binding work.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from bench.harness import (
    BENCH_NAMESPACE,
    RawClient,
    bench_cluster,
    command_line,
    machine_facts,
    operator_run,
    storage_class,
)
from csibench.kube.client import KubeClient, TokenBucket
from localcluster import manifests
from localcluster.kube import Kube, present, wait_until
from localcluster.runs import read_report


def raw_trial(kube: Kube, raw: RawClient, fast: str, namespace: str, volumes: int, threads: int) -> float:
    kube.core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]  # the client validates a dict body
    client: KubeClient = raw.client
    client.limiter = TokenBucket(100_000, 100_000)
    path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    sends: list[float] = []
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: client.request_sync("POST", path, manifests.pvc(f"raw-{i:05d}", fast),
                                                    on_send=sends.append), range(volumes)))
    rate = volumes / (max(sends) - min(sends))
    wait_until(lambda: all(present(c.status).phase == "Bound" for c in
                           kube.core.list_namespaced_persistent_volume_claim(namespace).items), 600, "raw bound")
    kube.core.delete_namespace(namespace)
    wait_until(lambda: not [p for p in kube.core.list_persistent_volume().items
                            if (ref := present(p.spec).claim_ref) and ref.namespace == namespace], 600,
               "raw volumes gone")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1, help="ABBA rounds (each is 2 raw + 2 operator trials)")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"raw": [], "operator": []}
    bound: list[float] = []
    with bench_cluster() as (cluster, _operator, kube):
        fast = storage_class(kube)
        raw = RawClient(cluster, 100_000, 100_000, args.threads)
        for trial, side in enumerate(["raw", "operator", "operator", "raw"] * args.rounds):
            if side == "raw":
                rates["raw"].append(raw_trial(kube, raw, fast, f"ceiling-raw-{trial}", args.volumes, args.threads))
            else:
                run = operator_run(kube, f"ceiling-{trial}", 3600, storageClassName=fast, volumes=args.volumes,
                                   steps=["createVolume", "deleteVolume"],
                                   client={"qps": 10000, "burst": 20000, "maxInFlight": args.threads})
                create = next(s for s in read_report(kube, run)["steps"] if s["status"]["name"] == "createVolume")
                sends = [ms for ms in create["submitMs"] if ms is not None]
                rates["operator"].append(args.volumes / ((max(sends) - min(sends)) / 1000))
                bound.append(create["status"]["throughput"])
            print(f"trial {trial} {side}: {rates[side][-1]:.0f} creates/s", flush=True)
            time.sleep(2)
        raw.close()
    raw_rate, operator_rate = statistics.median(rates["raw"]), statistics.median(rates["operator"])
    print(f"\n### Ceiling (N={args.volumes}, {args.threads} threads, ABBA x {args.rounds})\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.ceiling')}`\n")
    print("| figure | creates/s (each trial) | median |")
    print("|---|---|---|")
    print(f"| raw PVC creates, no client limit (the API server's rate here) | "
          f"{', '.join(f'{r:.0f}' for r in rates['raw'])} | {raw_rate:.0f} |")
    print(f"| operator createVolume submit rate (qps 10000) | "
          f"{', '.join(f'{r:.0f}' for r in rates['operator'])} | {operator_rate:.0f} |")
    print(f"| operator / raw | | {operator_rate / raw_rate:.2f}× |")
    print(f"| createVolume completions (Bound) per second, for reference | "
          f"{', '.join(f'{r:.0f}' for r in bound)} | |")
    print(f"\n(runs in namespace {BENCH_NAMESPACE}; the bound rate is the PV controller's, not the client's)")


if __name__ == "__main__":
    main()

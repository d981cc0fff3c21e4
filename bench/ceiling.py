"""Ceiling: the operator's best createVolume submit rate against the API server's raw PVC create rate.

The raw rate is the physical limit here: N PVC creates with many threads and no client-side rate limit.
Both sides are counted the same way, from the first request's send to the last request's send (the operator
records send times per object), so the ratio compares like with like. The operator runs the same N with an
unthrottled client (qps 10000) and the same number of threads; its rate comes from the report's send offsets.
Both batches use an instant simulator class (they are also provisioned and bound, as in real use).
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

from bench.harness import (
    BENCH_NAMESPACE,
    bench_cluster,
    command_line,
    machine_facts,
    operator_run,
    storage_class,
)
from csibench.kube.client import KubeClient, load_configuration
from tests.support import manifests
from tests.support.runs import read_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=32)
    args = parser.parse_args()
    with bench_cluster() as (cluster, _operator, kube):
        fast = storage_class(kube)
        kube.core.create_namespace({"metadata": {"name": "ceiling-raw"}})
        client = KubeClient(load_configuration(str(cluster.config.kubeconfig)), 100_000, 100_000, args.threads)
        path = "/api/v1/namespaces/ceiling-raw/persistentvolumeclaims"
        sends: list[float] = []
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(lambda i: client.request_sync("POST", path, manifests.pvc(f"raw-{i:05d}", fast),
                                                        on_send=sends.append), range(args.volumes)))
        raw_rate = args.volumes / (max(sends) - min(sends))
        client.close()
        run = operator_run(kube, "ceiling", 3600, storageClassName=fast, volumes=args.volumes,
                           steps=["createVolume", "deleteVolume"],
                           client={"qps": 10000, "burst": 20000, "maxInFlight": args.threads})
        create = next(s for s in read_report(kube, run)["steps"] if s["status"]["name"] == "createVolume")
        submit_span = max(create["submitMs"]) / 1000
        operator_rate = args.volumes / submit_span if submit_span else float("inf")
        bound_rate = create["status"]["throughput"]
    print(f"\n### Ceiling (N={args.volumes}, {args.threads} threads)\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.ceiling')}`\n")
    print("| figure | creates/s |")
    print("|---|---|")
    print(f"| raw PVC creates, no client limit (the API server's rate here) | {raw_rate:.0f} |")
    print(f"| operator createVolume submit rate (qps 10000) | {operator_rate:.0f} |")
    print(f"| operator / raw | {operator_rate / raw_rate:.2f}× |")
    print(f"| createVolume completions (Bound) per second, for reference | {bound_rate:.0f} |")
    print(f"\n(namespace {BENCH_NAMESPACE}; the bound rate is limited by the PV controller, not by the client)")


if __name__ == "__main__":
    main()

"""Accuracy: the operator's per-object latencies and step duration against the simulator's ground truth,
beside the method published scripts use (``kubectl apply`` the batch, ``kubectl get`` every 5 s until Bound).

Storage: latency 200 ms +/- 50 ms jitter, concurrency 8, N=500 (defaults). For each object, the truth is
"backend CreateVolume finished" (simulator clock, same machine) measured from the moment the request left the
client. The operator's error is what it adds on top of the storage: the PV controller's bind plus watch delivery.
Targets: p99 absolute error <= 50 ms, step duration error <= 1%.
"""

from __future__ import annotations

import argparse
import json
import time

from bench.harness import (
    BENCH_NAMESPACE,
    bench_cluster,
    command_line,
    ground_truth,
    kubectl,
    machine_facts,
    operator_run,
    storage_class,
)
from csibench.engine.report_store import object_names
from csibench.engine.timing import nearest_rank
from tests.support import manifests
from tests.support.runs import read_report


def percentiles(errors: list[float]) -> str:
    ordered = sorted(abs(e) for e in errors)
    return " / ".join(f"{nearest_rank(ordered, p) * 1000:.1f}" for p in (50, 90, 99)) + f" / {ordered[-1] * 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=500)
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    args = parser.parse_args()
    params = {"latency": "200ms", "jitter": "50ms", "concurrency": "8", "seed": "5"}
    with bench_cluster() as (cluster, _operator, kube):
        # The operator.
        ours = storage_class(kube, **params)
        run = operator_run(kube, "accuracy", 3600, storageClassName=ours, volumes=args.volumes,
                           steps=["createVolume", "deleteVolume"], client={"qps": 200, "burst": 400})
        report = read_report(kube, run)
        create = next(s for s in report["steps"] if s["status"]["name"] == "createVolume")
        target = run["status"]["targetNamespace"]
        truth = {r["object"]: r for r in ground_truth(cluster)
                 if r["storageClass"] == ours and r["op"] == "createVolume"}
        errors, sends, finishes = [], [], []
        for name, submit_ms, latency_ms in zip(object_names(create), create["submitMs"], create["latencyMs"],
                                               strict=True):
            sent = create["startWall"] + submit_ms / 1000
            finish = truth[f"{target}/{name}"]["finish"]
            errors.append(latency_ms / 1000 - (finish - sent))
            sends.append(sent)
            finishes.append(finish)
        true_duration = max(finishes) - create["startWall"]
        ours_duration = create["status"]["durationSeconds"]

        # The published-scripts method, on a fresh class with the same behaviour.
        theirs = storage_class(kube, **params)
        batch = "\n---\n".join(json.dumps({**manifests.pvc(f"poll-{i:05d}", theirs),
                                           "metadata": {"name": f"poll-{i:05d}", "namespace": BENCH_NAMESPACE}})
                               for i in range(args.volumes))
        started = time.time()
        kubectl(cluster, "apply", "-f", "-", input_text=batch)
        applied = time.time()
        seen: dict[str, float] = {}
        while len(seen) < args.volumes:
            time.sleep(args.poll_seconds)
            listing = json.loads(kubectl(cluster, "get", "pvc", "-n", BENCH_NAMESPACE, "-o", "json"))
            now = time.time()
            for claim in listing["items"]:
                name = claim["metadata"]["name"]
                if name.startswith("poll-") and claim["status"].get("phase") == "Bound":
                    seen.setdefault(name, now)
        their_truth = {r["object"]: r for r in ground_truth(cluster)
                       if r["storageClass"] == theirs and r["op"] == "createVolume"}
        their_errors = [(seen[n] - started) - (their_truth[f"{BENCH_NAMESPACE}/{n}"]["finish"] - started)
                        for n in seen]
        their_true = max(r["finish"] for r in their_truth.values()) - started
        their_duration = max(seen.values()) - started

    print(f"\n### Accuracy (N={args.volumes}, latency 200 ms ± 50 ms, concurrency 8)\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.accuracy')}`\n")
    print("| method | per-object abs. error p50 / p90 / p99 / max (ms) | step duration | true duration | error |")
    print("|---|---|---|---|---|")
    print(f"| csibench operator (watch events) | {percentiles(errors)} | {ours_duration:.3f} s | "
          f"{true_duration:.3f} s | {abs(ours_duration - true_duration) / true_duration * 100:.2f}% |")
    print(f"| kubectl apply + get every {args.poll_seconds:g} s | {percentiles(their_errors)} | "
          f"{their_duration:.3f} s | {their_true:.3f} s | "
          f"{abs(their_duration - their_true) / their_true * 100:.2f}% |")
    print(f"\n(kubectl apply alone took {applied - started:.1f} s to submit the batch.)")


if __name__ == "__main__":
    main()

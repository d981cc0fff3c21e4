"""What a provisioner restart halfway through a batch of creates costs, held against the component's own restart and
the array's record: examples/disruption-provisioner.yaml on a fresh local cluster, repeated.

Each round creates ``--volumes`` volumes on a class that creates one at a time (``--create-latency`` each) and
deletes the provisioner's pod once half are Bound. Per round it prints what status.disruptions says (recovery,
time without a leader, stall, throughput before and after, objects not recovered) beside what the cluster says:
when the replacement pod was created (its creationTimestamp, one-second resolution) and when the new leader took
the Lease (its acquireTime, microseconds), and what the array did (ground truth: each volume's creates and deletes,
so an operation done twice or a volume left shows). Results go in docs/benchmarks.md.

``--standby`` runs a second provisioner replica on the second node (a standing candidate for the Lease) and
restarts only the leader's pod; ``--release-on-exit`` starts the provisioner with its ReleaseLeaderElectionOnExit
gate (a leader that is stopped gives its Lease up instead of letting it run out).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
from typing import Any

from bench.harness import bench_cluster, command_line, ground_truth, machine_facts, operator_run, storage_class
from localcluster.kube import Kube, present

PROVISIONER = "csi-provisioner"
SELECTOR = {"app.kubernetes.io/name": "csi-provisioner"}


def seconds_of(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def array_counts(records: list[dict[str, Any]], storage_class: str) -> tuple[int, int, int, int]:
    """(creates done, volumes created more than once, deletes done, volumes created and never deleted) on the
    class, from the ground truth (pure)."""
    mine = [r for r in records if r["storageClass"] == storage_class and r.get("result") == "ok"]
    created = collections.Counter(r["object"] for r in mine if r["op"] == "createVolume")
    deleted = collections.Counter(r["object"] for r in mine if r["op"] == "deleteVolume" and not r.get("leaked"))
    return (sum(created.values()), sum(1 for count in created.values() if count > 1), sum(deleted.values()),
            len(created) - len(deleted))


def leader_node(kube: Kube) -> str:
    """The node of the provisioner replica holding the Lease (its identity is its pod's name and a suffix)."""
    for lease in kube.coordination.list_namespaced_lease("kube-system").items:
        holder = present(lease.spec).holder_identity or ""
        if holder.startswith(f"{PROVISIONER}-"):
            return holder.removeprefix(f"{PROVISIONER}-").rsplit("-", 1)[0]
    raise RuntimeError("no provisioner holds a Lease")


def cluster_facts(kube: Kube, node: str) -> tuple[float, float | None, str]:
    """(the restarted provisioner pod's creation, the provisioner Lease's acquireTime, as epoch seconds, and the
    node of its holder now)."""
    pod = kube.core.read_namespaced_pod(f"{PROVISIONER}-{node}", "kube-system")
    created = present(present(pod.metadata).creation_timestamp).timestamp()
    for lease in kube.coordination.list_namespaced_lease("kube-system").items:
        spec = present(lease.spec)
        if (spec.holder_identity or "").startswith(f"{PROVISIONER}-") and spec.acquire_time is not None:
            return created, spec.acquire_time.timestamp(), leader_node(kube)
    return created, None, "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=100)
    parser.add_argument("--create-latency", default="300ms")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--standby", action="store_true", help="a second provisioner replica stands by")
    parser.add_argument("--release-on-exit", action="store_true",
                        help="the provisioner's ReleaseLeaderElectionOnExit gate on")
    args = parser.parse_args()
    lines = ["| round | restarted on | recovery | replacement created (cluster) | leader | Lease acquired (cluster) | "
             "new leader on | stall | throughput before / after | not recovered | array: creates, twice, deletes, "
             "left |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    flags = {PROVISIONER: {"feature-gates": "ReleaseLeaderElectionOnExit=true"}} if args.release_on_exit else {}
    with bench_cluster(sidecar_flags=flags, standby_sidecars=(PROVISIONER,) if args.standby else ()) as (
            cluster, _operator, kube):
        for round_ in range(1, args.rounds + 1):
            serial = storage_class(kube, concurrency="1", createVolumeLatency=args.create_latency)
            node = leader_node(kube)  # with a standby, only the leader's pod is restarted
            disruption = {"step": "createVolume", "afterObjects": args.volumes // 2, "kind": "RestartComponent",
                          "component": {"namespace": "kube-system", "selector": SELECTOR,
                                        **({"node": node} if args.standby else {})}}
            run = operator_run(kube, f"disruption-{round_}", 1800, storageClassName=serial, volumes=args.volumes,
                               steps=["createVolume", "deleteVolume"], disruptions=[disruption],
                               timeouts={"default": 900})
            (result,) = run["status"]["disruptions"]
            start = seconds_of(next(s for s in run["status"]["steps"] if s["name"] == "createVolume")["startTime"])
            pod_created, acquired, new_leader = cluster_facts(kube, node)
            creates, twice, deletes, left = array_counts(ground_truth(cluster), serial)
            lines.append(
                f"| {round_} | {node} | {result['recoverySeconds']:.2f} s at {result['recoveredAtSeconds']:.2f} | "
                f"{pod_created - start:.0f} s | {result.get('leaderSeconds') or 0:.2f} s at "
                f"{result.get('leaderAcquiredAtSeconds') or 0:.3f} | "
                + (f"{acquired - start:.3f} s" if acquired is not None else "-") + f" | {new_leader} | "
                f"{result['stallSeconds']:.2f} s | {result['throughputBefore']} / {result['throughputAfter']} obj/s | "
                f"{result['unrecovered']} | {creates}, {twice}, {deletes}, {left} |")
            print(lines[-1], flush=True)
    setup = ", a standby replica" if args.standby else ", one replica"
    setup += ", ReleaseLeaderElectionOnExit" if args.release_on_exit else ""
    print(f"\n### A provisioner restart halfway through {args.volumes} serialized creates ({args.create_latency} "
          f"each){setup}\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.disruption')}`\n")
    print("Times on the createVolume step's clock (seconds since it started).\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""What a frozen control plane costs a batch of pods, held against the local cluster's own record:
examples/disruption-apiserver.yaml (PauseApiServer) and its PauseEtcd twin on a fresh local cluster.

Each round starts ``--pods`` pods (one volume each) and, once a quarter are Running, freezes the API server or etcd
for each of ``--seconds``. Per round it prints what status.disruptions says (frozen from injection to resume,
recovery from the resume, stall, throughput before and after (after: none when the step ended before the
pauser's answer arrived), container restarts, Lease transitions) beside what
the local cluster says: how long the pauser held the process stopped (its own stamps on the pod) and how many
times the sidecars' supervisors restarted a sidecar that exited by itself during the round (their logs). Results
go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re

from bench.harness import bench_cluster, command_line, machine_facts, operator_run, storage_class
from localcluster import sidecars
from localcluster.kube import Kube, present
from localcluster.launcher import LocalCluster

RESTARTED = re.compile(r"^(\S+ \S+) staticpod WARNING .* exited by itself")


def seconds_of(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def pauser_stamps(kube: Kube, component: str) -> tuple[float, float]:
    """(stopped, resumed) as the pauser wrote them on the component's pod, epoch seconds."""
    pod = kube.core.read_namespaced_pod(f"{component}-sim-node-0", "kube-system")
    answer = json.loads((present(pod.metadata).annotations or {})["csibench.io/paused"])
    return seconds_of(answer["stoppedAt"]), seconds_of(answer["resumedAt"])


def supervised_restarts(cluster: LocalCluster, since: float, until: float) -> int:
    """Sidecar restarts after a crash that the supervisors logged between two moments (their log lines)."""
    count = 0
    for sidecar in sidecars.SIDECARS:
        path = cluster.config.log_dir / f"{sidecar.name}.log"
        for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
            found = RESTARTED.match(line)
            if found:
                at = dt.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.UTC).timestamp()
                count += since <= at <= until
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--seconds", type=int, nargs="+", default=[5, 12])
    parser.add_argument("--kinds", nargs="+", default=["PauseApiServer", "PauseEtcd"])
    args = parser.parse_args()
    lines = ["| kind | seconds | frozen (status) | frozen (pauser) | recovery | stall | throughput before / after | "
             "restarts (status) | restarts (supervisors) | Lease transitions |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    with bench_cluster() as (cluster, _operator, kube):
        for kind in args.kinds:
            component = "kube-apiserver" if kind == "PauseApiServer" else "etcd"
            for seconds in args.seconds:
                array = storage_class(kube)
                disruption = {"step": "publish", "afterObjects": args.pods // 4, "kind": kind, "seconds": seconds}
                run = operator_run(kube, f"{kind.lower()}-{seconds}", 900, storageClassName=array,
                                   volumes=args.pods, steps=["createVolume", "publish", "unpublish", "deleteVolume"],
                                   disruptions=[disruption], timeouts={"default": 300})
                (result,) = run["status"]["disruptions"]
                stopped, resumed = pauser_stamps(kube, component)
                restarts = supervised_restarts(cluster, stopped, resumed + 30)
                lines.append(
                    f"| {kind} | {seconds} | {result['restoredAtSeconds'] - result['injectedAtSeconds']:.3f} s | "
                    f"{resumed - stopped:.3f} s | {result['recoverySeconds']:.3f} s | {result['stallSeconds']:.2f} s "
                    f"| {result.get('throughputBefore', '-')} / {result.get('throughputAfter', '-')} obj/s | "
                    f"{result['containerRestarts']} | {restarts} | {result.get('leaseTransitions')} |")
                print(lines[-1], flush=True)
    print(f"\n### A frozen control plane during publish of {args.pods} pods\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.pause')}`\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

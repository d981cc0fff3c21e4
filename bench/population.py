"""The scale envelope, run by run: a batch of ``--volumes`` through createVolume, createSnapshot, deleteSnapshot and
deleteVolume beside a population of each level in ``--levels`` (that many claims and as many snapshots), on the
local cluster, one fresh cluster for all levels, lowest level first.

Per level: how long the population took to make (status.population.seconds, the run's own client limits) and to
remove (the run deleted until gone: its deletion cleanup removes the population first, within its timeoutSeconds;
then nothing of the run or its population may be left, or the bench stops); each step's time and
throughput; the CSI components' peak memory and CPU over the batch's steps (spec.collect, the local Prometheus);
and, while the population exists, the time one client takes to LIST each kind involved (the median of 3, the
whole list in one answer, as an informer's first list), and from the control plane's own metrics (the cluster's
Prometheus scrapes it here) the API server's LIST p99 per kind, its memory, the PV controller's claim queue and
the snapshot-controller's operations in flight, each the highest over the batch's steps. Results go in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from bench.harness import BENCH_NAMESPACE, bench_cluster, command_line, machine_facts
from csibench.report.suite import render_suite
from csibench.report.suite_queries import own_query_peaks
from localcluster.kube import Kube, json_object, wait_until
from localcluster.launcher import REPO_ROOT
from localcluster.runs import (
    GROUP,
    PLURAL,
    TERMINAL,
    VERSION,
    benchmark_run,
    create_run,
    get_run,
    leftovers,
    population_leftovers,
    watch_for_phase,
)

DISRUPTION_FIGURES = ("state", "recoverySeconds", "stallSeconds", "throughputBefore", "throughputAfter",
                      "leaderSeconds", "leaseTransitions", "message")
STEPS = ["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"]
COMPONENTS = ("csi-provisioner", "csi-snapshotter", "snapshot-controller", "kube-apiserver", "kube-controller-manager")
LISTED = (("persistentvolumes", "/api/v1/persistentvolumes"),
          ("persistentvolumeclaims", "/api/v1/persistentvolumeclaims"),
          ("volumesnapshots", "/apis/snapshot.storage.k8s.io/v1/volumesnapshots"),
          ("volumesnapshotcontents", "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents"))


# The envelope's own questions of the control plane, as examples/suite-envelope.yaml asks them (the cluster runs
# with Prometheus scraping it, under kube-prometheus's job names), beside the CSIMachinery profile.
ENVELOPE_QUERIES: list[dict[str, Any]] = yaml.safe_load(
    (REPO_ROOT / "examples" / "suite-envelope.yaml").read_text())["spec"]["template"]["collect"]["queries"]


def list_seconds(kube: Kube, path: str) -> float:
    """The median of 3 whole LISTs of ``path`` (read and decoded), seconds."""
    times = []
    for _ in range(3):
        started = time.monotonic()
        client = kube.core.api_client
        method, url, headers, body, _ = client.param_serialize("GET", path, auth_settings=["BearerToken"])
        answer = client.call_api(method, url, header_params=headers, body=body)
        json.loads(answer.read())
        times.append(time.monotonic() - started)
    return statistics.median(times)


def component_peaks(run: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Per component, (peak MiB, CPU seconds) over the batch's steps, from each step's collection."""
    peaks: dict[str, tuple[float, float]] = {}
    seen = {value["labels"].get("container", "") for step in run["status"]["steps"]
            for value in (step.get("collection") or {}).get("values", [])}
    print(f"containers collected: {sorted(seen)}", flush=True)
    for step in run["status"]["steps"]:
        for value in (step.get("collection") or {}).get("values", []):
            container = value["labels"].get("container", "")
            name = next((c for c in COMPONENTS if container.startswith(c)), None)
            if name is None:
                continue
            memory, cpu = peaks.get(name, (0.0, 0.0))
            if value["query"] == "peakMemoryBytes":
                memory = max(memory, value["value"] / 2**20)
            elif value["query"] == "cpuSeconds":
                cpu += value["value"]
            peaks[name] = (memory, cpu)
    return peaks


def restart(component: str, step: str, volumes: int) -> dict[str, Any]:
    """A RestartComponent of ``component`` (its pods in kube-system, by app.kubernetes.io/name) once half of
    ``step``'s objects are done: its stall says how long the component took to serve again."""
    return {"step": step, "afterObjects": volumes // 2, "kind": "RestartComponent",
            "component": {"namespace": "kube-system", "selector": {"app.kubernetes.io/name": component}}}


def one_level(kube: Kube, level: int, volumes: int, prometheus: str, timeout: float,
              disruption: dict[str, Any] | None = None) -> dict[str, Any]:
    name = f"envelope-{level}"
    spec: dict[str, Any] = {
        "storageClassName": "csibench-sim", "volumeSnapshotClassName": "csibench-sim-snapclass", "volumes": volumes,
        "steps": STEPS, "cleanup": "Never",
        "collect": {"prometheusUrl": prometheus, "components": ["kube-apiserver", "kube-controller-manager"],
                    "queries": ENVELOPE_QUERIES},
        "timeouts": {"cleanup": int(timeout)}}
    if level:
        spec["population"] = {"claims": level, "snapshots": level, "timeoutSeconds": int(timeout)}
    if disruption is not None:
        spec["disruptions"] = [disruption]
    started = time.monotonic()
    create_run(kube, BENCH_NAMESPACE, benchmark_run(name, **spec))
    run = watch_for_phase(kube, BENCH_NAMESPACE, name, TERMINAL, timeout)
    wall = time.monotonic() - started
    if run["status"]["phase"] != "Succeeded":
        raise RuntimeError(f"level {level}: run ended {run['status']['phase']}: {json.dumps(run['status'])[:2000]}")
    lists = {kind: list_seconds(kube, path) for kind, path in LISTED}
    deleted = time.monotonic()
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, BENCH_NAMESPACE, PLURAL, name)
    wait_until(lambda: get_run(kube, BENCH_NAMESPACE, name) is None, timeout, f"run {name} gone")
    left = leftovers(kube, run)  # the run's objects, its population and the seed's volume and content
    if left:
        raise RuntimeError(f"level {level}: the deleted run left {json.dumps(left)[:2000]}")
    return {"level": level, "wall": wall, "population": run["status"].get("population") or {},
            "removed": time.monotonic() - deleted, "lists": lists, "peaks": component_peaks(run),
            "steps": {s["name"]: (s.get("durationSeconds"), s.get("throughput")) for s in run["status"]["steps"]},
            "client": run["status"].get("client"), "own": own_query_peaks([run])[0],
            "disruptions": [{key: d.get(key) for key in DISRUPTION_FIGURES}
                            for d in run["status"].get("disruptions", [])]}


def table(results: list[dict[str, Any]]) -> list[str]:
    head = ("| level (claims + snapshots) | made s | removed s | " + " | ".join(f"{s} s (ops/s)" for s in STEPS)
            + " | " + " | ".join(f"{c} MiB / CPU s" for c in COMPONENTS) + " | "
            + " | ".join(f"LIST {k} s" for k, _ in LISTED) + " |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for result in results:
        made = result["population"].get("seconds")
        cells = [f"{result['level']} + {result['level']}", f"{made:.1f}" if made else "-", f"{result['removed']:.1f}"]
        cells += [f"{seconds:.2f} ({rate:.0f})" if seconds else "-" for seconds, rate in
                  (result["steps"].get(step, (None, None)) for step in STEPS)]
        cells += [f"{mib:.0f} / {cpu:.1f}" if (mib, cpu) != (0.0, 0.0) else "-" for mib, cpu in
                  (result["peaks"].get(c, (0.0, 0.0)) for c in COMPONENTS)]
        cells += [f"{result['lists'][k]:.3f}" for k, _ in LISTED]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run_suite(kube: Kube, cluster: Any, path: str, timeout: float) -> str:
    """The suite in ``path`` (examples/suite-envelope.yaml) applied in the bench namespace with the local
    Prometheus, waited for, and its report as ``csibench report`` renders it."""
    cluster.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds" / "benchmarksuite.yaml"))
    cluster.wait_established("benchmarksuites.csibench.io")
    body = yaml.safe_load(Path(path).read_text())
    body["spec"]["template"]["collect"] = {**body["spec"]["template"].get("collect", {}),
                                           "prometheusUrl": cluster.prometheus_url}
    name = body["metadata"]["name"]
    create_run(kube, BENCH_NAMESPACE, body, "benchmarksuites")
    started = time.monotonic()
    suite = wait_until(lambda: found if (found := get_run(kube, BENCH_NAMESPACE, name, "benchmarksuites")) and (
        found.get("status") or {}).get("phase") in TERMINAL else None, timeout, f"suite {name} ended", interval=5)
    listed = kube.custom.list_namespaced_custom_object(GROUP, VERSION, BENCH_NAMESPACE, PLURAL,
                                                       label_selector=f"csibench.io/suite-uid={suite['metadata']['uid']}")
    runs = [json_object(item) for item in json_object(listed)["items"]]
    for run in runs:
        print(f"{run['metadata']['name']}: population {json.dumps(run['status'].get('population'))}, "
              f"cleanup {run['status'].get('cleanup')!r}", flush=True)
    ended = f"suite {name}: {suite['status']['phase']} in {time.monotonic() - started:.0f} s\n"
    if suite["spec"].get("sharePopulation"):  # the suite removes its population after its last run
        removed = wait_until(lambda: (found := (get_run(kube, BENCH_NAMESPACE, name, "benchmarksuites") or {}).get(
            "status", {}).get("population")) and (found.get("removed") or found.get("message")) and found,
            timeout, f"suite {name}'s population removed", interval=5)
        left = {kind: len(names) for kind, names in population_leftovers(kube, suite["metadata"]["uid"]).items()}
        ended += f"shared population: {json.dumps(removed)}; left after it: {json.dumps(left)}\n"
    return ended + render_suite(suite, runs, markdown=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--levels", default="0,1000,5000", help="population levels, claims (and snapshots) each")
    parser.add_argument("--volumes", type=int, default=100, help="the batch's volumes")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--save", help="write the results as JSON here")
    parser.add_argument("--restart", metavar="COMPONENT:STEP",
                        help="restart a CSI component (e.g. csi-snapshotter:createSnapshot) halfway through that step "
                             "at every level: its recovery and the step's stall per level")
    parser.add_argument("--suite", help="instead of the levels: run this BenchmarkSuite file (its population "
                                        "axis) and print its report")
    args = parser.parse_args()
    levels = sorted(int(level) for level in args.levels.split(","))
    print(command_line("bench.population"))
    print(machine_facts())
    with bench_cluster(scrape_control_plane=True) as (cluster, _operator, kube):
        if args.suite:
            print(run_suite(kube, cluster, args.suite, args.timeout))
            return
        results = []
        for level in levels:
            component, _, step = (args.restart or "").partition(":")
            disruption = restart(component, step, args.volumes) if args.restart else None
            results.append(one_level(kube, level, args.volumes, cluster.prometheus_url, args.timeout, disruption))
            print(json.dumps(results[-1]), flush=True)
    print("\n".join(table(results)))
    for result in results:
        print(f"level {result['level']}: control plane (highest over the steps) {json.dumps(result['own'])}")
        print(f"level {result['level']}: disruptions {json.dumps(result['disruptions'])}")
    if args.save:
        with open(args.save, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()

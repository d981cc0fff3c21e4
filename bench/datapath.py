"""Data path: fio through csibench (process-mode pods on the local cluster) against the same fio job run directly.

Both sides run the very command line the data-path step builds (``engine/steps/datapath/fio.py``), one fio per volume
at once, one workload after the other, on directories of the same filesystem: the operator's pods write into
the simulated array's per-volume directories (bind-mounted into each pod's private mount namespace), the direct
side into sibling directories under the same data directory. By default six volumes: the local cluster's three
nodes' worth, two each, their pods started together by the start barrier (the direct side lays out its files
first as the pods' init containers do, then starts its fio processes at once). Rows are aggregated by the same code
(``engine/steps/datapath/rows.py``): bandwidth summed, p99 from every process's histogram merged. Trials alternate
(ABBA) and per workload the bench prints medians, and the ratio of geometric means with its 90% interval (Welch's t on
the logarithms of the trials), bandwidth and p99 side by side, with csibench's start skew. Targets: csibench /
direct >= 0.9 for bandwidth, p99 within 10% (the pod machinery must cost neither). "Within 10%" is claimed only
when the whole 90% interval lies in [1/1.1, 1.1] (two one-sided tests at 5%); a p99 moves between trials of one
side by more than that on a shared disk, so a point ratio alone would claim nothing either way. The numbers
measure this machine's disk, not a storage product.

With ``--volume-mode Block`` csibench's side runs on raw block volumes (fio on each pod's device, a region per job)
and the direct side runs the same command lines on the very device files of those volumes, as the array keeps them
(each trial pair: csibench's run keeps its volumes, the direct side runs on their ``block.dev`` files, then the run
is deleted): what the pod machinery costs a device, on the same backing files. Since the files exist only once
csibench's run has made them, a trial is csibench, then the direct side twice on its files (C D D C D D ...): every
csibench side runs after a direct one (but the first) and the direct sides run after each kind, so the order
weighs on both, and the bench prints the direct side's medians after csibench and after itself apart, which shows
whether the order moves the figures.

To trace what the pods' side has that the direct side has not (docs/benchmarks.md, "the write p99 traced
further"): ``--direct-sandbox`` runs each direct fio in the simulated kubelet's sandbox, ``--direct-sessions`` in a
session of its own as the kubelet starts containers, ``--direct-noise`` beside a process burning a fraction of a
core, ``--start-delay`` sets the pods' delay after the start barrier's release; and every trial prints the CPU that
every process but fio used in each measured window (``bench/proc_cpu.py``). ``--freeze-cluster`` takes the other
way: it stops the cluster's processes and the operator while fio measures, on both sides (``bench/freeze.py``), so
the two compare the I/O paths alone, without the control plane's own CPU on the same cores.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.freeze import ClusterFreeze
from bench.harness import BENCH_NAMESPACE, bench_cluster, command_line, machine_facts, operator_run
from bench.proc_cpu import CpuSampler, describe
from csibench.api.models import DataPathSpec, default_workloads
from csibench.api.stats import RatioInterval, ratio_interval
from csibench.engine.steps.datapath.fio import (
    DEVICE_PATH,
    MOUNT_PATH,
    build_block_layout_command,
    build_fio_command,
    build_layout_command,
    parse_fio_log,
)
from csibench.engine.steps.datapath.rows import build_row
from localcluster import manifests
from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import ClusterState, LocalCluster, pid_runs
from localcluster.operator_process import OperatorProcess
from localcluster.runs import get_run

WORKLOAD_USER = "65532"


Trial = dict[str, tuple[float, float | None]]  # workload -> (MiB/s read + write, the worse direction's p99 in ms)


def _p99_ms(latency: Any) -> float | None:
    found = [value for value in (latency.get("readP99"), latency.get("writeP99")) if value]
    return max(found) * 1000 if found else None


def direct_trial(data: DataPathSpec, volumes: int, root: Path) -> Trial:
    """Every workload with ``volumes`` fio processes on plain directories, files laid out first, then all started
    at once: MiB/s (read + write) and the merged p99."""
    totals: Trial = {}
    directories = [root / f"direct-{i}" for i in range(volumes)]
    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
        shutil.chown(directory, int(WORKLOAD_USER), int(WORKLOAD_USER))
    try:
        for workload in data.workloads:
            command = [part.replace(f"--directory={MOUNT_PATH}", "--directory={dir}")
                       for part in build_fio_command(data, workload)]

            def one(directory: Path, command: list[str]) -> str:
                argv = ["setpriv", f"--reuid={WORKLOAD_USER}", f"--regid={WORKLOAD_USER}", "--clear-groups",
                        *[part.replace("{dir}", str(directory)) for part in command]]
                return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

            with ThreadPoolExecutor(volumes) as pool:
                list(pool.map(one, directories, [build_layout_command(command)] * volumes))
                started = time.monotonic()
                logs = list(pool.map(one, directories, [command] * volumes))
            row = build_row(data, workload, [parse_fio_log(log) for log in logs], [], time.monotonic() - started)
            totals[workload.name] = ((row.readMiBps or 0.0) + (row.writeMiBps or 0.0),
                                     _p99_ms(row.latency.model_dump() if row.latency else {}))
    finally:
        for directory in directories:
            shutil.rmtree(directory, ignore_errors=True)
    return totals


def device_files(kube: Kube, cluster: LocalCluster, namespace: str) -> list[Path]:
    """The array's device files of the Block claims in ``namespace``, in the claims' order."""
    claims = sorted(kube.core.list_namespaced_persistent_volume_claim(namespace).items,
                    key=lambda claim: str(present(claim.metadata).name))
    handles = [present(present(kube.core.read_persistent_volume(present(present(c.spec).volume_name)).spec).csi)
               .volume_handle for c in claims]
    return [cluster.config.data_dir / "volumes" / handle / "block.dev" for handle in handles]


def sandboxed(command: list[str], device: Path, root: Path) -> list[str]:
    """``command`` run as a pod's container is: the simulated kubelet's sandbox (a private mount namespace, a tmpfs
    root showing the host, ``device`` bound at the pod's device path, chroot, the workload's user)."""
    spec = {"command": command, "uid": int(WORKLOAD_USER), "gid": int(WORKLOAD_USER), "groups": [],
            "root": str(root), "volumes": {}, "devices": {DEVICE_PATH: str(device)}}
    return [sys.executable, "-m", "localcluster.simulator.sandbox", json.dumps(spec)]


def direct_block_trial(data: DataPathSpec, devices: list[Path], gap_seconds: float = 0.0,
                       sandbox_dir: Path | None = None,
                       windows: dict[str, tuple[float, float]] | None = None, sessions: bool = False,
                       freeze: ClusterFreeze | None = None) -> Trial:
    """Every workload with one fio process per device file (csibench's volumes' own), at once; the regions
    written first, as the first workload's layout does in the pods; ``gap_seconds`` idle before each workload
    but the first (csibench's side spends that deleting one row's pods and making the next's). With
    ``sandbox_dir`` each fio runs in the pods' sandbox (roots under it) and writes its output to a file there, as
    a pod's container does to its log; ``windows`` gets each workload's measured window (epoch seconds). With
    ``sessions`` each fio starts a session of its own, as the simulated kubelet starts each container: with the
    kernel's autogroups (``/proc/sys/kernel/sched_autogroup_enabled``) that is a scheduling group of its own, as a
    pod's CPU cgroup is on a real node. With ``freeze`` the cluster is stopped while each workload runs."""
    totals: Trial = {}

    def one(device: Path, command: list[str]) -> str:
        if sandbox_dir is None:
            argv = ["setpriv", f"--reuid={WORKLOAD_USER}", f"--regid={WORKLOAD_USER}", "--clear-groups",
                    *[part.replace(DEVICE_PATH, str(device)) for part in command]]
            return subprocess.run(argv, capture_output=True, text=True, check=True,
                                  start_new_session=sessions).stdout
        container = sandbox_dir / device.parent.name
        (container / "rootfs").mkdir(parents=True, exist_ok=True)
        log = container / "fio.log"
        with log.open("wb") as output:
            subprocess.run(sandboxed(command, device, container / "rootfs"), stdout=output,
                           stderr=subprocess.STDOUT, check=True, env=dict(os.environ), start_new_session=sessions)
        return log.read_text()

    with ThreadPoolExecutor(len(devices)) as pool:
        list(pool.map(one, devices, [build_block_layout_command(data)] * len(devices)))
        for index, workload in enumerate(data.workloads):
            if index:
                time.sleep(gap_seconds)
            command = build_fio_command(data, workload, block=True)
            started, began = time.monotonic(), time.time()
            with freeze.frozen(data.rampSeconds + data.runtimeSeconds) if freeze else contextlib.nullcontext():
                logs = list(pool.map(one, devices, [command] * len(devices)))
            if windows is not None:
                windows[workload.name] = (began + data.rampSeconds, began + data.rampSeconds + data.runtimeSeconds)
            row = build_row(data, workload, [parse_fio_log(log) for log in logs], [], time.monotonic() - started)
            totals[workload.name] = ((row.readMiBps or 0.0) + (row.writeMiBps or 0.0),
                                     _p99_ms(row.latency.model_dump() if row.latency else {}))
    return totals


@contextlib.contextmanager
def cpu_noise(cores: float, burst_ms: float) -> Iterator[None]:
    """One process that burns ``cores`` of a CPU (busy ``burst_ms``, then asleep) while the block is run."""
    if cores <= 0:
        yield
        return
    period = burst_ms / 1000 / cores
    script = (f"import time\nwhile True:\n    end = time.perf_counter() + {burst_ms / 1000}\n"
              f"    while time.perf_counter() < end: pass\n    time.sleep({period - burst_ms / 1000})\n")
    process = subprocess.Popen([sys.executable, "-c", script])
    try:
        yield
    finally:
        process.kill()
        process.wait()


@contextlib.contextmanager
def idle_pods(kube: Kube, count: int) -> Iterator[None]:
    """``count`` pods that only sleep, one per node in turn, Running on the cluster while the block is run: the
    kubelets' and the API server's work for running pods, without their I/O."""
    nodes = sorted(str(present(node.metadata).name) for node in kube.core.list_node().items)
    names = [f"idle-{index}" for index in range(count)]
    for index, name in enumerate(names):
        body = manifests.workload_pod(name, "unused", "exec sleep 3600", user=int(WORKLOAD_USER), grace=0)
        body["spec"].pop("volumes")
        body["spec"]["containers"][0].pop("volumeMounts")
        body["spec"]["nodeName"] = nodes[index % len(nodes)]
        kube.core.create_namespaced_pod(BENCH_NAMESPACE, body)  # type: ignore[arg-type]  # the client validates a dict body
    try:
        wait_until(lambda: all(present(kube.core.read_namespaced_pod(name, BENCH_NAMESPACE).status).phase
                               == "Running" for name in names), 120, "idle pods Running")
        yield
    finally:
        for name in names:
            kube.core.delete_namespaced_pod(name, BENCH_NAMESPACE, grace_period_seconds=0)
        wait_until(lambda: not [pod for pod in kube.core.list_namespaced_pod(BENCH_NAMESPACE).items
                                if str(present(pod.metadata).name).startswith("idle-")], 120, "idle pods gone")


def cluster_pids(cluster: LocalCluster, operator: OperatorProcess) -> list[int]:
    """Every process of the cluster that still runs what the launcher started (supervisors, and the binaries they
    run as ``process_pids`` finds them by their command line), and the operator's: read afresh, so a restarted
    sidecar is found under its new pid, and a recycled pid is never signalled."""
    state = ClusterState.load(cluster.config.state_dir)
    records = state.processes if state else []
    pids = {record.pid for record in records if pid_runs(record)}
    recorded = {record.pid for record in records}
    pids |= {pid for pid in cluster.process_pids().values() if pid not in recorded}  # supervised binaries
    if operator.process is not None and operator.process.poll() is None:
        pids.add(operator.process.pid)
    pids.discard(os.getpid())
    return sorted(pids)


def delete_run(kube: Kube, name: str) -> None:
    """Delete a run and wait until it is gone (its cleanup removed its volumes)."""
    kube.custom.delete_namespaced_custom_object("csibench.io", "v1alpha1", BENCH_NAMESPACE, "benchmarkruns", name)
    wait_until(lambda: get_run(kube, BENCH_NAMESPACE, name) is None, 300, f"run {name} deleted")


def _median(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def _interval_cell(a: list[float | None], b: list[float | None], margin: float | None = None) -> str:
    """'0.98 [0.93, 1.04] within 10%': the ratio of geometric means, its 90% interval, and the equivalence verdict
    when a margin is asked for; '-' when a side has fewer than 2 values."""
    found_a, found_b = [v for v in a if v], [v for v in b if v]
    if len(found_a) < 2 or len(found_b) < 2:
        return "-"
    interval: RatioInterval = ratio_interval(found_a, found_b)
    cell = f"{interval.ratio:.2f} [{interval.low:.2f}, {interval.high:.2f}]"
    if margin is not None:
        cell += f" {'within' if interval.within(margin) else 'not shown within'} {margin:.0%}"
    return cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=6, help="volumes (the local cluster has 3 nodes)")
    parser.add_argument("--jobs", type=int, default=2, help="fio jobs per volume")
    parser.add_argument("--file-size", default="64Mi")
    parser.add_argument("--runtime", type=int, default=5)
    parser.add_argument("--ramp", type=int, default=1)
    parser.add_argument("--start-delay", type=int, default=1,
                        help="csibench's side: dataPath.startDelaySeconds, from the start barrier's release to fio's "
                             "start (the step's default is 5)")
    parser.add_argument("--trials", type=int, default=2, help="trials of each side (ABBA order)")
    parser.add_argument("--api-port", type=int, default=19743)
    parser.add_argument("--storage-class", default="csibench-sim",
                        help="csibench's side: csibench-sim (directories, as the direct side) or csibench-sim-ext4 "
                             "(each volume an ext4 image, loop-mounted: the ratio is then what that filesystem costs)")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="the bench cluster's state (and so the simulated array's volumes, and the direct side's "
                             "directories); e.g. /dev/shm/csibench-bench: both sides on tmpfs (O_DIRECT works there "
                             "on Linux 6.6+), which takes the shared disk's swings out and leaves what the pod "
                             "machinery costs")
    parser.add_argument("--volume-mode", choices=["Filesystem", "Block"], default="Filesystem",
                        help="Block: csibench's side on raw block volumes, the direct side on their device files")
    parser.add_argument("--direct-gap", type=float, default=0.0,
                        help="Block: seconds the direct side idles between workloads, as csibench's side does "
                             "between rows (it prints its own gaps)")
    switches = {  # Block: what the direct side may be given of the pods' side, one at a time
        "--match-gap": "Block: the direct side idles between workloads as long as the csibench run before it "
            "did between rows (by the rows' start times, whole seconds)",
        "--direct-sandbox": "Block: the direct side runs each fio in the simulated kubelet's sandbox, as a pod's "
            "container (its device bound at the pod's device path, output to a file), without the "
            "cluster's work around it",
        "--direct-sessions": "Block: each direct fio in a session of its own, as the simulated kubelet starts each "
            "container (with the kernel's autogroups, a scheduling group of its own)",
        "--freeze-cluster": "Block: stop the cluster's processes and the operator (SIGSTOP) while fio measures, "
            "on both sides (csibench's from half a ramp after each row's start time to the end of its ramp and "
            "runtime): the "
            "comparison without the control plane's own CPU beside fio",
        "--direct-beside-pods": "Block: as many pods as volumes, sleeping, Running on the cluster's nodes while the "
            "direct side runs (the cluster's work for running pods, without their I/O)",
    }
    for flag, text in switches.items():
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument("--direct-noise", type=float, default=0.0,
                        help="Block: cores of other work beside the direct side (one process busy for --noise-burst "
                             "ms, then asleep, at that duty cycle), to see what a little CPU of others does to its "
                             "p99; the cluster's own work during csibench's rows is printed per window")
    parser.add_argument("--noise-burst", type=float, default=2.0, help="milliseconds of each --direct-noise burst")
    parser.add_argument("--workloads", default="",
                        help="comma list of the default workloads to run, in their order (default: all five)")
    args = parser.parse_args()
    wanted = [name for name in args.workloads.split(",") if name]
    workloads = [w for w in default_workloads() if not wanted or w.name in wanted]
    data = DataPathSpec(jobsPerVolume=args.jobs, fileSize=args.file_size, runtimeSeconds=args.runtime,
                        rampSeconds=args.ramp, startDelaySeconds=args.start_delay, workloads=workloads)
    size = f"{4 * args.jobs * int(args.file_size.removesuffix('Mi'))}Mi"
    results: dict[str, dict[str, list[tuple[float, float | None]]]] = {"csibench": {}, "direct": {}}
    skews: dict[str, list[float]] = {}
    others: dict[str, dict[str, list[float]]] = {"csibench": {}, "direct": {}}  # cores used by all but fio
    sampler = CpuSampler().start()

    def other_cpu(side: str, windows: dict[str, tuple[float, float]]) -> None:
        time.sleep(2 * sampler.interval)  # a sample after the last window's end
        for name, (start, end) in windows.items():
            used = sampler.others(start, end)
            others[side].setdefault(name, []).append(sum(used.values()) / (end - start))
            print(f"  {side} {name}: besides fio {describe(used, end - start)}", flush=True)
        sampler.forget_before(max((end for _, end in windows.values()), default=time.time()))

    with bench_cluster(api_port=args.api_port, state_dir=args.state_dir) as (cluster, operator, kube):
        freeze = ClusterFreeze(lambda: cluster_pids(cluster, operator)) if args.freeze_cluster else None
        order = ["direct", "csibench", "csibench", "direct"] * ((args.trials + 1) // 2)
        if args.volume_mode == "Block":
            order = ["csibench", "direct", "direct"] * args.trials
        made, gap = "", args.direct_gap
        for trial, side in enumerate(order[: len(order) if args.volume_mode == "Block" else 2 * args.trials]):
            if side == "direct" and args.volume_mode == "Block":
                windows: dict[str, tuple[float, float]] = {}
                beside = idle_pods(kube, args.volumes) if args.direct_beside_pods else contextlib.nullcontext()
                with cpu_noise(args.direct_noise, args.noise_burst), beside:
                    sandbox_dir = cluster.config.state_dir / "direct-sandbox" if args.direct_sandbox else None
                    totals = direct_block_trial(data, device_files(kube, cluster, BENCH_NAMESPACE), gap,
                                                sandbox_dir=sandbox_dir, windows=windows,
                                                sessions=args.direct_sessions, freeze=freeze)
                other_cpu("direct", windows)
                after = order[trial - 1]
                for name, value in totals.items():
                    results.setdefault(f"direct after {after}", {}).setdefault(name, []).append(value)
                if after == "direct":  # the second on these files: the run's volumes go
                    delete_run(kube, made)
            elif side == "direct":
                totals = direct_trial(data, args.volumes, cluster.config.data_dir / "volumes")
            else:  # on Block the volumes stay for the direct side, which deletes the run after it
                shape = ({"volumeMode": "Block", "cleanup": "Never", "targetNamespace": BENCH_NAMESPACE,
                          "steps": ["createVolume", "dataPath"]} if args.volume_mode == "Block"
                         else {"steps": ["createVolume", "dataPath", "deleteVolume"]})
                made = f"dp-{trial}"
                measured = data.rampSeconds + data.runtimeSeconds
                frozen = (freeze.at_start_times(kube, BENCH_NAMESPACE, data.rampSeconds, data.runtimeSeconds)
                          if freeze else contextlib.nullcontext())
                with frozen:
                    run = operator_run(kube, made, 900, storageClassName=args.storage_class, size=size,
                                       volumes=args.volumes,
                                       dataPath=data.model_dump(mode="json", exclude_none=True), **shape)
                if freeze:
                    print("frozen windows (s after each row's start time): " + "; ".join(
                        f"{stopped - int(row['startAt']):+.2f} to {resumed - int(row['startAt']):+.2f}"
                        for row in run["status"]["dataPath"] if row.get("startAt")
                        for stopped, resumed in freeze.windows
                        if int(row["startAt"]) - 5 < stopped < int(row["startAt"]) + measured), flush=True)
                totals = {row["name"]: (float(row.get("readMiBps") or 0.0) + float(row.get("writeMiBps") or 0.0),
                                        _p99_ms(row.get("latency") or {}))
                          for row in run["status"]["dataPath"]}
                for row in run["status"]["dataPath"]:
                    skews.setdefault(row["name"], []).append(float(row.get("startSkewSeconds") or 0.0))
                other_cpu("csibench", {row["name"]: (int(row["startAt"]) + data.rampSeconds,
                                                     int(row["startAt"]) + data.rampSeconds + data.runtimeSeconds)
                                       for row in run["status"]["dataPath"] if row.get("startAt")})
                starts = [int(row["startAt"]) for row in run["status"]["dataPath"] if row.get("startAt")]
                idle = [later - earlier - data.rampSeconds - data.runtimeSeconds
                        for earlier, later in itertools.pairwise(starts)]
                print(f"csibench's idle between rows, s: {idle}", flush=True)
                if args.match_gap and idle:  # the direct side pauses as long between its rows
                    gap = float(statistics.median(idle))
            for name, value in totals.items():
                results[side].setdefault(name, []).append(value)
            print(f"trial {trial} {side}: " + ", ".join(f"{n} {v:.0f} MiB/s p99 {p or 0:.2f} ms"
                                                       for n, (v, p) in totals.items()), flush=True)
    sampler.stop()
    print(f"\n### Data path: csibench vs direct fio ({machine_facts()})\n")
    where = f"on {args.state_dir}" if args.state_dir else "on the repository's disk"
    if args.volume_mode == "Block":
        where += ", raw block (csibench: each pod's device; direct: the same volumes' device files" + (
            ", each fio in the pods' sandbox)" if args.direct_sandbox else ")")
    print(f"`{command_line('bench.datapath')}`: class {args.storage_class}, volumes {where}, {args.volumes} volumes "
          "over the local "
          f"cluster's nodes x {args.jobs} jobs, {args.file_size} files, "
          f"{args.runtime} s (+{args.ramp} s ramp), direct I/O, libaio, iodepth {data.iodepth}; "
          f"{args.trials} trials a side, ABBA; MiB/s read + write summed over volumes and p99 (the worse "
          "direction, every process's histogram merged): medians, and csibench / direct as the ratio of geometric "
          "means [90% interval]\n")
    if args.volume_mode == "Block":
        def direct_after(before: str, name: str) -> str:
            return f"{_median([v for v, _ in results[f'direct after {before}'][name]]) or 0:,.0f}"

        print("Direct side by what ran just before it (medians, MiB/s): " + "; ".join(
            f"{w.name} after csibench {direct_after('csibench', w.name)}, after direct {direct_after('direct', w.name)}"
            for w in workloads) + "\n")
    print("CPU used by every process but fio in the measured windows (medians, cores): " + "; ".join(
        f"{w.name} csibench {_median(list(others['csibench'].get(w.name, []))) or 0:.2f}, "
        f"direct {_median(list(others['direct'].get(w.name, []))) or 0:.2f}" for w in workloads) + "\n")
    print("| workload | direct MiB/s | csibench MiB/s | ratio [90%] | direct p99 ms | csibench p99 ms | "
          "p99 ratio [90%] | csibench start skew s |\n|---|---|---|---|---|---|---|---|")
    for workload in workloads:
        direct = statistics.median(v for v, _ in results["direct"][workload.name])
        through = statistics.median(v for v, _ in results["csibench"][workload.name])
        direct_p99 = _median([p for _, p in results["direct"][workload.name]])
        through_p99 = _median([p for _, p in results["csibench"][workload.name]])
        bandwidth_cell = _interval_cell([v for v, _ in results["direct"][workload.name]],
                                        [v for v, _ in results["csibench"][workload.name]])
        p99_cell = _interval_cell([p for _, p in results["direct"][workload.name]],
                                  [p for _, p in results["csibench"][workload.name]], margin=0.1)
        print(f"| {workload.name} | {direct:,.0f} | {through:,.0f} | {bandwidth_cell} | "
              f"{direct_p99 or 0:.2f} | {through_p99 or 0:.2f} | {p99_cell} | "
              f"{max(skews.get(workload.name) or [0.0]):.3f} |")


if __name__ == "__main__":
    main()

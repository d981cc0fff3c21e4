"""Scale: N=10,000 volumes, createVolume and deleteVolume, on the local cluster.

Samples the operator's resident memory (VmRSS, and VmHWM at the end), the BenchmarkRun object's size, and the
run's API request rate (status.client.requests, read every 5 s) against the configured QPS.
Targets: completes; peak RSS <= 300 MB up to 10,000 volumes (<= 500 MB beyond: issue 46's goal at 100,000);
object <= 32 KB; request rate within the configured QPS. At the end it reads the stored report the way a user does
(`csibench report -o json`, timed) and sums its ConfigMaps, since the per-object data lives there, not in status.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.harness import BENCH_NAMESPACE, bench_cluster, command_line, kubectl, machine_facts, storage_class
from bench.profile import sampled, summary
from csibench.kube.ownership import REPORT_OF_LABEL
from localcluster.launcher import LocalCluster
from localcluster.runs import TERMINAL, benchmark_run, create_run, get_run

# The bench reads the request count from the run's status, not from the operator's /metrics: a scrape costs the
# operator about 4 ms of CPU, and one every 2 s was 11% of its CPU here (a Prometheus scrapes every 15-60 s).
STATUS_SECONDS = 5.0


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    return sum(cpu_times(pid))


def stored_report(cluster: LocalCluster) -> tuple[int, int, float, int]:
    """(compressed bytes, ConfigMaps, seconds for `csibench report -o json`, its output's bytes) of the run's report."""
    listing = json.loads(kubectl(cluster, "get", "configmaps", "-n", BENCH_NAMESPACE, "-l",
                                 f"{REPORT_OF_LABEL}=scale", "-o", "json"))["items"]
    stored = sum(len(base64.b64decode(data)) for item in listing for data in (item.get("binaryData") or {}).values())
    started = time.monotonic()
    output = subprocess.run([sys.executable, "-m", "csibench", "report", "scale", "-n", BENCH_NAMESPACE,
                             "--kubeconfig", str(cluster.config.kubeconfig), "-o", "json"],
                            check=True, capture_output=True).stdout
    return stored, len(listing), time.monotonic() - started, len(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=10_000)
    parser.add_argument("--qps", type=float, default=200)
    parser.add_argument("--burst", type=int, default=400)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--timeout", type=int, default=3600, help="each step's timeout, seconds (raise it at 100,000)")
    parser.add_argument("--profile", type=Path, help="record the operator's stacks with py-spy into this file "
                        "(collapsed stacks) and print where its CPU went")
    args = parser.parse_args()
    samples: list[float] = []  # rss MB, every second
    requests: list[tuple[float, int]] = []  # (t, status.client.requests)
    sizes: list[int] = []
    with bench_cluster() as (cluster, operator, kube):
        assert operator.process is not None
        pid = operator.process.pid
        fast = storage_class(kube)
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                samples.append(rss_mb(pid))
                stop.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        user_before, system_before = cpu_times(pid)
        with sampled(pid, args.profile) if args.profile else contextlib.nullcontext():
            create_run(kube, BENCH_NAMESPACE, benchmark_run(
                "scale", storageClassName=fast, volumes=args.volumes, steps=["createVolume", "deleteVolume"],
                client={"qps": args.qps, "burst": args.burst, "maxInFlight": args.threads},
                timeouts={"default": args.timeout}))
            while True:
                sizes.append(len(kubectl(cluster, "get", "br", "scale", "-n", BENCH_NAMESPACE, "-o", "json")))
                run = get_run(kube, BENCH_NAMESPACE, "scale") or {}
                status = run.get("status") or {}
                requests.append((time.monotonic(), int((status.get("client") or {}).get("requests", 0))))
                if status.get("phase") in TERMINAL:
                    break
                time.sleep(STATUS_SECONDS)
        stop.set()
        sampler.join()
        peak = rss_mb(pid, "VmHWM")
        cpu = cpu_seconds(pid)
        user_after, system_after = cpu_times(pid)
        elapsed = time.monotonic() - started
        status = run["status"]
        try:
            stored: tuple[int, int, float, int] | str = stored_report(cluster)
        except (subprocess.CalledProcessError, json.JSONDecodeError, RuntimeError) as error:
            stored = f"not read: {error}"  # the run's figures are printed all the same
    # Samples 30 s apart: the count is as of the run's last status write (every 2 s), so a narrow window would
    # swing by that much either way.
    apart = round(30 / STATUS_SECONDS)
    rates = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(requests, requests[apart:], strict=False)]
    steps = {s["name"]: s for s in status["steps"]}
    print(f"\n### Scale (N={args.volumes}, qps {args.qps:g}, burst {args.burst}, {args.threads} threads)\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.scale')}`\n")
    print("| figure | value | target |")
    print("|---|---|---|")
    print(f"| outcome | {status['phase']} in {elapsed:.0f} s wall | completes |")
    for name in ("createVolume", "deleteVolume"):
        step = steps[name]
        print(f"| {name} | {step['succeeded']}/{step['objects']} in {step['durationSeconds']:.1f} s, "
              f"{step['throughput']:.1f}/s, p50 {step['latency']['p50']:.2f} s, p99 {step['latency']['p99']:.2f} s | |")
    print(f"| operator peak RSS (VmHWM) | {peak:.0f} MB | <= {300 if args.volumes <= 10_000 else 500} MB |")
    print(f"| BenchmarkRun object size (max seen) | {max(sizes) / 1024:.1f} KB | <= 32 KB |")
    bound = args.qps + args.burst / 30
    print(f"| API requests, max 30 s average rate | {max(rates) if rates else 0:.0f}/s | <= qps + burst/30 s = "
          f"{bound:.0f}/s (token bucket) |")
    print(f"| operator CPU time (user + system), process lifetime | {cpu:.1f} s | |")
    user, system = user_after - user_before, system_after - system_before
    object_steps = 2 * args.volumes
    print(f"| operator CPU during the run (creation to end, cleanup included) | {user + system:.1f} s "
          f"(user {user:.1f}, system {system:.1f}) | |")
    per_step_ms = (user + system) / object_steps * 1000
    print(f"| operator CPU per object-step ({object_steps} object-steps) | {per_step_ms:.2f} ms | <= 0.7 ms |")
    print(f"| client-side throttled time, summed over requests | {status['client']['throttledSeconds']:.1f} s over "
          f"{status['client']['requests']} requests | |")
    if isinstance(stored, str):
        print(f"| stored report | {stored} | |")
    else:
        stored_bytes, chunks, read_seconds, read_bytes = stored
        print(f"| stored report | {stored_bytes / 1024:.0f} KiB compressed in {chunks} ConfigMap(s); `csibench "
              f"report -o json` read it in {read_seconds:.1f} s, a fresh process ({read_bytes / 1024:.0f} KiB of "
              "JSON) | |")
    print(f"\nFull status: {json.dumps({k: status[k] for k in ('phase', 'totalStepSeconds', 'cleanup')})}")
    if args.profile:
        print("\n" + summary(args.profile, f"Operator CPU by py-spy, {args.volumes} volumes"))


if __name__ == "__main__":
    main()

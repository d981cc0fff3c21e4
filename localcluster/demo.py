"""The README's demo: a local cluster, the operator, examples/quickstart.yaml, live progress, the report, teardown.

Runs on its own ports and state directory (``.localcluster/demo``), so it never disturbs a cluster a developer
left running, and it tears down everything it started even when interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from localcluster.launcher import REPO_ROOT, ClusterConfig, ClusterError, LocalCluster, log_tail

DEMO_DIR = REPO_ROOT / ".localcluster" / "demo"
DEMO_API_PORT = 19443
TERMINAL = {"Succeeded", "Failed"}


def _say(message: str) -> None:
    print(f"==> {message}", flush=True)


def _start_operator(cluster: LocalCluster, log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KUBECONFIG": str(cluster.config.kubeconfig), "PYTHONUNBUFFERED": "1"}
    with log_path.open("ab") as log:
        return subprocess.Popen([sys.executable, "-m", "csibench", "operator", "--health-port=19081"],
                                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)


def _watch_run(cluster: LocalCluster, name: str, timeout: float) -> dict[str, object]:
    """Print a line whenever the run's phase, step or progress changes (what `kubectl get br -w` shows)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        raw = cluster.kubectl("get", "benchmarkrun", name, "-n", "default", "-o", "json", check=False)
        run = json.loads(raw) if raw.strip() else {}
        status = run.get("status") or {}
        line = f"phase={status.get('phase', 'Pending'):<10} step={status.get('currentStep') or '-':<18} " \
               f"progress={status.get('progress') or '-'}"
        if line != last:
            print(f"    {time.strftime('%H:%M:%S')} {line}", flush=True)
            last = line
        if status.get("phase") in TERMINAL:
            return dict(run)
        time.sleep(0.5)
    raise TimeoutError(f"the run did not finish within {timeout:.0f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__)
    parser.add_argument("--example", default=str(REPO_ROOT / "examples" / "quickstart.yaml"))
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    parser.add_argument("--api-port", type=int, default=DEMO_API_PORT,
                        help="the cluster's API server port (it uses the next twelve too)")
    args = parser.parse_args(argv)
    cluster = LocalCluster(ClusterConfig(state_dir=DEMO_DIR, api_port=args.api_port))
    operator: subprocess.Popen[bytes] | None = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        _say("starting the local cluster (etcd, kube-apiserver, controller-manager, scheduler, CSI sidecars, "
             "simulated driver and nodes)")
        started = time.monotonic()
        cluster.up()
        _say(f"cluster ready in {time.monotonic() - started:.1f}s at {cluster.config.server}")
        cluster.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds" / "benchmarkrun.yaml"))
        cluster.wait_established("benchmarkruns.csibench.io")
        operator_log = cluster.config.log_dir / "operator.log"
        operator = _start_operator(cluster, operator_log)
        _say(f"operator started (log: {operator_log})")
        example = Path(args.example)
        name = cluster.kubectl("apply", "-n", "default", "-f", str(example), "-o", "name").strip().split("/")[-1]
        _say(f"applied {example.name}: BenchmarkRun {name}; progress:")
        run = _watch_run(cluster, name, timeout=900)
        _say("report")
        env = {**os.environ, "KUBECONFIG": str(cluster.config.kubeconfig)}
        subprocess.run([sys.executable, "-m", "csibench", "report", name, "-n", "default"], env=env, check=True,
                       cwd=REPO_ROOT)
        status = run.get("status")
        return 0 if isinstance(status, dict) and status.get("phase") == "Succeeded" else 1
    except (ClusterError, TimeoutError, subprocess.CalledProcessError) as error:
        print(f"demo failed: {error}", file=sys.stderr)
        if operator is not None:
            print(log_tail(cluster.config.log_dir / "operator.log", 30), file=sys.stderr)
        return 1
    finally:
        if operator is not None:
            operator.terminate()
            try:
                operator.wait(10)
            except subprocess.TimeoutExpired:
                operator.kill()
        if args.keep:
            _say(f"cluster left running: {cluster.env()}")
        else:
            _say("tearing down")
            cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())

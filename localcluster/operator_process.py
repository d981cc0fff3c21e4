"""The operator as a real process (``csibench operator``), for integration tests and benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import ClassVar

from localcluster.launcher import REPO_ROOT, LocalCluster, log_tail

# The identity deploy/ gives the operator (its ServiceAccount), for requests made "as the operator".
OPERATOR_SA = "system:serviceaccount:csibench-system:csibench-operator"


class OperatorStartError(RuntimeError):
    """The operator exited or never became healthy; the message carries its log tail."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class OperatorProcess:
    # every operator started in this process, by log: a failed test's report shows what each wrote last
    started: ClassVar[dict[Path, OperatorProcess]] = {}

    def __init__(self, cluster: LocalCluster, log_path: Path, kubeconfig: Path | None = None,
                 command: list[str] | None = None, extra_args: list[str] | None = None) -> None:
        self.cluster = cluster
        self.log_path = log_path
        self.kubeconfig = kubeconfig or cluster.config.kubeconfig
        self.command = command or [sys.executable, "-m", "csibench"]
        self.extra_args = extra_args or []
        self.health_port = _free_port()
        self.metrics_port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        OperatorProcess.started[self.log_path] = self
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [*self.command, "operator", f"--health-port={self.health_port}",
                 f"--metrics-port={self.metrics_port}", *self.extra_args],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise OperatorStartError(f"operator exited at start-up:\n{log_tail(self.log_path, 40)}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise OperatorStartError(f"operator not healthy within 60 s:\n{log_tail(self.log_path, 40)}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
            text: str = response.read().decode()
            return text

    def log(self, lines: int = 60) -> str:
        return log_tail(self.log_path, lines)

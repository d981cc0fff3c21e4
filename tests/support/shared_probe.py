"""The shared step's probe pods in the in-memory API server: each pod's log as the real probe printed it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.fake_kube import fake_fio


def probe_workload(reader_logs: list[str], filler_log: str = "") -> Callable[[dict[str, Any]], tuple[int, str]]:
    """A fake workload: a probe pod ends with the log of its index (``--pod=``), the filling pod of a ReadOnlyMany
    volume (``--mode=populate``) with ``filler_log``; any other pod as fio."""
    def workload(pod: dict[str, Any]) -> tuple[int, str]:
        command = pod["spec"]["containers"][0]["command"]
        if command[:2] != ["python3", "-c"]:
            return fake_fio(pod)
        if "--mode=populate" in command:
            return 0, filler_log
        index = int(next(arg for arg in command if arg.startswith("--pod=")).split("=")[1])
        return 0, reader_logs[index]
    return workload

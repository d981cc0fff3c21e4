"""Freeze the local cluster while a data-path bench measures: what the control plane's own CPU costs fio's tail.

On the local cluster the control plane (etcd, the API server, the controller-manager, the scheduler, the sidecars,
the simulated driver and kubelets) and the operator share the machine's two cores with the fio processes they
measure. A sub-millisecond p99 moves when anything preempts fio's completions (docs/benchmarks.md, "the write p99
traced further": 0.05 of a core of bursts doubled it), and the cluster does a little more while a run measures
than while fio runs directly beside it idle. No run can take that work away (the pods need the run), but every
one of those processes can be stopped for the few seconds fio measures: the pods' fio processes are the kubelets'
children in sessions of their own, and a stopped parent does not stop them; their output goes to files, never to a
pipe a stopped process would have to drain.

``ClusterFreeze`` stops the cluster's processes (SIGSTOP) and resumes them (SIGCONT) around a window: the direct
side around each workload it runs; csibench's side from the start time the operator gave the pods (the barrier's
annotation, which a thread here reads before it comes) to the end of fio's ramp and runtime and a margin, for each
row. It always resumes: on leaving its context, and before each freeze ends however the bench ends (a stopped
cluster would hold the machine's ports and memory). Bench only: nothing here is part of a run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

from csibench.engine.barrier import START_ANNOTATION
from localcluster.kube import Kube, present

POLL_SECONDS = 0.2  # how often the thread looks for a new start time (outside the frozen windows only)
END_MARGIN_SECONDS = 0.5  # past the ramp and runtime: fio's last completions and its report


class ClusterFreeze:
    """Stops and resumes ``pids`` (the cluster's processes and the operator's) around measured windows."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = sorted(set(pids))
        self.windows: list[tuple[float, float]] = []  # (stopped, resumed), epoch seconds
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        with self._lock:
            stopped = time.time()
            for pid in self.pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            try:
                yield
            finally:
                for pid in self.pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
                self.windows.append((stopped, time.time()))

    @contextlib.contextmanager
    def at_start_times(self, kube: Kube, namespace: str, measured_seconds: float) -> Iterator[None]:
        """While the context lasts, freeze the cluster at each new start time the operator gives the pods of
        ``namespace`` until ``measured_seconds`` (ramp and runtime) and the margin later."""
        done = threading.Event()

        def follow() -> None:
            seen: set[int] = set()
            while not done.is_set():
                with contextlib.suppress(Exception):  # the API server may be between restarts: look again
                    for start in sorted(_start_times(kube, namespace) - seen):
                        seen.add(start)
                        end = start + measured_seconds + END_MARGIN_SECONDS
                        if time.time() >= end - measured_seconds / 2:
                            continue  # seen too late to cover most of the window
                        _sleep_until(start, done)
                        with self.frozen():
                            _sleep_until(end, done)
                done.wait(POLL_SECONDS)

        thread = threading.Thread(target=follow, name="cluster-freeze", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()


def _start_times(kube: Kube, namespace: str) -> set[int]:
    found = set()
    for pod in kube.core.list_namespaced_pod(namespace).items:
        value = (present(pod.metadata).annotations or {}).get(START_ANNOTATION)
        if value and value.isdigit():
            found.add(int(value))
    return found


def _sleep_until(moment: float, done: threading.Event) -> None:
    done.wait(max(0.0, moment - time.time()))

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
side around each workload it runs; csibench's side from half the ramp after the start time the operator gave the
pods (the barrier's annotation, which a thread here reads before it comes: by then every fio has started, and the
measured window begins only after the ramp) to the end of fio's ramp and runtime and a margin, for each row. The
processes are found afresh at each freeze (a sidecar restarted in between runs under a new pid), each checked to
still run what the launcher started. It resumes them on leaving the window however the bench leaves it (an
exception, Ctrl-C); and each freeze starts a detached ``sleep; kill -CONT`` that resumes them a little after the
window should have ended even if the bench was killed outright, as the local cluster's pauser does. Bench only:
nothing here is part of a run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

from csibench.engine.barrier import START_ANNOTATION
from localcluster.kube import Kube, present

POLL_SECONDS = 0.2  # how often the thread looks for a new start time (outside the frozen windows only)
END_MARGIN_SECONDS = 0.5  # past the ramp and runtime: fio's last completions and its report
SAFETY_MARGIN_SECONDS = 30.0  # the detached resume's delay past the window's expected end


class ClusterFreeze:
    """Stops and resumes the processes ``pids`` names (the cluster's and the operator's) around measured windows."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids = pids
        self.windows: list[tuple[float, float]] = []  # (stopped, resumed), epoch seconds
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def frozen(self, expected_seconds: float) -> Iterator[None]:
        """The cluster stopped while the context lasts (expected to last ``expected_seconds``)."""
        with self._lock:
            pids = sorted(set(self.pids()))
            listed = " ".join(str(pid) for pid in pids)
            safety = subprocess.Popen(  # resumes them even if this process dies inside the window
                ["sh", "-c", f"sleep {expected_seconds + SAFETY_MARGIN_SECONDS:.0f}; kill -CONT {listed} 2>/dev/null"],
                start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            stopped = time.time()
            try:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGSTOP)
                yield
            finally:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
                self.windows.append((stopped, time.time()))
                safety.kill()
                safety.wait()

    @contextlib.contextmanager
    def at_start_times(self, kube: Kube, namespace: str, ramp_seconds: float, runtime_seconds: float
                       ) -> Iterator[None]:
        """While the context lasts, freeze the cluster half the ramp after each new start time the operator gives
        the pods of ``namespace``, until the ramp, the runtime and the margin have passed."""
        done = threading.Event()

        def follow() -> None:
            seen: set[int] = set()
            while not done.is_set():
                with contextlib.suppress(Exception):  # the API server may be between restarts: look again
                    for start in sorted(_start_times(kube, namespace) - seen):
                        seen.add(start)
                        begin = start + ramp_seconds / 2
                        end = start + ramp_seconds + runtime_seconds + END_MARGIN_SECONDS
                        if time.time() > begin + 0.1:
                            continue  # seen too late to cover the window whole
                        _sleep_until(begin, done)
                        if done.is_set():
                            return
                        with self.frozen(end - begin):
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

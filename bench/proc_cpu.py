"""What else ran on the machine while a bench measured: the CPU every process but the measured ones used in a window.

A tail latency (a p99 of well under a millisecond) moves when anything preempts the measured processes' completions.
csibench's side of a data-path bench runs with the local cluster busy beside it (kubelets starting and watching
pods, the API server and etcd writing their status, the operator's watches), the direct side with it idle; this
sampler says how much CPU that was, per process name, in the very windows both sides measured. It reads
``/proc/<pid>/stat`` (utime + stime, in clock ticks) of every process every ``interval`` seconds in a thread; a
window's figure is the ticks gained between the samples nearest its ends, by processes present at both.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")

Sample = tuple[float, dict[int, tuple[str, int]]]  # (epoch seconds, pid -> (comm, utime + stime ticks))


def read_processes() -> dict[int, tuple[str, int]]:
    """pid -> (comm, CPU ticks so far) of every process readable now (one that exits meanwhile is left out)."""
    found: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        found[int(entry)] = (comm, int(fields[11]) + int(fields[12]))  # utime, stime: fields 14 and 15 of stat
    return found


def cpu_between(earlier: Sample, later: Sample, excluded: frozenset[str]) -> dict[str, float]:
    """CPU seconds per process name between two samples, for processes in both whose name is not ``excluded``
    (pure)."""
    used: dict[str, float] = {}
    for pid, (comm, ticks) in later[1].items():
        before = earlier[1].get(pid)
        if before is not None and before[0] == comm and comm not in excluded:
            used[comm] = used.get(comm, 0.0) + (ticks - before[1]) / TICKS_PER_SECOND
    return used


@dataclass
class CpuSampler:
    """Samples every process's CPU in a thread until stopped; ``others`` answers for a window afterwards."""

    interval: float = 0.25
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> CpuSampler:
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), read_processes()))
            self._stop.wait(self.interval)

    def forget_before(self, moment: float) -> None:
        """Drop the samples older than ``moment`` (epoch seconds) but the last of them: a sample holds every
        process, and a bench runs for many minutes."""
        older = [sample for sample in self.samples if sample[0] < moment]
        if len(older) > 1:
            del self.samples[:len(older) - 1]

    def others(self, start: float, end: float, excluded: frozenset[str] = frozenset({"fio"})) -> dict[str, float]:
        """CPU seconds per process name between the samples nearest ``start`` and ``end`` (epoch seconds)."""
        samples = list(self.samples)
        if len(samples) < 2:
            return {}
        first = min(samples, key=lambda sample: abs(sample[0] - start))
        last = min(samples, key=lambda sample: abs(sample[0] - end))
        return cpu_between(first, last, excluded)


def describe(used: dict[str, float], seconds: float, top: int = 4) -> str:
    """"0.31 cores (kube-apiserver 0.12, python3 0.08, ...)" (pure)."""
    if seconds <= 0:
        return "no window"
    busiest = sorted(used.items(), key=lambda item: -item[1])[:top]
    named = ", ".join(f"{name} {value / seconds:.2f}" for name, value in busiest if value > 0)
    return f"{sum(used.values()) / seconds:.2f} cores ({named})"

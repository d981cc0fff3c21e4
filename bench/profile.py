"""Where the operator's CPU goes during a benchmark: py-spy samples of the operator process, summarized.

A benchmark wraps its measured part in ``sampled(pid, path)``; py-spy (a dev dependency) records the
operator's stacks without pausing it (``--nonblocking``), only from the thread holding the GIL (``--gil``: a
thread blocked in a TLS read is otherwise sampled as busy), so a function's share of the samples is its share
of the operator's Python CPU; C work done without the GIL (TLS decryption) is not in it. ``summary`` turns
the raw stacks into the tables recorded in docs/benchmarks.md: by thread role, by stage of the per-object
work, and the hottest functions by their own time.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Which thread a sample came from, by a frame only that thread has (first match from the stack's root).
ROLES = [
    ("watch threads (read, de-chunk, decode, hand-off)", "kube/watch.py"),
    ("API worker threads (sync client)", "concurrent/futures/thread.py"),
    ("event loop", "asyncio/base_events.py"),
]
# Stages of the per-object work, by a function on the stack (a sample counts for every stage it is in).
STAGES = [
    ("watch: socket read (TLS)", "recv_into (ssl.py"),
    ("watch: de-chunking", "feed (csibench/kube/watch.py"),
    ("watch: hand-off to the loop", "_emit (csibench/kube/watch.py"),
    ("loop: watch batches (Observed.apply + judges + trackers)", "_sink (csibench/engine/watching.py"),
    ("loop: Observed.apply", "apply (csibench/engine/observed.py"),
    ("loop: judges and trackers (on_change)", "on_change (csibench/engine/execution.py"),
    ("loop: engine requests (kube/http.py)", "request (csibench/kube/client.py"),
    ("loop: status writes", "write (csibench/engine/status.py"),
    ("loop: status building (publish)", "publish (csibench/engine/execution.py"),
    ("loop: kopf's own handling (no csibench frame)", "kopf/"),
    ("metrics scrapes (prometheus-client)", "prometheus_client/"),
    ("loop: report building", "csibench/engine/report_"),
]


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install -e '.[dev]'")
    return found


@contextmanager
def sampled(pid: int, path: Path, rate: int = 250) -> Iterator[None]:
    """py-spy records ``pid`` into ``path`` (collapsed stacks, one line per stack: frames;...;frames count)."""
    recorder = subprocess.Popen([py_spy(), "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate),
                                 "--nonblocking", "--gil", "--output", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(60)


def _stacks(path: Path) -> Iterator[tuple[list[str], int]]:
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def summary(path: Path, title: str) -> str:
    """Markdown: shares by thread role, by stage, and the 15 functions with the most samples of their own."""
    total, roles, stages, own = 0, Counter[str](), Counter[str](), Counter[str]()
    for frames, count in _stacks(path):
        total += count
        role = next((name for name, marker in ROLES if any(marker in f for f in frames)), "other threads")
        roles[role] += count
        ours = any("csibench/" in f for f in frames)  # kopf's frames are also under every handler of ours
        for name, marker in STAGES:
            if any(marker in f for f in frames) and not (marker == "kopf/" and ours):
                stages[name] += count
        own[frames[-1]] += count
    if not total:
        return f"{title}: no samples (py-spy could not read the process?)\n"
    lines = [f"#### {title} ({total} samples)", "", "| thread | share |", "|---|---|"]
    lines += [f"| {name} | {100 * n / total:.0f}% |" for name, n in roles.most_common()]
    lines += ["", "| stage (inclusive) | share |", "|---|---|"]
    lines += [f"| {name} | {100 * stages[name] / total:.1f}% |" for name, _ in STAGES]
    lines += ["", "| function (own time) | share |", "|---|---|"]
    lines += [f"| `{name}` | {100 * n / total:.1f}% |" for name, n in own.most_common(15)]
    return "\n".join(lines) + "\n"

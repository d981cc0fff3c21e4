"""A start barrier: every pod of a batch begins its measured work at one instant (pure). The data path's
workloads use it, and the readers of a ReadOnlyMany volume (the shared step), which cannot meet at barriers on the
volume itself; the data path is what is described here.

A row sums its pods' bandwidth as if they ran at once, so they must. Pods come up one by one (attach, mount,
container start), and the first workload also lays out its files, which takes longer on a slower volume. So:

1. each pod lays out its files first, in an init container (``fio --create_only=1`` with the workload's own
   options): the pod is Running only once it is ready to measure;
2. its container then waits for a start time, epoch seconds, which the operator sets as the pod annotation
   START_ANNOTATION once every pod of the workload is Running (or once ``startTimeoutSeconds`` passed: the pods
   not Running by then start when they are, and their late start shows in the row's skew). The kubelet writes
   the annotation into a downwardAPI volume, so the pod needs no API credentials and no network;
3. the start time lies ``startDelaySeconds`` ahead: room for each node's kubelet to write the file (a kubelet
   does it when it next syncs the pod, usually at once on the update, at worst on its periodic sync). A pod that
   reads it late starts at once.

Whether they did start together is measured, not assumed: fio's own clock says when each pod measured
(``VolumeResult.window_ms``), and the row records the skew and how long they all ran at once.

The wait is a shell script (the workload image's ``sh``, ``cat``, ``date`` and a ``sleep`` that takes fractions, as
GNU coreutils' and busybox's do): it sleeps to the second before the start time, then polls the clock every 10 ms,
and ``exec``s fio, so fio's own process is the container's. fio's command line reaches it as positional
parameters, never as shell text; the start time must be plain epoch seconds (no leading zero, at most 14 digits).
While it waits it ends on SIGTERM (a shell as PID 1 would ignore it), so a deleted pod goes at once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from csibench.engine.kinds.pod import PodState

START_ANNOTATION = "csibench.io/start-at"
VOLUME = "barrier"
MOUNT_PATH = "/csibench/barrier"
START_FILE = "start"
LAYOUT_CONTAINER = "layout"
SCRIPT_NAME = "csibench-barrier"  # $0 of the script: what ps shows
WAIT_SCRIPT = f"""set -eu
trap 'exit 143' TERM
file={MOUNT_PATH}/{START_FILE}
while [ ! -s "$file" ]; do sleep 0.05 & wait $!; done
at=$(cat "$file")
case "$at" in ''|0*|*[!0-9]*|???????????????*)
  echo "csibench: start time '$at' is not epoch seconds" >&2; exit 2;; esac
now=$(date +%s)
if [ "$at" -gt "$((now + 1))" ]; then sleep "$((at - now - 1))" & wait $!; fi
while [ "$(date +%s)" -lt "$at" ]; do sleep 0.01; done
exec "$@"
"""


def build_waiting_command(command: list[str]) -> list[str]:
    """The container's command: wait for the start time, then run ``command`` (its words as "$@")."""
    return ["sh", "-c", WAIT_SCRIPT, SCRIPT_NAME, *command]


def start_at(now_epoch_seconds: float, delay_seconds: float) -> int:
    """The start time given to every pod: ``delay_seconds`` from now, on a whole second (the script's unit)."""
    return math.ceil(now_epoch_seconds + delay_seconds)


def started(pod: PodState | None) -> bool:
    """Where a workload pod's time to start ends (its batch's one boundary): its containers run, so its init
    container, the layout, is done."""
    return pod is not None and pod.phase == "Running"

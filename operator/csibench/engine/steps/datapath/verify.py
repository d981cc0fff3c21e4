"""The verifyClone step (``spec.dataPath.verify``): each clone's data held against its source's.

After cloneFromSnapshot, one pod per clone checksums fio's files on it (``datapath/checksum.py``, the same pod
the data path ran on each volume at its end, before the snapshots were taken). A clone whose files are missing or
differ from its source volume's fails, its message naming the file and both digests; a pod that could not read
the clone (no files at all, a mount failure) fails it with its own words. The step's clock covers the pods'
creation to the last one done; the pods are deleted (and their clones detached) before the step ends, so
deleteClone then times clones no pod holds.
"""

from __future__ import annotations

import time

from csibench.api.steps import StepName
from csibench.engine import judges
from csibench.engine.fio_log import messages_of
from csibench.engine.judges import Verdict
from csibench.engine.observed import POD
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.steps.datapath import checksum
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches, finished_log

MISMATCH = "DataMismatch"


async def measure(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext) -> None:
    data_path = context.trackers.get(StepName.DATA_PATH)
    sources: dict[str, dict[str, str]] = ((data_path.extra if data_path is not None else None) or {}).get(
        checksum.CHECKSUMS) or {}
    timeout = float(context.spec.timeouts.for_step(step.name))
    tracker.start()
    run = StepTracker(f"{step.name}-pods", tracker.active)
    await runner.batch(POD, run, step.judge_in(context), runner.creator(step, context, run), timeout)
    for index, name in enumerate(tracker.objects):
        if name not in run.objects:
            continue
        outcome = run.outcomes[name]
        verdict = await _verdict(runner, name, outcome.ok, outcome.reason, outcome.message,
                                 sources.get(context.names.volume(index), {}), context.names.clone(index),
                                 context.names.volume(index))
        tracker.mark_submitted(name, run.submitted.get(name, outcome.at))
        tracker.record(name, verdict, outcome.at)
    tracker.stopped = time.monotonic()
    seen = context.observed.uids_of(POD)
    removal = StepTracker(f"{step.name}-delete", [n for n in run.objects if n in seen])
    await runner.batch(POD, removal, judges.pod_gone_and_detached(context.observed, frozenset()),
                       runner.remover(step, removal), timeout)


async def _verdict(runner: Batches, pod: str, ok: bool, reason: str, message: str, source: dict[str, str],
                   clone: str, volume: str) -> Verdict:
    log, unavailable = await finished_log(runner, pod)
    if unavailable is not None and ok:  # a pod that never ran (a clone that would not mount) has no log
        return Verdict(False, *unavailable)
    if not ok:
        return Verdict(False, reason or "PodFailed", messages_of(log) or message or "the pod failed")
    found = checksum.mismatch(source, checksum.parse_checksums(log), clone, volume)
    return Verdict(False, MISMATCH, found) if found is not None else Verdict(True, "", "")

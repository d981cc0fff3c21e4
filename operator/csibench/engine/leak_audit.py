"""What a run left behind after its cleanup (``status.leaks``), counted exactly where it can be.

The cluster shows only what Kubernetes still holds: the run's PVs and snapshot contents cleanup could not remove.
What a storage team loses sleep over is what the storage holds that nothing names — a delete the driver
acknowledged without doing, a volume created while its claim went away — and only the array knows that. So a
driver whose CSIDriver object carries the annotation ``csibench.io/array-audit: configmap`` (csibench's local
array does) is asked through the API, never through a channel of its own:

1. after cleanup, the operator writes a request (``{"id", "runUid"}``) into a ConfigMap of the run's namespace,
   ``<prefix>-array-audit`` (``array_requests.py``: owned by the run like its report, so cleanup never removes a
   record it just made);
2. the array answers in the same ConfigMap, once per request id: the run's volumes and snapshots it still holds,
   by the names it was asked to create them with, and the creates and deletes it did more than once;
3. what it holds that no PV or content of the run still names is leaked (``Array``). An array that does not
   answer within ``ANSWER_WAIT_SECONDS`` leaves the cluster's count, with a message saying so;
4. the array says when it began each operation it did again, so each disruption is given the repeats that began
   in its window (``repeats_per_disruption``): from its injection to its step's end or its recovery.

A driver without the annotation is counted by the cluster (``Cluster``): exact for what Kubernetes holds, blind to
what the storage holds.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

from csibench.api.models import DisruptionResult, LeakAudit, StepStatus
from csibench.api.text import shorten
from csibench.engine.array_requests import answer_in, build_request_configmap, driver_answers, send_request
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError

log = logging.getLogger(__name__)

ARRAY_AUDIT = "csibench.io/array-audit"  # the CSIDriver's annotation, and the request ConfigMap's label
ANSWER_WAIT_SECONDS = 30.0
_POLL_SECONDS = 0.05
_MAX_NAMED = 20
_NAME_MAX = 253  # a DNS subdomain: the longest name the array was asked to create
_MESSAGE_MAX = 300
_MAX_REPEAT_TIMES = 1000  # stamps read from an answer: the array's words are bounded like any input


def _bounded(texts: list[str]) -> list[str]:
    """The first of them, each cut to a name's length: the array's words reach status, and status stays small."""
    return [shorten(text, _NAME_MAX) for text in texts[:_MAX_NAMED]]


def audit_name(prefix: str) -> str:
    return f"{prefix}-array-audit"


def answer_of(configmap: Mapping[str, Any] | None, request_id: str) -> dict[str, Any] | None:
    """The array's answer to ``request_id``, once it is there and well formed (pure): counts that are whole
    numbers, names that are lists of strings; an ``error`` (the array would not answer) is an answer too."""
    answer = answer_in(configmap, request_id)
    if answer is None:
        return None
    if isinstance(answer.get("error"), str):
        return answer
    counts = [answer.get(key) for key in ("volumeCount", "snapshotCount", "repeatedCount")]
    if not all(isinstance(count, int) and not isinstance(count, bool) and count >= 0 for count in counts):
        return None
    names = [answer.get("volumes", []), answer.get("snapshots", [])]
    if not all(isinstance(listed, list) and all(isinstance(name, str) for name in listed) for listed in names):
        return None
    repeated = answer.get("repeated", [])
    if not isinstance(repeated, list) or not all(isinstance(item, dict) for item in repeated):
        return None
    return answer


def leaks_from_answer(answer: Mapping[str, Any], still_named: set[str], cluster_left: int) -> LeakAudit:
    """The array's answer (``answer_of``), less what a PV or content of the run still names (cleanup left it),
    plus what cleanup left in the cluster (pure)."""
    approximate = False

    def left(kind: str) -> tuple[int, list[str]]:
        nonlocal approximate
        named = list(answer.get(kind) or [])
        count = int(answer[f"{kind[:-1]}Count"])
        approximate = approximate or (count > len(named) and bool(still_named))
        kept = [name for name in named if name in still_named]
        return max(0, count - len(kept)), [name for name in named if name not in still_named]

    volumes, volume_names = left("volumes")
    snapshots, snapshot_names = left("snapshots")
    repeated = [f"{item.get('operation')} {item.get('object')} x{item.get('times')}"
                for item in answer.get("repeated") or []]
    message = ("the array held more than it named, and cleanup left some of the run's PVs or contents: what they "
               "still name beyond the names listed is counted as leaked") if approximate else None
    return LeakAudit(source="Array", volumes=volumes, snapshots=snapshots, clusterLeft=cluster_left,
                     leaked=volumes + snapshots + cluster_left, names=_bounded(volume_names + snapshot_names),
                     repeatedOperations=int(answer["repeatedCount"]), repeated=_bounded(repeated), message=message)


def leaks_from_cleanup(remaining: Mapping[str, int], left: Mapping[str, list[str]],
                       message: str | None = None) -> LeakAudit:
    """What Kubernetes still holds of the run's volumes and snapshots after cleanup (pure)."""
    volumes, snapshots = remaining.get("persistentvolumes", 0), remaining.get("volumesnapshotcontents", 0)
    names = [*left.get("persistentvolumes", []), *left.get("volumesnapshotcontents", [])]
    return LeakAudit(source="Cluster", volumes=volumes, snapshots=snapshots, clusterLeft=volumes + snapshots,
                     leaked=volumes + snapshots, names=_bounded(names),
                     message=None if message is None else shorten(message, _MESSAGE_MAX))


async def array_answers(client: KubeApi, storage_class_name: str) -> bool:
    """Whether the class's driver says its array answers audits (its CSIDriver's annotation)."""
    try:
        storage_class = await client.get(r.STORAGE_CLASSES.path(name=storage_class_name))
    except ApiError as error:
        if error.status in (401, 403):
            return False  # not allowed to look: counted by the cluster
        raise
    return storage_class is not None and await driver_answers(client, storage_class, ARRAY_AUDIT)


async def ask_array(client: KubeApi, namespace: str, name: str, run_name: str, run_uid: str,
                    wait_seconds: float | None = None) -> dict[str, Any] | str:
    """Ask the array and wait for its answer (at most ``ANSWER_WAIT_SECONDS``): the answer, or why there is none."""
    wait_seconds = ANSWER_WAIT_SECONDS if wait_seconds is None else wait_seconds
    request_id = uuid.uuid4().hex
    body = build_request_configmap(name, ARRAY_AUDIT, run_name, run_uid, {"id": request_id, "runUid": run_uid})
    path = r.CONFIGMAPS.path(namespace, name)
    try:
        await send_request(client, namespace, body, run_uid)
    except ApiError as error:
        if error.status == 409:  # a ConfigMap of that name that is not the run's
            return error.message
        raise
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        answer = answer_of(await client.get(path), request_id)
        if answer is not None:
            return answer
        await asyncio.sleep(_POLL_SECONDS)
    return f"the array did not answer within {wait_seconds:g}s (ConfigMap {namespace}/{name})"


def _epoch(stamp: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def repeat_times(answer: Mapping[str, Any]) -> list[float]:
    """When the array began each operation it did again, as epoch seconds (pure): the first
    ``_MAX_REPEAT_TIMES``; a stamp that is not RFC 3339 is skipped."""
    times: list[float] = []
    for item in answer.get("repeated") or []:
        stamps = item.get("at") if isinstance(item, Mapping) else None
        for text in stamps if isinstance(stamps, list) else []:
            at = _epoch(text) if isinstance(text, str) else None
            if at is not None and len(times) < _MAX_REPEAT_TIMES:
                times.append(at)
    return times


def repeats_per_disruption(results: list[DisruptionResult], steps: list[StepStatus], times: list[float]) -> None:
    """Each injected disruption's ``repeatedOperations`` (pure but for the results it fills in): the repeats that
    began in its window, from its injection to its step's end or its recovery, whichever came later; a repeat in
    two windows (two disruptions in one step) is the later injection's, so the shares add up to at most the run's
    total. Steps are read on their wall clock (startTime); a disruption never injected, or whose step has no
    start, gets none."""
    started = {step.name: (_epoch(step.startTime), step.durationSeconds or 0.0) for step in steps if step.startTime}
    windows: list[tuple[float, float, DisruptionResult]] = []
    for result in results:
        start, duration = started.get(result.step, (None, 0.0))
        if result.injectedAtSeconds is None or start is None:
            continue
        windows.append((start + result.injectedAtSeconds,
                        start + max(duration, result.recoveredAtSeconds or 0.0), result))
        result.repeatedOperations = 0
    for at in times:
        holding = [window for window in windows if window[0] <= at <= window[1]]
        if holding:
            latest = max(holding, key=lambda window: window[0])[2]
            latest.repeatedOperations = (latest.repeatedOperations or 0) + 1


async def audit_leaks(client: KubeApi, *, namespace: str, prefix: str, run_name: str, run_uid: str,
                      storage_class_name: str, remaining: Mapping[str, int], left: Mapping[str, list[str]],
                      still_named: set[str]) -> tuple[LeakAudit, list[float] | None]:
    """``status.leaks`` after a cleanup: the array's count when its driver answers audits, else the cluster's;
    and when the array began each operation it did again (None: the array did not answer)."""
    try:
        if not await array_answers(client, storage_class_name):
            return leaks_from_cleanup(remaining, left), None
        answer: dict[str, Any] | str = await ask_array(client, namespace, audit_name(prefix), run_name, run_uid)
    except ApiError as error:  # the run's verdict stands; only the array's count is missing
        answer = f"the array could not be asked: {error}"
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        answer = f"the array would not answer: {answer['error']}"
    if isinstance(answer, str):
        log.warning("run %s/%s: %s", namespace, run_name, answer)
        return leaks_from_cleanup(remaining, left, message=answer), None
    cluster_left = remaining.get("persistentvolumes", 0) + remaining.get("volumesnapshotcontents", 0)
    times = repeat_times(answer)
    # Stamps the array listed short of its count (its bounds, ours): the shares would be too low, so none is given
    return leaks_from_answer(answer, still_named, cluster_left), \
        times if len(times) >= int(answer["repeatedCount"]) else None

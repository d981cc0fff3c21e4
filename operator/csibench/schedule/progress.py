"""What a schedule does next, decided from its status, its runs and the clock (pure).

The schedule's memory is ``status.lastScheduleTime``: the last time a run was created for. The times after it up to
now are due, and as in CronJob only the latest of them starts (the others are counted as skipped); with
``startingDeadlineSeconds`` only times within the deadline count, so one missed for longer is never started late.
Under Forbid a due time waits while a run is going, without moving lastScheduleTime, exactly as CronJob waits: it
starts when the run ends if the deadline still allows. The run's name is a function of the time, so a decision
repeated after an operator restart creates the same name again and the API server answers AlreadyExists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from csibench.api.cron import TOO_MANY_MISSED, Schedule, due
from csibench.api.schedule import (
    SCHEDULED_AT_ANNOTATION,
    TIME_DIGITS,
    BenchmarkScheduleSpec,
    ConcurrencyPolicy,
    ScheduledRunStatus,
)

TERMINAL = ("Succeeded", "Failed")
FUTURE_SLACK = timedelta(minutes=5)  # a run's time later than now by more than this is not believed (an edited
# annotation, a forged name): it would stop the schedule until that date


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def scheduled_time(run: dict[str, Any]) -> datetime | None:
    """The time a run was created for: its annotation, else its name's suffix (``<schedule>-<unix seconds>``);
    None when neither is a time."""
    meta = run.get("metadata") or {}
    found = parse_time((meta.get("annotations") or {}).get(SCHEDULED_AT_ANNOTATION))
    suffix = str(meta.get("name") or "").rpartition("-")[2]
    if found is None and suffix.isdigit() and len(suffix) <= TIME_DIGITS:
        found = datetime.fromtimestamp(int(suffix), UTC)
    return found


def phase_of(run: dict[str, Any]) -> str:
    return str((run.get("status") or {}).get("phase") or "Pending")


def going(run: dict[str, Any]) -> bool:
    """A run not yet ended, whether or not it is being deleted (a run deleted while it ran is cleaning up: load
    that a run started beside it would measure)."""
    return phase_of(run) not in TERMINAL


@dataclass(frozen=True)
class Decision:
    create: datetime | None  # the time to create a run for now
    replace: list[str]  # going runs to delete first (Replace)
    prune: list[str]  # finished runs beyond the history limits, oldest first
    skipped: int  # times passed over now (counted once: each is before a time that starts)
    waiting: str | None  # why a due time does not start now (Forbid, suspended), for status
    next: datetime | None  # the next time after now
    since: datetime  # the last time a run was made for (or the schedule's creation): later times are due
    runs: list[dict[str, Any]] = field(default_factory=list)  # the schedule's runs, oldest time first


def decide(spec: BenchmarkScheduleSpec, schedule: Schedule, last_scheduled: datetime | None, created: datetime,
           children: list[dict[str, Any]], now: datetime) -> Decision:
    """``last_scheduled``: status.lastScheduleTime; ``created``: the schedule's creationTimestamp (the start when no
    run was ever scheduled); ``children``: its own runs (ownership proven)."""
    runs = sorted(children, key=lambda run: scheduled_time(run) or created)
    # A run made for a later time than status says (created just before a restart, its status never written)
    # moves the start on: its time is never due again.
    made = [at for at in (scheduled_time(run) for run in runs) if at is not None and at <= now + FUTURE_SLACK]
    since = max([at for at in (last_scheduled, *made) if at is not None and at <= now + FUTURE_SLACK],
                default=created)
    active = [run["metadata"]["name"] for run in runs if going(run)]
    if spec.suspend:  # nothing starts: only the next time is needed (the missed ones are looked at on resuming)
        return Decision(None, [], _beyond_limits(runs, spec), 0, "suspended: no new runs", schedule.next_after(now),
                        since, runs)
    found = due(schedule, since, now, spec.startingDeadlineSeconds)
    prune = _beyond_limits(runs, spec)
    waiting: str | None = None
    create, replace, skipped = found.latest, [], 0
    if create is not None and active and spec.concurrencyPolicy == ConcurrencyPolicy.FORBID:
        waiting = (f"the run of {rfc3339(create)} waits: {', '.join(active[:3])} still going (concurrencyPolicy "
                   "Forbid)")
        create = None
    elif create is not None:
        if spec.concurrencyPolicy == ConcurrencyPolicy.REPLACE:
            replace = active
        skipped = _count_between(schedule, since, create)
    return Decision(create, replace, prune, skipped, waiting, found.next, since, runs)


def _count_between(schedule: Schedule, since: datetime, until: datetime) -> int:
    """Times strictly between ``since`` and ``until`` (capped past TOO_MANY_MISSED)."""
    count, at = 0, schedule.next_after(since)
    while at is not None and at < until and count <= TOO_MANY_MISSED:
        count, at = count + 1, schedule.next_after(at)
    return count


def _beyond_limits(runs: list[dict[str, Any]], spec: BenchmarkScheduleSpec) -> list[str]:
    """The oldest finished runs past each history limit (runs going, or being deleted, are never counted)."""
    prune: list[str] = []
    for phase, limit in (("Succeeded", spec.successfulRunsHistoryLimit), ("Failed", spec.failedRunsHistoryLimit)):
        ended = [run["metadata"]["name"] for run in runs if phase_of(run) == phase
                 and not (run.get("metadata") or {}).get("deletionTimestamp")]
        prune.extend(ended[:max(0, len(ended) - limit)])
    return prune


def run_status(run: dict[str, Any]) -> ScheduledRunStatus:
    at = scheduled_time(run)
    status = run.get("status") or {}
    return ScheduledRunStatus(name=run["metadata"]["name"], scheduledTime=rfc3339(at) if at else "",
                              phase=phase_of(run), verdict=status.get("verdict"))

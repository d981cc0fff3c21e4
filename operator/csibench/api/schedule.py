"""The BenchmarkSchedule API (csibench.io/v1alpha1): a BenchmarkRun on a cron schedule, as a CronJob makes Jobs.

Storage drifts over days (leaks that build up, sidecars that grow, a release that slows attaches), and users ask for
benchmarks that run by themselves, as probes do. A schedule creates one run per scheduled time from its template,
named ``<schedule>-<unix seconds of the time>``, so that an operator restarted at any moment creates the same name
again and the API server answers AlreadyExists: never two runs for one time. Its runs carry its labels
(``csibench history -l csibench.io/schedule=<name>`` reads them as one series) and an owner reference to it, and
the oldest finished ones beyond the history limits are deleted, each cleaned up by its own finalizer. The
semantics are CronJob's wherever it has one: concurrencyPolicy (Forbid by default: a run measured while another
runs would measure the other's load), suspend, startingDeadlineSeconds, and only the latest of several missed times
is started.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field

from csibench.api.base import Model as _Model
from csibench.api.cron import SCHEDULE_MAX, SCHEDULE_PATTERN
from csibench.api.models import MAX_RUN_NAME, Condition, Verdict

SCHEDULE_KIND = "BenchmarkSchedule"
SCHEDULE_PLURAL = "benchmarkschedules"
SCHEDULE_UID_LABEL = "csibench.io/schedule-uid"
SCHEDULE_NAME_LABEL = "csibench.io/schedule"
SCHEDULED_AT_ANNOTATION = "csibench.io/scheduled-at"
TIME_DIGITS = 10  # unix seconds until the year 2286
MAX_SCHEDULE_NAME = MAX_RUN_NAME - 1 - TIME_DIGITS
MAX_HISTORY = 100
MAX_ACTIVE_SHOWN = 10


class ConcurrencyPolicy(StrEnum):
    """What a due time does while an earlier run is still going (CronJob's concurrencyPolicy)."""

    FORBID = "Forbid"  # skip the time: a run measured beside another measures the other's load too
    ALLOW = "Allow"  # start it beside the running one
    REPLACE = "Replace"  # delete the running one (its cleanup runs), then start the new one


class BenchmarkScheduleSpec(_Model):
    """A BenchmarkRun template and when to run it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schedule: str = Field(
        ..., min_length=1, max_length=SCHEDULE_MAX, pattern=SCHEDULE_PATTERN,
        description="When, in UTC: a cron expression as CronJob takes it (minute hour day-of-month month "
                    "day-of-week; @hourly, @daily, ...), or '@every <n>s|m|h' (10 s to 24 h, at the multiples of "
                    "the interval since the Unix epoch). The exact check is the operator's: a schedule it cannot "
                    "parse is reported as InvalidSpec and nothing is created.")
    template: dict[str, Any] = Field(
        ..., description="The spec of each BenchmarkRun (validated as a run's at admission, and again with a "
                         "server-side dry run before the first run).")
    concurrencyPolicy: ConcurrencyPolicy = Field(
        ConcurrencyPolicy.FORBID, description="Forbid (default: a due time waits while a run is going and starts "
                                              "when it ends, unless startingDeadlineSeconds passed first; as "
                                              "CronJob), Allow, or Replace (delete the going run, then start).")
    suspend: bool = Field(False, description="No new runs while true (runs going are left to end); times passed "
                                             "while suspended count as missed.")
    startingDeadlineSeconds: int | None = Field(
        None, ge=1, le=2**31 - 1, description="A time not started within this many seconds of it (the operator "
                                              "down, a run still going under Forbid) is skipped, not started late.")
    successfulRunsHistoryLimit: int = Field(
        10, ge=0, le=MAX_HISTORY, description="Succeeded runs kept (the oldest beyond it are deleted). Default 10: "
                                              "a change point needs runs on both sides of it (csibench history).")
    failedRunsHistoryLimit: int = Field(3, ge=0, le=MAX_HISTORY, description="Failed runs kept.")


class ScheduledRunStatus(_Model):
    """One run the schedule created."""

    name: str = Field(..., description="The BenchmarkRun.")
    scheduledTime: str = Field(..., description="The time it was created for (RFC 3339, UTC).")
    phase: str | None = Field(None, description="The run's phase.")
    verdict: Verdict | None = Field(None, description="The run's verdict, if it judges any.")


class ChangePoint(_Model):
    """Where the schedule's series last changed (csibench history's change point, on its own runs)."""

    run: str = Field(..., description="The latest run of the window in which the change was found.")
    time: str = Field(..., description="When that run ended.")
    steps: str = Field(..., description="Each step that changed: its verdict and the ratio of the latest runs' "
                                        "throughput to the runs before, e.g. 'createVolume Regression (0.62x)'.")


class BenchmarkScheduleStatus(_Model):
    """What the schedule did last and will do next."""

    conditions: list[Condition] = Field(default_factory=list, description="Ready: True while it schedules; False "
                                        "with InvalidSpec, Suspended, RunRefused or Retrying, and why.")
    observedGeneration: int | None = Field(None, description="Generation of the spec this status is about.")
    message: str | None = Field(None, description="What the schedule did last, or why it does nothing.")
    lastScheduleTime: str | None = Field(None, description="The last time a run was created for (RFC 3339).")
    nextScheduleTime: str | None = Field(None, description="The next time a run is due.")
    lastSuccessfulTime: str | None = Field(None, description="When the last Succeeded run ended.")
    active: list[str] = Field(default_factory=list, max_length=MAX_ACTIVE_SHOWN,
                              description="Runs going now (at most 10 named).")
    lastRun: ScheduledRunStatus | None = Field(None, description="The latest run, and how it ended.")
    lastVerdict: Verdict | None = Field(None, description="The verdict of the latest run that ended with one.")
    lastVerdictRun: str | None = Field(None, description="The run that gave lastVerdict.")
    skipped: int = Field(0, ge=0, description="Times that never got a run (the operator down, suspended, held "
                                              "under Forbid, past the starting deadline, refused), counted when a "
                                              "later time starts; at most 101 are counted at once.")
    lastChangePoint: ChangePoint | None = Field(None, description="The latest change point of the schedule's runs.")


def run_name(schedule_name: str, unix_seconds: int) -> str:
    """The run of one scheduled time: the same name for the same time, whoever creates it."""
    return f"{schedule_name}-{unix_seconds}"

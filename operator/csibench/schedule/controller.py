"""One BenchmarkSchedule, for as long as it exists: a pass every few seconds creates the run that is due, deletes
what the concurrency policy and the history limits say, and writes status.

Each generation of the spec is checked before it creates anything, as a suite checks its cells: the models
(pydantic), the cron expression (``api/cron.py``), then the API server itself with a server-side dry run of a run
made from the template (the run CRD's CEL rules, the admission policy). A spec that fails says InvalidSpec and
creates nothing until it is changed. A run the API server refuses at its time is counted as skipped and said in
status; a refusal that is not the run's (a quota, missing rights), and any other failure to reach the API server,
is said in the Ready condition (``Retrying``) and retried at the next pass without moving the schedule on. A name
taken by a run that is not the schedule's is never adopted, changed or deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from csibench.api.conditions import READY, set_condition
from csibench.api.cron import TOO_MANY_MISSED, CronError, Schedule, parse
from csibench.api.models import BenchmarkRunSpec, Condition, Verdict
from csibench.api.regression import Change
from csibench.api.schedule import (
    SCHEDULE_UID_LABEL,
    BenchmarkScheduleSpec,
    BenchmarkScheduleStatus,
    ChangePoint,
)
from csibench.api.text import validation_problems
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.resources import ScheduleRef
from csibench.kube.status_patch import StatusPatcher
from csibench.metrics import METRICS
from csibench.report import history
from csibench.schedule.children import build_scheduled_run, owned_by
from csibench.schedule.progress import (
    Decision,
    decide,
    going,
    parse_time,
    phase_of,
    rfc3339,
    run_status,
    scheduled_time,
)

log = logging.getLogger(__name__)
POLL_SECONDS = 5.0  # how often a schedule reads its runs between due times (status follows their phases)
LIST_LIMIT = "500"  # a page: history limits keep at most 200 finished runs, plus those going (Allow: any number)
MESSAGE_MAX = 1024
CHANGE_WINDOW, CHANGE_THRESHOLD = 3, 0.10  # csibench history's defaults
CHANGES = (Change.REGRESSION, Change.IMPROVEMENT)  # significant and beyond the threshold


class ScheduleReason:
    SCHEDULING = "Scheduling"
    SUSPENDED = "Suspended"
    INVALID_SPEC = "InvalidSpec"
    RUN_REFUSED = "RunRefused"
    RETRYING = "Retrying"


@dataclass(frozen=True)
class Checked:
    """A generation of the spec that passed every check."""

    generation: int
    spec: BenchmarkScheduleSpec
    schedule: Schedule


class InvalidSchedule(Exception):
    pass


class ScheduleController:
    def __init__(self, ref: ScheduleRef, client: KubeApi, status: dict[str, Any] | None, created: datetime,
                 clock: Callable[[], float] = time.time) -> None:
        self.ref, self.client, self.created, self.clock = ref, client, created, clock
        self.status = BenchmarkScheduleStatus.model_validate(status or {})
        self.patcher = StatusPatcher(client, ref.status_path)
        self.checked: Checked | None = None
        self.invalid_generation: int | None = None
        self.finished_seen = -1

    async def run(self, current: Callable[[], tuple[int, dict[str, Any]] | None]) -> None:
        """Until cancelled (the operator stopping) or the schedule is being deleted (``current()`` gives None): it
        gives the live generation and spec, so an edit (suspend, a new schedule) takes effect at the next pass."""
        while True:
            live = current()
            if live is None:
                log.info("schedule %s: being deleted; its runs go with it", self.ref.label)
                return
            generation, spec = live
            try:
                wait = await self.step(generation, spec)
            except (ApiError, TimeoutError) as error:  # the API server away, a quota, a refused delete: next pass
                log.warning("schedule %s: %s; retrying in %.0f s", self.ref.label, error, POLL_SECONDS)
                with contextlib.suppress(ApiError, TimeoutError):
                    await self.say(ScheduleReason.RETRYING, f"retrying: {error}"[:MESSAGE_MAX], ready=False,
                                   generation=generation)
                wait = POLL_SECONDS
            await asyncio.sleep(wait)

    async def step(self, generation: int, raw_spec: dict[str, Any]) -> float:
        """One pass; the seconds until the next."""
        if self.checked is None or self.checked.generation != generation:
            if self.invalid_generation == generation:
                return POLL_SECONDS
            try:
                self.checked = await self.check(generation, raw_spec)
            except InvalidSchedule as invalid:
                self.invalid_generation, self.checked = generation, None
                self.status = self.status.model_copy(update={"nextScheduleTime": None,
                                                             "observedGeneration": generation})
                await self.say(ScheduleReason.INVALID_SPEC, str(invalid)[:MESSAGE_MAX], ready=False,
                               generation=generation)
                return POLL_SECONDS
        return await self.schedule_pass(self.checked)

    async def check(self, generation: int, raw_spec: dict[str, Any]) -> Checked:
        try:
            spec = BenchmarkScheduleSpec.model_validate(raw_spec)
        except ValidationError as error:
            raise InvalidSchedule(f"spec: {validation_problems(error)}") from None
        try:
            schedule = parse(spec.schedule)
        except CronError as error:
            raise InvalidSchedule(f"spec.schedule {spec.schedule!r}: {error}") from None
        if schedule.next_after(datetime.fromtimestamp(self.clock(), UTC)) is None:
            raise InvalidSchedule(f"spec.schedule {spec.schedule!r} has no time in the next five years")
        try:
            BenchmarkRunSpec.model_validate(spec.template)
        except ValidationError as error:
            raise InvalidSchedule(f"spec.template is not a valid run spec: {validation_problems(error)}") from None
        body = build_scheduled_run(self.ref.name, self.ref.uid, spec.template, datetime.now(UTC))
        try:
            await self.client.create(r.BENCHMARK_RUNS.path(self.ref.namespace), body, dry_run=True)
        except ApiError as error:
            if error.refuses_the_object:
                raise InvalidSchedule(f"the API server refuses a run of spec.template: {error}") from None
            raise
        return Checked(generation, spec, schedule)

    async def children(self) -> list[dict[str, Any]]:
        """The schedule's own runs (label-selected, every page, ownership proven)."""
        found: list[dict[str, Any]] = []
        query = {"labelSelector": f"{SCHEDULE_UID_LABEL}={self.ref.uid}", "limit": LIST_LIMIT}
        while True:
            listed = await self.client.get(r.BENCHMARK_RUNS.path(self.ref.namespace), query) or {}
            found += [item for item in listed.get("items") or [] if owned_by(item, self.ref.uid)]
            token = (listed.get("metadata") or {}).get("continue")
            if not token:
                return found
            query = {**query, "continue": token}

    async def schedule_pass(self, checked: Checked) -> float:
        now = datetime.fromtimestamp(self.clock(), UTC)
        runs = await self.children()
        decision = decide(checked.spec, checked.schedule, parse_time(self.status.lastScheduleTime), self.created,
                          runs, now)
        message, reason = decision.waiting, (ScheduleReason.SUSPENDED if checked.spec.suspend
                                             else ScheduleReason.SCHEDULING)
        last_time = decision.since if decision.since != self.created else parse_time(self.status.lastScheduleTime)
        skipped = self.status.skipped
        if decision.create is not None:
            for name in decision.replace:
                await self.delete(runs, name, "replaced (concurrencyPolicy Replace)")
            made, said = await self.create(checked, decision.create)
            if made is None:  # not the run's fault: tried again at the next pass, the time not yet used
                return POLL_SECONDS
            last_time, skipped = decision.create, skipped + decision.skipped + (0 if made else 1)
            message = said
            if not made:
                reason = ScheduleReason.RUN_REFUSED
            runs = await self.children()
        await self.record(checked, runs, decision, last_time, skipped, message, reason)
        for name in decision.prune:
            await self.delete(runs, name, "beyond the history limit")
        wait = POLL_SECONDS
        if decision.next is not None:
            wait = min(wait, max(0.05, (decision.next - datetime.fromtimestamp(self.clock(), UTC)).total_seconds()))
        return wait

    async def create(self, checked: Checked, at: datetime) -> tuple[bool | None, str]:
        """(True, what) when the run of ``at`` exists and is ours; (False, why) when it is refused for good (the
        time is skipped); (None, why) when the refusal is not the run's (retried)."""
        body = build_scheduled_run(self.ref.name, self.ref.uid, checked.spec.template, at)
        name = body["metadata"]["name"]
        try:
            created = await self.client.create(r.BENCHMARK_RUNS.path(self.ref.namespace), body)
        except ApiError as error:
            if error.refuses_the_object:
                log.warning("schedule %s: run %s refused: %s", self.ref.label, name, error)
                return False, f"the run of {rfc3339(at)} was refused by the API server: {error}"
            if 400 <= error.status < 500:
                log.warning("schedule %s: creating run %s: %s; retrying", self.ref.label, name, error)
                await self.say(ScheduleReason.RETRYING, f"creating run {name}: {error}; retrying"[:MESSAGE_MAX],
                               ready=False, generation=checked.generation)
                return None, str(error)
            raise
        if not created:
            existing = await self.client.get(r.BENCHMARK_RUNS.path(self.ref.namespace, name))
            if existing is not None and not owned_by(existing, self.ref.uid):
                return False, (f"a BenchmarkRun named {name} already exists and is not this schedule's; the "
                               f"time {rfc3339(at)} is skipped and that run left alone")
        log.info("schedule %s: created run %s for %s", self.ref.label, name, rfc3339(at))
        return True, f"created {name} for {rfc3339(at)}"

    async def delete(self, runs: list[dict[str, Any]], name: str, why: str) -> None:
        """Delete one of the schedule's own runs, by uid (a namesake made since is not touched)."""
        run = next((run for run in runs if run["metadata"]["name"] == name), None)
        if run is None or not owned_by(run, self.ref.uid):
            return
        log.info("schedule %s: deleting run %s: %s", self.ref.label, name, why)
        await self.client.delete(r.BENCHMARK_RUNS.path(self.ref.namespace, name), uid=run["metadata"]["uid"])

    async def record(self, checked: Checked, runs: list[dict[str, Any]], decision: Decision,
                     last_time: datetime | None, skipped: int, message: str | None, reason: str) -> None:
        active = [run["metadata"]["name"] for run in runs if going(run)]
        ended = [run for run in runs if phase_of(run) in ("Succeeded", "Failed")]
        succeeded = [str((run.get("status") or {}).get("completionTime") or "") for run in ended
                     if phase_of(run) == "Succeeded"]
        last_success = max([t for t in (*succeeded, self.status.lastSuccessfulTime) if t], default=None)
        # The latest run, and the latest that judged, only ever move forward: a history limit of 0 deletes the
        # newest run, and what is left must not put an older verdict back in status (and the alert).
        latest = _newer(runs[-1] if runs else None, self.status.lastRun.name if self.status.lastRun else None)
        judged = [run for run in ended if _verdict(run) is not None]
        verdict_run = _newer(judged[-1] if judged else None, self.status.lastVerdictRun)
        verdict = _verdict(verdict_run) if verdict_run else self.status.lastVerdict
        update: dict[str, Any] = {
            "observedGeneration": checked.generation,
            "lastScheduleTime": rfc3339(last_time) if last_time else None,
            "nextScheduleTime": rfc3339(decision.next) if decision.next and not checked.spec.suspend else None,
            "lastSuccessfulTime": last_success, "active": active[:10], "skipped": skipped,
            "lastRun": run_status(latest) if latest else self.status.lastRun, "lastVerdict": verdict,
            "lastVerdictRun": verdict_run["metadata"]["name"] if verdict_run else self.status.lastVerdictRun,
        }
        if decision.create is not None and decision.skipped > TOO_MANY_MISSED and message:
            message += f"; more than {TOO_MANY_MISSED} earlier times were missed"
        message = message or (f"{', '.join(active[:3])} going" if active else None) or (
            f"next run at {rfc3339(decision.next)}" if decision.next else "the schedule has no time in five years")
        if len(ended) != self.finished_seen:
            self.finished_seen = len(ended)
            update["lastChangePoint"] = change_point(ended) or self.status.lastChangePoint
        self.status = self.status.model_copy(update=update)
        ready = not checked.spec.suspend and reason == ScheduleReason.SCHEDULING
        await self.say(reason, message[:MESSAGE_MAX], ready=ready, generation=checked.generation)
        METRICS.set_schedule(self.ref.label, verdict.value if verdict else None,
                             last_time.timestamp() if last_time else None)

    async def say(self, reason: str, message: str, ready: bool, generation: int | None = None) -> None:
        conditions: list[Condition] = set_condition(self.status.conditions, READY, "True" if ready else "False",
                                                    reason, message, generation or self.ref.generation,
                                                    rfc3339(datetime.fromtimestamp(self.clock(), UTC)))
        self.status = self.status.model_copy(update={"conditions": conditions, "message": message})
        await self.write()

    async def write(self) -> None:
        await self.patcher.write(self.status.model_dump(mode="json"))


def _verdict(run: dict[str, Any]) -> Verdict | None:
    try:
        return Verdict(str((run.get("status") or {}).get("verdict")))
    except ValueError:
        return None


def _newer(run: dict[str, Any] | None, known: str | None) -> dict[str, Any] | None:
    """``run`` if it is the run named ``known`` or one made for a later time; else None (keep what status says)."""
    if run is None or known is None or run["metadata"]["name"] == known:
        return run
    ours, theirs = scheduled_time(run), scheduled_time({"metadata": {"name": known}})
    return run if ours is not None and (theirs is None or ours > theirs) else None


def change_point(ended: list[dict[str, Any]]) -> ChangePoint | None:
    """csibench history's change point on the schedule's runs: the latest window against the runs before it."""
    series = history.select(ended)
    if not series.runs:
        return None
    changed = [step for step in history.step_histories(series, CHANGE_WINDOW, CHANGE_THRESHOLD)
               if step.change in CHANGES]
    if not changed:
        return None
    latest = series.runs[-1]
    return ChangePoint(run=latest["metadata"]["name"],
                       time=str((latest.get("status") or {}).get("completionTime") or ""),
                       steps=", ".join(f"{step.step} {step.change} ({step.ratio:.2f}x)" for step in changed))

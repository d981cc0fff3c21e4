"""One BenchmarkSuite from start to end: check every cell, then create its runs in order and follow them.

Before the first run, every cell's spec is validated twice, as a run would be: by the models (pydantic), then by
the API server itself, with a server-side dry run of the cell's first run (the run CRD's CEL rules, the admission
policy). A bad cell fails the suite with InvalidSpec naming the cell, and no run is created. Then the suite creates
runs as ``progress.decide`` says, reads them back every couple of seconds (a suite times nothing itself: its runs
do, from watch events) and writes status when it changed. A name already taken by a run that is not the suite's
own fails the suite (NameTaken): it never adopts, changes or deletes a run it did not create.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pydantic import ValidationError

from csibench.api.conditions import READY, set_condition
from csibench.api.models import BenchmarkRunSpec, Condition
from csibench.api.suite import (
    SUITE_UID_LABEL,
    BenchmarkSuiteSpec,
    BenchmarkSuiteStatus,
    Slot,
    SuiteCellStatus,
    SuitePhase,
    SuitePopulationStatus,
    SuiteRunStatus,
    cells_of,
    child_spec,
    schedule,
)
from csibench.api.suite_results import cell_results
from csibench.api.text import validation_problems
from csibench.api.validation import is_dns_subdomain
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.resources import SuiteRef
from csibench.kube.status_patch import StatusPatcher
from csibench.metrics import METRICS
from csibench.suite.children import build_child, owned_by
from csibench.suite.progress import Decision, decide

log = logging.getLogger(__name__)
POLL_SECONDS = 2.0
LIST_LIMIT = "500"  # a suite has at most MAX_SUITE_RUNS runs


class SuiteReason:
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    RUNS_FAILED = "RunsFailed"
    INVALID_SPEC = "InvalidSpec"
    NAME_TAKEN = "NameTaken"
    RUN_REFUSED = "RunRefused"  # the API server refuses to create a run for a reason not the cell's: retried


class SuiteRetry(Exception):
    """Not the suite's fault and maybe not lasting (a quota, missing rights): the handler retries later."""


class SuiteFailed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def name_taken_message(name: str) -> str:
    return (f"a BenchmarkRun named {name} already exists and is not this suite's; the suite leaves it alone "
            "(rename the suite or delete that run)")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def describe_cell(slot: Slot) -> str:
    """'cell c1 (storageClassName=fast, volumes=100, dataPath[1])'."""
    values = ", ".join(value if value.startswith(f"{axis}[") else f"{axis}={value}"
                       for axis, value in slot.cell.shown().items())
    return f"cell {slot.cell.id}" + (f" ({values})" if values else "")


def invalid_cell_message(slot: Slot, error: ValidationError) -> str:
    return f"{describe_cell(slot)} is not a valid run spec: {validation_problems(error)}"


class SuiteController:
    def __init__(self, ref: SuiteRef, spec: BenchmarkSuiteSpec, client: KubeApi,
                 status: dict[str, Any] | None = None) -> None:
        self.ref, self.spec, self.client = ref, spec, client
        self.slots = schedule(spec)
        self.status = BenchmarkSuiteStatus.model_validate(status or {})
        self.patcher = StatusPatcher(client, ref.status_path)
        self.refused: dict[str, SuiteRunStatus] = {}  # runs the API server would not create: Failed, with why
        self.cells_recorded = False

    async def run(self) -> None:
        try:
            if self.status.phase in (None, SuitePhase.PENDING):
                await self.check_cells()
                await self.check_names()
            while True:
                decision = decide(self.ref.name, self.slots, self.recorded(), await self.children(),
                                  self.spec.parallelism)
                for slot in decision.create:
                    await self.create(slot)
                if decision.create:  # read back what was created: its uid goes into status at once
                    decision = decide(self.ref.name, self.slots, self.recorded(decision), await self.children(),
                                      self.spec.parallelism)
                await self.record(decision)
                if decision.finished:
                    return
                await asyncio.sleep(POLL_SECONDS)
        except SuiteFailed as failure:
            await self.fail(failure.reason, str(failure))
        except SuiteRetry as retry:
            await self.blocked(str(retry))
            raise

    def recorded(self, decision: Decision | None = None) -> dict[str, SuiteRunStatus]:
        """What status (or the decision just made) says of each run, with the runs the API server refused."""
        runs = {run.name: run for run in (decision.runs if decision is not None else self.status.runs)}
        return runs | self.refused

    async def check_cells(self) -> None:
        """Every cell as a run: the models' rules, then the API server's (a dry run of its first run). Only a
        refusal of the run itself (422: its schema or CEL; an admission policy's denial) makes a cell invalid;
        anything else (a quota, missing rights) is not the cell's fault and is retried."""
        first_of_cell: dict[str, Slot] = {}
        for slot in self.slots:
            first_of_cell.setdefault(slot.cell.id, slot)
        for slot in first_of_cell.values():
            try:
                BenchmarkRunSpec.model_validate(child_spec(self.spec, slot.cell))
            except ValidationError as error:
                raise SuiteFailed(SuiteReason.INVALID_SPEC, invalid_cell_message(slot, error)) from None
        for slot in first_of_cell.values():
            body = build_child(self.ref.name, self.ref.uid, self.spec, slot)
            try:
                await self.client.create(r.BENCHMARK_RUNS.path(self.ref.namespace), body, dry_run=True)
            except ApiError as error:
                message = f"{describe_cell(slot)}: the API server refuses its run: {error}"
                if error.refuses_the_object:
                    raise SuiteFailed(SuiteReason.INVALID_SPEC, message) from None
                if 400 <= error.status < 500:
                    raise SuiteRetry(message) from None
                raise

    async def check_names(self) -> None:
        """Before the first run: no run name of the suite is taken by a run that is not its own."""
        for slot in self.slots:
            name = slot.child_name(self.ref.name)
            existing = await self.client.get(r.BENCHMARK_RUNS.path(self.ref.namespace, name))
            if existing is not None and not owned_by(existing, self.ref.uid) \
                    and not (existing.get("metadata") or {}).get("deletionTimestamp"):
                raise SuiteFailed(SuiteReason.NAME_TAKEN, name_taken_message(name))

    async def children(self) -> dict[str, dict[str, Any]]:
        """The suite's own runs by name (label-selected, ownership proven)."""
        listed = await self.client.get(r.BENCHMARK_RUNS.path(self.ref.namespace),
                                       {"labelSelector": f"{SUITE_UID_LABEL}={self.ref.uid}", "limit": LIST_LIMIT})
        return {item["metadata"]["name"]: item for item in (listed or {}).get("items") or []
                if owned_by(item, self.ref.uid)}

    async def create(self, slot: Slot) -> None:
        """Create one run. A refusal that is the run's own (a namesake that is not the suite's, the API server
        rejecting it) fails that run, and the suite goes on; one that is not (a quota, missing rights) is retried."""
        body = build_child(self.ref.name, self.ref.uid, self.spec, slot)
        name = body["metadata"]["name"]
        path = r.BENCHMARK_RUNS.path(self.ref.namespace)
        try:
            created = await self.client.create(path, body)
        except ApiError as error:
            if error.refuses_the_object:
                self.refuse(slot, name, f"the API server refused it: {error}")
                return
            if 400 <= error.status < 500:
                raise SuiteRetry(f"creating run {name} ({describe_cell(slot)}): {error}") from None
            raise
        if created:
            log.info("suite %s: created run %s (%s, round %d)", self.ref.label, name, describe_cell(slot),
                     slot.round)
            return
        existing = await self.client.get(r.BENCHMARK_RUNS.path(self.ref.namespace, name))
        if existing is None or owned_by(existing, self.ref.uid):
            return  # ours (listed next time), or gone already: the next pass decides again
        if (existing.get("metadata") or {}).get("deletionTimestamp"):
            return  # a namesake of an earlier suite, being deleted: wait for it
        self.refuse(slot, name, name_taken_message(name))

    def refuse(self, slot: Slot, name: str, message: str) -> None:
        log.warning("suite %s: run %s not created: %s", self.ref.label, name, message)
        self.refused[name] = SuiteRunStatus(name=name, cell=slot.cell.id, round=slot.round, phase="Failed",
                                            message=message)

    async def blocked(self, message: str) -> None:
        """Status says why the suite waits (it is retried), and keeps what it says of the runs."""
        log.warning("suite %s: %s; retrying", self.ref.label, message)
        self.status = self.status.model_copy(update={
            "message": message, "conditions": self._conditions("False", SuiteReason.RUN_REFUSED, message)})
        await self.write()

    def cells(self) -> list[SuiteCellStatus]:
        return [SuiteCellStatus(id=cell.id, values=cell.shown()) for cell in cells_of(self.spec.matrix)]

    def _conditions(self, status: str, reason: str, message: str) -> list[Condition]:
        return set_condition(self.status.conditions, READY, status, reason, message, self.ref.generation, now())

    async def record(self, decision: Decision) -> None:
        status = self.status
        more_done = decision.done != (status.done or 0)
        update: dict[str, Any] = {
            "observedGeneration": self.ref.generation, "runs": decision.runs, "total": len(decision.runs),
            "done": decision.done, "progress": f"{decision.done}/{len(decision.runs)}",
            "current": ", ".join(decision.current) or None, "verdict": decision.verdict,
            "cells": self.cells(),
            "startTime": status.startTime or now(),
        }
        if decision.finished:
            failed = decision.failed
            phase = SuitePhase.FAILED if failed else SuitePhase.SUCCEEDED
            message = (f"{len(failed)} of {len(decision.runs)} runs failed: "
                       + ", ".join(f"{run.name} ({run.message or run.phase})" for run in failed[:5])
                       if failed else f"all {len(decision.runs)} runs succeeded")
            reason = SuiteReason.RUNS_FAILED if failed else SuiteReason.SUCCEEDED
            update |= {"phase": phase, "message": message, "completionTime": status.completionTime or now(),
                       "conditions": self._conditions("True" if not failed else "False", reason, message)}
        else:
            message = f"running {update['current'] or 'nothing'} ({update['progress']} done)"
            update |= {"phase": SuitePhase.RUNNING, "message": message,
                       "conditions": self._conditions("False", SuiteReason.RUNNING, "runs under way")}
        self.status = status.model_copy(update=update)
        await self.write()
        METRICS.set_suite_progress(self.ref.label, decision.done, len(decision.runs))
        if more_done or decision.finished or not self.cells_recorded:  # a cell's median moves with each round
            await self.record_cells()
            self.cells_recorded = True

    async def restore_metrics(self) -> None:
        """After an operator restart, a finished suite's series come back from its status and its runs."""
        METRICS.set_suite_progress(self.ref.label, self.status.done or 0, self.status.total or 0)
        await self.record_cells()

    async def record_cells(self) -> None:
        """Per cell and step, the median throughput over its rounds, labelled by the cell's axis values."""
        runs = list((await self.children()).values())
        suite = {"metadata": {"name": self.ref.name, "namespace": self.ref.namespace},
                 "status": self.status.model_dump(mode="json", exclude_none=True)}
        for result in cell_results(suite, runs):
            for step, samples in result.steps.items():
                if samples.throughput is not None:
                    METRICS.record_suite_cell(self.ref.label, result.cell, result.values, step, samples.throughput)

    async def fail(self, reason: str, message: str) -> None:
        log.warning("suite %s failed: %s", self.ref.label, message)
        self.status = self.status.model_copy(update={
            "phase": SuitePhase.FAILED, "message": message, "observedGeneration": self.ref.generation,
            "cells": self.status.cells or self.cells(),  # a report of a suite that never started still has them
            "completionTime": now(), "conditions": self._conditions("False", reason, message)})
        await self.write()

    @property
    def population_removed(self) -> bool:
        """Whether status says the shared population is gone (a suite that shares none has nothing to remove)."""
        return not self.spec.sharePopulation or (self.status.population is not None and self.status.population.removed)

    def recorded_seed(self) -> tuple[str | None, str | None]:
        """The seed's PV and content as status recorded them, only where they are names (a tampered status cannot
        send a read elsewhere)."""
        population = self.status.population or SuitePopulationStatus()

        def named(value: str | None) -> str | None:
            return value if value is not None and is_dns_subdomain(value) else None
        return named(population.seedVolume), named(population.seedSnapshotContent)

    async def record_seed(self, volume: str | None, content: str | None) -> None:
        """The seed's PV and content, before the removal deletes the claim and snapshot that name them."""
        population = self.status.population or SuitePopulationStatus()
        self.status = self.status.model_copy(update={"population": population.model_copy(update={
            "seedVolume": volume, "seedSnapshotContent": content})})
        await self.write()

    async def record_population(self, selector: str, removed: bool, seconds: float, message: str) -> None:
        """What removing the shared population did (``engine/population/sharing`` does it, for the handler)."""
        population = self.status.population or SuitePopulationStatus()
        self.status = self.status.model_copy(update={"population": population.model_copy(update={
            "selector": selector, "removed": removed, "removedSeconds": round(seconds, 3),
            "message": message[:1024]})})
        if not removed:
            log.warning("suite %s: %s", self.ref.label, message)
        await self.write()

    async def runs_left(self) -> list[str]:
        """The suite's own runs still there (being deleted or not)."""
        return sorted(await self.children())

    async def stop_runs(self) -> list[str]:
        """Delete the suite's own runs (uid-checked) now, not after the suite is gone as the garbage collector
        would: a deleted suite's shared population is removed only once no run of it can grow it."""
        stopped = []
        for name, run in (await self.children()).items():
            if not (run.get("metadata") or {}).get("deletionTimestamp"):
                await self.client.delete(r.BENCHMARK_RUNS.path(self.ref.namespace, name),
                                         uid=str(run["metadata"]["uid"]))
            stopped.append(name)
        return stopped

    async def write(self) -> None:
        await self.patcher.write(self.status.model_dump(mode="json"))

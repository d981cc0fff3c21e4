"""kopf handlers, and nothing else: each one delegates to the engine.

A BenchmarkRun is a kopf daemon: it starts when the run appears (or when the operator restarts while one exists)
and is cancelled when the run is deleted; the delete handler then removes what the run created, behind
csibench's own finalizer. The engine patches status itself, so progress shows while a step runs. A
BenchmarkSuite is a kopf daemon too (``suite/controller.py``): it creates its runs one after another; deleting it
deletes them by owner reference, each cleaned up by its own finalizer. A BenchmarkSchedule is a kopf daemon for
as long as it exists (``schedule/controller.py``): it reads its live spec at each pass, so an edit (suspend, a new
schedule) takes effect without a restart; its runs go with it by owner reference too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from csibench.api.models import (
    GROUP,
    PLURAL,
    VERSION,
    BenchmarkRunSpec,
    ClientSettings,
    ConditionReason,
    DisruptionKind,
    Phase,
    RestartPolicy,
)
from csibench.api.population import DEFAULT_TIMEOUT_SECONDS
from csibench.api.schedule import SCHEDULE_PLURAL
from csibench.api.suite import (
    SUITE_KIND,
    SUITE_PLURAL,
    BenchmarkSuiteSpec,
    SuitePhase,
    shared_population_seconds,
)
from csibench.api.text import validation_problems
from csibench.engine.deletion import clean_up_deleted_run
from csibench.engine.population.removal import SeedParts
from csibench.engine.population.sharing import remove_suite_population, suite_owner
from csibench.engine.recovery import recover_after_restart
from csibench.engine.report_store import load_report, restore_run_metrics
from csibench.engine.resume import resume
from csibench.engine.run import RunEngine
from csibench.engine.status import StatusRecorder
from csibench.engine.undo import undo_all
from csibench.engine.verdict import RunVerdict
from csibench.kube.client import ApiError, KubeClient, load_configuration
from csibench.kube.events import post_event
from csibench.kube.resources import InvalidName, RunRef, ScheduleRef, SuiteRef
from csibench.metrics import METRICS
from csibench.schedule.controller import ScheduleController
from csibench.schedule.progress import parse_time
from csibench.suite.controller import SuiteController, SuiteReason, SuiteRetry

FINALIZER = "csibench.io/finalizer"
ANNOTATION_PREFIX = "csibench.io"
TERMINAL = {Phase.SUCCEEDED.value, Phase.FAILED.value}
SUITE_TERMINAL = {SuitePhase.SUCCEEDED.value, SuitePhase.FAILED.value}
SUITE_RETRY_SECONDS = 30.0
SUITE_CLIENT = ClientSettings(qps=20, burst=40, maxInFlight=4)  # a suite reads its runs every 2 s, no more
DELETE_CLEANUP_SECONDS = 50.0  # the default of ``csibench operator --deleted-run-cleanup-seconds``
DELETE_CLEANUP_ENV = "CSIBENCH_DELETED_RUN_CLEANUP_SECONDS"
DELETE_RETRIES = 5  # then kopf gives up and releases the finalizer: a run is never stuck on deletion forever
DELETE_BACKOFF_SECONDS = 10.0
log = logging.getLogger(__name__)


def deleted_run_cleanup_seconds() -> float:
    """How long a deleted run's cleanup waits for its objects to go before a Warning names what is left: the
    operator's ``--deleted-run-cleanup-seconds`` (passed on in ``DELETE_CLEANUP_ENV``), else 50 s."""
    return float(os.environ.get(DELETE_CLEANUP_ENV) or DELETE_CLEANUP_SECONDS)


def plain(value: Any) -> Any:
    """kopf hands out read-only views; pydantic wants plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


async def _client_for(settings: ClientSettings, run_label: str = "") -> KubeClient:
    """Loading a kubeconfig reads files and may run an exec auth plugin: never on the event loop."""
    def build() -> KubeClient:
        return KubeClient(load_configuration(), settings.qps, settings.burst, settings.maxInFlight, run_label)
    return await asyncio.to_thread(build)


def describe_invalid_spec(error: ValidationError) -> str:
    """'spec is invalid: spec.targetNamespace: ...; spec.labels: ...'."""
    return "spec is invalid: " + validation_problems(error)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=2.0)
async def handle_run_benchmarkrun(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, **_: Any) -> None:
    phase = status.get("phase")
    ref = RunRef(meta["namespace"], meta["name"], meta["uid"], int(meta.get("generation", 1)))
    if phase in TERMINAL:
        await _restore_metrics(ref, body, plain(status))
        await _undo_finished_run_disruptions(ref, body)
        return
    try:
        spec = BenchmarkRunSpec.model_validate(plain(body.get("spec") or {}))
    except ValidationError as error:
        client = await _client_for(ClientSettings())
        try:
            await StatusRecorder(ref, client).finish(RunVerdict(Phase.FAILED, ConditionReason.INVALID_SPEC,
                                                                describe_invalid_spec(error)))
        finally:
            await client.close()
        return
    client = await _client_for(spec.client, f"{ref.namespace}/{ref.name}")
    try:
        engine = RunEngine(ref, spec, client)
        if phase in (Phase.RUNNING.value, Phase.CLEANING_UP.value):
            await _undo_disruptions(client, ref, spec)  # before the step is redone or the run fails
        if phase == Phase.RUNNING.value and spec.restartPolicy == RestartPolicy.REDO:
            await resume(engine, plain(status))
        elif phase in (Phase.RUNNING.value, Phase.CLEANING_UP.value):
            await recover_after_restart(engine, plain(status))
        else:
            await engine.execute()
    finally:
        await client.close()


async def _undo_disruptions(client: KubeClient, ref: RunRef, spec: BenchmarkRunSpec) -> None:
    """What a disruption of this run left undone when the operator stopped (a workload scaled down) is undone;
    a problem is logged (the run's end, or the operator's next start, tries again)."""
    for problem in await undo_all(client, ref.uid, spec.disruptions):
        log.error("run %s/%s: a workload its disruption scaled down was not given back: %s", ref.namespace,
                  ref.name, problem)


async def _undo_finished_run_disruptions(ref: RunRef, body: kopf.Body) -> None:
    """A finished run whose ScaleDown could not be given back, or whose DrainNode's node could not be
    uncordoned, at its end (its DisruptionNotUndone Event) gets another try each time the operator starts; a
    workload or node without its mark is not touched."""
    disruptions = (body.get("spec") or {}).get("disruptions") or []
    undoable = (DisruptionKind.SCALE_DOWN, DisruptionKind.DRAIN_NODE)
    if not any(isinstance(d, Mapping) and d.get("kind") in undoable for d in disruptions):
        return
    try:
        spec = BenchmarkRunSpec.model_validate(plain(body.get("spec") or {}))
    except ValidationError:
        return
    client = await _client_for(ClientSettings())
    try:
        await _undo_disruptions(client, ref, spec)
    finally:
        await client.close()


async def _restore_metrics(ref: RunRef, body: kopf.Body, status: dict[str, Any]) -> None:
    """After an operator restart, a finished run's series come back from its status and stored report."""
    run_label = f"{ref.namespace}/{ref.name}"
    storage_class = str((body.get("spec") or {}).get("storageClassName", ""))
    METRICS.set_phase(run_label, str(status["phase"]))
    report = None
    if status.get("reportConfigMap"):
        client = await _client_for(ClientSettings())
        try:
            report = await load_report(client, ref.namespace, str(status["reportConfigMap"]))
        finally:
            await client.close()
    restore_run_metrics(run_label, storage_class, status, report)


@kopf.on.delete(GROUP, VERSION, PLURAL, retries=DELETE_RETRIES, backoff=DELETE_BACKOFF_SECONDS)
async def handle_delete_benchmarkrun(meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, **_: Any) -> None:
    """Remove what the run created. What it created is read from its status (recorded as it went), never
    from the spec; every delete is still limited to objects carrying the run's uid label, but for orphaned
    snapshot contents, whose ownership is proven by uid instead (``engine/reclaim.py``). A workload one of its
    disruptions scaled down is given back its replicas first (the workload's own annotation proves the run did
    it; the spec only says where to look)."""
    METRICS.forget_run(f"{meta['namespace']}/{meta['name']}")
    if not status.get("targetNamespace"):
        return  # never got past its preconditions: nothing was created
    ref = RunRef(meta["namespace"], meta["name"], meta["uid"])
    client = await _client_for(ClientSettings())
    try:
        undone = await _undo_deleted_run_disruptions(client, ref, plain(spec))
        population = (plain(spec) or {}).get("population") or {}
        population_seconds = float(population.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)
        await clean_up_deleted_run(client, ref, plain(status), deleted_run_cleanup_seconds(), population_seconds,
                                   population_shared=population.get("shared") is True)
        if undone:  # the run's own objects are gone; what is left is retried (kopf), then the finalizer goes
            raise kopf.TemporaryError("what a disruption did was not undone: " + "; ".join(undone),
                                      delay=DELETE_BACKOFF_SECONDS)
    except InvalidName as error:  # a status naming no valid namespace: there is nothing of the run's there
        log.warning("run %s/%s deleted; its status names an invalid namespace: %s", ref.namespace, ref.name, error)
    except (ApiError, TimeoutError) as error:
        raise kopf.TemporaryError(f"cleanup of the deleted run failed: {error}",
                                  delay=DELETE_BACKOFF_SECONDS) from error
    finally:
        await client.close()


async def _undo_deleted_run_disruptions(client: KubeClient, ref: RunRef, spec: dict[str, Any]) -> list[str]:
    """A deleted run's scaled-down workloads given back; what could not be, with why."""
    try:
        disruptions = BenchmarkRunSpec.model_validate(spec).disruptions
    except ValidationError:
        return []  # a spec that never validated never ran a disruption
    return await undo_all(client, ref.uid, disruptions)


@kopf.daemon(GROUP, VERSION, SUITE_PLURAL, cancellation_timeout=2.0)
async def handle_run_benchmarksuite(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, **_: Any) -> None:
    """A suite creates its runs one after another until the last ends; after a restart it picks up where its
    status and its runs say it is. Deleting the suite cancels this; its runs go with it (owner references)."""
    ref = SuiteRef(meta["namespace"], meta["name"], meta["uid"], int(meta.get("generation", 1)))
    client = await _client_for(SUITE_CLIENT)
    try:
        try:
            spec = BenchmarkSuiteSpec.model_validate(plain(body.get("spec") or {}))
        except ValidationError as error:
            controller = SuiteController(ref, BenchmarkSuiteSpec(template={}), client, plain(status))
            await controller.fail(SuiteReason.INVALID_SPEC, describe_invalid_spec(error))
            return
        controller = SuiteController(ref, spec, client, plain(status))
        if status.get("phase") in SUITE_TERMINAL:
            await controller.restore_metrics()
        else:
            try:
                await controller.run()
            except SuiteRetry as retry:  # a quota or missing rights: status says so; kopf starts the daemon again
                raise kopf.TemporaryError(str(retry), delay=SUITE_RETRY_SECONDS) from retry
        if controller.status.phase in (SuitePhase.SUCCEEDED, SuitePhase.FAILED) and not controller.population_removed:
            await _remove_suite_population(controller, client, shared_population_seconds(spec))
    finally:
        await client.close()


async def _remove_suite_population(controller: SuiteController, client: KubeClient, deadline_seconds: float,
                                   last_try: bool = False) -> None:
    """A suite's shared population removed (its last run has ended, or the suite is deleted), and status told; what
    is left is retried by kopf (the finished suite's daemon starts again, a deletion's handler is called again),
    and on the ``last_try`` said in a Warning Event instead."""
    ref = controller.ref
    volume, content = controller.recorded_seed()

    async def remember(parts: SeedParts) -> None:
        await controller.record_seed(parts.volume, parts.content)
    removal = await remove_suite_population(client, ref, SeedParts(volume, content), deadline_seconds, remember)
    if removal.found or not controller.population_removed:
        await controller.record_population(suite_owner(ref.namespace, ref.name, ref.uid, {}).selector,
                                           removal.complete, removal.seconds,
                                           removal.describe() if removal.found else "nothing to remove")
    if removal.complete:
        return
    if last_try:
        await post_event(client, SUITE_KIND, ref, "PopulationLeft", removal.describe(), warning=True)
        return
    raise kopf.TemporaryError(removal.describe(), delay=SUITE_RETRY_SECONDS)


async def _wait_for_runs_gone(controller: SuiteController, seconds: float) -> None:
    """Until none of the suite's runs is left (each one's own finalizer cleans up after it, and none grows the
    population any more once it is gone); TemporaryError past ``seconds``."""
    deadline = time.monotonic() + seconds
    while left := await controller.runs_left():
        if time.monotonic() > deadline:
            raise kopf.TemporaryError(f"waiting for the suite's runs to go first: {', '.join(left[:5])}",
                                      delay=DELETE_BACKOFF_SECONDS)
        await asyncio.sleep(1.0)


@kopf.on.delete(GROUP, VERSION, SUITE_PLURAL, retries=DELETE_RETRIES, backoff=DELETE_BACKOFF_SECONDS)
async def handle_delete_benchmarksuite(meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, retry: int,
                                       **_: Any) -> None:
    """The suite's runs are deleted by the garbage collector (owner references), each cleaned up by its own
    finalizer. A suite that shares its population first deletes its runs itself and waits until they are gone (so
    none grows it any more), then removes the population within its levels' timeoutSeconds; what is left is
    retried, then said in a Warning Event (PopulationLeft) when the finalizer goes."""
    METRICS.forget_suite(f"{meta['namespace']}/{meta['name']}")
    if not spec.get("sharePopulation") and not status.get("population"):
        return
    ref = SuiteRef(meta["namespace"], meta["name"], meta["uid"], int(meta.get("generation", 1)))
    try:
        deadline = shared_population_seconds(BenchmarkSuiteSpec.model_validate(plain(spec)))
    except ValidationError:  # a spec another version wrote: the population's default deadline
        deadline = float(DEFAULT_TIMEOUT_SECONDS)
    client = await _client_for(SUITE_CLIENT)
    try:
        try:
            controller = SuiteController(ref, BenchmarkSuiteSpec(template={}), client, plain(status))
        except ValidationError:  # a status another version wrote: what it recorded of the seed is not used
            controller = SuiteController(ref, BenchmarkSuiteSpec(template={}), client)
        await controller.stop_runs()
        await _wait_for_runs_gone(controller, deleted_run_cleanup_seconds() + 30.0)
        await _remove_suite_population(controller, client, deadline, last_try=retry >= DELETE_RETRIES - 1)
    except ApiError as error:
        raise kopf.TemporaryError(f"removing the suite's population failed: {error}",
                                  delay=DELETE_BACKOFF_SECONDS) from error
    finally:
        await client.close()


@kopf.daemon(GROUP, VERSION, SCHEDULE_PLURAL, cancellation_timeout=2.0)
async def handle_run_benchmarkschedule(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, **_: Any) -> None:
    """A schedule creates its runs at their times for as long as it exists; after a restart it goes on from its
    status and its runs (a run's name is its time: one made before the restart is never made again)."""
    ref = ScheduleRef(meta["namespace"], meta["name"], meta["uid"], int(meta.get("generation", 1)))
    created = parse_time(meta.get("creationTimestamp")) or datetime.now(UTC)
    client = await _client_for(SUITE_CLIENT)

    def current() -> tuple[int, dict[str, Any]] | None:  # kopf keeps a daemon's body fresh with each change
        live = body.get("metadata") or {}
        if live.get("deletionTimestamp"):  # nothing more to make (a namespace being deleted refuses it anyway)
            return None
        return int(live.get("generation", 1)), plain(body.get("spec") or {})

    try:
        await ScheduleController(ref, client, plain(status), created).run(current)
    finally:
        await client.close()


@kopf.on.delete(GROUP, VERSION, SCHEDULE_PLURAL)
async def handle_delete_benchmarkschedule(meta: kopf.Meta, **_: Any) -> None:
    """The schedule's runs are deleted by the garbage collector (owner references); its series are dropped."""
    METRICS.forget_schedule(f"{meta['namespace']}/{meta['name']}")

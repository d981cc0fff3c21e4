"""One BenchmarkRun driven through the real engine against the in-memory ``FakeKube``, for the engine's unit tests.

The run's identity (``REF``, ``UID``, ``NAMES``, ``LABEL``), a small spec on the fake's storage class, running it
to its end (``run``), stopping it as an operator restart would at a chosen moment (``kill_when``, ``running``)
and resuming it (``resume``), and reading what it left: its steps, its objects (``owned_left``), its stored
report. Also the state a run lost mid-way leaves behind, for the recovery tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine
from typing import Any

from csibench.api.models import BenchmarkRunSpec, BenchmarkRunStatus
from csibench.engine.naming import Names
from csibench.engine.population.manifests import POPULATION_LABEL
from csibench.engine.recovery import recover_after_restart
from csibench.engine.report_store import load_report
from csibench.engine.resume import resume as resume_run
from csibench.engine.run import RunEngine
from csibench.kube.client import Json
from csibench.kube.resources import RunRef
from tests.support.fake_kube import GROUP_HANDLE, FakeKube

UID = "0a1b2c3d-0000-4000-8000-000000000001"
REF = RunRef("runs", "bench", UID)
NAMES = Names.for_run(REF.name, REF.uid)
LABEL = {"csibench.io/run-uid": UID}
Status = dict[str, Any]  # a BenchmarkRun's status as the API server stores it (JSON)


def spec(**fields: Any) -> BenchmarkRunSpec:
    """A small valid spec on the fake's storage class (6 volumes, 2 per pod), with ``fields`` over it."""
    return BenchmarkRunSpec.model_validate({"storageClassName": "sim", "volumes": 6, "pvcsPerPod": 2, **fields})


HANG_SECONDS = 90.0


def run(fake: FakeKube, run_spec: BenchmarkRunSpec, previous: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None) -> BenchmarkRunStatus:
    """The run to its end (execute; with ``previous``, after a restart as its restart policy says). ``metadata``:
    more of the run object's metadata (a suite's labels and owner reference)."""
    async def go() -> BenchmarkRunStatus:
        fake.loop = asyncio.get_running_loop()
        fake.put("benchmarkruns", REF.namespace, {"metadata": {**(metadata or {}), "name": REF.name, "uid": REF.uid},
                                                  "spec": run_spec.model_dump(mode="json")})
        engine = RunEngine(REF, run_spec, fake)
        if previous is None:
            work = engine.execute()
        elif run_spec.restartPolicy.value == "Redo":
            work = resume_run(engine, previous)
        else:
            work = recover_after_restart(engine, previous)
        # A guard against a hang, not a bound on speed: at nice 10 beside the integration tests and two CPU
        # burners, an 18-pod data path that takes 2.5 s alone ran out of 20 s (2026-12-07).
        return await asyncio.wait_for(work, HANG_SECONDS)
    return asyncio.run(go())


def steps_of(status: BenchmarkRunStatus) -> dict[str, tuple[str, int, int, int, int]]:
    """Each step's (state, objects, succeeded, failed, skipped)."""
    return {s.name: (s.state.value, s.objects, s.succeeded, s.failed, s.skipped) for s in status.steps}


def owned_left(fake: FakeKube) -> list[tuple[str, str, str]]:
    """Objects of the run still in the fake: labelled ones, and PVs/contents pointing at the run's objects."""
    left = [k for k, o in fake.objects.items() if (o["metadata"].get("labels") or {}).get(
        "csibench.io/run-uid") == UID]
    left += [k for k, o in fake.objects.items() if k[0] in ("persistentvolumes", "volumesnapshotcontents",
                                                            "volumegroupsnapshotcontents", "volumesnapshots")
             and str(o["spec"]).find(NAMES.prefix) >= 0 and k not in left]
    # A group member's content names only its member snapshot; the fake holds no one else's groups.
    left += [k for k, o in fake.objects.items() if k[0] == "volumesnapshotcontents"
             and GROUP_HANDLE in (o["metadata"].get("annotations") or {})]
    return left


def population_objects(fake: FakeKube, owner_uid: str) -> list[tuple[str, str, str]]:
    """Every object of the population whose owner has ``owner_uid`` (a run's, or a suite's shared one), sorted."""
    return sorted(k for k, o in fake.objects.items()
                  if (o["metadata"].get("labels") or {}).get(POPULATION_LABEL) == owner_uid)


def seeded_fake() -> FakeKube:
    """The fake with its cluster's classes, nodes and namespace (``FakeKube.seed_cluster``)."""
    fake = FakeKube()
    fake.seed_cluster()
    return fake


def status_of_a_lost_run(states: list[tuple[str, str]]) -> dict[str, Any]:
    """The status an operator killed mid-run left: Running, with these (step, state) pairs."""
    steps = [{"name": name, "state": state, "objects": 6} for name, state in states]
    return {"phase": "Running", "targetNamespace": NAMES.namespace, "ownedNamespace": NAMES.namespace,
            "steps": steps, "duration": "1.0s"}


def leave_objects_of_a_lost_run(fake: FakeKube) -> None:
    """What such a run left in the fake: its labelled namespace and three of its claims."""
    fake.put("namespaces", "", {"metadata": {"name": NAMES.namespace, "labels": dict(LABEL)}})
    for index in range(3):
        fake.put("persistentvolumeclaims", NAMES.namespace, {"metadata": {"name": NAMES.volume(index),
                                                                          "labels": dict(LABEL)}})



def running(step: str) -> Callable[[Status], bool]:
    """A condition for ``kill_when``: ``step`` is running."""
    return lambda status: any(s["name"] == step and s["state"] == "Running" for s in status.get("steps", []))


def kill_when(fake: FakeKube, run_spec: BenchmarkRunSpec, condition: Callable[[Status], bool],
              start: Callable[[RunEngine], Coroutine[Any, Any, BenchmarkRunStatus]] | None = None,
              extra_sleep: float = 0.03) -> Status:
    """Run (``execute``, or ``start(engine)``) until a status it writes meets ``condition``, then stop the engine
    ``extra_sleep`` later as an operator restart would; the status as last written. A poller alone, starved on a
    busy machine, could miss a status that a later write replaced: each write is checked as it is made too."""
    async def go() -> None:
        loop = asyncio.get_running_loop()
        fake.loop = loop
        if ("benchmarkruns", REF.namespace, REF.name) not in fake.objects:
            fake.put("benchmarkruns", REF.namespace, {"metadata": {"name": REF.name, "uid": REF.uid},
                                                      "spec": run_spec.model_dump(mode="json")})
        engine = RunEngine(REF, run_spec, fake)
        task = asyncio.create_task(start(engine) if start else engine.execute())
        met = asyncio.Event()
        original = fake.merge_patch

        def check() -> None:
            if not met.is_set() and fake.status_writes and condition(fake.status_writes[-1]):
                met.set()
                loop.call_later(extra_sleep, task.cancel)

        async def watched(path: str, body: Json, on_send: Any = None) -> Json | None:
            answer = await original(path, body, on_send)
            if path.endswith("/status"):
                check()
            return answer
        # The condition is checked on each status write as it is made, and (for one that reads the cluster too) as
        # time passes.
        fake.merge_patch = watched  # type: ignore[method-assign]  # the restart's moment, seen as it is written
        try:
            while not met.is_set():
                assert not task.done(), "the run ended before the moment to kill it"
                check()
                await asyncio.sleep(0.002)
            with contextlib.suppress(asyncio.CancelledError):
                await task
        finally:
            fake.merge_patch = original  # type: ignore[method-assign]
    asyncio.run(go())
    last: Status = json.loads(json.dumps(fake.status_writes[-1]))
    return last


def resume(fake: FakeKube, run_spec: BenchmarkRunSpec, previous: Status) -> BenchmarkRunStatus:
    """The engine resuming after the restart ``previous`` (a status ``kill_when`` returned) tells of."""
    async def go() -> BenchmarkRunStatus:
        fake.loop = asyncio.get_running_loop()
        return await asyncio.wait_for(resume_run(RunEngine(REF, run_spec, fake), previous), 30)
    return asyncio.run(go())


def stored_report(fake: FakeKube) -> dict[str, Any]:
    """The report the run stored in the fake (its ConfigMaps), as ``csibench report`` reads it."""
    report = asyncio.run(load_report(fake, REF.namespace, NAMES.report))
    assert report is not None
    return report

"""A suite's shared population (sharePopulation; population.shared): the rules that keep one population true for
every run, growth that makes only what a level adds, the proof a run gives before it uses a suite's population,
a run's cleanup that leaves it, and the suite's removal of all of it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunSpec, ConditionReason, Phase
from csibench.api.population import PopulationSpec, PopulationStatus
from csibench.api.suite import (
    SHARED_POPULATION_RULE,
    SUITE_UID_LABEL,
    BenchmarkSuiteSpec,
    cells_of,
    child_spec,
    shared_population_seconds,
)
from csibench.engine.errors import RunAborted
from csibench.engine.population import manifests as m
from csibench.engine.population.making import Owner, make_population
from csibench.engine.population.removal import SeedParts, population_cleanup
from csibench.engine.population.sharing import remove_suite_population, suite_owner
from csibench.kube.resources import SuiteRef
from csibench.report.render import population_line
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import REF, UID, owned_left, population_objects, run, seeded_fake, spec, steps_of

SUITE = SuiteRef(REF.namespace, "envelope", "5a17e000-0000-4000-8000-00000000abcd")
TEMPLATE = {"storageClassName": "sim", "volumeSnapshotClassName": "snap"}


def _suite(**fields: Any) -> BenchmarkSuiteSpec:
    return BenchmarkSuiteSpec.model_validate({"template": TEMPLATE, "sharePopulation": True, **fields})




# -- the suite's rules -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("fields", "words"), [
    ({"matrix": {"population": [{"claims": 20}, {"claims": 10}]}}, "only grows"),
    ({"matrix": {"population": [{"claims": 10}, {"claims": 20}]}, "repeat": 2}, "only grows"),  # Interleaved
    ({"matrix": {"population": [{"claims": 10, "snapshots": 10}, {"claims": 20, "snapshots": 5}]}}, "only grows"),
    ({"matrix": {"population": [{"claims": 10}], "storageClassName": ["a", "b"]}}, "axis storageClassName"),
    ({"matrix": {"population": [{"claims": 10}], "size": ["1Gi", "2Gi"]}}, "axis size"),
    ({"matrix": {"volumes": [1, 2]}}, "has no population"),
    ({"template": {**TEMPLATE, "population": {"claims": 10}}, "parallelism": 2}, "needs parallelism 1"),
    ({"sharePopulation": False, "template": {**TEMPLATE, "population": {"claims": 10, "shared": True}}},
     "the suite's to set"),
    ({"sharePopulation": False, "matrix": {"population": [{"claims": 10, "shared": True}]}}, "the suite's to set"),
])
def test_a_suite_whose_runs_could_not_share_one_population_is_refused(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        _suite(**fields)


def test_the_crd_refuses_a_shared_population_with_parallelism_too() -> None:
    rules = [rule["rule"] for rule in BenchmarkSuiteSpec.model_json_schema()["x-kubernetes-validations"]]
    assert SHARED_POPULATION_RULE[0] in rules


def test_each_run_of_a_sharing_suite_is_told_its_population_is_shared() -> None:
    suite = _suite(order="Sequential", repeat=2, matrix={
        "population": [{"claims": 10}, {"claims": 20, "snapshots": 5, "timeoutSeconds": 7200}]})
    children = [child_spec(suite, cell)["population"] for cell in cells_of(suite.matrix)]
    assert [c["shared"] for c in children] == [True] * 2, children
    assert shared_population_seconds(suite) == 7200.0
    one_level = _suite(repeat=2, template={**TEMPLATE, "population": {"claims": 10}}, matrix={"volumes": [1, 2]})
    assert {child_spec(one_level, cell)["population"]["shared"] for cell in cells_of(one_level.matrix)} == {True}
    with pytest.raises(ValidationError, match="varies fastest"):
        _suite(matrix={"volumes": [1, 2], "population": [{"claims": 10}, {"claims": 20}]})
    alone = BenchmarkSuiteSpec.model_validate({"template": TEMPLATE, "matrix": {"population": [{"claims": 10}]}})
    assert "shared" not in child_spec(alone, cells_of(alone.matrix)[0])["population"]


# -- growth ------------------------------------------------------------------------------------------------------
def _make(fake: FakeKube, owner: Owner, population: PopulationSpec) -> tuple[PopulationStatus, list[str]]:
    run_spec = BenchmarkRunSpec.model_validate(TEMPLATE)
    said: list[str] = []
    record = PopulationStatus()

    async def progress(text: str) -> None:
        said.append(text)

    async def go() -> None:
        fake.loop = asyncio.get_running_loop()
        await make_population(fake, run_spec, population, owner, None, progress, record)
    asyncio.run(go())
    return record, said


def _population_posts(fake: FakeKube, prefix: str) -> list[str]:
    return [path for verb, path in fake.timeline if verb == "POST" and f"/pop-{prefix}-0" in path]


def test_a_shared_population_grows_by_what_a_level_adds_and_never_shrinks() -> None:
    fake = seeded_fake()
    owner = suite_owner(REF.namespace, SUITE.name, SUITE.uid, {})
    first, _ = _make(fake, owner, PopulationSpec(claims=3, snapshots=2, shared=True))
    assert (first.foundClaims, first.foundSnapshots) == (0, 0)
    posts_before = len(_population_posts(fake, owner.prefix))
    assert posts_before == 2 * 3 + 2 * 2  # a PV and a claim, a content and a snapshot
    uids = {k: o["metadata"]["uid"] for k, o in fake.objects.items() if k[0] == "persistentvolumeclaims"}

    second, said = _make(fake, owner, PopulationSpec(claims=5, snapshots=4, shared=True))
    assert (second.claims, second.snapshots, second.foundClaims, second.foundSnapshots) == (5, 4, 3, 2)
    assert any("creating 2 claims, 2 snapshots" in s for s in said), said
    assert len(_population_posts(fake, owner.prefix)) - posts_before == 2 * 2 + 2 * 2  # only the new ones
    claims = fake.named("persistentvolumeclaims", REF.namespace)
    assert sorted(n for n in claims if m.member_index(owner.prefix, n)) == [
        m.member_name(owner.prefix, i) for i in range(1, 6)]
    assert all(claims[n]["metadata"]["uid"] == uids[("persistentvolumeclaims", REF.namespace, n)]
               for n in claims if ("persistentvolumeclaims", REF.namespace, n) in uids), "a claim was made anew"

    with pytest.raises(RunAborted, match="only grows"):
        _make(fake, owner, PopulationSpec(claims=4, snapshots=4, shared=True))


def test_a_claim_left_without_its_volume_gets_its_pair_asked_for_again() -> None:
    """A run stopped between a PV's create and its claim's (or a refused PV create) leaves a claim that never binds:
    the next level asks for its pair again instead of waiting for it until the deadline."""
    fake = seeded_fake()
    owner = suite_owner(REF.namespace, SUITE.name, SUITE.uid, {})
    _make(fake, owner, PopulationSpec(claims=3, shared=True))
    orphan = m.member_name(owner.prefix, 4)
    fake.put("persistentvolumeclaims", REF.namespace, {**m.build_claim(orphan, BenchmarkRunSpec.model_validate(
        TEMPLATE), owner.labels), "status": {"phase": "Pending"}})
    grown, _ = _make(fake, owner, PopulationSpec(claims=5, shared=True, timeoutSeconds=30))
    assert (grown.claims, grown.foundClaims) == (5, 4)
    assert ("persistentvolumes", "", orphan) in fake.objects
    assert fake.named("persistentvolumeclaims", REF.namespace)[orphan]["status"]["phase"] == "Bound"


def test_member_names_are_read_back_as_their_indices_and_nothing_else_is() -> None:
    assert m.member_index("s-abcde", m.member_name("s-abcde", 42)) == 42
    assert m.member_index("s-abcde", m.seed_name("s-abcde")) is None
    assert m.member_index("s-abcde", m.member_name("t-abcde", 42)) is None
    assert m.member_index("s-abcde", "pop-s-abcde-00004x") is None


# -- a run of a suite --------------------------------------------------------------------------------------------
def _suite_object(fake: FakeKube, share: bool = True, deleting: bool = False) -> None:
    deleted = {"deletionTimestamp": "2026-12-07T00:00:00Z"} if deleting else {}
    fake.put("benchmarksuites", SUITE.namespace, {"metadata": {"name": SUITE.name, "uid": SUITE.uid, **deleted},
                                                  "spec": {"template": TEMPLATE, "sharePopulation": share}})


def _childs_metadata(uid: str = SUITE.uid, controller: bool = True) -> dict[str, Any]:
    return {"labels": {SUITE_UID_LABEL: uid}, "ownerReferences": [
        {"apiVersion": "csibench.io/v1alpha1", "kind": "BenchmarkSuite", "name": SUITE.name, "uid": uid,
         "controller": controller}]}


SHARED = {"claims": 4, "snapshots": 2, "shared": True}


def test_a_suites_run_grows_the_suites_population_leaves_it_and_the_suite_removes_it() -> None:
    fake = seeded_fake()
    _suite_object(fake)
    run_spec = spec(volumeSnapshotClassName="snap", steps=["createVolume", "createSnapshot", "deleteSnapshot",
                                                           "deleteVolume"], population=SHARED)
    status = run(fake, run_spec, metadata=_childs_metadata())
    assert status.phase == Phase.SUCCEEDED, status.conditions
    assert steps_of(status)["createVolume"] == ("Succeeded", 6, 6, 0, 0)
    population = status.population
    assert population is not None and population.sharedBy == SUITE.name, population
    assert population.selector == m.population_selector(SUITE.uid) and population.removedSeconds is None
    assert population_cleanup(population, 60, shared=True) is None
    # Status alone decides nothing: a run whose spec is not shared removes its own population whatever status says.
    assert population_cleanup(population, 60) is not None
    line = population_line(population.model_dump(mode="json", exclude_none=True))
    assert "the suite envelope's, found with 0 claims and 0 snapshots and kept for the suite, grown in " in line, line
    assert owned_left(fake) == [] and population_objects(fake, UID) == []
    kept = population_objects(fake, SUITE.uid)
    assert len(kept) == 2 * 4 + 2 * 2 + 2, kept  # members, and the seed claim and snapshot
    assert all(k[1] in ("", REF.namespace) for k in kept)
    seed_owner = suite_owner(REF.namespace, SUITE.name, SUITE.uid, {})
    seed_volume = fake.named("persistentvolumeclaims", REF.namespace)[m.seed_name(seed_owner.prefix)]["spec"][
        "volumeName"]

    remembered: list[SeedParts] = []

    async def remember(parts: SeedParts) -> None:
        remembered.append(parts)

    async def remove() -> Any:
        fake.loop = asyncio.get_running_loop()
        return await remove_suite_population(fake, SUITE, SeedParts(), 30, remember)
    removal = asyncio.run(remove())
    assert removal.complete and removal.found, removal
    assert population_objects(fake, SUITE.uid) == []
    assert ("persistentvolumes", "", seed_volume) not in fake.objects, "the seed's volume was left"
    assert [parts.volume for parts in remembered] == [seed_volume]


def test_a_retried_suite_removal_still_waits_for_the_seed_volume_its_first_try_recorded() -> None:
    """Once the first try deleted the seed claim, nothing but the suite's status names the seed's PV: a retry
    given those names waits for it; one without them would call the population gone while its volume is not."""
    fake = FakeKube(Behaviour(release_delay=2.0))  # the seed's PV outlives its claim by 2 s (the provisioner)
    fake.seed_cluster()
    owner = suite_owner(REF.namespace, SUITE.name, SUITE.uid, {})
    _make(fake, owner, PopulationSpec(claims=2, shared=True))
    remembered: list[SeedParts] = []

    async def remember(parts: SeedParts) -> None:
        remembered.append(parts)

    async def removals() -> tuple[Any, Any, Any]:
        fake.loop = asyncio.get_running_loop()
        first = await remove_suite_population(fake, SUITE, SeedParts(), 0.3, remember)
        unknowing = await remove_suite_population(fake, SUITE, SeedParts(), 10, remember)
        retried = await remove_suite_population(fake, SUITE, remembered[0], 10, remember)
        return first, unknowing, retried
    first, unknowing, retried = asyncio.run(removals())
    seed_volume = remembered[0].volume
    assert not first.complete and first.remaining["persistentvolumes"] == 1, first
    assert unknowing.complete and not unknowing.found  # the trap the recorded names avoid
    assert retried.complete and retried.found, retried
    assert seed_volume is not None and ("persistentvolumes", "", seed_volume) not in fake.objects


@pytest.mark.parametrize(("metadata", "share", "words"), [
    ({}, True, "is not a BenchmarkSuite's"),
    (_childs_metadata(controller=False), True, "is not a BenchmarkSuite's"),
    (_childs_metadata(uid="5a17e000-0000-4000-8000-0000000fffff"), True, "is gone"),  # another uid than the suite's
    (_childs_metadata(), False, "does not share its population"),
    (_childs_metadata(), None, "is being deleted"),  # its population is being removed: nothing may grow it
    ({"labels": {SUITE_UID_LABEL: SUITE.uid}, "ownerReferences": [
        {"apiVersion": "csibench.io/v1alpha1", "kind": "BenchmarkSuite", "name": "../x", "uid": SUITE.uid,
         "controller": True}]}, True, "names no valid suite"),
    ({"labels": {SUITE_UID_LABEL: SUITE.uid}, "ownerReferences": [
        {"apiVersion": "csibench.io/v1alpha1", "kind": "BenchmarkSuite", "name": "s" * 100_000, "uid": SUITE.uid,
         "controller": True}]}, True, "names no valid suite"),
])
def test_a_run_that_cannot_prove_it_is_the_sharing_suites_fails_before_creating_anything(
        metadata: dict[str, Any], share: bool | None, words: str) -> None:
    fake = seeded_fake()
    _suite_object(fake, share is not False, deleting=share is None)
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], population={**SHARED, "snapshots": 0}),
                 metadata=metadata)
    assert status.phase == Phase.FAILED
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert ready.reason == ConditionReason.INVALID_SPEC and words in ready.message, ready
    assert "population.shared" in ready.message and len(ready.message) < 1000, len(ready.message)
    assert not [k for k in fake.objects if k[0] in ("persistentvolumeclaims", "persistentvolumes", "namespaces")
                and k[2].startswith(("pop-", "csibench-"))]

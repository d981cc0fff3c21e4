"""spec.population: its rules, its manifests, and a run with one on the in-memory fake (made before the first step,
never counted by the steps, removed first at cleanup, another owner's population left alone)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunSpec, ConditionReason, Phase
from csibench.api.population import PopulationSpec, PopulationStatus
from csibench.api.suite import POPULATION_RULE, BenchmarkSuiteSpec
from csibench.engine.deletion import clean_up_deleted_run
from csibench.engine.errors import RunAborted
from csibench.engine.observed import Observed
from csibench.engine.population import making
from csibench.engine.population import manifests as m
from csibench.engine.population.making import Owner, make_population
from csibench.engine.population.removal import remove_population
from csibench.kube.client import ApiError
from csibench.kube.ownership import RUN_UID_LABEL
from csibench.report.render import render_table
from tests.support.fake_kube import FAKE_DRIVER, FakeKube
from tests.support.fake_runs import (
    NAMES,
    REF,
    UID,
    kill_when,
    owned_left,
    population_objects,
    resume,
    run,
    seeded_fake,
    spec,
    steps_of,
)

SNAPSHOT_PLURALS = ("volumesnapshots", "volumesnapshotcontents")




# -- the spec --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("population", "words"), [
    ({"snapshots": 3}, "needs volumeSnapshotClassName"),
    ({"claims": -1}, "greater than or equal to 0"),
    ({"claims": 100001}, "less than or equal to 100000"),
    ({"claims": 1, "timeoutSeconds": 5}, "greater than or equal to 30"),
])
def test_a_population_that_cannot_be_made_is_refused(population: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        BenchmarkRunSpec.model_validate({"storageClassName": "sim", "population": population})


def test_the_crd_holds_the_same_rules_as_cel() -> None:
    schema = BenchmarkRunSpec.model_json_schema()
    rules = [rule["message"] for rule in schema["x-kubernetes-validations"]]
    assert any("population.snapshots needs volumeSnapshotClassName" in rule for rule in rules)


# -- the manifests ---------------------------------------------------------------------------------------------
SEED_PV: dict[str, Any] = {"metadata": {"name": "pvc-1"}, "spec": {
    "csi": {"driver": "d.example.com", "volumeHandle": "vol-7", "volumeAttributes": {"pool": "a"}},
    "nodeAffinity": {"required": {"nodeSelectorTerms": []}}, "capacity": {"storage": "1Gi"},
    "persistentVolumeReclaimPolicy": "Delete", "claimRef": {"name": "seed", "uid": "u"}, "storageClassName": "x"}}


def test_a_population_volume_is_the_seeds_copy_retained_and_pre_bound_to_its_own_claim() -> None:
    run_spec = BenchmarkRunSpec(storageClassName="gold", volumeMode="Block", accessModes=["ReadWriteMany"])
    labels = m.population_labels("owner-uid", {"team": "a"})
    pv = m.build_volume("p-pop-000001", "ns", SEED_PV, run_spec, labels)
    assert pv["spec"]["csi"] == SEED_PV["spec"]["csi"] and pv["spec"]["nodeAffinity"] == SEED_PV["spec"]["nodeAffinity"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["claimRef"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "ns",
                                      "name": "p-pop-000001"}
    assert (pv["spec"]["storageClassName"], pv["spec"]["volumeMode"], pv["spec"]["accessModes"]) == (
        "gold", "Block", ["ReadWriteMany"])
    claim = m.build_claim("p-pop-000001", run_spec, labels)
    assert claim["spec"]["volumeName"] == "p-pop-000001" and claim["spec"]["storageClassName"] == "gold"
    assert labels == {"team": "a", m.POPULATION_LABEL: "owner-uid", "app.kubernetes.io/managed-by": "csibench"}
    assert RUN_UID_LABEL not in labels, "the steps' watches would see the population"


def test_a_population_content_names_the_seed_snapshot_retained_and_pre_bound() -> None:
    content = m.build_content("p-pop-000002", "ns", "d.example.com", "snap-9", "snapclass", {})
    assert content["spec"]["deletionPolicy"] == "Retain"
    assert content["spec"]["source"] == {"snapshotHandle": "snap-9"}
    assert content["spec"]["volumeSnapshotRef"]["name"] == "p-pop-000002"
    assert m.build_snapshot("p-pop-000002", {})["spec"] == {"source": {"volumeSnapshotContentName": "p-pop-000002"}}


def test_a_seed_on_a_wait_for_first_consumer_class_names_its_node() -> None:
    run_spec = BenchmarkRunSpec(storageClassName="gold")
    assert m.build_seed_claim("s", run_spec, {}, "node-1")["metadata"]["annotations"] == {m.SELECTED_NODE: "node-1"}
    assert "annotations" not in m.build_seed_claim("s", run_spec, {}, None)["metadata"]


# -- making and removing, on the fake ----------------------------------------------------------------------------
def _make(fake: FakeKube, owner: Owner, population: PopulationSpec, **fields: Any) -> Any:
    run_spec = BenchmarkRunSpec.model_validate({"storageClassName": "sim", "volumeSnapshotClassName": "snap",
                                                **fields})
    said: list[str] = []

    async def progress(text: str) -> None:
        said.append(text)

    record = PopulationStatus()

    async def go() -> None:
        fake.loop = asyncio.get_running_loop()
        await make_population(fake, run_spec, population, owner, None, progress, record)
    asyncio.run(go())
    return record, said


def test_a_population_is_made_from_one_seed_and_removed_by_its_owners_label_alone() -> None:
    fake = seeded_fake()
    mine, theirs = Owner("runs", "mine-aaaaa", "uid-mine"), Owner("runs", "theirs-bbbbb", "uid-theirs")
    made, said = _make(fake, mine, PopulationSpec(claims=4, snapshots=3))
    _make(fake, theirs, PopulationSpec(claims=2))
    assert (made.claims, made.snapshots) == (4, 3)
    assert said[0] == "population: the seed" and any("creating 4 claims, 3 snapshots" in s for s in said)
    claims = {n: o for n, o in fake.named("persistentvolumeclaims", "runs").items() if n.startswith("pop-mine")}
    seed = claims.pop(m.seed_name("mine-aaaaa"))
    assert made.seedVolume == seed["spec"]["volumeName"] and made.seedSnapshotContent is not None
    handle = fake.objects[("persistentvolumes", "", seed["spec"]["volumeName"])]["spec"]["csi"]["volumeHandle"]
    assert sorted(claims) == [f"pop-mine-aaaaa-00000{i}" for i in range(1, 5)]
    assert all(c["status"]["phase"] == "Bound" and c["spec"]["volumeName"] == n for n, c in claims.items())
    assert {fake.objects[("persistentvolumes", "", n)]["spec"]["csi"]["volumeHandle"] for n in claims} == {handle}
    contents = [o for k, o in fake.objects.items() if k[0] == "volumesnapshotcontents"
                and (o["metadata"].get("labels") or {}).get(m.POPULATION_LABEL) == "uid-mine"]
    assert len(contents) == 3 and {c["spec"]["driver"] for c in contents} == {FAKE_DRIVER}
    seed_content = fake.named("volumesnapshots", "runs")[m.seed_name("mine-aaaaa")]["status"][
        "boundVolumeSnapshotContentName"]
    seed_handle = fake.objects[("volumesnapshotcontents", "", seed_content)]["status"]["snapshotHandle"]
    assert {c["spec"]["source"]["snapshotHandle"] for c in contents} == {seed_handle}
    theirs_before = population_objects(fake, "uid-theirs")

    async def remove() -> Any:
        fake.loop = asyncio.get_running_loop()
        return await remove_population(fake, mine, 30)
    removal = asyncio.run(remove())
    assert removal.complete and removal.found, removal
    assert population_objects(fake, "uid-mine") == []
    assert ("persistentvolumes", "", seed["spec"]["volumeName"]) not in fake.objects, "the seed's volume stayed"
    assert ("volumesnapshotcontents", "", seed_content) not in fake.objects, "the seed's content stayed"
    assert population_objects(fake, "uid-theirs") == theirs_before and len(theirs_before) == 2 * 2 + 1


def test_the_members_go_at_once_and_the_seed_volume_only_after_its_snapshot() -> None:
    fake = seeded_fake()
    owner = Owner("runs", "mine-aaaaa", "uid-mine")
    made, _ = _make(fake, owner, PopulationSpec(claims=3, snapshots=2))
    fake.behaviour.release_delay = 0.6  # the seed snapshot's content goes a while after the snapshot
    seen: list[tuple[str, str, bool]] = []  # (path, selector, the seed's content still there) at each delete
    original = fake.delete

    async def delete(path: str, *args: Any, **kwargs: Any) -> bool:
        content_there = ("volumesnapshotcontents", "", made.seedSnapshotContent) in fake.objects
        seen.append((path, (kwargs.get("query") or {}).get("labelSelector", ""), content_there))
        return await original(path, *args, **kwargs)
    fake.delete = delete  # type: ignore[method-assign]  # each delete seen with the moment it was asked

    async def remove() -> Any:
        fake.loop = asyncio.get_running_loop()
        return await remove_population(fake, owner, 30)
    assert asyncio.run(remove()).complete
    members = [i for i, (path, selector, _) in enumerate(seen) if path.endswith("/persistentvolumeclaims")
               and selector.endswith(f",!{m.SEED_LABEL}")]
    seed_claim = [i for i, (path, selector, _) in enumerate(seen) if path.endswith("/persistentvolumeclaims")
                  and selector.endswith(f",{m.SEED_LABEL}")]
    assert members and seed_claim and members[0] < seed_claim[0], seen
    assert all(not seen[i][2] for i in seed_claim), "the seed volume was deleted while its snapshot's content stayed"
    assert ("persistentvolumes", "", made.seedVolume) not in fake.objects


def test_a_delete_the_api_server_fails_is_asked_again_and_the_rest_goes_on() -> None:
    fake = seeded_fake()
    owner = Owner("runs", "mine-aaaaa", "uid-mine")
    _make(fake, owner, PopulationSpec(claims=3))
    original, failures = fake.delete, [1]

    async def delete(path: str, *args: Any, **kwargs: Any) -> bool:
        if path.endswith("/persistentvolumes") and failures:
            failures.pop()
            raise ApiError(504, "Timeout", "the server was unable to return a response in the time allotted")
        return await original(path, *args, **kwargs)
    fake.delete = delete  # type: ignore[method-assign]  # one deletecollection of PVs times out

    async def remove() -> Any:
        fake.loop = asyncio.get_running_loop()
        return await remove_population(fake, owner, 30)
    removal = asyncio.run(remove())
    assert removal.complete and population_objects(fake, "uid-mine") == [], removal


def test_a_deleted_run_removes_its_population_within_the_populations_timeout_not_the_short_cleanup() -> None:
    fake = seeded_fake()
    run_spec = spec(steps=["createVolume", "deleteVolume"], cleanup="Never", population={"claims": 4})
    status = run(fake, run_spec)
    assert status.phase == Phase.SUCCEEDED and len(population_objects(fake, UID)) == 2 * 4 + 1
    fake.behaviour.release_delay = 1.0  # the seed's volume goes a second after its claim

    async def delete() -> Any:
        fake.loop = asyncio.get_running_loop()
        return await clean_up_deleted_run(fake, REF, status.model_dump(mode="json", exclude_none=True),
                                          deadline_seconds=0.2, population_seconds=30)
    result = asyncio.run(delete())
    assert result is not None and result.population is not None and result.population.complete, result
    assert population_objects(fake, UID) == [] and status.population is not None
    assert ("persistentvolumes", "", status.population.seedVolume) not in fake.objects


def test_a_create_the_api_server_refuses_fails_the_population_and_says_which() -> None:
    fake = seeded_fake()
    owner = Owner("runs", "mine-aaaaa", "uid-mine")
    fake.behaviour.refuse_create = lambda plural, name: ApiError(403, "Forbidden", "quota exceeded") \
        if plural == "persistentvolumes" else None
    with pytest.raises(RunAborted) as failed:
        _make(fake, owner, PopulationSpec(claims=2))
    assert failed.value.reason == ConditionReason.POPULATION_FAILED
    assert "creating PersistentVolume pop-mine-aaaaa-00000" in str(failed.value) and "quota exceeded" in str(
        failed.value)


def test_the_runs_shared_watches_pass_the_population_over() -> None:
    """Population PVs and contents name claims and snapshots outside the run's prefix: the run's shared PV and
    content watches (``Observed.mentions_ours``) never decode them."""
    observed = Observed("runs", NAMES.prefix)
    pv = {"metadata": {"name": m.member_name(NAMES.prefix, 1)},
          "spec": {"claimRef": {"namespace": "runs", "name": m.member_name(NAMES.prefix, 1)}}}
    assert not observed.mentions_ours(json.dumps({"type": "ADDED", "object": pv}).encode())
    ours = {**pv, "spec": {"claimRef": {"namespace": "runs", "name": NAMES.volume(1)}}}
    assert observed.mentions_ours(json.dumps({"type": "ADDED", "object": ours}).encode())


@pytest.mark.parametrize(("failure", "words"), [
    ("never_bind", "the seed claim pop-mine-aaaaa-seed was not Bound by the class sim within population."),
    ("provisioning_fails", "; last Warning ProvisioningFailed: injected failure"),
])
def test_a_seed_never_bound_fails_the_population_at_its_deadline_saying_why(failure: str, words: str) -> None:
    fake = seeded_fake()
    owner = Owner("runs", "mine-aaaaa", "uid-mine")
    setattr(fake.behaviour, failure, {m.seed_name("mine-aaaaa")})
    with pytest.raises(RunAborted) as failed:
        _make(fake, owner, PopulationSpec.model_construct(claims=2, snapshots=0, timeoutSeconds=1))
    assert failed.value.reason == ConditionReason.POPULATION_FAILED
    assert words in str(failed.value), failed.value


def test_a_claim_of_the_seeds_name_that_is_not_the_populations_is_never_used() -> None:
    fake = seeded_fake()
    owner = Owner("runs", "mine-aaaaa", "uid-mine")
    fake.put("persistentvolumeclaims", "runs", {"metadata": {"name": m.seed_name("mine-aaaaa"), "labels": {}},
                                                "spec": {}})
    with pytest.raises(RunAborted, match="is not this population's"):
        _make(fake, owner, PopulationSpec(claims=1))


# -- a run with a population -------------------------------------------------------------------------------------
def test_a_run_makes_its_population_before_its_steps_never_counts_it_and_removes_it_first() -> None:
    fake = seeded_fake()
    run_spec = spec(volumeSnapshotClassName="snap", steps=["createVolume", "createSnapshot", "deleteSnapshot",
                                                           "deleteVolume"], population={"claims": 5, "snapshots": 2})
    status = run(fake, run_spec)
    assert status.phase == Phase.SUCCEEDED, status.conditions
    assert steps_of(status)["createVolume"] == ("Succeeded", 6, 6, 0, 0)
    assert steps_of(status)["createSnapshot"] == ("Succeeded", 6, 6, 0, 0)
    population = status.population
    assert population is not None and (population.claims, population.snapshots) == (5, 2)
    assert population.seconds is not None and population.removedSeconds is not None
    assert status.cleanup is not None and "population removed in" in status.cleanup
    assert population_objects(fake, UID) == [] and owned_left(fake) == []
    creates = [path for verb, path in fake.timeline if verb == "POST"]
    first_step_claim = next(i for i, path in enumerate(creates) if path.endswith(NAMES.volume(0)))
    assert all(not path.split("/")[-1].startswith(f"pop-{NAMES.prefix}") for path in creates[first_step_claim:])


def test_a_run_without_the_rights_fails_before_creating_anything() -> None:
    fake = seeded_fake()
    fake.denied.add(("create", "persistentvolumes", ""))
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], population={"claims": 2}))
    assert status.phase == Phase.FAILED
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert ready.reason == ConditionReason.MISSING_RIGHTS and "deploy/components/population" in ready.message
    assert not [k for k in fake.objects if k[0] in ("persistentvolumeclaims", "persistentvolumes")]


def test_a_level_of_zero_makes_nothing_and_needs_no_rights() -> None:
    fake = seeded_fake()
    fake.denied.add(("create", "persistentvolumes", ""))
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], population={"claims": 0}))
    assert status.phase == Phase.SUCCEEDED, status.conditions
    assert status.population is not None and (status.population.claims, status.population.seconds) == (0, 0.0)
    assert not [path for verb, path in fake.timeline if verb == "POST" and "/pop-" in path]


def test_an_operator_restart_while_the_population_is_made_makes_the_rest_and_measures_the_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(making, "_PROGRESS_SECONDS", 0.0)  # progress said at every batch of creates
    fake = seeded_fake()
    run_spec = spec(steps=["createVolume", "deleteVolume"], population={"claims": 400})
    killed = kill_when(fake, run_spec, lambda status: "objects created" in (status.get("progress") or ""),
                       extra_sleep=0.0)
    made_before = {k for k in population_objects(fake, UID) if k[0] == "persistentvolumeclaims"}
    assert 0 < len(made_before) < 401, (len(made_before), killed.get("progress"))
    status = resume(fake, run_spec, killed)
    assert status.phase == Phase.SUCCEEDED, status.conditions
    assert status.population is not None and status.population.claims == 400
    assert steps_of(status)["createVolume"] == ("Succeeded", 6, 6, 0, 0)
    assert population_objects(fake, UID) == [] and owned_left(fake) == []


def test_the_report_says_the_level_and_what_making_and_removing_it_took() -> None:
    fake = seeded_fake()
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], population={"claims": 3}))
    text = render_table({"metadata": {"namespace": "runs", "name": "bench"}, "spec": {"storageClassName": "sim"},
                         "status": status.model_dump(mode="json", exclude_none=True)})
    line = next(line for line in text.splitlines() if line.startswith("population "))
    assert line.startswith("population 3 claims and 0 snapshots beside the batch (statically provisioned; not in "
                           "the steps), made in ") and ", removed in " in line, line


@pytest.mark.parametrize(("suite", "words"), [
    ({"matrix": {"population": [{"claims": 10}, {"claims": 10, "timeoutSeconds": 60}]}}, "lists a level twice"),
    ({"matrix": {"population": [{"claims": 0}, {"claims": 10}]}, "parallelism": 2}, "needs parallelism 1"),
])
def test_a_suite_of_levels_that_would_not_measure_them_is_refused(suite: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        BenchmarkSuiteSpec.model_validate({"template": {"storageClassName": "sim"}, **suite})
    rules = [rule["message"] for rule in BenchmarkSuiteSpec.model_json_schema()["x-kubernetes-validations"]]
    assert POPULATION_RULE[1] in rules


def test_a_run_whose_status_recorded_no_population_asks_nothing_about_one() -> None:
    """Removal follows status (written before the seed is made), so the runs without a population pay nothing."""
    def population_reads(population: dict[str, int] | None) -> list[str]:
        fake = seeded_fake()
        queries: list[str] = []
        original = fake.get

        async def get(path: str, query: dict[str, str] | None = None) -> Any:
            queries.append(json.dumps(query or {}))
            return await original(path, query)
        fake.get = get  # type: ignore[method-assign]  # every read's query seen
        extra = {"population": population} if population is not None else {}
        status = run(fake, spec(steps=["createVolume", "deleteVolume"], **extra))
        assert status.phase == Phase.SUCCEEDED, status.conditions
        return [query for query in queries if m.POPULATION_LABEL in query]
    assert population_reads(None) == []
    assert population_reads({"claims": 2}), "the spy sees a population's removal"

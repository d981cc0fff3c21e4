"""The kinds hold together: every field a judge reads of a claim, pod or snapshot is in that kind's field list, so
the change filter (whose signature is derived from the same list) never skips a line that would change a verdict;
and each kind's ``update`` writes only its fields.

The judges are exercised, not read: each judge of the catalog (its judge, its WaitForFirstConsumer judge, its
restore rules, a companion's) is called on states that record every attribute read, in every shape that sends a
judge down another branch (missing, present, gone before and after the submission, ready, failed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, cast

import pytest

from csibench.engine import catalog
from csibench.engine.judges import DONE, Judge
from csibench.engine.kinds import claim, group_snapshot, pod, snapshot
from csibench.engine.kinds.fields import Field, attributes
from csibench.engine.observed import (
    CLAIM,
    GROUP_SNAPSHOT,
    POD,
    SNAPSHOT,
    ClaimState,
    GroupSnapshotState,
    Observed,
    PodState,
    SnapshotState,
)
from csibench.engine.step import Boundaries, JudgeFactory

NAME = "run-abcde-v00000"
STATES: dict[str, type[Any]] = {CLAIM: ClaimState, POD: PodState, SNAPSHOT: SnapshotState,
                                 GROUP_SNAPSHOT: GroupSnapshotState}
FIELDS: dict[str, tuple[Field, ...]] = {CLAIM: claim.FIELDS, POD: pod.FIELDS, SNAPSHOT: snapshot.FIELDS,
                                        GROUP_SNAPSHOT: group_snapshot.FIELDS}
SHAPES: dict[str, list[dict[str, Any]]] = {
    CLAIM: [{}, {"phase": "Bound", "volume": "pv-1"}, {"phase": "Lost"},
            {"phase": "Bound", "expand_to": "2Gi", "capacity": "2Gi"},
            {"phase": "Bound", "expand_to": "2Gi", "capacity": "1Gi", "resizing": ("FileSystemResizePending",)},
            {"phase": "Bound", "expand_to": "2Gi", "resize_status": "ControllerResizeInfeasible"}],
    POD: [{}, {"ready": True, "node": "node-0", "claims": ["c"]}, {"phase": "Failed"}, {"phase": "Succeeded"}],
    SNAPSHOT: [{}, {"ready": True, "content": "snapcontent-1"},
               {"error": "rpc error: code = Internal"}],
    GROUP_SNAPSHOT: [{}, {"ready": True, "content": "gc", "protected": True, "members_expected": 2},
                     {"ready": True}, {"error": "rpc error: code = Internal"}],
}
EXISTENCE: list[dict[str, Any]] = [{}, {"exists": False, "gone_at": 5.0}, {"exists": False, "gone_at": 0.5}]


class Recording:
    """A state that writes down every attribute read of it."""

    def __init__(self, state: object, read: set[str]) -> None:
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_read", read)

    def __getattr__(self, name: str) -> Any:
        self._read.add(name)
        return getattr(self._state, name)


def judge_factories() -> Iterator[tuple[str, str, JudgeFactory]]:
    """(step, kind, factory) for every judge the catalog holds."""
    for step in catalog.STEPS.values():
        for factory in (step.judge, step.judge_wffc, step.judge_unheld, step.gone, step.settled):
            if factory is not None:
                yield step.name, step.kind, factory
        if step.companion is not None:
            yield step.name, step.companion.kind, step.companion.gone
        if step.phases is not None:  # where each part of its latency ends: read like a judge
            for boundary in range(len(step.phases.names) - 1):
                yield step.name, step.kind, as_judge(step.phases.boundaries, boundary, step.phases.names[boundary])


def as_judge(boundaries: Boundaries, boundary: int, part: str) -> JudgeFactory:
    def factory(observed: Observed, terminal: frozenset[str]) -> Judge:
        return lambda name, submitted: DONE if boundaries(observed)[boundary](name) else None
    factory.__name__ = f"end of {part}"
    return factory


def reads(kind: str, factory: JudgeFactory) -> set[str]:
    """Every attribute of a ``kind`` state the judge read, over every shape."""
    read: set[str] = set()
    for shape in SHAPES[kind]:
        for existence in EXISTENCE:
            observed = Observed("bench", "run-abcde")
            state = STATES[kind](uid="uid-1", **shape, **existence)
            states = {CLAIM: observed.claims, POD: observed.pods, SNAPSHOT: observed.snapshots,
                      GROUP_SNAPSHOT: observed.groups}[kind]
            cast(dict[str, Any], states)[NAME] = Recording(state, read)
            factory(observed, frozenset({"ProvisioningFailed"}))(NAME, 1.0)
    return read


@pytest.mark.parametrize(("step", "kind", "factory"), list(judge_factories()),
                         ids=[f"{s}-{k}-{f.__name__}" for s, k, f in judge_factories()])
def test_every_field_a_judge_reads_is_in_its_kinds_field_list(step: str, kind: str, factory: JudgeFactory) -> None:
    read = reads(kind, factory)
    assert read, f"{step}: the judge read nothing of its {kind}: the shapes here do not reach it"
    assert read <= attributes(FIELDS[kind]), f"{step} reads {sorted(read - attributes(FIELDS[kind]))} of a {kind}, " \
        f"which its change filter does not watch: add the field to kinds/{kind}.py"


def test_the_check_sees_a_field_missing_from_the_list() -> None:
    without_volume = tuple(field for field in claim.FIELDS if field.attribute != "volume")
    read = reads(CLAIM, catalog.STEPS["deleteVolume"].judge)
    assert "volume" in read and not read <= attributes(without_volume)


@pytest.mark.parametrize("kind", [CLAIM, POD, SNAPSHOT, GROUP_SNAPSHOT])
def test_update_writes_only_the_kinds_fields(kind: str) -> None:
    objects = {
        CLAIM: {"metadata": {"annotations": {claim.EXPAND_TO: "2Gi"}}, "spec": {"volumeName": "pv-1"},
                "status": {"phase": "Bound", "capacity": {"storage": "1Gi"},
                           "currentVolumeAttributesClassName": "gold",
                           "modifyVolumeStatus": {"targetVolumeAttributesClassName": "silver", "status": "InProgress"},
                           "conditions": [{"type": "FileSystemResizePending", "status": "True"}],
                           "allocatedResourceStatuses": {"storage": "NodeResizePending"}}},
        POD: {"spec": {"nodeName": "node-0", "volumes": [{"persistentVolumeClaim": {"claimName": "c"}}]},
              "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        SNAPSHOT: {"metadata": {"finalizers": ["snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"]},
                   "status": {"readyToUse": True, "boundVolumeSnapshotContentName": "c", "error": {"message": "x"}}},
        GROUP_SNAPSHOT: {"metadata": {"finalizers": [group_snapshot.BOUND_PROTECTION],
                                      "annotations": {group_snapshot.MEMBERS: "5"}},
                         "status": {"readyToUse": True, "boundVolumeGroupSnapshotContentName": "gc",
                                    "error": {"message": "x"}}},
    }
    module: Any = {CLAIM: claim, POD: pod, SNAPSHOT: snapshot, GROUP_SNAPSHOT: group_snapshot}[kind]
    state = STATES[kind]()
    before = dataclasses.asdict(state)
    module.update(state, objects[kind])
    changed = {name for name, value in dataclasses.asdict(state).items() if before[name] != value}
    assert changed == {field.attribute for field in FIELDS[kind]}


def test_a_claims_conditions_are_always_decoded() -> None:
    """A condition's message may hold any character (a "]" in "[vol-1] busy"): no pattern over the raw line could
    tell two lists of conditions apart, so a line with conditions is never skipped undecoded."""
    line = (b'{"status":{"phase":"Bound","conditions":[{"type":"ControllerResizeError","status":"True",'
            b'"message":"[vol-1] busy"},{"type":"FileSystemResizePending","status":"True"}]}}')
    assert claim.SIGNATURE(line) is None
    assert claim.SIGNATURE(b'{"status":{"phase":"Bound","capacity":{"storage":"1Gi"}}}') is not None

"""Which steps a run executes: defaults, order and dependencies, from the catalog."""

from __future__ import annotations

from typing import Any

import pytest

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.engine.errors import PlanError
from csibench.engine.plan import resolve_steps


def spec(**fields: Any) -> BenchmarkRunSpec:
    return BenchmarkRunSpec.model_validate({"storageClassName": "sc", **fields})


def test_default_steps_depend_on_the_snapshot_class() -> None:
    assert [s.name for s in resolve_steps(spec())] == [StepName.CREATE_VOLUME, StepName.PUBLISH,
                                                       StepName.UNPUBLISH, StepName.DELETE_VOLUME]
    optional = (StepName.DATA_PATH, StepName.VERIFY_CLONE, StepName.DATABASE, StepName.EXPAND_VOLUME,
                StepName.CREATE_GROUP_SNAPSHOT, StepName.DELETE_GROUP_SNAPSHOT, StepName.MOVE_VOLUME, StepName.DENSITY,
                StepName.CREATE_EPHEMERAL, StepName.DELETE_EPHEMERAL, StepName.SHARED_VOLUME, StepName.MODIFY_VOLUME,
                StepName.CHURN)
    assert [s.name for s in resolve_steps(spec(volumeSnapshotClassName="snap"))] == [
        s for s in StepName if s not in optional]
    with_data = resolve_steps(spec(volumeSnapshotClassName="snap", size="1Gi", dataPath={}))
    assert [s.name for s in with_data] == [s for s in StepName if s not in optional[1:]]
    verified = resolve_steps(spec(volumeSnapshotClassName="snap", size="1Gi", dataPath={"verify": True}))
    assert [s.name for s in verified] == [s for s in StepName if s not in optional[2:]]
    every = resolve_steps(spec(volumeSnapshotClassName="snap", size="1Gi", dataPath={"verify": True}, database={},
                               expand={"by": "1Gi"}, groupSnapshot={"volumeGroupSnapshotClassName": "g"}, move={},
                               density={"volumesPerNode": [2]}, ephemeral={"pods": 2}, shared={},
                               modify={"volumeAttributesClassName": "gold"}, churn={"durationSeconds": 110,
                                                                                    "windowSeconds": 10}))
    assert [s.name for s in every] == list(StepName)  # each only with its part of the spec; the database after
    grown = resolve_steps(spec(expand={"to": "2Gi"}))  # online: after publish, while its pods mount the volumes
    assert [s.name for s in grown] == [StepName.CREATE_VOLUME, StepName.PUBLISH, StepName.EXPAND_VOLUME,
                                       StepName.UNPUBLISH, StepName.DELETE_VOLUME]
    alone = resolve_steps(spec(steps=["database"], database={}))
    assert [s.name for s in alone] == [StepName.DATABASE]  # its volume is its own: no lifecycle step needed
    ephemeral = resolve_steps(spec(steps=["createEphemeral", "deleteEphemeral"], ephemeral={"pods": 2}))
    assert [s.name for s in ephemeral] == [StepName.CREATE_EPHEMERAL, StepName.DELETE_EPHEMERAL]  # likewise
    shared = resolve_steps(spec(steps=["sharedVolume"], shared={}))
    assert [s.name for s in shared] == [StepName.SHARED_VOLUME]  # its claim is its own too


@pytest.mark.parametrize(("steps", "reason", "words"), [
    (["publish", "createVolume"], "InvalidSteps", "lifecycle order"),
    (["createVolume", "cloneFromSnapshot"], "InvalidSteps", "needs step createSnapshot"),
    (["publish"], "InvalidSteps", "needs step createVolume"),
    (["createVolume", "createVolume"], "InvalidSteps", "must not repeat"),
])
def test_bad_step_lists_fail_before_anything_is_created(steps: list[str], reason: str, words: str) -> None:
    with pytest.raises(PlanError) as failure:
        resolve_steps(spec(steps=steps, volumeSnapshotClassName="snap"))
    assert failure.value.reason == reason and words in str(failure.value)


def test_snapshot_steps_need_a_snapshot_class() -> None:
    with pytest.raises(PlanError) as failure:
        resolve_steps(spec(steps=["createVolume", "createSnapshot"]))
    assert failure.value.reason == "MissingVolumeSnapshotClass"

"""What is refused before the first object exists, against the in-memory API server: a snapshot class of another
driver than the StorageClass's provisioner (its snapshots would never be taken and never deleted: issue 41)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fake_kube import FakeKube
from tests.support.fake_runs import NAMES, owned_left, run, spec


@pytest.mark.parametrize("fields", [
    {"steps": ["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"]},
    {"steps": ["createVolume", "createSnapshot", "cloneFromSnapshot", "deleteClone", "deleteSnapshot",
               "deleteVolume"]},
    {"dataPath": {"verify": True}},  # verifyClone: checksums of clones from snapshots
], ids=["snapshots", "clones", "dataPath.verify"])
def test_a_snapshot_class_of_another_driver_fails_before_anything_is_created(fields: dict[str, Any]) -> None:
    fake = FakeKube()
    fake.put("volumesnapshotclasses", "", {"metadata": {"name": "foreign"}, "driver": "other.example.com"})
    status = run(fake, spec(volumeSnapshotClassName="foreign", **fields))
    assert status.phase is not None and status.phase.value == "Failed", status.message
    assert status.conditions[0].reason == "InvalidSpec", status.conditions
    message = status.message or ""
    assert "'other.example.com'" in message and "'sim.csibench.io'" in message and "'foreign'" in message, message
    posts = [path for verb, path in fake.log if verb == "POST" and "dryRun" not in path and "/events" not in path]
    assert posts == [] and owned_left(fake) == [], posts
    assert ("namespaces", "", NAMES.namespace) not in fake.objects


def test_a_snapshot_class_of_the_storage_class_driver_is_accepted() -> None:
    status = run(FakeKube(), spec(volumeSnapshotClassName="snap",
                                  steps=["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message

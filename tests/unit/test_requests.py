"""The requests a step's action sends (engine/requests.py): a delete or a patch acts only on an object the run's
watch saw, by its uid; one it never saw is left alone and says why, with no request sent."""

from __future__ import annotations

import asyncio

import pytest

from csibench.engine.observed import CLAIM, Observed
from csibench.engine.requests import NotSeen, OwnedRequests
from csibench.engine.step import Submit
from csibench.engine.tracker import StepTracker
from csibench.kube import resources as r
from csibench.kube.ownership import RunScope
from tests.support.fake_kube import FakeKube

UID = "0a1b2c3d-0000-4000-8000-000000000001"


def test_an_object_the_run_never_saw_is_neither_deleted_nor_patched() -> None:
    fake = FakeKube()
    fake.put("persistentvolumeclaims", "runs", {"metadata": {"name": "bench-0a1b2-v00000", "uid": "someone-elses"}})
    requests = OwnedRequests(fake, RunScope("runs", "bench-0a1b2", UID),
                             Observed("runs", "bench-0a1b2"))
    tracker = StepTracker("patchVolume", ["bench-0a1b2-v00000"])
    delete = requests.deleting(CLAIM, r.PVCS, tracker)
    patch = requests.patching(CLAIM, r.PVCS, lambda name: {"spec": {"resources": {"requests": {"storage": "2Gi"}}}},
                              tracker)
    for submit in (delete, patch):
        async def send(submit: Submit = submit) -> None:
            await submit("bench-0a1b2-v00000")
        with pytest.raises(NotSeen, match="never saw claim bench-0a1b2-v00000"):
            asyncio.run(send())
    assert [verb for verb, _ in fake.timeline if verb in ("DELETE", "PATCH")] == []
    assert tracker.submitted == {}

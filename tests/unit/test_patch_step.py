"""A step with a new kind of action, added the way a real one would be: its facts, one catalog entry built from a
strategy that exists (``actions.Patch``) and a judge that reads a field of its kind (the claim's capacity), and
nothing else: no edit to execution, the run, status, the reports, preflight or the models. Run end to end against
the in-memory API server, whose resizer and kubelet make a mounted claim's larger request its capacity after a moment.

The step stands in for volume expansion: PATCH each claim's requested storage, done when the claim's
``status.capacity`` says the new size.
"""

from __future__ import annotations

from typing import Any

import pytest

from csibench.api.models import StepName
from csibench.api.steps import STEP_FACTS, StepFacts
from csibench.engine import catalog
from csibench.engine.actions import Patch
from csibench.engine.judges import DONE, Judge, Verdict
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, Observed
from csibench.engine.skips import skip_never_seen
from csibench.engine.step import StepContext, StepSpec
from csibench.kube import resources as r
from csibench.report.render import render_table
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import owned_left, run, spec, steps_of

NEW_SIZE = "2Gi"


def grown(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Done when the claim reports the new size as its capacity."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.claims.get(name)
        return DONE if state is not None and state.exists and state.capacity == NEW_SIZE else None
    return judge


def larger_request(context: StepContext, index: int) -> dict[str, Any]:
    return {"spec": {"resources": {"requests": {"storage": NEW_SIZE}}}}


GROW = StepSpec(facts=StepFacts("growVolume", "Grow Volume", "vol", requires=StepName.CREATE_VOLUME),
                kind=CLAIM, resource=r.PVCS, action=Patch(larger_request), object_name=Names.volume,
                count=lambda s: s.volumes, judge=grown, skip=skip_never_seen)


def test_a_patch_step_is_its_facts_and_one_catalog_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = list(catalog.STEPS.items())
    at = [name for name, _ in entries].index("publish") + 1  # online, while publish's pods hold the volumes
    monkeypatch.setattr(catalog, "STEPS", dict([*entries[:at], (GROW.name, GROW), *entries[at:]]))
    monkeypatch.setitem(STEP_FACTS, GROW.name, GROW.facts)
    fake = FakeKube(Behaviour(resize_delay=0.05))
    status = run(fake, spec(size="1Gi"))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [s.name for s in status.steps] == ["createVolume", "publish", "growVolume", "unpublish", "deleteVolume"]
    assert steps_of(status)["growVolume"] == ("Succeeded", 6, 6, 0, 0)
    grow = next(s for s in status.steps if s.name == "growVolume")
    assert grow.latency is not None and grow.latency.p50 >= 0.05  # timed to the capacity, not to the PATCH's answer
    patches = [path for verb, path in fake.log if verb == "PATCH" and "/persistentvolumeclaims/" in path]
    assert len(patches) == 6
    assert owned_left(fake) == []
    table = render_table({"metadata": {"name": "bench", "namespace": "runs"},
                          "status": status.model_dump(mode="json", exclude_none=True)})
    assert "Grow Volume" in table and "vol/s" in table

"""Adding a step is one new module under ``engine/steps/`` and its facts, and nothing else.

The step added here, annotateVolume, patches an existing kind (every claim of the run gets an annotation) and is
done when the run's watch shows the annotation on the claim. Its module is written to a folder of the test's own
and that folder put on ``csibench.engine.steps``'s search path, as if the file were dropped into
``engine/steps/``; its facts are inserted into ``api/steps.py``'s table after createVolume. The registry
(``catalog.collect``) finds it; no engine file is edited, which the test also holds (the source tree has no such
module and the real catalog does not know the step). It then runs end to end against the in-memory API server:
planned by default, its PATCHes sent, timed to the watch, reported, cleaned up.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from csibench.api import steps as step_facts
from csibench.api.steps import StepFacts, StepName
from csibench.engine import catalog
from csibench.engine import steps as step_modules
from csibench.report.render import render_table
from tests.support.catalog_rules import assert_consistent_entry
from tests.support.fake_kube import FakeKube
from tests.support.fake_runs import owned_left, run, spec, steps_of

NAME = "annotateVolume"
MODULE = "annotate_volume"
FACTS = StepFacts(NAME, "Annotate Volume", "vol", requires=StepName.CREATE_VOLUME)
SOURCE = '''"""annotateVolume: every claim of the run marked with an annotation, done when the watch shows the mark."""

from __future__ import annotations

from csibench.api.steps import facts_of
from csibench.engine import judges
from csibench.engine.actions import Patch
from csibench.engine.judges import DONE, Judge, Verdict
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, Observed
from csibench.engine.skips import skip_claims_not_bound
from csibench.engine.step import Manifest, StepContext, StepSpec
from csibench.kube import resources as r

MARK = "csibench.io/annotated"


def mark(context: StepContext, index: int) -> Manifest:
    return {"metadata": {"annotations": {MARK: context.names.volume(index)}}}


def marked(observed: Observed, terminal: frozenset[str]) -> Judge:
    def judge(name: str, submitted: float) -> Verdict | None:
        claim = observed.claims.get(name)
        return DONE if claim is not None and claim.exists and claim.annotations.get(MARK) == name else None
    return judge


ENTRIES = (
    StepSpec(facts=facts_of("annotateVolume"), kind=CLAIM, resource=r.PVCS, action=Patch(mark),
             object_name=Names.volume, count=lambda spec: spec.volumes, judge=marked,
             skip=skip_claims_not_bound, gone=judges.claim_and_volume_gone, recreated_by="createVolume"),
)
'''


@pytest.fixture
def added_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The module dropped into the steps' package path, its facts after createVolume, the registry collected
    again; all undone afterwards (the facts' table is changed in place: the models read it by reference)."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.setattr(step_modules, "__path__", [*step_modules.__path__, str(tmp_path)])
    table, before = step_facts.STEP_FACTS, dict(step_facts.STEP_FACTS)
    table.clear()
    for name, facts in before.items():
        table[name] = facts
        if name == StepName.CREATE_VOLUME:
            table[NAME] = FACTS
    try:
        monkeypatch.setattr(catalog, "STEPS", catalog.collect())
        yield
    finally:
        table.clear()
        table.update(before)
        sys.modules.pop(f"{step_modules.__name__}.{MODULE}", None)


def test_the_source_tree_holds_no_such_step() -> None:
    assert NAME not in catalog.STEPS and NAME not in step_facts.STEP_FACTS
    assert not (Path(step_modules.__file__).parent / f"{MODULE}.py").exists()


@pytest.mark.usefixtures("added_step")
def test_a_new_step_is_one_module_under_engine_steps_and_its_facts() -> None:
    assert list(catalog.STEPS)[:3] == ["createVolume", NAME, "publish"]  # in the facts' order
    assert_consistent_entry(NAME, catalog.STEPS[NAME])  # held to the rules the shipped steps are held to
    fake = FakeKube()
    status = run(fake, spec())  # the default plan: every step the spec allows, now with the new one
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [s.name for s in status.steps] == ["createVolume", NAME, "publish", "unpublish", "deleteVolume"]
    assert steps_of(status)[NAME] == ("Succeeded", 6, 6, 0, 0)
    patches = [path for verb, path in fake.log if verb == "PATCH" and "/persistentvolumeclaims/" in path]
    assert len(patches) == 6
    step = next(s for s in status.steps if s.name == NAME)
    assert step.latency is not None and step.latency.p50 >= 0  # timed from the PATCH to the watch's event
    assert owned_left(fake) == []
    table = render_table({"metadata": {"name": "bench", "namespace": "runs"},
                          "status": status.model_dump(mode="json", exclude_none=True)})
    assert "Annotate Volume" in table and "vol/s" in table


def test_a_module_whose_step_has_no_facts_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry collects only steps with facts (api/steps.py), so no layer meets a step it cannot name."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.setattr(step_modules, "__path__", [*step_modules.__path__, str(tmp_path)])
    try:
        with pytest.raises(KeyError, match=f"step '{NAME}' is not in the step catalog"):
            catalog.collect()  # facts_of, as the module builds its entry
    finally:
        sys.modules.pop(f"{step_modules.__name__}.{MODULE}", None)

"""What every step's catalog entry must hold, whichever module declares it: the real catalog's test and the test
that adds a step both ask it, so a new step is held to the same rules as the ones that ship."""

from __future__ import annotations

from csibench.api.steps import STEP_FACTS
from csibench.engine import catalog
from csibench.engine.actions import Create, Measure, Move, Patch
from csibench.engine.skips import skip_claims_not_bound, skip_never_seen
from csibench.engine.step import StepSpec
from csibench.engine.steps.group_snapshot import skip_groups_being_taken
from csibench.engine.steps.move import skip_pods_not_running


def assert_consistent_entry(name: str, step: StepSpec) -> None:
    """The entry is named by its facts, can be restored, comes after what it requires, and each kind of action
    has what it needs (a Create its manifest, a Patch the claim skip rule, a deletion only what the run saw)."""
    assert step.name == name and step.facts is STEP_FACTS[name] and step.facts.title and step.facts.unit
    assert step.gone is not None, f"{name} declares no restore rule"
    # Deleted or changed in place (an expansion cannot be undone): a restore makes its objects again.
    assert (step.recreated_by is not None) == (step.action.deletes or isinstance(step.action, Patch)), name
    assert step.requires is None or list(catalog.STEPS).index(step.requires) < list(catalog.STEPS).index(name)
    if isinstance(step.action, Create) and not isinstance(step.action, Measure):
        assert step.manifest is not None and step.report_key, name
    elif isinstance(step.action, Measure):  # runs pods of its own on existing volumes, and needs its spec part
        assert step.measure is not None and step.manifest is not None and step.spec_part is not None, name
    elif isinstance(step.action, Patch):  # changes each object of the step it requires, if that one was made
        assert step.manifest is None and step.skip is skip_claims_not_bound, name
    elif isinstance(step.action, Move):  # makes again elsewhere what the step it requires made, if it runs
        assert step.manifest is None and step.skip is skip_pods_not_running, name
        assert step.recreated_by == step.requires and step.spec_part is not None, name
    else:
        # a deletion acts only on what the run saw (a group's also waits for it to settle: it skips both)
        seen_only = (skip_never_seen, skip_groups_being_taken)
        assert step.manifest is None and step.skip in seen_only, name

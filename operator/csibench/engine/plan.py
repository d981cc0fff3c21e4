"""Which steps a run executes, checked before anything is created (pure).

The steps come from the spec (or, by default, every catalog step the given classes and spec parts allow) and must
follow the order and ``requires`` edges of the step facts (``api/steps.py``): every lifecycle step needs
createVolume, unpublish needs publish, clones need snapshots, deleting clones needs clones; the database step needs
nothing (its volume is its own). A spec that breaks them fails before the run touches the cluster.
"""

from __future__ import annotations

from csibench.api.enabling import enabled, is_set
from csibench.api.models import BenchmarkRunSpec, ConditionReason
from csibench.engine import catalog
from csibench.engine.errors import PlanError
from csibench.engine.step import StepSpec


def resolve_steps(spec: BenchmarkRunSpec) -> list[StepSpec]:
    """The spec's steps, or the default (every step the classes allow), checked for order and dependencies."""
    lifecycle = list(catalog.STEPS.values())
    if spec.steps is None:
        return [s for s in lifecycle if enabled(s.facts, spec)]
    try:
        steps = [catalog.step_named(name) for name in spec.steps]
    except KeyError as error:
        raise PlanError(ConditionReason.INVALID_STEPS, str(error)) from None
    names = [s.name for s in steps]
    if len(set(names)) != len(names):
        raise PlanError(ConditionReason.INVALID_STEPS, f"steps must not repeat: {[str(n) for n in names]}")
    if steps != sorted(steps, key=lifecycle.index):
        order = " → ".join(s.name for s in lifecycle)
        raise PlanError(ConditionReason.INVALID_STEPS, f"steps must follow the lifecycle order {order}")
    for step in steps:
        if step.requires is not None and step.requires not in names:
            raise PlanError(ConditionReason.INVALID_STEPS,
                            f"step {step.name} needs step {step.requires} in the same run")
    for step in steps:
        if step.spec_part is not None and not is_set(spec, step.spec_part):
            raise PlanError(ConditionReason.INVALID_STEPS, f"step {step.name} needs its part of the spec "
                            f"(spec.{step.spec_part})")
    if any(s.needs_snapshot_class for s in steps) and not spec.volumeSnapshotClassName:
        raise PlanError(ConditionReason.MISSING_VOLUME_SNAPSHOT_CLASS,
                        "volumeSnapshotClassName is required when createSnapshot or cloneFromSnapshot runs")
    return steps

"""Skip rules several steps share: which objects a step does not submit (counted as skipped, never timed).

A rule that one step alone uses lives in that step's module (``engine/steps/``); these are the ones two or more
declare: nothing skipped, object *i* skipped when object *i* of the required step failed, a pod or group skipped
when one of its volumes failed, a deletion's objects the run never saw, and the claims a change of claims (a Patch
step: expandVolume today) must leave alone.
"""

from __future__ import annotations

from csibench.engine.naming import volumes_of_pod
from csibench.engine.step import StepContext, StepSpec


def skip_nothing(step: StepSpec, context: StepContext) -> set[str]:
    return set()


def failed_indexes(context: StepContext, of: str) -> set[int]:
    """The indexes of step ``of``'s objects that were skipped or failed."""
    tracker = context.trackers[of]
    return {index for index, name in enumerate(tracker.objects)
            if name in tracker.skipped or (name in tracker.outcomes and not tracker.outcomes[name].ok)}


def skip_if_prerequisite_failed(step: StepSpec, context: StepContext) -> set[str]:
    """Object i needs object i of the required step (snapshot i of volume i, clone i of snapshot i)."""
    assert step.requires is not None
    objects = step.objects(context.spec, context.names)
    return {objects[index] for index in failed_indexes(context, step.requires)}


def skip_missing_a_volume(step: StepSpec, context: StepContext, per_object: int) -> set[str]:
    """Object i holds ``per_object`` of the required step's volumes (a pod mounts them, a group snapshot covers
    them): it is skipped if any of them failed."""
    assert step.requires is not None
    spec = context.spec
    bad = failed_indexes(context, step.requires)
    return {step.object_name(context.names, index) for index in range(step.count(spec))
            if bad & set(volumes_of_pod(index, spec.volumes, per_object))}


def skip_never_seen(step: StepSpec, context: StepContext) -> set[str]:
    """A deletion acts only on objects the run's label-selected watches saw and that still exist: a refused create
    made nothing, and an object already gone (deleted by someone else, a moved pod whose successor was never
    made) was not deleted by this step; counting either as a successful deletion would be false."""
    present = context.observed.existing(step.kind)
    return {name for name in step.objects(context.spec, context.names) if name not in present}


def skip_claims_not_bound(step: StepSpec, context: StepContext) -> set[str]:
    """A change of claim i needs claim i made and Bound (the API server refuses to resize an unbound claim: on a
    WaitForFirstConsumer class, one whose publish pod never ran), and, when publish ran, held by its ready pod (an
    online expansion's node half needs the mount)."""
    spec, objects = context.spec, step.objects(context.spec, context.names)
    unbound = {name for name in objects
               if (claim := context.observed.claims.get(name)) is None or claim.phase != "Bound"}
    unheld: set[str] = set()
    if step.holders is not None and step.holders in context.trackers:  # each holder as it is now (a move's too)
        holders = context.trackers[step.holders].objects
        for pod, name in enumerate(holders):
            state = context.observed.pods.get(name)
            if state is None or not state.exists or not state.ready:
                unheld |= {objects[i] for i in volumes_of_pod(pod, spec.volumes, spec.pvcsPerPod)}
    return skip_if_prerequisite_failed(step, context) | unbound | unheld

"""How a step submits one of its objects: a small set of strategies, so the step runner has no switch on the kind
of action and a new kind of action is one new strategy here.

Each strategy turns (step, its context, its tracker) into a ``Submit`` — a coroutine function of an object's
name that sends that object's request and stamps the moment it leaves (``tracker.mark_submitted``), so the
object's latency runs from there to its terminal watch event. The requests themselves are the runner's
(``step.Requests``: create with a manifest, delete by the uid the run saw, patch by that uid), because ownership
is proven there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from csibench.engine.step import Action, Manifest, Requests, StepContext, StepSpec, Submit
from csibench.engine.tracker import StepTracker


def _by_index(step: StepSpec, context: StepContext,
              build: Callable[[StepContext, int], Manifest]) -> Callable[[str], Manifest]:
    """Object i's body, looked up by the object's name (names are deterministic, in index order)."""
    index = {name: i for i, name in enumerate(step.objects(context.spec, context.names))}
    return lambda name: build(context, index[name])


class Create(Action):
    """The step creates its objects from its manifest (409 counts only for the run's own object)."""

    name = "create"
    creates = True

    def submitter(self, requests: Requests, step: StepSpec, context: StepContext, tracker: StepTracker) -> Submit:
        assert step.manifest is not None, f"creation step {step.name} has no manifest in the catalog"
        return requests.creating(step.resource, _by_index(step, context, step.manifest), tracker)


class Measure(Create):
    """The step runs workloads on existing volumes: its ``measure`` drives batches of its pods (created like a
    creation step's objects) and their deletion itself."""

    name = "measure"


class Delete(Action):
    """The step deletes objects an earlier step created, by the uid the run saw."""

    name = "delete"
    deletes = True

    def submitter(self, requests: Requests, step: StepSpec, context: StepContext, tracker: StepTracker) -> Submit:
        return requests.deleting(step.kind, step.resource, tracker)


@dataclass(frozen=True, repr=False)
class Patch(Action):
    """The step changes objects an earlier step created (a merge patch of ``body(context, i)``, by the uid the
    run saw), e.g. a claim's requested size; its judge says when the change has taken effect."""

    body: Callable[[StepContext, int], Manifest]
    name = "patch"

    def submitter(self, requests: Requests, step: StepSpec, context: StepContext, tracker: StepTracker) -> Submit:
        return requests.patching(step.kind, step.resource, _by_index(step, context, self.body), tracker)


Placement = Callable[[StepContext, int, "str | None"], Manifest]


@dataclass(frozen=True, repr=False)
class Move(Action):
    """The step makes each of its pods again elsewhere: it deletes the pod (by the uid the run saw) and, once the
    watch says it is gone (the step's first boundary), creates its successor, same name, from ``body(context, i,
    the node the pod was on when the step started)``. Its latency runs from the delete to the successor's
    terminal state."""

    body: Placement
    # The grace period of the delete: what a drain or a rescheduling gives a pod (Kubernetes' default), so the
    # kubelet stops the container and unmounts the volumes before the pod leaves the API. The benchmark pods'
    # own is 0, which removes a pod from the API at once, before its kubelet has done anything.
    grace_seconds: int = 30
    name = "move"
    creates = True
    deletes = True

    def submitter(self, requests: Requests, step: StepSpec, context: StepContext, tracker: StepTracker) -> Submit:
        observed = context.observed
        origins = {name: (state.uid, state.node) for name, state in observed.pods.items() if state.exists}
        index = {name: i for i, name in enumerate(step.objects(context.spec, context.names))}
        delete = requests.deleting(step.kind, step.resource, tracker, self.grace_seconds)
        create = requests.creating(step.resource, lambda name: self.body(context, index[name], origins[name][1]),
                                   tracker)

        async def move(name: str) -> None:
            await delete(name)
            state = observed.pods.get(name)
            if state is None or not state.exists or state.uid != origins[name][0]:  # gone before any event said so
                tracker.mark_boundary(name, 0, time.monotonic())
            if await tracker.passed(name, 0):
                await create(name)
        return move


CREATE = Create()
DELETE = Delete()
MEASURE = Measure()

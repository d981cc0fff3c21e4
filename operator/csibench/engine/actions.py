"""How a step submits one of its objects: a small set of strategies, so the step runner has no switch on the kind
of action and a new kind of action is one new strategy here.

Each strategy turns (step, its context, its tracker) into a ``Submit`` — a coroutine function of an object's
name that sends that object's request and stamps the moment it leaves (``tracker.mark_submitted``), so the
object's latency runs from there to its terminal watch event. The requests themselves are the runner's
(``step.Requests``: create with a manifest, delete by the uid the run saw, patch by that uid), because ownership
is proven there.
"""

from __future__ import annotations

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


CREATE = Create()
DELETE = Delete()
MEASURE = Measure()

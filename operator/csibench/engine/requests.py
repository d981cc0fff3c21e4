"""The requests a step's action sends, where ownership is proven (``step.Requests``): a create that meets
"already exists" counts only for the run's own object (a restart re-submitting), a delete or a patch acts only on
the very object the run's label-selected watch saw, its uid as a precondition, and an object the watch never saw
is left alone. Each request stamps the moment it leaves (``tracker.mark_submitted``): an object's latency runs
from there to its terminal watch event.
"""

from __future__ import annotations

from collections.abc import Callable

from csibench.engine.observed import Observed
from csibench.engine.step import Manifest, Submit
from csibench.engine.tracker import StepTracker
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.ownership import RunScope


class NotOwned(Exception):
    """An object of the run's name exists but is not the run's: it is never counted, changed or deleted."""


class NotSeen(Exception):
    """The run's label-selected watch never saw the object: there is no uid to prove it is the run's, so it is
    neither changed nor deleted (a step's skip rule normally leaves such objects out)."""


def _seen(uids: dict[str, str], kind: str, name: str) -> str:
    """The uid the run's watch saw for one of its objects (NotSeen when it saw none)."""
    uid = uids.get(name)
    if uid is None:
        raise NotSeen(f"the run's watch never saw {kind} {name}, so nothing proves it is the run's: left alone")
    return uid


class OwnedRequests:
    """Creates, deletes and patches of the run's objects in its scope."""

    def __init__(self, client: KubeApi, scope: RunScope, observed: Observed) -> None:
        self.client = client
        self.scope = scope
        self.observed = observed

    def deleting(self, kind: str, resource: r.Resource, tracker: StepTracker,
                 grace_seconds: int | None = None) -> Submit:
        client, scope = self.client, self.scope
        uids = self.observed.uids_of(kind)

        async def delete(name: str) -> None:
            # Only the very object the run's label-selected watch saw (its uid as a precondition).
            await client.delete(resource.path(scope.namespace, name), uid=_seen(uids, kind, name),
                                on_send=lambda at: tracker.mark_submitted(name, at), grace_seconds=grace_seconds)
        return delete

    def patching(self, kind: str, resource: r.Resource, body_of: Callable[[str], Manifest],
                 tracker: StepTracker) -> Submit:
        client, scope = self.client, self.scope
        uids = self.observed.uids_of(kind)

        async def patch(name: str) -> None:
            # Only the very object the run's label-selected watch saw: its uid in the body is a precondition.
            body = body_of(name)
            metadata = {**(body.get("metadata") or {}), "uid": _seen(uids, kind, name)}
            if await client.merge_patch(resource.path(scope.namespace, name), {**body, "metadata": metadata},
                                        on_send=lambda at: tracker.mark_submitted(name, at)) is None:
                raise ApiError(404, "NotFound", f"{resource.plural} {scope.namespace}/{name} is gone")
        return patch

    def creating(self, resource: r.Resource, body_of: Callable[[str], Manifest], tracker: StepTracker) -> Submit:
        client, scope = self.client, self.scope
        path = resource.path(scope.namespace)

        def stamp(name: str) -> Callable[[float], None]:
            return lambda at: tracker.mark_submitted(name, at)

        async def create(name: str) -> None:
            body = body_of(name)
            if not await client.create(path, body, stamp(name)):
                # "Already exists" is success only for an object this run created (a restart re-submitting).
                existing = await client.get(resource.path(scope.namespace, name))
                if existing is not None and not scope.owns(existing.get("metadata") or {}):
                    raise NotOwned(f"{body['kind']} {scope.namespace}/{name} already exists and does not carry "
                                   f"this run's label {scope.selector}; the run never touches it")
        return create

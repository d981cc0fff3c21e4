"""Start the set of watches a run (or its cleanup) needs, all feeding one ``Observed``.

The run's own kinds (claims, pods, snapshots, group snapshots, Warning events) are label- or field-selected
watches of its namespace; a group's member snapshots (the snapshot-controller's, without the run's label) are a
watch of the namespace's snapshots that keeps only those owned by one of the run's groups. The cluster-scoped kinds
(PVs, VolumeAttachments, snapshot contents, group snapshot contents) are the operator's shared watches
(kube/shared_watch.py): one stream each for all runs, so N concurrent runs do not read every PV event N times.
Snapshots and their contents are watched only when the run's plan has a step that needs them, group snapshots and
their contents only with a group snapshot step (cleanup's watches: when their APIs exist). Every watch but the
Warning events' and the attachments' also passes over the MODIFIED lines that change nothing a run keeps
(engine/relevance.py).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from csibench.engine.kinds.fields import Signature
from csibench.engine.observed import Key, Observed
from csibench.engine.relevance import (
    CLUSTER_CUSTOM_NAME,
    CORE_NAME,
    NAMESPACED_CUSTOM_NAME,
    ChangeFilter,
    claim_signature,
    content_signature,
    group_content_signature,
    group_snapshot_signature,
    pod_signature,
    pv_signature,
    snapshot_signature,
)
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.shared_watch import SharedWatch, SharedWatches, Subscription
from csibench.kube.watch import Keep, Watch, WatchEvent

log = logging.getLogger(__name__)
SHARED = SharedWatches()


def _changes(signature: Signature, name: re.Pattern[bytes] = CORE_NAME,
             ) -> Callable[[], tuple[Keep, Callable[[], None]]]:
    def build() -> tuple[Keep, Callable[[], None]]:
        changes = ChangeFilter(signature, name)
        return changes, changes.reset
    return build


class RunWatches:
    """Label-selected watches in the target namespace plus the shared cluster-scoped ones."""

    def __init__(self, client: KubeApi, observed: Observed, selector: str, snapshots: bool,
                 on_change: Callable[[list[Key], float], None] | None = None, groups: bool = False) -> None:
        self.observed = observed
        self._on_change = on_change
        loop = asyncio.get_running_loop()
        ns = observed.namespace
        labelled = {"labelSelector": selector}
        own: list[tuple[str, r.Resource, dict[str, str], Signature | None, re.Pattern[bytes]]] = [
            ("claims", r.PVCS, labelled, claim_signature, CORE_NAME),
            ("pods", r.PODS, labelled, pod_signature, CORE_NAME),
            ("events", r.EVENTS, {"fieldSelector": "type=Warning"}, None, CORE_NAME),
        ]
        # PVs and snapshot contents name the run's claims and snapshots when they are its own: the rest (other
        # runs', users') is passed over undecoded. Attachments name only the PV: all decoded.
        mine = observed.mentions_ours
        shared: list[tuple[SharedWatch, Keep | None]] = [
            (SHARED.get(client, "pvs", r.PVS, _changes(pv_signature)), mine),
            (SHARED.get(client, "attachments", r.VOLUME_ATTACHMENTS), None),
        ]
        if snapshots or groups:
            own.append(("snapshots", r.SNAPSHOTS, labelled, snapshot_signature, NAMESPACED_CUSTOM_NAME))
            # A group's member contents name only their member snapshot (not the run): kept by the controller's
            # group handle annotation, and sorted out by Observed.
            shared.append((SHARED.get(client, "contents", r.SNAPSHOT_CONTENTS,
                                      _changes(content_signature, CLUSTER_CUSTOM_NAME)),
                           observed.mentions_ours_or_a_member if groups else mine))
        if groups:
            own.append(("groups", r.GROUP_SNAPSHOTS, labelled, group_snapshot_signature, NAMESPACED_CUSTOM_NAME))
            shared.append((SHARED.get(client, "group_contents", r.GROUP_SNAPSHOT_CONTENTS,
                                      _changes(group_content_signature, CLUSTER_CUSTOM_NAME)), mine))
        self.watches = []
        for source, resource, query, signature, name in own:
            changes = ChangeFilter(signature, name) if signature is not None else None
            self.watches.append(Watch(client, source, resource, ns, query, loop, self._sink, changes,
                                      changes.reset if changes is not None else None))
        if groups:  # the controller's member snapshots carry no label of the run's: owned by one of its groups
            members = ChangeFilter(snapshot_signature, NAMESPACED_CUSTOM_NAME)

            def member_lines(line: bytes) -> bool:
                return observed.owned_by_a_group(line) and members(line)
            self.watches.append(Watch(client, "members", r.SNAPSHOTS, ns, {}, loop, self._sink, member_lines,
                                      members.reset))
        self._shared = shared
        self._subscriptions: list[tuple[SharedWatch, Subscription]] = []
        self._stopped = False

    def _sink(self, events: list[WatchEvent]) -> None:
        for event in events:
            affected = self.observed.apply(event)
            if affected and self._on_change is not None:
                self._on_change(affected, event.at)

    async def start(self, timeout: float = 60.0) -> None:
        for watch in self.watches:
            watch.start()

        async def subscribe(shared: SharedWatch, keep: Keep | None) -> None:
            # Its own list gives up a second before ours, with a TimeoutError that names the last failure.
            subscription = await shared.subscribe(self._sink, keep, max(0.5, timeout - 1))
            if self._stopped:  # stopped meanwhile: a late subscription must not feed a finished run
                shared.unsubscribe(subscription)
            else:
                self._subscriptions.append((shared, subscription))

        tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(w.synced.wait()) for w in self.watches]
        tasks += [asyncio.ensure_future(subscribe(shared, keep)) for shared, keep in self._shared]
        try:
            async with asyncio.timeout(timeout):  # (wait_for on 3.11 can swallow a cancellation)
                await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:  # gather leaves the others running when one fails: none may outlive start()
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    def stop(self) -> None:
        self._stopped = True
        for watch in self.watches:
            watch.stop()
        for shared, subscription in self._subscriptions:
            shared.unsubscribe(subscription)
        own = [f"{w.source} {w.decoded} events ({w.skipped} skipped undecoded, {w.errors} errors)"
               for w in self.watches]
        log.info("watches of %s: %s; shared: %s", self.observed.namespace, ", ".join(own), ", ".join(
            f"{s.source} {s.delivered} events delivered" for _, s in self._subscriptions))
        self._subscriptions = []

"""Start the set of watches a run (or its cleanup) needs, all feeding one ``Observed``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from csibench.engine.observed import Key, Observed
from csibench.kube import resources as r
from csibench.kube.client import KubeClient
from csibench.kube.watch import Keep, Watch, WatchEvent

log = logging.getLogger(__name__)


class RunWatches:
    """Label-selected watches in the target namespace plus cluster-scoped PVs, attachments and contents."""

    def __init__(self, client: KubeClient, observed: Observed, selector: str, snapshots: bool,
                 on_change: Callable[[list[Key], float], None] | None = None) -> None:
        self.observed = observed
        self._on_change = on_change
        loop = asyncio.get_running_loop()
        ns = observed.namespace
        labelled = {"labelSelector": selector}
        # Cluster-wide PVs and snapshot contents name the run's claims and snapshots when they are its own:
        # the rest (other runs', users') is passed over undecoded. Attachments name only the PV: all decoded.
        mine = observed.mentions_ours
        specs: list[tuple[str, r.Resource, str | None, dict[str, str], Keep | None]] = [
            ("claims", r.PVCS, ns, labelled, None),
            ("pods", r.PODS, ns, labelled, None),
            ("events", r.EVENTS, ns, {"fieldSelector": "type=Warning"}, None),
            ("pvs", r.PVS, None, {}, mine),
            ("attachments", r.VOLUME_ATTACHMENTS, None, {}, None),
        ]
        if snapshots:
            specs += [("snapshots", r.SNAPSHOTS, ns, labelled, None),
                      ("contents", r.SNAPSHOT_CONTENTS, None, {}, mine)]
        self.watches = [Watch(client, source, resource, namespace, query, loop, self._sink, keep)
                        for source, resource, namespace, query, keep in specs]

    def _sink(self, events: list[WatchEvent]) -> None:
        for event in events:
            affected = self.observed.apply(event)
            if affected and self._on_change is not None:
                self._on_change(affected, event.at)

    async def start(self, timeout: float = 60.0) -> None:
        for watch in self.watches:
            watch.start()
        await asyncio.wait_for(asyncio.gather(*(w.synced.wait() for w in self.watches)), timeout)

    def stop(self) -> None:
        for watch in self.watches:
            watch.stop()
        log.info("watches of %s: %s", self.observed.namespace, ", ".join(
            f"{w.source} {w.decoded} events ({w.skipped} skipped undecoded, {w.errors} errors)" for w in self.watches))

    @property
    def errors(self) -> int:
        return sum(w.errors for w in self.watches)

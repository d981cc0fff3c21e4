"""One watch of a cluster-scoped kind for every run of the operator, instead of one per run.

PVs, VolumeAttachments and snapshot contents carry no run label, so each run used to watch all of them and
pass over the others' lines: with five runs every PV line was read five times, by five threads. A
``SharedWatch`` reads the stream once; a line is decoded when any subscriber wants it (its ``keep``) and handed to
the subscribers that want it (to all, for a watch whose subscribers keep everything, such as attachments).

A subscriber that joins while the watch is running needs the current objects first, then every change after
them, with no gap and nothing older than what it already has. It lists on its own (stamped on arrival, as
every event is) and receives the shared events from the moment it is registered, buffered until its list is
in; then it gets its list, then the buffered and the later events whose resourceVersion is newer than its
list's. Kubernetes calls resourceVersions opaque; an API server backed by etcd serves etcd revisions (integers
that grow with every write), and within one watch stream they only grow. An event whose version is not an
integer is delivered (never dropped), and the list SYNC event of the shared watch carries its list's version
so that a relist after 410 Gone reaches every subscriber as a consistent state.

The watch thread starts with the first subscriber and stops with the last.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable

from csibench.kube.api import KubeApi, WatchSource
from csibench.kube.resources import Resource
from csibench.kube.watch import Keep, Sink, Watch, WatchEvent

log = logging.getLogger(__name__)


def version_of(event: WatchEvent) -> int | None:
    """The event's resourceVersion as an integer (an etcd revision), None when it is not one."""
    raw = event.obj.get("resourceVersion") if event.type == "SYNC" else event.obj["metadata"].get("resourceVersion")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


class Subscription:
    """One subscriber's view of a shared watch: buffered until its own list is in, then fenced by its version."""

    def __init__(self, source: str, sink: Sink, keep: Keep | None) -> None:
        self.source = source
        self.keep = keep
        self._sink = sink
        self._fence: int | None = None
        self._buffer: list[WatchEvent] | None = []  # None once the subscriber's list has been delivered
        self.delivered = 0

    def deliver(self, events: list[WatchEvent]) -> None:
        """Shared events, on the event loop, in stream order."""
        if self._buffer is not None:
            self._buffer.extend(events)
            return
        fence = self._fence
        fresh = [e for e in events if fence is None or (v := version_of(e)) is None or v > fence]
        if fresh:
            self.delivered += len(fresh)
            self._sink(fresh)

    def begin(self, listed: list[WatchEvent], version: int | None) -> None:
        """The subscriber's own list (ADDED + SYNC), then what the shared watch delivered meanwhile."""
        buffered, self._buffer = self._buffer or [], None
        self._fence = version
        self._sink(listed)
        self.deliver(buffered)


class SharedWatch:
    """A list+watch of one cluster-scoped resource whose events go to every subscriber."""

    def __init__(self, make_client: Callable[[], WatchSource], source: str, resource: Resource,
                 changes: Keep | None = None, on_list: Callable[[], None] | None = None) -> None:
        self._make_client = make_client  # reads TLS files: called in a thread, once
        self._client: WatchSource | None = None
        self._building = asyncio.Lock()
        self.source = source
        self._resource = resource
        self._changes = changes  # a test every line anyone keeps must pass too (relevance.ChangeFilter)
        self._on_list = on_list
        self._subscriptions: tuple[Subscription, ...] = ()  # replaced, never mutated: read by the watch thread
        self._watch: Watch | None = None
        self._stopped_errors = 0  # errors of watch threads that have stopped

    @property
    def running(self) -> bool:
        return self._watch is not None

    @property
    def errors(self) -> int:
        return self._stopped_errors + (self._watch.errors if self._watch is not None else 0)

    def _keep(self, line: bytes) -> object:
        """In the watch thread: decode a line if any subscriber keeps it and it changes something, for those
        subscribers only (a run never even looks at another run's volumes' events)."""
        subscriptions = self._subscriptions
        wanted = tuple(s for s in subscriptions if s.keep is None or s.keep(line))
        if not wanted or (self._changes is not None and not self._changes(line)):
            return False
        return True if len(wanted) == len(subscriptions) else wanted

    def _dispatch(self, events: list[WatchEvent]) -> None:
        subscriptions = self._subscriptions
        if all(event.route is None for event in events):
            for subscription in subscriptions:
                subscription.deliver(events)
            return
        for subscription in subscriptions:
            routed = [e for e in events if e.route is None or subscription in e.route]
            if routed:
                subscription.deliver(routed)

    async def subscribe(self, sink: Sink, keep: Keep | None, timeout: float) -> Subscription:
        """Register, start the watch if it is the first subscriber, list, and deliver in order."""
        async with self._building:  # two first subscribers at once build one client
            if self._client is None:
                self._client = await asyncio.to_thread(self._make_client)
        subscription = Subscription(self.source, sink, keep)
        self._subscriptions = (*self._subscriptions, subscription)
        if self._watch is None:
            self._watch = Watch(self._client, self.source, self._resource, None, {}, asyncio.get_running_loop(),
                                self._dispatch, self._keep, self._on_list)
            self._watch.start()
        try:
            listed, version = await asyncio.wait_for(asyncio.to_thread(self._list, self._client, timeout), timeout)
        except BaseException:
            self.unsubscribe(subscription)
            raise
        subscription.begin(listed, version)
        return subscription

    def _list(self, client: WatchSource, timeout: float) -> tuple[list[WatchEvent], int | None]:
        """The subscriber's own list, retried like a watch's until ``timeout`` (an API server restarting)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                listing = client.request_sync("GET", self._resource.path(None))
                break
            except Exception as error:
                if time.monotonic() > deadline:  # out of time, as the caller's own wait would be: say it so
                    raise TimeoutError(f"list of {self.source} failed for {timeout:.1f}s: {error}") from error
                log.warning("list of %s for a new subscriber failed (%s); retrying", self.source, error)
                time.sleep(0.5)
        at = time.monotonic()
        items = listing.get("items", [])
        version = str(listing["metadata"]["resourceVersion"])
        present = [f"/{item['metadata']['name']}" for item in items]
        events = [*(WatchEvent(self.source, "ADDED", item, at, initial=True) for item in items),
                  WatchEvent(self.source, "SYNC", {"present": present, "resourceVersion": version}, at, initial=True)]
        return events, version_of(events[-1])

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions = tuple(s for s in self._subscriptions if s is not subscription)
        if not self._subscriptions and self._watch is not None:
            self._stopped_errors += self._watch.errors
            self._watch.stop()
            self._watch = None

    def counts(self) -> tuple[int, int]:
        """(events decoded, lines skipped undecoded) by the running watch thread, for every subscriber."""
        watch = self._watch
        return (watch.decoded, watch.skipped) if watch is not None else (0, 0)


class SharedWatches:
    """The operator's shared watches, one per (API server, source), alive while someone holds them."""

    def __init__(self) -> None:
        self._watches: weakref.WeakValueDictionary[tuple[str, str], SharedWatch] = weakref.WeakValueDictionary()

    def get(self, client: KubeApi, source: str, resource: Resource,
            changes: Callable[[], tuple[Keep, Callable[[], None]]] | None = None) -> SharedWatch:
        """The shared watch of ``source``; ``changes`` builds its change filter and reset when it is new."""
        key = (client.server, source)
        shared = self._watches.get(key)
        if shared is None:
            keep, reset = changes() if changes is not None else (None, None)
            shared = SharedWatch(client.shared, source, resource, keep, reset)
            self._watches[key] = shared
        return shared

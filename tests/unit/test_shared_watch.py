"""Shared watches against the fake API server: one stream for every subscriber, a late subscriber gets the
current objects then every later change exactly once, a relist reaches everyone, the last one out stops it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from csibench.engine.observed import Observed
from csibench.kube import resources as r
from csibench.kube.api import WatchStream
from csibench.kube.client import Json
from csibench.kube.shared_watch import SharedWatch, SharedWatches, Subscription
from csibench.kube.watch import Watch, WatchEvent
from tests.support.fake_kube import FakeKube


def pv(name: str, claim: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"claimRef": {"namespace": "ns", "name": claim}}}


def _event(kind: str, name: str, version: int) -> WatchEvent:
    return WatchEvent("pvs", kind, {"metadata": {"name": name, "resourceVersion": str(version)}}, float(version))


def test_a_subscription_delivers_its_list_first_then_only_what_is_newer() -> None:
    seen: list[WatchEvent] = []
    subscription = Subscription("pvs", seen.extend, None)
    subscription.deliver([_event("ADDED", "a", 4), _event("MODIFIED", "a", 6)])  # before its list: buffered
    assert seen == []
    listed = [_event("ADDED", "a", 6), WatchEvent("pvs", "SYNC", {"present": ["/a"], "resourceVersion": "7"}, 7.0)]
    subscription.begin(listed, 7)
    subscription.deliver([_event("MODIFIED", "a", 7), _event("MODIFIED", "a", 8), _event("DELETED", "a", 9)])
    assert [(e.type, e.obj.get("metadata", {}).get("resourceVersion")) for e in seen] == [
        ("ADDED", "6"), ("SYNC", None), ("MODIFIED", "8"), ("DELETED", "9")]


async def _until(condition: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_one_stream_for_every_subscriber_and_a_late_one_misses_nothing() -> None:
    fake = FakeKube()
    fake.put("persistentvolumes", "", pv("pv-old", "a-0"))
    first: list[WatchEvent] = []
    late: list[WatchEvent] = []

    def names(events: list[WatchEvent], live: bool = True) -> list[tuple[str, str]]:
        return [(e.type, e.obj["metadata"]["name"]) for e in events if e.type != "SYNC" and e.initial != live]

    async def scenario() -> SharedWatch:
        shared = SharedWatches().get(fake, "pvs", r.PVS)
        one = await shared.subscribe(first.extend, lambda line: b'"a-' in line, 5)
        fake.put("persistentvolumes", "", pv("pv-a1", "a-1"))
        fake.put("persistentvolumes", "", pv("pv-b1", "b-1"))
        await _until(lambda: ("ADDED", "pv-a1") in names(first))
        two = await shared.subscribe(late.extend, lambda line: b'"b-' in line, 5)
        fake.remove("persistentvolumes", "", "pv-a1")
        fake.put("persistentvolumes", "", pv("pv-b2", "b-2"))
        await _until(lambda: ("ADDED", "pv-b2") in names(late) and ("DELETED", "pv-a1") in names(first))
        # The shared stream expires (410 Gone): both get the relist, and its SYNC.
        syncs = sum(1 for e in first if e.type == "SYNC")
        with fake.lock:
            gone = json.dumps({"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}).encode() + b"\n"
            for watcher in fake._watchers:
                watcher.events.put(gone)
        await _until(lambda: sum(1 for e in first if e.type == "SYNC") > syncs)
        await _until(lambda: sum(1 for e in late if e.type == "SYNC") == 2)
        shared.unsubscribe(one)
        assert shared.running
        shared.unsubscribe(two)
        assert not shared.running
        return shared

    asyncio.run(scenario())
    watches = [verb for verb, path in fake.log if verb == "WATCH" and path.endswith("/persistentvolumes")]
    assert len(watches) == 2  # one stream for both subscribers, then one after the relist
    # Each subscriber gets the decoded lines it keeps, and only those: the first ("a-" lines) never sees a "b-"
    # PV, even once the second subscriber has them decoded.
    assert names(first)[:2] == [("ADDED", "pv-a1"), ("DELETED", "pv-a1")]
    assert all("pv-b" not in name for _, name in names(first))
    # The late subscriber: the state at its list (no pv-a1 ADDED twice, nothing before), then later changes once.
    its_list = late[:next(i for i, e in enumerate(late) if e.type == "SYNC")]
    assert {e.obj["metadata"]["name"] for e in its_list} == {"pv-old", "pv-a1", "pv-b1"}
    assert names(late)[:1] == [("ADDED", "pv-b2")]  # pv-a1's deletion is not its business: never routed to it
    assert len([e for e in names(late) if e == ("ADDED", "pv-b2")]) == 1


class OneListing:
    """A watch source whose every list answers ``listing`` (this test drives the watch's list only)."""

    def __init__(self, listing: Json) -> None:
        self.listing = listing

    def request_sync(self, method: str, path: str, body: Json | None = None,
                     query: dict[str, str] | None = None) -> Json:
        return self.listing

    def stream(self, path: str, query: dict[str, str]) -> WatchStream:
        raise AssertionError("this test never opens a stream")


def test_a_shared_relist_older_than_a_subscribers_list_does_not_forget_its_objects() -> None:
    """The shared watch's list and a new subscriber's own list run at the same time; when the shared one is the
    older, its SYNC (which does not have pv-b) must not reach the subscriber after its own newer list."""
    observed = Observed("ns", "run")
    def apply(events: list[WatchEvent]) -> None:
        for event in events:
            observed.apply(event)

    subscription = Subscription("pvs", apply, None)
    listing = {"metadata": {"resourceVersion": "5"}, "items": [_pv_event("pv-a", "run-a", 4).obj]}
    client = OneListing(listing)
    loop = asyncio.new_event_loop()
    try:
        watch = Watch(client, "pvs", r.PVS, None, {}, loop, subscription.deliver)
        watch._list()  # the shared watch's list, as of version 5
        loop.run_until_complete(asyncio.sleep(0.01))
    finally:
        loop.close()
    subscription.deliver([_pv_event("pv-b", "run-b", 6)])
    own = [_pv_event("pv-a", "run-a", 4, initial=True), _pv_event("pv-b", "run-b", 6, initial=True),
           WatchEvent("pvs", "SYNC", {"present": ["/pv-a", "/pv-b"], "resourceVersion": "7"}, 7.0, initial=True)]
    subscription.begin(own, 7)
    assert observed.pv_claim == {"pv-a": "run-a", "pv-b": "run-b"}


def _pv_event(name: str, claim: str, version: int, initial: bool = False) -> WatchEvent:
    obj = {"metadata": {"name": name, "resourceVersion": str(version)},
           "spec": {"claimRef": {"namespace": "ns", "name": claim, "uid": f"u-{claim}"}}}
    return WatchEvent("pvs", "ADDED", obj, float(version), initial=initial)

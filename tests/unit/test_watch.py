"""The watch thread against the fake API server: list, then live events, then a relist after 410 Gone that
reports objects deleted while the watch was away."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from csibench.kube import resources as r
from csibench.kube.client import KubeClient
from csibench.kube.watch import Watch, WatchEvent
from tests.support.fake_kube import FakeKube


def test_list_watch_and_relist_after_gone() -> None:
    fake = FakeKube()
    fake.put("namespaces", "", {"metadata": {"name": "ns"}})
    fake.put("persistentvolumeclaims", "ns", {"metadata": {"name": "early", "labels": {"run": "a"}}})
    fake.put("persistentvolumeclaims", "ns", {"metadata": {"name": "foreign", "labels": {"run": "b"}}})
    seen: list[WatchEvent] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        watch = Watch(cast(KubeClient, fake), "claims", r.PVCS, "ns", {"labelSelector": "run=a"}, loop,
                      seen.append)
        watch.start()
        await asyncio.wait_for(watch.synced.wait(), 5)
        fake.put("persistentvolumeclaims", "ns", {"metadata": {"name": "late", "labels": {"run": "a"}}})
        await _until(lambda: any(e.type == "ADDED" and e.obj["metadata"]["name"] == "late" for e in seen))
        # The watch's resourceVersion expires; meanwhile "early" is deleted without an event reaching it.
        with fake.lock:
            del fake.objects[("persistentvolumeclaims", "ns", "early")]
            gone = json.dumps({"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}).encode() + b"\n"
            for watcher in fake._watchers:
                watcher.events.put(gone)
        await _until(lambda: sum(1 for e in seen if e.type == "SYNC") == 2)
        watch.stop()

    asyncio.run(scenario())
    names = [(e.type, e.obj["metadata"]["name"]) for e in seen if e.type != "SYNC"]
    assert names[:2] == [("ADDED", "early"), ("ADDED", "late")]
    assert ("ADDED", "foreign") not in names  # the label selector is the server's job, and the fake does it
    syncs = [e.obj["present"] for e in seen if e.type == "SYNC"]
    assert syncs == [["ns/early"], ["ns/late"]]
    assert all(e.at > 0 for e in seen)


async def _until(condition: Any, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)

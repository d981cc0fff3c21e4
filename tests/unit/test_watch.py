"""The watch thread against the fake API server: list, then live events, then a relist after 410 Gone that
reports objects deleted while the watch was away."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from csibench.kube import resources as r
from csibench.kube.http import ChunkedDecoder
from csibench.kube.watch import Watch, WatchEvent, body_blocks
from tests.support.fake_kube import FakeKube


def test_list_watch_and_relist_after_gone() -> None:
    fake = FakeKube()
    fake.put("namespaces", "", {"metadata": {"name": "ns"}})
    fake.put("persistentvolumeclaims", "ns", {"metadata": {"name": "early", "labels": {"run": "a"}}})
    fake.put("persistentvolumeclaims", "ns", {"metadata": {"name": "foreign", "labels": {"run": "b"}}})
    seen: list[WatchEvent] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        watch = Watch(fake, "claims", r.PVCS, "ns", {"labelSelector": "run=a"}, loop,
                      seen.extend)
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


def chunked(*pieces: bytes) -> bytes:
    """``pieces`` as an HTTP/1.1 chunked body, one chunk each, with a chunk extension on the first."""
    body = b""
    for index, piece in enumerate(pieces):
        body += f"{len(piece):x}".encode() + (b";ext=1" if index == 0 else b"") + b"\r\n" + piece + b"\r\n"
    return body + b"0\r\n\r\n"


def test_chunked_bodies_decode_whatever_the_read_boundaries() -> None:
    events = [json.dumps({"type": "ADDED", "object": {"metadata": {"name": f"pvc-{i}"}}}).encode() + b"\n"
              for i in range(5)]
    wire = chunked(*events[:3], events[3] + events[4])
    for size in (1, 2, 3, 7, 64, len(wire)):
        decoder = ChunkedDecoder()
        body = b"".join(decoder.feed(wire[i:i + size]) for i in range(0, len(wire), size))
        assert body == b"".join(events) and decoder.done, size


class _Socket:
    def __init__(self, data: bytes, block: int) -> None:
        self._data, self._block = data, block

    def read1(self, size: int) -> bytes:
        taken, self._data = self._data[:min(size, self._block)], self._data[min(size, self._block):]
        return taken


def test_a_chunked_urllib3_stream_is_read_in_blocks_from_the_socket() -> None:
    events = [b'{"type":"ADDED"}\n', b'{"type":"MODIFIED"}\n', b'{"type":"DELETED"}\n']
    raw = SimpleNamespace(chunked=True, fp=_Socket(chunked(*events), block=40))
    blocks = list(body_blocks(SimpleNamespace(_fp=raw)))
    assert b"".join(blocks) == b"".join(events) and len(blocks) < len(events) + 2
    plain = SimpleNamespace(_fp=SimpleNamespace(chunked=False), stream=lambda _amount: iter([b"x\n", b"y\n"]))
    assert list(body_blocks(plain)) == [b"x\n", b"y\n"]


def test_keep_turns_away_other_objects_undecoded_and_still_delivers_ours() -> None:
    fake = FakeKube()
    fake.put("namespaces", "", {"metadata": {"name": "ns"}})
    seen: list[WatchEvent] = []

    async def scenario() -> Watch:
        loop = asyncio.get_running_loop()
        watch = Watch(fake, "pvs", r.PVS, None, {}, loop, seen.extend,
                      keep=lambda line: b'"mine-' in line)
        watch.start()
        await asyncio.wait_for(watch.synced.wait(), 5)
        for name in ("theirs-1", "mine-1", "theirs-2", "mine-2"):
            fake.put("persistentvolumes", "", {"metadata": {"name": name}})
        await _until(lambda: sum(1 for e in seen if e.type == "ADDED" and not e.initial) == 2)
        watch.stop()
        return watch

    watch = asyncio.run(scenario())
    assert [e.obj["metadata"]["name"] for e in seen if not e.initial] == ["mine-1", "mine-2"]
    assert watch.skipped == 2 and watch.decoded == 2


def test_reads_of_one_whole_chunk_each_give_each_chunk_and_then_the_end() -> None:
    pieces = [b'{"type":"ADDED"}\n', b'{"type":"DELETED"}\n']
    decoder = ChunkedDecoder()
    assert [decoder.feed(f"{len(p):x}".encode() + b"\r\n" + p + b"\r\n") for p in pieces] == pieces
    assert not decoder.done
    assert decoder.feed(b"0\r\n\r\n") == b"" and decoder.done

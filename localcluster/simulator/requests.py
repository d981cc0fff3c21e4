"""Requests to the array through the API: a ConfigMap's ``data.request`` (JSON with an ``id``) answered in its
``data.answer`` (JSON with the same ``id``), once per id. The array's audit (``audit.py``) and its fault windows
(``faults.py``) are asked this way: csibench's operator has no channel to the array but the API server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import aiohttp

from localcluster.simulator import api

log = logging.getLogger(__name__)

REQUEST_KEY = "request"
ANSWER_KEY = "answer"
ANSWER_ATTEMPTS = 5


def pending_request(configmap: api.Obj) -> dict[str, Any] | None:
    """The request a ConfigMap asks that is not answered yet, or None (pure; a malformed one is None)."""
    data = configmap.get("data") or {}
    try:
        request = json.loads(data.get(REQUEST_KEY) or "null")
        answer = json.loads(data.get(ANSWER_KEY) or "null")
    except ValueError:
        return None
    if not isinstance(request, dict) or not request.get("id"):
        return None
    if isinstance(answer, dict) and answer.get("id") == request["id"]:
        return None
    return request


class RequestWatcher:
    """Watches the ConfigMaps labelled ``label`` and serves each request once per id (``serve``, a task each)."""

    def __init__(self, client: api.Client, label: str) -> None:
        self.client = client
        self.informer = api.Informer(client, api.CONFIG_MAP, label_selector=label)
        self.informer.handlers.append(self._on_configmap)
        self._served: set[tuple[str, str]] = set()  # (ConfigMap key, request id)
        self._tasks: set[asyncio.Task[None]] = set()

    async def serve(self, configmap: api.Obj, request: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_deleted(self, configmap: api.Obj) -> None:
        """A request's ConfigMap is gone (its run deleted)."""

    async def write_answer(self, configmap: api.Obj, answer: dict[str, Any], precondition: bool = False) -> bool:
        """Write ``answer`` on the request, retried (a lost answer leaves its asker waiting for it); False if it
        could not be. With ``precondition``, only onto the version that asked, or a later one still asking the
        same id (a newer request wins)."""
        meta = configmap["metadata"]
        path = api.CONFIG_MAP.path(meta["namespace"], meta["name"])
        body: dict[str, Any] = {"data": {ANSWER_KEY: json.dumps(answer, sort_keys=True)}}
        if precondition:
            body["metadata"] = {"resourceVersion": meta.get("resourceVersion")}
        failure: Exception | None = None
        for attempt in range(ANSWER_ATTEMPTS):
            try:
                await self.client.patch(path, body)
                return True
            except api.ApiError as error:
                if error.status == 404:
                    return False  # the request is gone: nobody to answer
                failure = error
                if error.status == 409 and precondition:
                    with contextlib.suppress(api.ApiError, aiohttp.ClientError, TimeoutError):
                        current = await self.client.get(path) or {}
                        if (pending_request(current) or {}).get("id") != answer.get("id"):
                            return False
                        body["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
                        continue
            except (aiohttp.ClientError, TimeoutError) as error:
                failure = error
            await asyncio.sleep(0.2 * 2 ** attempt)
        log.warning("answer to %s not written: %s", path, failure)
        return False

    def _on_configmap(self, event: str, configmap: api.Obj) -> None:
        if event == "DELETED":
            self.on_deleted(configmap)
            return
        request = pending_request(configmap)
        if request is None:
            return
        key = (api.key_of(configmap), str(request["id"]))
        if key in self._served:
            return
        self._served.add(key)
        task = asyncio.create_task(self.serve(configmap, request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

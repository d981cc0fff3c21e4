"""Requests to the array through the API: a ConfigMap's ``data.request`` (JSON with an ``id``) answered in its
``data.answer`` (JSON with the same ``id``), once per id. The array's audit (``audit.py``) and its fault windows
(``faults.py``) are asked this way: csibench's operator has no channel to the array but the API server."""

from __future__ import annotations

import json
from typing import Any

from localcluster.simulator import api

REQUEST_KEY = "request"
ANSWER_KEY = "answer"


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

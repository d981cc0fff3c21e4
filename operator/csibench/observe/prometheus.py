"""A small Prometheus HTTP API client: instant and range queries, answers read into plain series.

Blocking (urllib) on purpose: the engine calls it through ``asyncio.to_thread``, never on the event loop. No new
dependency for two GET endpoints. Every failure is a ``PrometheusError`` that says which kind it is, because the
run tells them apart in its findings: Prometheus unreachable (connection, timeout, 5xx) or a query it refused
(400/422 with Prometheus' own error text).
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

TIMEOUT_SECONDS = 10.0
MAX_ANSWER_BYTES = 32 * 1024 * 1024  # a cut answer is not JSON: a finding, not an operator out of memory


class PrometheusError(RuntimeError):
    def __init__(self, message: str, unreachable: bool) -> None:
        super().__init__(message)
        self.unreachable = unreachable


@dataclass(frozen=True)
class Series:
    """One series of an answer: its labels (without __name__) and its samples (unix seconds, value)."""

    labels: dict[str, str]
    samples: list[tuple[float, float]]

    def key(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.labels.items()))


def parse_answer(body: bytes) -> list[Series]:
    """The series of a /api/v1/query or /query_range answer (vector, matrix or scalar) (pure)."""
    answer = json.loads(body)
    if answer.get("status") != "success":
        raise PrometheusError(f"{answer.get('errorType', 'error')}: {answer.get('error', 'no error text')}", False)
    data = answer.get("data") or {}
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, list):
        return [Series({}, [(float(result[0]), float(result[1]))])]
    if kind == "vector":
        return [_series(item["metric"], [item["value"]]) for item in result or []]
    if kind == "matrix":
        return [_series(item["metric"], item["values"]) for item in result or []]
    raise PrometheusError(f"unexpected result type {kind!r}", False)


def _series(metric: dict[str, str], values: list[list[Any]]) -> Series:
    labels = {k: str(v) for k, v in metric.items() if k != "__name__"}
    samples = [(float(at), float(value)) for at, value in values]
    return Series(labels, [(at, value) for at, value in samples if math.isfinite(value)])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: the URL asked is the one validated (no hop to another host or scheme)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# No proxy from the environment, no redirects: the operator asks exactly the URL the run or its flag named.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


class Prometheus:
    def __init__(self, url: str, timeout: float = TIMEOUT_SECONDS) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def instant(self, query: str, at: float) -> list[Series]:
        return self._get("/api/v1/query", {"query": query, "time": f"{at:.3f}"})

    def range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        return self._get("/api/v1/query_range", {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                 "step": f"{step:.3f}"})

    def _get(self, path: str, params: dict[str, str]) -> list[Series]:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with OPENER.open(url, timeout=self.timeout) as response:
                return parse_answer(response.read(MAX_ANSWER_BYTES + 1)[:MAX_ANSWER_BYTES])
        except urllib.error.HTTPError as error:
            body = error.read()
            if error.code in (400, 422):
                try:
                    return parse_answer(body)
                except (ValueError, PrometheusError) as refused:
                    raise PrometheusError(str(refused), False) from None
            raise PrometheusError(f"{self.url} answered HTTP {error.code}", True) from None
        except (urllib.error.URLError, OSError, TimeoutError) as error:
            reason = getattr(error, "reason", error)
            raise PrometheusError(f"{self.url} unreachable: {reason}", True) from None
        except ValueError as error:
            raise PrometheusError(f"{self.url} answered something that is not Prometheus JSON: {error}", True) \
                from None

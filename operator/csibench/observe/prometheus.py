"""A small Prometheus HTTP API client: instant and range queries, answers read into plain bounded series.

Blocking (http.client) on purpose: the engine calls it through ``asyncio.to_thread``, never on the event loop. No
new dependency for two GET endpoints. The server is whatever URL a run named, so nothing it sends is trusted:

- Every failure is a ``PrometheusError`` whose ``check`` is the finding it becomes: Prometheus unreachable
  (connection, 5xx, a redirect, which is never followed), too slow (no whole answer within the query's total
  deadline — a socket timeout is per read, so a server that sends a byte every few seconds would otherwise hold
  the run for ever: a watchdog shuts the socket at the deadline), a query it refused (400/422 with its own error
  text), or an answer of a shape Prometheus never sends (``[]``, ``null``, items without ``metric``, values that
  are not numbers). Parsing checks the shape instead of trusting it, so no ``KeyError`` leaves this module.
- What an answer holds is bounded before anyone stores it: error texts, label names and values are shortened
  (each series says how many of its labels were cut), the body is read up to ``MAX_ANSWER_BYTES``.
- The address is checked after name resolution and the connection goes to the checked address: link-local
  addresses and the clouds' metadata services are refused (a run could otherwise make the operator read
  instance credentials), unless the operator was started to allow them for its own ``--prometheus-url``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from csibench.api.collect import forbidden_address
from csibench.api.text import shorten

TIMEOUT_SECONDS = 10.0  # one connect or read
QUERY_DEADLINE_SECONDS = 30.0  # one whole request: connect, head and body
# Parsed JSON takes about 30 times its bytes in memory: 4 MiB stays far under the operator's limit (512 Mi), and
# holds the profile's range queries (a dozen containers x 2,000 points) many times over.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
MAX_ERROR_TEXT = 300
MAX_LABEL_NAME = 128
MAX_LABEL_VALUE = 256

UNREACHABLE = "PrometheusUnreachable"
SLOW = "PrometheusTooSlow"
REFUSED = "QueryRefused"
MALFORMED = "AnswerMalformed"
TOO_LARGE = "AnswerTooLarge"
ADDRESS_REFUSED = "AddressRefused"


class PrometheusError(RuntimeError):
    def __init__(self, message: str, check: str) -> None:
        super().__init__(message)
        self.check = check

    @property
    def unreachable(self) -> bool:
        """Asking again in this step would fail the same way (the next step tries again)."""
        return self.check in (UNREACHABLE, SLOW, ADDRESS_REFUSED)


@dataclass(frozen=True)
class Series:
    """One series of an answer: its labels (without __name__), its samples (unix seconds, value: infinite and NaN
    values are kept, the reader says what it does with them) and how many of its labels were shortened."""

    labels: dict[str, str]
    samples: list[tuple[float, float]]
    labels_cut: int = 0

    def key(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.labels.items()))


class _Malformed(Exception):
    """The answer is not of a shape Prometheus sends; the message says where."""


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _Malformed(f"{where} is {_kind(value)}, not a number")
    try:
        return float(value)
    except (ValueError, OverflowError):  # OverflowError: an integer of hundreds of digits
        raise _Malformed(f"{where} is {shorten(repr(value), 40)}, not a number") from None


def _sample(pair: object, where: str) -> tuple[float, float]:
    if not isinstance(pair, list) or len(pair) != 2:
        raise _Malformed(f"{where} is {_kind(pair)}, not a [time, value] pair")
    return _number(pair[0], f"{where}[0]"), _number(pair[1], f"{where}[1]")


def _labels(metric: object, where: str) -> tuple[dict[str, str], int]:
    if not isinstance(metric, dict):
        raise _Malformed(f"{where} is {_kind(metric)}, not an object of labels")
    labels, cut = {}, 0
    for name, value in metric.items():
        if name == "__name__":
            continue
        text = value if isinstance(value, str) else json.dumps(value)[:MAX_LABEL_VALUE + 1]
        short_name, short_text = shorten(name, MAX_LABEL_NAME), shorten(text, MAX_LABEL_VALUE)
        cut += short_name != name or short_text != text
        labels[short_name] = short_text
    return labels, cut


def _items(result: object, kind: str) -> list[dict[str, Any]]:
    if not isinstance(result, list):
        raise _Malformed(f"data.result of a {kind} is {_kind(result)}, not a list")
    for index, item in enumerate(result):
        if not isinstance(item, dict):
            raise _Malformed(f"data.result[{index}] is {_kind(item)}, not an object")
        if "metric" not in item:
            raise _Malformed(f"data.result[{index}] has no 'metric'")
    return result


def _parse(answer: object) -> list[Series]:
    if not isinstance(answer, dict):
        raise _Malformed(f"the answer is {_kind(answer)}, not an object")
    status = answer.get("status")
    if status == "error":
        error_type, error = answer.get("errorType", "error"), answer.get("error", "no error text")
        raise PrometheusError(shorten(f"{error_type}: {error}", MAX_ERROR_TEXT), REFUSED)
    if status != "success":
        raise _Malformed(f"status is {shorten(repr(status), 40)}, not 'success' or 'error'")
    data = answer.get("data")
    if not isinstance(data, dict):
        raise _Malformed(f"data is {_kind(data)}, not an object")
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        return [Series({}, [_sample(result, "data.result")])]
    series = []
    if kind == "vector":
        for index, item in enumerate(_items(result, kind)):
            labels, cut = _labels(item["metric"], f"data.result[{index}].metric")
            series.append(Series(labels, [_sample(item.get("value"), f"data.result[{index}].value")], cut))
        return series
    if kind == "matrix":
        for index, item in enumerate(_items(result, kind)):
            labels, cut = _labels(item["metric"], f"data.result[{index}].metric")
            values = item.get("values")
            if not isinstance(values, list):
                raise _Malformed(f"data.result[{index}].values is {_kind(values)}, not a list")
            series.append(Series(labels, [_sample(pair, f"data.result[{index}].values[{at}]")
                                          for at, pair in enumerate(values)], cut))
        return series
    raise _Malformed(f"data.resultType is {shorten(repr(kind), 40)}, not vector, matrix or scalar")


def parse_answer(body: bytes) -> list[Series]:
    """The series of a /api/v1/query or /query_range answer (vector, matrix or scalar) (pure). Whatever the
    bytes, the result is series or a ``PrometheusError`` (REFUSED for Prometheus' own error answer, MALFORMED
    for anything else, naming where the shape broke)."""
    try:
        return _parse(json.loads(body))
    except _Malformed as malformed:
        raise PrometheusError(f"an answer of unexpected shape: {malformed}", MALFORMED) from None
    except (ValueError, RecursionError) as error:  # not JSON (UnicodeDecodeError is a ValueError), or nested deep
        raise PrometheusError(shorten(f"an answer that is not JSON: {error}", MAX_ERROR_TEXT), MALFORMED) from None


class Prometheus:
    def __init__(self, url: str, timeout: float = TIMEOUT_SECONDS, deadline: float | None = None,
                 allow_link_local: bool = False) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.deadline = QUERY_DEADLINE_SECONDS if deadline is None else deadline
        self.allow_link_local = allow_link_local

    def instant(self, query: str, at: float, until: float | None = None) -> list[Series]:
        """``until``: a monotonic instant the request must not outlast (the step's collection budget)."""
        return self._get("/api/v1/query", {"query": query, "time": f"{at:.3f}"}, until)

    def range(self, query: str, start: float, end: float, step: float, until: float | None = None) -> list[Series]:
        return self._get("/api/v1/query_range", {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                 "step": f"{step:.3f}"}, until)

    def _get(self, path: str, params: dict[str, str], until: float | None) -> list[Series]:
        began = time.monotonic()
        deadline = began + self.deadline
        if until is not None:
            deadline = min(deadline, until)
        slow = f"{self.url} sent no whole answer within {deadline - began:.1f} s (the query's deadline or what was " \
               "left of the step's collection budget)"
        parts = urllib.parse.urlsplit(self.url)
        target = f"{parts.path.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
        expired = threading.Event()
        connection: _Connection | None = None

        def shut() -> None:  # from the watchdog's thread: a shutdown wakes a blocked read at once
            expired.set()
            if connection is not None:  # its own socket: http.client forgets it once a response will close
                with contextlib.suppress(OSError):
                    connection.raw_socket.shutdown(socket.SHUT_RDWR)

        watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), shut)
        watchdog.daemon = True
        try:
            connection = self._connect(parts, deadline)
            watchdog.start()
            connection.request("GET", target, headers={"Accept": "application/json"})
            response = connection.getresponse()
            body = response.read(MAX_ANSWER_BYTES + 1)
            code = response.status
        except PrometheusError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as error:
            if expired.is_set() or time.monotonic() >= deadline:
                raise PrometheusError(slow, SLOW) from None
            reason = getattr(error, "reason", None) or str(error) or type(error).__name__
            raise PrometheusError(shorten(f"{self.url} unreachable: {reason}", MAX_ERROR_TEXT), UNREACHABLE) \
                from None
        finally:
            watchdog.cancel()
            if connection is not None:
                connection.close()
        if expired.is_set():
            raise PrometheusError(slow, SLOW)
        if len(body) > MAX_ANSWER_BYTES:
            raise PrometheusError(f"an answer larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB (aggregate the "
                                  "query, e.g. sum by (...), to ask for fewer series)", TOO_LARGE)
        if code == 200:
            return parse_answer(body)
        if code in (400, 422):
            try:
                parse_answer(body)
            except PrometheusError as refused:
                raise PrometheusError(str(refused), REFUSED) from None
            raise PrometheusError(f"refused with HTTP {code} and a success answer", REFUSED)
        raise PrometheusError(f"{self.url} answered HTTP {code}", UNREACHABLE)

    def _connect(self, parts: urllib.parse.SplitResult, deadline: float) -> _Connection:
        """A connection to the first address of the URL's host that may be asked: resolved once, checked, and
        connected to as checked (no second lookup that could answer differently)."""
        host = parts.hostname or ""
        https = parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        timeout = max(min(self.timeout, deadline - time.monotonic()), 0.001)
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        allowed = [info for info in addresses if self.allow_link_local or not forbidden_address(str(info[4][0]))]
        if not allowed:
            raise PrometheusError(f"{host} is a link-local or metadata address ({addresses[0][4][0]}); the operator "
                                  "asks such an address only when started with --allow-link-local-prometheus",
                                  ADDRESS_REFUSED)
        failure: OSError | None = None
        for family, kind, proto, _, address in allowed:  # as socket.create_connection does: each in turn
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(max(min(timeout, deadline - time.monotonic()), 0.001))
                sock.connect(address)
                if https:
                    sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
                break
            except OSError as error:
                sock.close()
                failure = error
            except BaseException:
                sock.close()
                raise
        else:
            assert failure is not None
            raise failure
        connection = _Connection(host, port, timeout=self.timeout)
        connection.sock = connection.raw_socket = sock  # used as given: it connects only when it has no socket
        return connection


class _Connection(http.client.HTTPConnection):
    """An HTTP connection that keeps its socket for the watchdog after http.client hands it to the response."""

    raw_socket: socket.socket

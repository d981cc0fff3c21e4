"""A Prometheus HTTP API stand-in for unit tests: a real HTTP server on loopback answering /api/v1/query and
/api/v1/query_range from rules, so the operator's client, its error handling and the engine's collection run
unchanged. Counters grow linearly with time (``rate`` per second from ``origin``), so a window's increase is known.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CPU_RATES = {"csi-provisioner": 0.5, "csi-attacher": 0.25}  # CPU-seconds per second, by container
MEMORY = {"csi-provisioner": 50 * 1024 * 1024, "csi-attacher": 30 * 1024 * 1024}


class FakePrometheus:
    def __init__(self) -> None:
        self.origin = time.time() - 100.0  # counters count from here: windows in the last 100 s read positive
        self.queries: list[tuple[str, dict[str, str]]] = []
        self.down_for_queries = False  # everything but the settle query answers 503
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urllib.parse.urlparse(self.path)
                params = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                owner.queries.append((url.path, params))
                code, body = owner.answer(url.path, params)
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakePrometheus:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def cpu(self, container: str, at: float) -> float:
        return CPU_RATES[container] * (at - self.origin)

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        query = params.get("query", "")
        if query == "min(timestamp(up))":
            now = time.time()
            return 200, {"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {}, "value": [now, str(now)]}]}}
        if self.down_for_queries:
            return 503, {"status": "error", "errorType": "unavailable", "error": "down"}
        if "(" in query and query.count("(") != query.count(")"):
            return 400, {"status": "error", "errorType": "bad_data",
                         "error": 'invalid parameter "query": 1:5: parse error: unclosed left parenthesis'}
        if "process_cpu_seconds_total" in query or "process_resident_memory_bytes" in query:
            series = self._series(query, path, params)
            kind = "matrix" if path.endswith("query_range") else "vector"
            return 200, {"status": "success", "data": {"resultType": kind, "result": series}}
        return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}

    def _series(self, query: str, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        memory = "process_resident_memory_bytes" in query and "process_cpu_seconds_total" not in query
        found: list[dict[str, Any]] = []
        for container in CPU_RATES:
            labels = {"namespace": "kube-system", "pod": f"{container}-sim-node-0", "container": container}
            if path.endswith("query_range"):
                start, end, step = (float(params[k]) for k in ("start", "end", "step"))
                points: list[list[Any]] = []
                at = start
                while at <= end:
                    points.append([at, str(MEMORY[container] + (1024 if at > start else 0))])
                    at += step
                found.append({"metric": labels, "values": points})
            else:
                at = float(params["time"])
                value = MEMORY[container] if memory else self.cpu(container, at)
                found.append({"metric": labels, "value": [at, str(value)]})
        return found

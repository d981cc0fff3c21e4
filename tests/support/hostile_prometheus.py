"""A server at a Prometheus URL that answers what a test tells it to: any status code and bytes, sent at once or
one byte at a time (a server that never finishes its answer). The settle query (``min(timestamp(up))``) gets a
normal answer unless ``hostile_settle`` is set, so a test can aim at the queries or at everything."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def vector(*items: dict[str, Any]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": list(items)}}).encode()


class HostilePrometheus:
    def __init__(self, body: bytes, code: int = 200, drip_seconds: float = 0.0, hostile_settle: bool = False) -> None:
        self.body, self.code, self.drip_seconds, self.hostile_settle = body, code, drip_seconds, hostile_settle
        self.asked = 0
        self.stopping = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("query", [""])[0]
                if query == "min(timestamp(up))" and not owner.hostile_settle:
                    code, body = 200, vector({"metric": {}, "value": [time.time(), str(time.time())]})
                else:
                    owner.asked += 1
                    code, body = owner.code, owner.body
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if not owner.drip_seconds:
                        self.wfile.write(body)
                        return
                    for index in range(len(body)):  # never done in time: a byte, then a pause
                        if owner.stopping.wait(owner.drip_seconds):
                            return
                        self.wfile.write(body[index:index + 1])
                        self.wfile.flush()
                except OSError:
                    pass  # the client gave up: what the test wants

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HostilePrometheus:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

"""The kubelet's log endpoint: ``GET /containerLogs/<namespace>/<pod>/<container>`` over HTTPS, per node.

``kubectl logs`` and every ``pods/log`` read go to the API server, which proxies them to the pod's node at the
address and port the Node's status advertises (``status.addresses`` InternalIP, chosen by the API server's
``--kubelet-preferred-address-types``, and ``status.daemonEndpoints.kubeletEndpoint.Port``). One threaded server
per node address serves the log files the runtime writes. Like a kubelet it answers ``tailLines``,
``limitBytes`` and ``follow`` (streams until the container's process has exited). It listens on loopback only,
with the cluster's own certificate; the local API server verifies neither side (no
``--kubelet-certificate-authority``), and this server asks for no client certificate.
"""

from __future__ import annotations

import http.server
import logging
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("simulator.logs")
FOLLOW_POLL_SECONDS = 0.2
Lookup = Callable[[str, str, str], tuple[Path, Callable[[], bool]] | None]  # -> (log file, still running?)


def parse_log_path(path: str) -> tuple[str, str, str] | None:
    """``/containerLogs/ns/pod/container`` -> (ns, pod, container); anything else None (pure)."""
    parts = [unquote(part) for part in urlsplit(path).path.split("/")]
    if len(parts) != 5 or parts[0] != "" or parts[1] != "containerLogs" or not all(parts[2:]):
        return None
    if any("/" in part or part in (".", "..") for part in parts[2:]):
        return None
    return parts[2], parts[3], parts[4]


def select_text(data: bytes, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    """The part of a log a request asks for: the last ``tail_lines`` lines, then at most ``limit_bytes`` (pure)."""
    if tail_lines is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[-tail_lines:]) if tail_lines > 0 else b""
    if limit_bytes is not None:
        data = data[:limit_bytes]
    return data


def _number(query: dict[str, list[str]], name: str) -> int | None:
    values = query.get(name)
    try:
        return int(values[0]) if values else None
    except ValueError:
        return None


class _Handler(http.server.BaseHTTPRequestHandler):
    lookup: Lookup
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s " + format, self.client_address[0], *args)

    def do_GET(self) -> None:
        target = parse_log_path(self.path)
        found = self.lookup(*target) if target is not None else None
        if found is None:
            self._answer(404, b"not found\n")
            return
        path, running = found
        query = parse_qs(urlsplit(self.path).query)
        follow = (query.get("follow") or ["false"])[0] == "true"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        data = select_text(data, _number(query, "tailLines"), _number(query, "limitBytes"))
        if not follow:
            self._answer(200, data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(data)
        offset = path.stat().st_size if path.exists() else 0
        while True:
            alive = running()
            size = path.stat().st_size if path.exists() else offset
            if size > offset:
                with path.open("rb") as handle:
                    handle.seek(offset)
                    self._chunk(handle.read(size - offset))
                offset = size
            if not alive:
                break
            time.sleep(FOLLOW_POLL_SECONDS)
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class LogServers:
    """One HTTPS server per node address, each on its own daemon thread."""

    def __init__(self, addresses: list[str], port: int, cert: Path, key: Path, lookup: Lookup) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        handler = type("Handler", (_Handler,), {"lookup": staticmethod(lookup)})
        self._servers = []
        for address in addresses:
            server = http.server.ThreadingHTTPServer((address, port), handler)
            server.daemon_threads = True
            server.socket = context.wrap_socket(server.socket, server_side=True)
            self._servers.append(server)

    def start(self) -> None:
        for server in self._servers:
            threading.Thread(target=server.serve_forever, name=f"logs:{server.server_address}", daemon=True).start()

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

"""What one watch line costs a reader that wakes up for it, with nothing else in the way.

Why: after issue 18's cuts most of the operator's CPU is its watch threads, about 170-195 us per line, and
each line is read on its own (events arrive a few ms apart, so every read brings one line). This bench
separates the part no decoder can remove: a thread blocked in a read, woken by one 1.4 KB line every 4 ms,
and the thread CPU (``CLOCK_THREAD_CPUTIME_ID``) each wake-up costs. Three readers, on the same machine in
the same run:

- Python over a plain socket pair (the kernel's and the interpreter's wake-up);
- Python over TLS with a read timeout, as ``kube/watch.py`` reads the API server;
- C over a plain socket pair (the kernel's alone), compiled here if a C compiler is found.

The difference between the first two and the third is what a native reader could save; the third is the
floor for any reader that takes each event when it arrives (which the per-object latencies need).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

LINE = b'{"type":"MODIFIED","object":{"metadata":{"name":"' + b"x" * 1360 + b'"}}}\n'
GAP_SECONDS = 0.004

C_READER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static int pair[2]; static char line[1401]; static int lines;
static void *send_lines(void *unused) {
    for (int i = 0; i < lines; i++) { if (write(pair[0], line, sizeof line) < 0) break; usleep(4000); }
    close(pair[0]); return unused;
}
int main(int argc, char **argv) {
    lines = atoi(argv[1]); memset(line, 'x', sizeof line); line[sizeof line - 1] = '\n';
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return 1;
    pthread_t sender; pthread_create(&sender, 0, send_lines, 0);
    char buffer[65536]; struct timespec start, end; int reads = 0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    while (read(pair[1], buffer, sizeof buffer) > 0) reads++;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
    printf("%d %.3f\n", reads, ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / 1e3);
    return 0;
}
"""


def _send(write: socket.socket | ssl.SSLSocket, lines: int) -> None:
    for _ in range(lines):
        write.sendall(LINE)
        time.sleep(GAP_SECONDS)
    write.close()


def _read_all(read: socket.socket | ssl.SSLSocket) -> tuple[int, float]:
    """Reads until end of stream: (reads, thread CPU in us)."""
    buffer = bytearray(65536)
    started, reads = time.thread_time(), 0
    while read.recv_into(buffer):
        reads += 1
    return reads, (time.thread_time() - started) * 1e6


def python_plain(lines: int) -> tuple[int, float]:
    write, read = socket.socketpair()
    threading.Thread(target=_send, args=(write, lines), daemon=True).start()
    with read:
        return _read_all(read)


def python_tls(lines: int, workdir: Path) -> tuple[int, float]:
    key, cert = workdir / "key.pem", workdir / "cert.pem"
    if not cert.exists():
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        _send(server_context.wrap_socket(connection, server_side=True), lines)

    threading.Thread(target=serve, daemon=True).start()
    client_context = ssl.create_default_context(cafile=str(cert))
    client_context.check_hostname = False
    with client_context.wrap_socket(socket.create_connection(("127.0.0.1", port))) as read:
        read.settimeout(60)  # as the watch reads: a timeout makes each read wait in poll()
        result = _read_all(read)
    listener.close()
    return result


def c_plain(lines: int, workdir: Path) -> tuple[int, float] | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    source, binary = workdir / "reader.c", workdir / "reader"
    source.write_text(C_READER)
    subprocess.run([compiler, "-O2", "-pthread", str(source), "-o", str(binary)], check=True)
    reads, micros = subprocess.run([str(binary), str(lines)], check=True, capture_output=True,
                                   text=True).stdout.split()
    return int(reads), float(micros)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"Python, plain socket pair": [], "Python, TLS with a read timeout": [],
                                    "C, plain socket pair": []}
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        readers: dict[str, Callable[[], tuple[int, float] | None]] = {
            "Python, plain socket pair": lambda: python_plain(args.lines),
            "Python, TLS with a read timeout": lambda: python_tls(args.lines, workdir),
            "C, plain socket pair": lambda: c_plain(args.lines, workdir)}
        for _ in range(args.rounds):  # interleaved, so the machine's moods fall on every reader alike
            for name, measure in readers.items():
                result = measure()
                if result is not None:
                    reads, micros = result
                    rows[name].append(micros / reads)
    print(f"\n### Thread CPU per wake-up ({args.lines} lines of {len(LINE)} B, one every "
          f"{GAP_SECONDS * 1000:g} ms, {args.rounds} rounds interleaved)\n")
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"Machine: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {platform.release()}\n")
    print("| reader | us of thread CPU per read (each round) | median |")
    print("|---|---|---|")
    for name, values in rows.items():
        if values:
            ordered = sorted(values)
            print(f"| {name} | {', '.join(f'{v:.0f}' for v in values)} | {ordered[len(ordered) // 2]:.0f} |")
        else:
            print(f"| {name} | no C compiler found | |")


if __name__ == "__main__":
    main()

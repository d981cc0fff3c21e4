"""What one watch line costs a reader that wakes up for it, with nothing else in the way, in three languages.

Why: after issue 18's cuts most of the operator's CPU is its watch threads, about 170-195 us per line, and
each line is read on its own (events arrive a few ms apart, so every read brings one line). This bench
separates the part no decoder can remove: a reader blocked in a read, woken by one 1.4 KB line every 4 ms,
and the CPU each wake-up costs it. The lines come from a sender in another process (so no reader shares an
interpreter lock or a runtime with its sender), over TCP on the loopback, plain or TLS. Readers, each in a
process of its own and interleaved round by round so the machine's moods fall on all of them alike:

- Python, plain and TLS (with a read timeout, as ``kube/watch.py`` reads the API server, and blocking);
- Go, plain and TLS (``net`` and ``crypto/tls`` with a read deadline, as client-go reads a watch), built here
  if ``go`` is found; its figure is the whole process's CPU, because the runtime's own threads (netpoller,
  sysmon) are part of what a Go reader costs;
- C, plain (the kernel's wake-up and one ``read``), compiled here if a C compiler is found.

The question it answers: would a native watch reader (a Go component next to the Python package) cut the
per-line floor enough to be worth a second language in the operator's build and image?
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

LINE = b'{"type":"MODIFIED","object":{"metadata":{"name":"' + b"x" * 1360 + b'"}}}\n'
GAP_SECONDS = 0.004

C_READER = r"""
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {0};
    address.sin_family = AF_INET; address.sin_port = htons(atoi(argv[1]));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) return 1;
    char buffer[65536]; struct timespec start, end; long reads = 0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
    while (read(fd, buffer, sizeof buffer) > 0) reads++;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &end);
    printf("%ld %.3f\n", reads, ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / 1e3);
    return 0;
}
"""

GO_READER = r"""
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

func processMicros() float64 {
	var usage syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return float64(usage.Utime.Sec+usage.Stime.Sec)*1e6 + float64(usage.Utime.Usec+usage.Stime.Usec)
}

func main() {
	address := "127.0.0.1:" + os.Args[2]
	var connection net.Conn
	var err error
	if os.Args[1] == "tls" {
		pem, _ := os.ReadFile(os.Args[3])
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		connection, err = tls.Dial("tcp", address, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	} else {
		connection, err = net.Dial("tcp", address)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buffer := make([]byte, 65536)
	reads, started := 0, processMicros()
	for {
		connection.SetReadDeadline(time.Now().Add(60 * time.Second))
		n, err := connection.Read(buffer)
		if n > 0 {
			reads++
		}
		if err != nil {
			break
		}
	}
	fmt.Printf("%d %.3f\n", reads, processMicros()-started)
}
"""


def _certificate(workdir: Path) -> tuple[Path, Path]:
    key, cert = workdir / "key.pem", workdir / "cert.pem"
    if not cert.exists():
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    return key, cert


def serve(transport: str, lines: int, workdir: Path) -> None:
    """The sender (its own process): one connection, `lines` lines one gap apart, then close."""
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    connection, _ = listener.accept()
    stream: socket.socket | ssl.SSLSocket = connection
    if transport == "tls":
        key, cert = _certificate(workdir)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        stream = context.wrap_socket(connection, server_side=True)
    for _ in range(lines):
        stream.sendall(LINE)
        time.sleep(GAP_SECONDS)
    stream.close()
    listener.close()


def read_python(transport: str, port: int, timeout: float | None, workdir: Path) -> None:
    """A Python reader (its own process, one thread): prints reads and thread CPU in us."""
    stream: socket.socket | ssl.SSLSocket = socket.create_connection(("127.0.0.1", port))
    if transport == "tls":
        context = ssl.create_default_context(cafile=str(_certificate(workdir)[1]))
        stream = context.wrap_socket(stream, server_hostname="localhost")
    stream.settimeout(timeout)  # with a timeout each read waits in poll() before the TLS read
    buffer = bytearray(65536)
    started, reads = time.thread_time(), 0
    while stream.recv_into(buffer):
        reads += 1
    print(reads, (time.thread_time() - started) * 1e6)


def _build(workdir: Path) -> dict[str, Path]:
    """Compiles the native readers this machine can build."""
    built: dict[str, Path] = {}
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is not None:
        (workdir / "reader.c").write_text(C_READER)
        subprocess.run([compiler, "-O2", str(workdir / "reader.c"), "-o", str(workdir / "c-reader")], check=True)
        built["c"] = workdir / "c-reader"
    go = shutil.which("go")
    if go is not None:
        source = workdir / "go-reader"
        source.mkdir(exist_ok=True)
        (source / "go.mod").write_text("module wakeup\n\ngo 1.22\n")
        (source / "main.go").write_text(GO_READER)
        subprocess.run([go, "build", "-o", str(workdir / "go-reader-bin"), "."], cwd=source, check=True,
                       env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"})
        built["go"] = workdir / "go-reader-bin"
    return built


def measure(transport: str, command: Callable[[str], list[str]], lines: int, workdir: Path) -> float:
    """Starts a sender, runs one reader (its command, given the port) against it: CPU per read, in us."""
    sender = subprocess.Popen([sys.executable, "-m", "bench.wakeup", "--serve", transport, "--lines", str(lines),
                               "--workdir", str(workdir)], stdout=subprocess.PIPE, text=True)
    try:
        assert sender.stdout is not None
        port = sender.stdout.readline().strip()
        output = subprocess.run(command(port), check=True, capture_output=True, text=True).stdout.split()
    finally:
        sender.wait(timeout=60)
    reads, micros = int(output[0]), float(output[1])
    return micros / reads


def _readers(workdir: Path, built: dict[str, Path]) -> dict[str, tuple[str, Callable[[str], list[str]]]]:
    """Each reader: its transport and its command line for a port."""
    python = [sys.executable, "-m", "bench.wakeup", "--workdir", str(workdir), "--read-python"]
    cert = str(workdir / "cert.pem")
    readers: dict[str, tuple[str, Callable[[str], list[str]]]] = {
        "Python, plain": ("plain", lambda port: [*python, "plain", "none", port]),
        "Python, TLS with a read timeout (as kube/watch.py)": ("tls", lambda port: [*python, "tls", "60", port]),
        "Python, TLS blocking": ("tls", lambda port: [*python, "tls", "none", port]),
    }
    if "go" in built:
        go = str(built["go"])
        readers["Go, plain (whole process)"] = ("plain", lambda port: [go, "plain", port])
        readers["Go, TLS (whole process)"] = ("tls", lambda port: [go, "tls", port, cert])
    if "c" in built:
        c = str(built["c"])
        readers["C, plain"] = ("plain", lambda port: [c, port])
    return readers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", choices=["plain", "tls"], help=argparse.SUPPRESS)
    parser.add_argument("--read-python", nargs=3, metavar=("TRANSPORT", "TIMEOUT", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.lines, args.workdir)
        return
    if args.read_python:
        transport, timeout, port = args.read_python
        read_python(transport, int(port), None if timeout == "none" else float(timeout), args.workdir)
        return
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        _certificate(workdir)
        built = _build(workdir)
        readers = _readers(workdir, built)
        rows: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(args.rounds):  # interleaved, so the machine's moods fall on every reader alike
            for name, (transport, command) in readers.items():
                rows[name].append(measure(transport, command, args.lines, workdir))
    print(f"\n### CPU per wake-up ({args.lines} lines of {len(LINE)} B, one every {GAP_SECONDS * 1000:g} ms, "
          f"{args.rounds} rounds interleaved)\n")
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"Machine: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {platform.release()}\n")
    print("| reader | us of CPU per read (each round) | median |")
    print("|---|---|---|")
    for name, values in rows.items():
        ordered = sorted(values)
        print(f"| {name} | {', '.join(f'{v:.0f}' for v in values)} | {ordered[len(ordered) // 2]:.0f} |")
    missing = [language for language in ("go", "c") if language not in built]
    if missing:
        print(f"\n(not built here: {', '.join(missing)})")


if __name__ == "__main__":
    main()

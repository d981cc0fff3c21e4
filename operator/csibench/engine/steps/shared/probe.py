"""The shared-volume probe: what one pod of the sharedVolume step runs, as ``python3 -c <this file> <options>``.

Every pod of the step mounts the same ReadWriteMany volume, each on its own node where there are enough, and runs
this program with its index. They work in a folder of this attempt's own, ``csibench-shared-<attempt>`` (the
operator names the attempt), so files an earlier attempt left on a volume a backend kept never meet this one; pod 0
removes the folder when every pod is done. The pods meet at barriers on the volume itself (each creates
``b/<barrier>/<index>`` and waits until all N are there). Each phase lies between two barriers and a pod's seconds
run from leaving the first to leaving the second, so the slowest pod's seconds cover the whole phase on every pod
however their starts were spread (a barrier's own wait is in it: at most a poll interval and one visibility more
than the work), and a phase's aggregate rate is every pod's operations over that time: no clock is compared
between nodes. The phases:

``visibility``  round k: pod k mod N creates ``v/<k>``; each other pod polls (a stat every ``--poll-ms``) until
                it sees the file and answers with ``v/<k>.<its index>``; the writer polls for the answers. One
                sample per (round, reader): half the round trip on the writer's own clock (one visibility each
                way, plus a poll interval and a create each way), so clocks of different nodes never meet. With
                instant visibility a sample is about half a poll interval or a whole one: the resolution.
``lock``        each pod ``--lock-rounds`` times: open the shared ``lock`` file, flock(LOCK_EX), read the counter,
                write it plus one, unlock, close. A sample is the time to get the lock (open included); after the
                phase pod 0 reads the counter (``lock-counter``): pods x rounds unless an update was lost.
``create``      each pod creates ``--small-files`` files of ``--file-bytes`` in its own folder ``f/<index>`` (a
                short write is a failure).
``stat``        each pod stats the files its neighbour (index + 1 mod N) created: attributes across nodes.
``list``        each pod lists its neighbour's folder once (one sample) and counts the names.
``delete``      each pod unlinks its own files.
``listing``     pod 0 creates ``--list-files`` empty files in ``l`` (its seconds: ``listing-create``); then every
                pod lists ``l`` (readdir, names only) and counts them.
``fio``         with ``--fio-seconds``: every pod runs fio at once, sequential 1 MiB direct writes to a file of its
                own, and prints the write side of fio's JSON: the aggregate throughput of all writers, and fio's
                own completion histogram (the same bins as the probe's, merged the same way).

On a ReadOnlyMany volume (``--mode``): one pod fills a ReadWriteOnce volume first (``populate``: the listing's
``--list-files`` empty files in ``l`` and a ``--fio-bytes`` file per reader in ``fio``, in the attempt's folder),
which is then cloned into the ReadOnlyMany volume; the readers (``read``) cannot meet at barriers on a volume they
cannot write, so the operator gives them one start time (the data path's start barrier, a file of the pod's
annotation: ``--start-file``), and each reads from that instant: fio, sequential 1 MiB direct reads of its own
file for ``--fio-seconds`` (every reader at once: their aggregate), then, ``READ_GAP_SECONDS`` after fio's
runtime, at one instant again, the listing. A phase's seconds are the pod's own from the common instant.

A sample goes into a histogram with fio's own bins (``plat_val_to_idx``/``plat_idx_to_val`` of fio's stat.c,
FIO_IO_U_PLAT_BITS 6), so the operator merges the pods' histograms exactly, as it merges fio's. Each phase prints
one line ``CSIBENCH-SHARED {json}``; a failure prints one with ``error`` and ends the program with status 1. Every
loop checks the deadline (``--timeout``), so a pod that waits for nothing or works too long says so and ends.
Only the standard library: the workload image has a plain python3. The operator reads this file's text to build
the command, so nothing here may import csibench.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

MARKER = "CSIBENCH-SHARED "
READ_GAP_SECONDS = 5  # from the readers' fio's end (its runtime after the start) to their listing's common start
WRITE_CHUNK = 1 << 20
PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
PLAT_NR = 29 * PLAT_VAL


def all_exist(paths: list[str]) -> bool:
    return all(os.path.exists(path) for path in paths)


class ProbeFailed(Exception):
    """The probe cannot go on; its message is the line the operator shows."""


def plat_index(value: int) -> int:
    """fio's plat_val_to_idx: the bin of a latency in ns."""
    msb = value.bit_length() - 1 if value > 0 else 0
    if msb <= PLAT_BITS:
        return value
    error_bits = msb - PLAT_BITS
    base = (error_bits + 1) << PLAT_BITS
    offset = (PLAT_VAL - 1) & (value >> error_bits)
    return min(base + offset, PLAT_NR - 1)


def plat_value(index: int) -> int:
    """fio's plat_idx_to_val: the value (ns) a bin stands for, its midpoint."""
    if index < (PLAT_VAL << 1):
        return index
    error_bits = (index >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    return base + (2 * (index % PLAT_VAL) + 1) * (1 << error_bits) // 2


class Samples:
    """Latencies of one phase, as fio's histogram (bin value -> count) and their exact maximum."""

    def __init__(self) -> None:
        self.bins: dict[int, int] = {}
        self.count = 0
        self.max_ns = 0

    def add(self, nanoseconds: int) -> None:
        value = plat_value(plat_index(max(0, nanoseconds)))
        self.bins[value] = self.bins.get(value, 0) + 1
        self.count += 1
        self.max_ns = max(self.max_ns, nanoseconds)

    def fields(self) -> dict[str, object]:
        return {"bins": {str(value): self.bins[value] for value in sorted(self.bins)}, "maxNs": self.max_ns}


class Probe:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.me: int = options.pod
        self.pods: int = options.pods
        self.root: str = os.path.join(options.root, f"csibench-shared-{options.attempt}")
        self.poll = options.poll_ms / 1000.0
        self.deadline = time.monotonic() + options.timeout

    def path(self, *parts: object) -> str:
        return os.path.join(self.root, *(str(part) for part in parts))

    def emit(self, phase: str, **fields: object) -> None:
        print(MARKER + json.dumps({"pod": self.me, "phase": phase, **fields}, sort_keys=True), flush=True)

    def in_time(self, what: str) -> None:
        if time.monotonic() > self.deadline:
            raise ProbeFailed(f"timed out {what} (--timeout {self.options.timeout:g}s)")

    def wait_for(self, present: Callable[[], bool], what: str) -> None:
        """Poll ``present()`` until it is true; past the deadline, fail saying what never came."""
        while not present():
            self.in_time(f"waiting for {what}")
            time.sleep(self.poll)

    def barrier(self, phase: str) -> None:
        """Every pod at ``phase`` before any goes on (files on the shared volume itself). A barrier's folder that
        is gone was removed by pod 0 after every pod had arrived (the end of the run)."""
        folder = self.path("b", phase)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, str(self.me)), "w"):
            pass

        def arrived() -> bool:
            try:
                return len(os.listdir(folder)) >= self.pods
            except FileNotFoundError:
                return True

        try:
            self.wait_for(arrived, f"the other pods at {phase}")
        except ProbeFailed:
            missing = sorted(set(range(self.pods)) - {int(n) for n in os.listdir(folder) if n.isdigit()})
            raise ProbeFailed(f"pods {', '.join(map(str, missing))} of {self.pods} never reached {phase} "
                              f"(timed out after {self.options.timeout:g}s)") from None

    def phase(self, name: str, work: Callable[[], dict[str, object]]) -> None:
        """One phase between two barriers: its seconds run from leaving the first to leaving the second, so the
        slowest pod's seconds cover the whole phase on every pod, however their starts were spread."""
        self.barrier(name)
        started = time.monotonic()
        fields = work()
        self.barrier(f"{name}-done")
        self.emit(name, seconds=time.monotonic() - started, **fields)

    def create(self, path: str, payload: bytes = b"") -> None:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            written = 0
            while written < len(payload):
                done = os.write(fd, payload[written:])
                if done <= 0:
                    raise OSError(f"short write: {written} of {len(payload)} bytes")
                written += done
        except OSError as error:  # a write's error names no file: say which one
            if error.filename is None:
                raise OSError(error.errno, error.strerror, path) from error
            raise
        finally:
            os.close(fd)

    def visibility(self) -> dict[str, object]:
        samples = Samples()
        for round_ in range(self.options.files):
            writer = round_ % self.pods
            readers = [pod for pod in range(self.pods) if pod != writer]
            answers = {pod: self.path("v", f"{round_}.{pod}") for pod in readers}
            if self.me == writer:
                began = time.monotonic_ns()
                self.create(self.path("v", round_))
                waiting = dict(answers)
                while waiting:
                    for pod, answer in list(waiting.items()):
                        if os.path.exists(answer):
                            samples.add((time.monotonic_ns() - began) // 2)
                            del waiting[pod]
                    if waiting:
                        self.in_time(f"in round {round_}: pods {sorted(waiting)} never answered")
                        time.sleep(self.poll)
            else:
                self.wait_for(functools.partial(all_exist, [self.path("v", round_)]),
                              f"round {round_}'s file from pod {writer}")
                self.create(answers[self.me])
                self.wait_for(functools.partial(all_exist, list(answers.values())),
                              f"round {round_}'s answers from pods {readers}")
        return {"ops": samples.count, **samples.fields()}

    def lock(self) -> dict[str, object]:
        lock_file, samples = self.path("lock"), Samples()
        for round_ in range(self.options.lock_rounds):
            if round_ % 100 == 0:
                self.in_time(f"in flock round {round_}")
            began = time.monotonic_ns()
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                samples.add(time.monotonic_ns() - began)
                counted = os.pread(fd, 32, 0).strip()
                os.pwrite(fd, b"%020d" % (int(counted or b"0") + 1), 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        return {"ops": samples.count, **samples.fields()}

    def counter(self) -> int:
        with open(self.path("lock"), "rb") as counter:
            return int(counter.read().strip() or b"0")

    def timed(self, what: str, paths: list[str], operation: Callable[[str], object]) -> dict[str, object]:
        """One operation per path, each timed; a path not found counts as missing."""
        samples, missing = Samples(), 0
        for number, path in enumerate(paths):
            if number % 100 == 0:
                self.in_time(f"in {what} ({number} of {len(paths)} done)")
            began = time.monotonic_ns()
            try:
                operation(path)
            except FileNotFoundError:
                missing += 1
                continue
            samples.add(time.monotonic_ns() - began)
        return {"ops": samples.count, "missing": missing, **samples.fields()}

    def listed(self, folder: str, expected: int) -> dict[str, object]:
        began, samples = time.monotonic_ns(), Samples()
        with os.scandir(folder) as entries:
            seen = sum(1 for _ in entries)
        samples.add(time.monotonic_ns() - began)
        return {"ops": 1, "entries": seen, "expected": expected, **samples.fields()}

    def small_files(self) -> None:
        count, mine = self.options.small_files, self.path("f", self.me)
        neighbour = self.path("f", (self.me + 1) % self.pods)
        os.makedirs(mine, exist_ok=True)
        payload = b"x" * self.options.file_bytes
        names = [str(n) for n in range(count)]
        self.phase("create", lambda: self.timed("create", [os.path.join(mine, n) for n in names],
                                                lambda path: self.create(path, payload)))
        self.phase("stat", lambda: self.timed("stat", [os.path.join(neighbour, n) for n in names], os.stat))
        self.phase("list", lambda: self.listed(neighbour, count))
        self.phase("delete", lambda: self.timed("delete", [os.path.join(mine, n) for n in names], os.unlink))

    def listing(self) -> None:
        count, folder = self.options.list_files, self.path("l")
        if count <= 0:
            return
        if self.me == 0:
            os.makedirs(folder, exist_ok=True)
            started = time.monotonic()
            for n in range(count):
                if n % 1000 == 0:
                    self.in_time(f"creating the listing's files ({n} of {count} done)")
                self.create(os.path.join(folder, str(n)))
            self.emit("listing-create", ops=count, seconds=time.monotonic() - started)
        self.phase("listing", lambda: self.listed(folder, count))

    def fio(self, direction: str = "write") -> dict[str, object]:
        """Every pod's fio at once (they left the same barrier, or the readers' start time): sequential 1 MiB
        direct writes (``read``: reads, of a file the volume was filled with) to a file of its own for
        ``--fio-seconds``; that side of fio's JSON (``json+``: its completion histogram in fio's bins, which the
        operator merges over the pods)."""
        if direction == "write":
            os.makedirs(self.path("fio"), exist_ok=True)
        command = ["fio", "--name=shared", f"--filename={self.path('fio', self.me)}",
                   f"--size={self.options.fio_bytes}", f"--rw={direction}", "--bs=1M", "--direct=1",
                   "--ioengine=psync", "--time_based", f"--runtime={self.options.fio_seconds}",
                   "--output-format=json+", *(["--readonly"] if direction == "read" else [])]
        try:
            ended = subprocess.run(command, capture_output=True, text=True, check=False,
                                   timeout=max(1.0, self.deadline - time.monotonic()))
        except FileNotFoundError:
            raise ProbeFailed("fio is not in the image (the shared step's fio phase needs it)") from None
        except subprocess.TimeoutExpired:
            raise ProbeFailed(f"fio did not end within --timeout {self.options.timeout:g}s") from None
        start = ended.stdout.find("{")
        try:
            job = json.loads(ended.stdout[start:])["jobs"][0] if start >= 0 else None
        except (ValueError, KeyError, IndexError, TypeError):
            job = None
        if ended.returncode != 0 or not isinstance(job, dict) or job.get("error"):
            words = " ".join((ended.stderr or ended.stdout[: max(start, 0)]).split())[:500]
            raise ProbeFailed(f"fio failed (exit {ended.returncode}): {words or 'no result'}")
        side = job.get(direction) or {}
        clat = side.get("clat_ns") or {}
        fields: dict[str, object] = {
            "ops": int(side.get("total_ios") or 0), "bytesPerSecond": side.get("bw_bytes") or 0,
            "iops": side.get("iops") or 0, "bins": clat.get("bins") or {}, "maxNs": int(clat.get("max") or 0),
            "direction": direction}
        ended_ms, runtime_ms = json.loads(ended.stdout[start:]).get("timestamp_ms"), side.get("runtime")
        if isinstance(ended_ms, int) and isinstance(runtime_ms, int) and runtime_ms > 0:  # when it measured
            fields.update(startMs=ended_ms - runtime_ms, endMs=ended_ms)
        return fields

    def clean(self) -> None:
        """Pod 0, once every pod is done: the attempt's folder removed, so a backend that keeps a directory
        across claims (a subdirectory per claim name, a retained volume) finds nothing of it."""
        for top, folders, files in os.walk(self.root, topdown=False):
            for name in files:
                os.unlink(os.path.join(top, name))
            for name in folders:
                os.rmdir(os.path.join(top, name))
        os.rmdir(self.root)

    def populate(self) -> None:
        """Fill the volume the readers' clone is made of: the listing's files, and a file per reader for fio."""
        started = time.monotonic()
        if self.options.list_files > 0:
            os.makedirs(self.path("l"), exist_ok=True)
            for n in range(self.options.list_files):
                if n % 1000 == 0:
                    self.in_time(f"creating the listing's files ({n} of {self.options.list_files} done)")
                self.create(self.path("l", n))
            self.emit("listing-create", ops=self.options.list_files, seconds=time.monotonic() - started)
        if self.options.fio_seconds > 0:
            os.makedirs(self.path("fio"), exist_ok=True)
            chunk = b"\xa5" * WRITE_CHUNK
            for reader in range(self.pods):
                self.in_time(f"writing reader {reader}'s fio file")
                with open(self.path("fio", reader), "wb") as file:
                    for _ in range(self.options.fio_bytes // WRITE_CHUNK):
                        file.write(chunk)
                    file.flush()
                    os.fsync(file.fileno())
        self.emit("populate", seconds=time.monotonic() - started)

    def start_time(self) -> float:
        """The readers' common start (epoch seconds), from the file the kubelet writes the pod's annotation to."""
        def written() -> bool:
            try:
                with open(self.options.start_file) as file:
                    return file.read().strip().isdigit()
            except FileNotFoundError:
                return False

        self.wait_for(written, "the start time")
        with open(self.options.start_file) as file:
            return float(file.read().strip())

    def wait_until(self, epoch: float) -> float:
        """Sleep until the epoch instant (at once when it passed); the monotonic clock there."""
        while (left := epoch - time.time()) > 0:
            self.in_time("waiting for the common start")
            time.sleep(min(left, 0.5))
        return time.monotonic()

    def read(self) -> None:
        """A reader: fio at the common start, then the listing at one instant after fio's runtime."""
        start = self.start_time()
        self.emit("start", pods=self.pods)
        if self.options.fio_seconds > 0:
            began = self.wait_until(start)
            fields = self.fio("read")
            self.emit("fio", seconds=time.monotonic() - began, **fields)
        if self.options.list_files > 0:
            at = start + (self.options.fio_seconds + READ_GAP_SECONDS if self.options.fio_seconds > 0 else 0)
            began, started_ms = self.wait_until(at), time.time_ns() // 1_000_000
            fields = self.listed(self.path("l"), self.options.list_files)
            self.emit("listing", seconds=time.monotonic() - began, startMs=started_ms,
                      endMs=time.time_ns() // 1_000_000, **fields)
        self.emit("end")

    def run(self) -> None:
        if self.options.mode == "populate":
            self.populate()
            self.emit("end")
            return
        if self.options.mode == "read":
            self.read()
            return
        os.makedirs(self.path("v"), exist_ok=True)
        self.emit("start", pods=self.pods)
        self.barrier("start")
        self.phase("visibility", self.visibility)
        self.phase("lock", self.lock)
        if self.me == 0:
            self.emit("lock-counter", counter=self.counter())
        self.small_files()
        self.listing()
        if self.options.fio_seconds > 0:
            self.phase("fio", self.fio)
        self.barrier("end")
        if self.me == 0:
            self.clean()
        self.emit("end")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="csibench-shared")
    parser.add_argument("--pod", type=int, required=True)
    parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--attempt", required=True)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--lock-rounds", type=int, default=100)
    parser.add_argument("--small-files", type=int, default=1000)
    parser.add_argument("--file-bytes", type=int, default=4096)
    parser.add_argument("--list-files", type=int, default=10000)
    parser.add_argument("--fio-seconds", type=int, default=0)
    parser.add_argument("--fio-bytes", type=int, default=64 << 20)
    parser.add_argument("--poll-ms", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--mode", choices=["readwrite", "populate", "read"], default="readwrite")
    parser.add_argument("--start-file", default="")
    options = parser.parse_args(argv)
    if options.mode == "read" and not options.start_file:
        parser.error("--mode read needs --start-file")
    if not options.attempt.isalnum() or not options.attempt.isascii():
        parser.error(f"--attempt {options.attempt!r}: letters and digits only")
    if not 0 <= options.pod < options.pods or options.pods < 2:
        parser.error(f"--pod {options.pod} of --pods {options.pods}: need 0 <= pod < pods and pods >= 2")
    return options


def main(argv: list[str]) -> int:
    options = parse(argv)
    probe = Probe(options)
    try:
        probe.run()
    except (ProbeFailed, OSError, ValueError) as error:
        probe.emit("failed", error=f"{type(error).__name__}: {error}" if not isinstance(error, ProbeFailed)
                   else str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

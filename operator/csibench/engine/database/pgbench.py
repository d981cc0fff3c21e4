"""PostgreSQL and pgbench in one pod: the script it runs, the matrix of rows, and what its log says (pure).

The pod runs one fixed POSIX shell script (``SCRIPT``); everything that varies comes in through its environment,
from validated fields only (integers, enums and patterns in the CRD and the models), so nothing in the spec can
reach a shell as code. The script initdb's a data directory on the PVC (``/data/pgdata``: a subdirectory, since a
filesystem's root may hold ``lost+found``), starts ``postgres`` itself (not ``pg_ctl``, which detaches it from the
container's process group: deleting the pod must reach it) with its socket in an emptyDir and no TCP listener,
then for each scale runs ``pgbench -i -q -s SCALE`` and every mode x clients run with the pauses, and ends with a
fast shutdown. A TERM (the pod deleted) becomes a fast shutdown too. pgbench writes into a file in the emptyDir
that is printed in one piece when it ends, because PostgreSQL logs to the same stream meanwhile and pgbench writes
its error lines in pieces that the server's lines would otherwise split.

Around each row it prints a machine-readable line, ``csibench-db {JSON}``: ``start`` before, ``end`` after with
pgbench's exit code, the wall time in nanoseconds and, for runs, the WAL generated (``pg_wal_lsn_diff`` of
``pg_current_wal_lsn()`` after and before the run: exact bytes) and the threads used. Between the two lines is
pgbench's own output; its summary gives TPS (the "without initial connection time" figure), latency average
and stddev (``--progress`` makes pgbench print the stddev), transactions and failed transactions. PostgreSQL's
own log goes to the same stream with the prefix ``postgres[PID]``, so a row that fails carries the server's
words when pgbench's are not enough (a full disk during ``pgbench -i`` is a PANIC in the server and only
"PQputline failed" in pgbench). Before each run the script does what pgbench's own pre-run vacuum does (VACUUM
the branches and tellers, TRUNCATE the history) and runs pgbench with ``-n``, so that the vacuum's WAL is not
counted as the run's: a readOnly run then generates (next to) none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import DatabaseRow, DatabaseRowKind, DatabaseSpec, StepState
from csibench.api.text import shorten

MOUNT_PATH = "/data"
SCRATCH_PATH = "/scratch"  # an emptyDir: PostgreSQL's unix socket and lock file, pgbench's output; gone with the pod
MARKER = "csibench-db "
MAX_MESSAGE = 600
MAX_SUMMARY = 2000
PGBENCH_BIN = "/usr/lib/postgresql/15/bin"  # Debian's PostgreSQL 15, in the workload image and on the host
PATH = f"{PGBENCH_BIN}:/usr/local/bin:/usr/bin:/bin"

SCRIPT = r"""set -u
emit() { printf 'csibench-db %s\n' "$1"; }
now() { date +%s%N; }
export PGHOST="$SCRATCH_DIR" PGUSER=postgres PGDATABASE=postgres
pg=
child=
stop() {
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi
  if [ -n "$pg" ]; then kill -INT "$pg" 2>/dev/null; wait "$pg"; fi
  exit "$1"
}
trap 'stop 143' TERM INT
# A trap runs only between commands: long ones (pgbench -T, the pauses) run in the background and are waited
# for, so a TERM (the pod deleted) reaches the script at once and it stops them and PostgreSQL within the grace.
run() { "$@" & child=$!; wait "$child"; code=$?; child=; }
ready() {
  tries=0
  until pg_isready -q; do
    tries=$((tries + 1))
    if [ "$tries" -gt 600 ] || ! kill -0 "$pg" 2>/dev/null; then
      emit "{\"event\":\"setup\",\"stage\":\"$1\"}"; stop 1
    fi
    sleep 0.1
  done
}
if ! initdb -D "$PGDATA" -U postgres --auth=trust --no-instructions 2>&1; then
  emit '{"event":"setup","stage":"initdb"}'; exit 1
fi
postgres -D "$PGDATA" -c 'log_line_prefix=postgres[%p] ' -c listen_addresses= \
  -c unix_socket_directories="$SCRATCH_DIR" -c shared_buffers="$SHARED_BUFFERS" -c max_wal_size="$MAX_WAL_SIZE" \
  -c synchronous_commit="$SYNCHRONOUS_COMMIT" -c checkpoint_timeout="$CHECKPOINT_TIMEOUT" \
  -c max_connections="$MAX_CONNECTIONS" -c log_checkpoints=on 2>&1 &
pg=$!
ready postgres
cpus=$(nproc)
out="$SCRATCH_DIR/pgbench.out"
row=0
for scale in $SCALES; do
  what="\"row\":$row,\"kind\":\"initialize\",\"scale\":$scale"
  emit "{\"event\":\"start\",$what}"
  t0=$(now)
  run pgbench -i -q -s "$scale" >"$out" 2>&1
  t1=$(now)
  cat "$out"
  emit "{\"event\":\"end\",$what,\"exit\":$code,\"ns\":$((t1 - t0))}"
  row=$((row + 1))
  [ "$code" -eq 0 ] || stop 1
  for mode in $MODES; do
    if [ "$mode" = readOnly ]; then script=-S; duration=$READ_ONLY_SECONDS
    else script=; duration=$READ_WRITE_SECONDS; fi
    progress=10
    [ "$duration" -lt 10 ] && progress=$duration
    pause=$PHASE_PAUSE_SECONDS
    for clients in $CLIENTS; do
      run sleep "$pause"
      pause=$PAUSE_SECONDS
      threads=${THREADS:-$cpus}
      [ "$threads" -gt "$clients" ] && threads=$clients
      psql -XAtq -c 'VACUUM pgbench_branches' -c 'VACUUM pgbench_tellers' -c 'TRUNCATE pgbench_history' 2>&1
      before=$(psql -XAtqc 'SELECT pg_current_wal_lsn()')
      what="\"row\":$row,\"kind\":\"run\",\"scale\":$scale,\"mode\":\"$mode\",\"clients\":$clients"
      emit "{\"event\":\"start\",$what}"
      t0=$(now)
      run pgbench -n $script -c "$clients" -j "$threads" -T "$duration" --progress="$progress" >"$out" 2>&1
      t1=$(now)
      cat "$out"
      wal=$(psql -XAtqc "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$before')::bigint")
      case "$wal" in ''|*[!0-9]*) wal=null ;; esac
      emit "{\"event\":\"end\",$what,\"threads\":$threads,\"exit\":$code,\"ns\":$((t1 - t0)),\"walBytes\":$wal}"
      row=$((row + 1))
      kill -0 "$pg" 2>/dev/null || { emit '{"event":"setup","stage":"postgres exited"}'; exit 1; }
      [ "$code" -eq 0 ] || ready "postgres recovering"  # after a PANIC, the next row waits for crash recovery
    done
  done
done
stop 0
"""


def matrix(spec: DatabaseSpec) -> list[DatabaseRow]:
    """The rows in the order the script runs them: per scale its initialization, then mode x clients."""
    rows = []
    for scale in spec.scales:
        rows.append(DatabaseRow(kind=DatabaseRowKind.INITIALIZE, scale=scale))
        rows += [DatabaseRow(kind=DatabaseRowKind.RUN, scale=scale, mode=mode, clients=clients)
                 for mode in spec.modes for clients in spec.clients]
    return rows


def build_env(spec: DatabaseSpec) -> dict[str, str]:
    """The script's parameters (every value from a validated field)."""
    settings = spec.postgres
    env = {"PATH": PATH, "PGDATA": f"{MOUNT_PATH}/pgdata", "SCRATCH_DIR": SCRATCH_PATH,
           "SCALES": " ".join(str(s) for s in spec.scales), "MODES": " ".join(m.value for m in spec.modes),
           "CLIENTS": " ".join(str(c) for c in spec.clients),
           "READ_ONLY_SECONDS": str(spec.durationSeconds.readOnly),
           "READ_WRITE_SECONDS": str(spec.durationSeconds.readWrite),
           "PAUSE_SECONDS": str(spec.pauseSeconds), "PHASE_PAUSE_SECONDS": str(spec.phasePauseSeconds),
           "SHARED_BUFFERS": settings.sharedBuffers, "MAX_WAL_SIZE": settings.maxWalSize,
           "SYNCHRONOUS_COMMIT": settings.synchronousCommit.value,
           "CHECKPOINT_TIMEOUT": f"{settings.checkpointTimeoutSeconds}s",
           "MAX_CONNECTIONS": str(max(spec.clients) + 10)}
    if spec.threads is not None:
        env["THREADS"] = str(spec.threads)
    return env


def build_command() -> list[str]:
    return ["/bin/sh", "-c", SCRIPT]


@dataclass
class Segment:
    """One row's part of the log: whether it started, its end line, and the lines in between."""

    started: bool = False
    end: dict[str, Any] | None = None
    lines: list[str] = field(default_factory=list)


@dataclass
class LogView:
    """What the log says so far: each row's segment, a setup failure, and the lines outside any row."""

    segments: dict[int, Segment] = field(default_factory=dict)
    setup_failed: str | None = None  # the stage (initdb, postgres) that failed before or between rows
    outside: list[str] = field(default_factory=list)


def read_log(log: str) -> LogView:
    """Split the pod's log at its machine-readable lines (only complete lines count: the last may be half
    written)."""
    view = LogView()
    current: Segment | None = None
    lines = log.split("\n")
    for line in lines[:-1] if not log.endswith("\n") else lines:
        if line.startswith(MARKER):
            try:
                event = json.loads(line[len(MARKER):])
            except ValueError:
                event = None
            if isinstance(event, dict):
                kind = event.get("event")
                index = event.get("row")
                if kind == "start" and isinstance(index, int):
                    current = view.segments.setdefault(index, Segment())
                    current.started = True
                    continue
                if kind == "end" and isinstance(index, int):
                    view.segments.setdefault(index, Segment(started=True)).end = event
                    current = None
                    continue
                if kind == "setup":
                    view.setup_failed = str(event.get("stage", "setup"))
                    current = None
                    continue
        (current.lines if current is not None else view.outside).append(line)
    return view


_SEVERITY = re.compile(r"^postgres\[\d+\] (PANIC|FATAL|ERROR):\s+(.*)$")
# Unanchored: initdb writes its error after its own progress text on the same line ("creating ... initdb: error:").
_TOOL_ERROR = re.compile(r"(?:^|\s)(pgbench|initdb|psql|postgres|pg_isready): (error: |FATAL: )?(.*)$")


def messages_of(lines: list[str]) -> str:
    """The tools' own error words: PostgreSQL's PANIC, ERROR and FATAL lines first (the cause, e.g. "could not
    write to file ...: No space left on device"), then pgbench's, initdb's and psql's error lines."""
    server: list[tuple[int, str]] = []
    tools: list[str] = []
    rank = {"PANIC": 0, "ERROR": 1, "FATAL": 2}
    for line in lines:
        text = line.strip()
        match = _SEVERITY.match(text)
        if match:
            server.append((rank[match.group(1)], f"{match.group(1)}: {match.group(2)}"))
            continue
        tool = _TOOL_ERROR.search(text)
        if tool and (tool.group(2) or "could not" in text):
            tools.append(text[tool.start(1):])
        elif "No space left on device" in text:
            tools.append(text)
    ordered = [text for _, text in sorted(server, key=lambda item: item[0])] + tools
    # pgbench echoes the server's error as it received it ("ERROR:  could not extend ..."): said once.
    return shorten("; ".join(dict.fromkeys(" ".join(text.split()) for text in ordered)), MAX_MESSAGE)


_NUMBERS = {
    "tps": re.compile(r"^tps = ([0-9.]+) \(without initial connection time\)", re.M),
    "latencyAverageMs": re.compile(r"^latency average = ([0-9.]+) ms", re.M),
    "latencyStddevMs": re.compile(r"^latency stddev = ([0-9.]+) ms", re.M),
    "transactions": re.compile(r"^number of transactions actually processed: ([0-9]+)", re.M),
    "failedTransactions": re.compile(r"^number of failed transactions: ([0-9]+)", re.M),
    "threads": re.compile(r"^number of threads: ([0-9]+)", re.M),
}


def summary_of(segment: Segment) -> str:
    """pgbench's own summary of a row, for the report: its output without progress lines and server log."""
    kept = [line for line in segment.lines if not line.startswith(("progress: ", "postgres["))]
    return "\n".join(kept).strip()[-MAX_SUMMARY:]


def build_row(planned: DatabaseRow, segment: Segment | None) -> DatabaseRow:
    """One row as far as the log shows it (a row whose end line is missing is still Running)."""
    row = planned.model_copy()
    if segment is None or not segment.started:
        return row
    end = segment.end
    if end is None:
        row.state = StepState.RUNNING
        return row
    row.durationSeconds = round(int(end.get("ns") or 0) / 1e9, 3)
    text = "\n".join(segment.lines)
    if row.kind == DatabaseRowKind.RUN:
        threads = end.get("threads")
        row.threads = int(threads) if isinstance(threads, int) else None
    code = end.get("exit")
    if code != 0:
        row.state = StepState.FAILED
        words = messages_of(segment.lines) or f"pgbench exited with {code}"
        row.message = shorten(f"{'pgbench -i' if row.kind == DatabaseRowKind.INITIALIZE else 'pgbench'} failed "
                              f"(exit {code}): {words}", MAX_MESSAGE)
        return row
    row.state = StepState.SUCCEEDED
    if row.kind == DatabaseRowKind.INITIALIZE:
        return row
    found = {name: pattern.search(text) for name, pattern in _NUMBERS.items()}
    if found["tps"] is None:
        row.state = StepState.FAILED
        row.message = shorten("pgbench printed no tps: " + (messages_of(segment.lines) or text[-300:]), MAX_MESSAGE)
        return row
    row.tps = round(float(found["tps"].group(1)), 3)
    for name in ("latencyAverageMs", "latencyStddevMs"):
        match = found[name]
        setattr(row, name, round(float(match.group(1)), 3) if match else None)
    for name in ("transactions", "failedTransactions", "threads"):
        match = found[name]
        if match:
            setattr(row, name, int(match.group(1)))
    wal = end.get("walBytes")
    row.walBytes = int(wal) if isinstance(wal, int) else None
    return row


SERVER_FAILED_TO_START = "ServerFailedToStart"
NOT_STARTED = "not run: PostgreSQL did not start"


def startup_failure(view: LogView) -> str | None:
    """PostgreSQL never served a row (initdb failed, or the server exited before it accepted connections): the
    server's own words, which are the step's failure and no row's."""
    if view.setup_failed is None or any(segment.started for segment in view.segments.values()):
        return None
    words = messages_of(view.outside) or f"{view.setup_failed} failed"
    stage = "initdb failed: " if view.setup_failed == "initdb" else ""
    return shorten(f"PostgreSQL did not start: {stage}{words}", MAX_MESSAGE)


def build_rows(planned: list[DatabaseRow], log: str) -> tuple[list[DatabaseRow], list[str]]:
    """Every row as the log shows it so far, and each row's pgbench summary (for the report). When PostgreSQL
    did not start, no row ran: each says so, and ``startup_failure`` has the server's words."""
    view = read_log(log)
    rows = [build_row(row, view.segments.get(index)) for index, row in enumerate(planned)]
    summaries = [summary_of(view.segments[index]) if index in view.segments else "" for index in range(len(rows))]
    if startup_failure(view) is not None:
        for row in rows:
            row.state, row.message = StepState.FAILED, NOT_STARTED
    elif view.setup_failed is not None:  # the server went away between rows
        reason = messages_of(view.outside) or f"{view.setup_failed} failed"
        for row in rows:
            if row.state in (StepState.PENDING, StepState.RUNNING):
                row.state = StepState.FAILED
                row.message = shorten(f"{view.setup_failed} failed: {reason}", MAX_MESSAGE)
                break
    return rows, summaries


def not_run(rows: list[DatabaseRow], why: str) -> None:
    """The pod ended (or was given up on) with rows left: the one under way failed with ``why``, the rest
    never ran and say so."""
    first = next((row.scale for row in rows if row.state == StepState.FAILED), None)
    for row in rows:
        if row.state == StepState.RUNNING:
            row.state = StepState.FAILED
            row.message = shorten(why, MAX_MESSAGE)
        elif row.state == StepState.PENDING:
            row.state = StepState.FAILED
            cause = f"an earlier row failed (scale {first})" if first is not None else why
            row.message = shorten(f"not run: {cause}", MAX_MESSAGE)


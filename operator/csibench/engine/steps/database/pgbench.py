"""What the database pod's log says (pure): the matrix of rows the pod's script runs, and each row read from the
log — its machine-readable lines, pgbench's summary, PostgreSQL's and the tools' error words.

The script (``script.py``) prints a machine-readable line around each row, ``csibench-db {JSON}``: ``start``
before, ``end`` after with pgbench's exit code, the wall time in nanoseconds and, for runs, the WAL generated
(``pg_wal_lsn_diff`` of ``pg_current_wal_lsn()`` after and before the run: exact bytes) and the threads used.
Between the two lines is pgbench's own output; its summary gives TPS (the "without initial connection time"
figure), latency average and stddev (``--progress`` makes pgbench print the stddev), transactions and failed
transactions. PostgreSQL's own log goes to the same stream with the prefix ``postgres[PID]``, so a row that fails
carries the server's words when pgbench's are not enough (a full disk during ``pgbench -i`` is a PANIC in the
server and only "PQputline failed" in pgbench). A server that never started (initdb failed, a setting it refused)
is no row's failure: ``startup_failure`` gives its words, and every row says it was not run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import DatabaseRow, DatabaseRowKind, DatabaseSpec, StepState
from csibench.api.text import shorten

MARKER = "csibench-db "
MAX_MESSAGE = 600
MAX_SUMMARY = 2000


def matrix(spec: DatabaseSpec) -> list[DatabaseRow]:
    """The rows in the order the script runs them: per scale its initialization, then mode x clients."""
    rows = []
    for scale in spec.scales:
        rows.append(DatabaseRow(kind=DatabaseRowKind.INITIALIZE, scale=scale))
        rows += [DatabaseRow(kind=DatabaseRowKind.RUN, scale=scale, mode=mode, clients=clients)
                 for mode in spec.modes for clients in spec.clients]
    return rows


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


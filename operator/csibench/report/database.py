"""The database table, shaped like the published pgbench tables (Scale, Type, Clients, Duration (s), TPS, WAL Gen)
plus threads, latency average/stddev and failed transactions, with each scale's initialization as a row of its
own ("init", its wall time); and two runs side by side, B vs A TPS per row (pure, over the run's status as the API
returns it). Every duration is in seconds with one decimal, init rows and runs alike. WAL is shown in MiB
(1024 x 1024 bytes, the unit PostgreSQL's "MB" means), and the header says MiB; status keeps exact bytes.
"""

from __future__ import annotations

from typing import Any

from csibench.api.text import human_duration

HEADERS = ["Scale", "Type", "Clients", "Threads", "Duration (s)", "TPS", "Latency avg/stddev ms", "WAL Gen (MiB)",
           "Failed tx", "State"]
COMPARE_HEADERS = ["Scale", "Type", "Clients", "A: TPS", "B: TPS", "B vs A (TPS)"]
TYPES = {"readOnly": "RO", "readWrite": "RW"}
MB = 1024 * 1024


def rows_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("status") or {}).get("database") or [])


def kind(row: dict[str, Any]) -> str:
    return "init" if row.get("kind") == "initialize" else TYPES.get(str(row.get("mode")), str(row.get("mode")))


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _duration(row: dict[str, Any]) -> str:
    """Seconds, one decimal, for every row: an init of 0.3 s and a 10 s run read alike under "Duration (s)"."""
    seconds = row.get("durationSeconds")
    return "-" if seconds is None else f"{float(seconds):.1f}"


def table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The database table's headers and rows, or None for a run without a database step."""
    found = rows_of(run)
    if not found:
        return None
    rows = []
    for row in found:
        latency = "-" if row.get("latencyAverageMs") is None else \
            f"{row['latencyAverageMs']:.3f}/{_number(row.get('latencyStddevMs'), 3)}"
        wal = row.get("walBytes")
        rows.append([str(row.get("scale", "")), kind(row), str(row.get("clients") or "-"),
                     str(row.get("threads") or "-"), _duration(row), _number(row.get("tps"), 0), latency,
                     "-" if wal is None else f"{wal / MB:,.2f}", str(row.get("failedTransactions", "-")),
                     str(row.get("state", ""))])
    return HEADERS, rows


def notes(run: dict[str, Any]) -> list[str]:
    """Under the table: how to read it, and each failed row's message (PostgreSQL's or pgbench's own words)."""
    found = rows_of(run)
    if not found:
        return []
    lines = ["database: TPS excludes connection time; WAL Gen is pg_current_wal_lsn() after minus before each run; "
             "init rows are the wall time of pgbench -i"]
    said = [row for row in found if row.get("message")]
    if said and len(said) == len(found) and len({row["message"] for row in said}) == 1:
        return [*lines, f"database (every row): {said[0]['message']}"]  # e.g. PostgreSQL did not start
    lines += [f"database ({kind(row)} scale {row.get('scale')}{_clients(row)}): {row['message']}" for row in said]
    return lines


def _clients(row: dict[str, Any]) -> str:
    return f", {row['clients']} clients" if row.get("clients") else ""


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return row.get("kind"), row.get("scale"), row.get("mode"), row.get("clients")


def compare_table(run_a: dict[str, Any], run_b: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """B vs A per row: TPS for runs; for init rows the A time over the B time (above 1: B initialized faster)."""
    a = {_key(row): row for row in rows_of(run_a)}
    b = {_key(row): row for row in rows_of(run_b)}
    if not a and not b:
        return None
    rows = []
    for key in list(a) + [key for key in b if key not in a]:
        row_a, row_b = a.get(key), b.get(key)
        shown = row_a or row_b or {}
        if key[0] == "initialize":
            time_a, time_b = ((r or {}).get("durationSeconds") for r in (row_a, row_b))
            cells = [human_duration(t) if t is not None else "-" for t in (time_a, time_b)]
            ratio = f"{time_a / time_b:.2f}×" if time_a and time_b and _ok(row_a) and _ok(row_b) else "-"
        else:
            tps_a, tps_b = ((r or {}).get("tps") for r in (row_a, row_b))
            cells = [_number(t, 0) if t is not None else str((r or {}).get("state", "-"))
                     for t, r in ((tps_a, row_a), (tps_b, row_b))]
            ratio = f"{tps_b / tps_a:.2f}×" if tps_a and tps_b is not None else "-"
        rows.append([str(shown.get("scale", "")), kind(shown), str(shown.get("clients") or "-"), *cells, ratio])
    return COMPARE_HEADERS, rows


def _ok(row: dict[str, Any] | None) -> bool:
    return row is not None and row.get("state") == "Succeeded"

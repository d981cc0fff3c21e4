"""The report's tables as CSV (``csibench report -o csv --table ...``; pure), for spreadsheets and pipelines.

Each table is one header row and one row per record of the run's status (or the suite's cells). The headers name
the status field and its unit ("durationSeconds (s)"), so a reader knows what a number is without this program;
the numbers are the status's own at full precision (Python's shortest repr that reads back to the same float),
never the rounded text of the printed tables. An absent value is an empty cell.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from csibench.api.steps import title_and_unit

Column = tuple[str, Callable[[dict[str, Any]], Any]]


def _at(*path: str) -> Callable[[dict[str, Any]], Any]:
    def get(row: dict[str, Any]) -> Any:
        value: Any = row
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    return get


def cell(value: Any) -> str:
    """A value as a CSV cell: floats at full precision (repr round-trips), booleans as true/false, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


STEP_COLUMNS: list[Column] = [
    ("step", _at("name")), ("state", _at("state")), ("unit", lambda s: title_and_unit(s["name"])[1]),
    ("objects", _at("objects")), ("succeeded", _at("succeeded")), ("failed", _at("failed")),
    ("skipped", _at("skipped")), ("durationSeconds (s)", _at("durationSeconds")),
    ("throughput (unit/s)", _at("throughput")),
    *[(f"latency.{p} (s)", _at("latency", p)) for p in ("p50", "p90", "p99", "max", "mean")],
]

_DATAPATH_LATENCY = [f"{d}{p}" for d in ("read", "write") for p in ("P50", "P90", "P99", "P999", "Max")]
DATAPATH_COLUMNS: list[Column] = [
    ("workload", _at("name")), ("state", _at("state")), ("pattern", _at("pattern")), ("blockSize", _at("blockSize")),
    ("volumes", _at("volumes")), ("jobs", _at("jobs")), ("failed", _at("failed")),
    ("durationSeconds (s)", _at("durationSeconds")), ("readMiBps (MiB/s)", _at("readMiBps")),
    ("writeMiBps (MiB/s)", _at("writeMiBps")), ("readIOPS (IO/s)", _at("readIOPS")),
    ("writeIOPS (IO/s)", _at("writeIOPS")), ("minVolumeMiBps (MiB/s)", _at("minVolumeMiBps")),
    ("maxVolumeMiBps (MiB/s)", _at("maxVolumeMiBps")),
    *[(f"latency.{name} (s)", _at("latency", name)) for name in _DATAPATH_LATENCY],
    ("startSkewSeconds (s)", _at("startSkewSeconds")), ("togetherSeconds (s)", _at("togetherSeconds")),
    ("skewed", _at("skewed")),
]

DATABASE_COLUMNS: list[Column] = [
    ("kind", _at("kind")), ("scale", _at("scale")), ("mode", _at("mode")), ("clients", _at("clients")),
    ("threads", _at("threads")), ("state", _at("state")), ("durationSeconds (s)", _at("durationSeconds")),
    ("tps (transactions/s)", _at("tps")), ("latencyAverageMs (ms)", _at("latencyAverageMs")),
    ("latencyStddevMs (ms)", _at("latencyStddevMs")), ("transactions", _at("transactions")),
    ("failedTransactions", _at("failedTransactions")), ("walBytes (bytes)", _at("walBytes")),
]

BASELINE_COLUMNS: list[Column] = [
    ("subject", _at("subject")), ("metric", _at("metric")), ("change", _at("change")),
    ("ratio (this/baseline)", _at("ratio")), ("low (this/baseline)", _at("low")),
    ("high (this/baseline)", _at("high")), ("p", _at("p")), ("pBeyond", _at("pBeyond")),
]

RUN_TABLES = ("steps", "datapath", "database", "baseline")
SUITE_TABLES = ("cells",)


def run_table(run: dict[str, Any], table: str) -> tuple[list[str], list[list[str]]]:
    """A run's table (steps, datapath, database or baseline) as CSV headers and cells."""
    status = run.get("status") or {}
    columns, records = {
        "steps": (STEP_COLUMNS, status.get("steps") or []),
        "datapath": (DATAPATH_COLUMNS, status.get("dataPath") or []),
        "database": (DATABASE_COLUMNS, status.get("database") or []),
        "baseline": (BASELINE_COLUMNS, (status.get("baseline") or {}).get("rows") or []),
    }[table]
    return [name for name, _ in columns], [[cell(get(record)) for _, get in columns] for record in records]


def cells_table(suite_body: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A suite's cells (``suite_json``'s): per cell and step its axis values and its medians over the rounds."""
    cells = suite_body.get("cells") or []
    axes = sorted({axis for item in cells for axis in item.get("values") or {}})
    headers = ["cell", *axes, "step", "rounds", "throughput median (objects/s)", "p99 median (s)",
               "durationSeconds median (s)"]
    rows = [[item["id"], *[cell((item.get("values") or {}).get(axis)) for axis in axes], step,
             cell(samples.get("rounds")), cell(samples.get("throughput")), cell(samples.get("p99")),
             cell(samples.get("durationSeconds"))]
            for item in cells for step, samples in (item.get("steps") or {}).items()]
    return headers, rows


def to_csv(headers: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows(rows)
    return out.getvalue()

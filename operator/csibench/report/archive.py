"""Results that outlive the cluster: runs exported to a directory tree and read back from it (``csibench export``,
and ``--from DIR`` on ``report``, ``compare`` and ``history``).

One folder per run, ``<completionTime>-<namespace>-<name>`` (the time as ``20261204T170000Z``, so a listing is
oldest first), holding what a later reader needs without the cluster: ``run.json`` (the BenchmarkRun as the API
returned it, status included), ``report.json`` (the stored report, when one was stored), ``junit.xml``, the CSV
tables the run has (``steps.csv``, ``datapath.csv``, ``database.csv``, ``baseline.csv``) and ``report.html`` when
the plotting extra is installed. Reading checks each report's schema version (``api/stored_report.py``), so a
directory written by a newer csibench is refused by name, not misread.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from csibench.api.stored_report import readable
from csibench.report.csv_tables import RUN_TABLES, run_table, to_csv
from csibench.report.verdicts import junit

RUN_FILE = "run.json"
REPORT_FILE = "report.json"


class ArchiveError(ValueError):
    """The directory does not hold what was asked for (no such run, a selector it cannot evaluate)."""


def folder_name(run: dict[str, Any]) -> str:
    """``20261204T170000Z-bench-r1``: when the run ended (or was created, if it has not), its namespace, its name."""
    meta = run.get("metadata") or {}
    when = str((run.get("status") or {}).get("completionTime") or meta.get("creationTimestamp") or "unfinished")
    return f"{re.sub(r'[^0-9A-Za-z]', '', when)}-{meta.get('namespace', '')}-{meta.get('name', '')}"


def write_run(directory: Path, run: dict[str, Any], report: dict[str, Any] | None, html: str | None) -> Path:
    """Write one run's folder under ``directory`` (replacing the files of an earlier export of it)."""
    folder = directory / folder_name(run)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RUN_FILE).write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    if report is not None:
        (folder / REPORT_FILE).write_text(json.dumps(report, sort_keys=True) + "\n")
    (folder / "junit.xml").write_text(junit(run))
    for table in RUN_TABLES:
        headers, rows = run_table(run, table)
        if rows:
            (folder / f"{table}.csv").write_text(to_csv(headers, rows))
    if html is not None:
        (folder / "report.html").write_text(html)
    return folder


@dataclass(frozen=True)
class ArchivedRun:
    run: dict[str, Any]
    folder: Path

    def report(self) -> dict[str, Any] | None:
        """The stored report, checked to be of a version this csibench reads (``ReportTooNew`` otherwise)."""
        path = self.folder / REPORT_FILE
        if not path.exists():
            return None
        report: dict[str, Any] = json.loads(path.read_text())
        return readable(report, f"{path}")


def read_runs(directory: Path) -> list[ArchivedRun]:
    """Every run exported under ``directory``, in folder order (oldest first)."""
    if not directory.is_dir():
        raise ArchiveError(f"{directory} is not a directory")
    return [ArchivedRun(json.loads((folder / RUN_FILE).read_text()), folder)
            for folder in sorted(directory.iterdir()) if (folder / RUN_FILE).is_file()]


def find_run(directory: Path, namespace: str, name: str) -> ArchivedRun:
    """The latest export of that run in ``directory``; ``ArchiveError`` when it has none."""
    found = [archived for archived in read_runs(directory)
             if (archived.run.get("metadata") or {}).get("namespace") == namespace
             and (archived.run.get("metadata") or {}).get("name") == name]
    if not found:
        raise ArchiveError(f"BenchmarkRun {namespace}/{name} not found in {directory}")
    return found[-1]


def matches(labels: dict[str, str], selector: str) -> bool:
    """An equality-based label selector (``a=b,c!=d,e,!f``) as the API evaluates it; set-based ones are refused."""
    for term in (part.strip() for part in selector.split(",") if part.strip()):
        if "(" in term or " in " in term or " notin " in term:
            raise ArchiveError(f"--from reads equality selectors only (a=b, a!=b, a, !a), not {term!r}")
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def select_runs(directory: Path, selector: str, namespace: str | None) -> list[dict[str, Any]]:
    """The runs under ``directory`` matching the selector (in ``namespace``, or in all when None)."""
    return [archived.run for archived in read_runs(directory)
            if (namespace is None or (archived.run.get("metadata") or {}).get("namespace") == namespace)
            and matches((archived.run.get("metadata") or {}).get("labels") or {}, selector)]

"""The stored report as its readers see it (pure): which version it is, its iterations, its objects' names.

The engine writes the report (``engine/report_store.py``: gzip JSON in ConfigMaps); the reports, the CLI and the
benchmarks read it. What the readers need of its shape lives here, at the bottom layer, so reading a report never
loads the engine.

Versions: the report's ``format`` has named its version since the first (``csibench.io/report-v1``); from version 2
it also says it as a number, ``schemaVersion``, as the JSON output (``report -o json``) does. Version 2 is version 1
plus ``schemaVersion``. A reader takes every version up to ``SCHEMA_VERSION`` and refuses a newer one by name
(``ReportTooNew``), never by a KeyError somewhere later. The JSON Schema of the current version is generated from
``api/report_schema.py`` (``csibench schema``) and kept in ``schemas/``.
"""

from __future__ import annotations

import re
from typing import Any

SCHEMA_VERSION = 2
REPORT_FORMAT = f"csibench.io/report-v{SCHEMA_VERSION}"
_FORMAT = re.compile(r"csibench\.io/report-v([0-9]{1,6})")


class ReportTooNew(ValueError):
    """A report written by a newer csibench than this one: its fields may mean what this reader does not know."""


def schema_version(document: dict[str, Any]) -> int:
    """The version of a stored report or of a JSON output: ``schemaVersion``, else the one its ``format`` names
    (version 1 had only that), else 1 (what the first version's JSON output was: no version at all)."""
    version = document.get("schemaVersion")
    if isinstance(version, int) and not isinstance(version, bool):
        return version
    found = _FORMAT.fullmatch(str(document.get("format") or ""))
    return int(found.group(1)) if found else 1


def readable(document: dict[str, Any], what: str = "report") -> dict[str, Any]:
    """The document itself when this csibench understands its version; ``ReportTooNew`` when it is newer."""
    version = schema_version(document)
    if version > SCHEMA_VERSION:
        raise ReportTooNew(f"{what} has schema version {version}; this csibench reads versions 1 to "
                           f"{SCHEMA_VERSION}: upgrade csibench to read it")
    return document


def iteration_records(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every iteration of a stored report, in order, each ``{"iteration": n, "steps": [...], ...}``: the earlier
    ones from ``iterations``, the current (at the end: the last) from ``steps``. A report without repeats is one
    iteration."""
    current = {"iteration": int(report.get("iteration") or 1), "steps": report.get("steps") or [],
               **({"state": report["iterationState"], "message": report.get("iterationMessage", "")}
                  if report.get("iterationState") else {})}
    return [*(report.get("iterations") or []), current]


def object_names(step: dict[str, Any]) -> list[str]:
    """The names of a report step's objects, in index order (stored as a prefix and a count)."""
    return [f"{step['objectPrefix']}{index:05d}" for index in range(step["objectCount"])]

"""The versioned result schema: the file in schemas/ is the models' JSON Schema, reports of this version and of the
one before are read, and a newer one is refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from csibench import cli
from csibench.api.report_schema import ReportDocument, StoredReport, render_report_schema
from csibench.api.stored_report import REPORT_FORMAT, SCHEMA_VERSION, ReportTooNew, readable, schema_version
from csibench.engine.report_store import build_report_configmaps, decode_report
from csibench.report.render import render_json

ROOT = Path(__file__).resolve().parent.parent.parent
GOLDEN = ROOT / "tests" / "golden"
SCHEMA_FILE = ROOT / "schemas" / f"report-v{SCHEMA_VERSION}.json"
V1_OUTPUT = GOLDEN / "report-v1-output.json"  # `report -o json` as version 1 wrote it (no schemaVersion)


def test_the_schema_file_matches_the_models() -> None:
    assert SCHEMA_FILE.read_text() == render_report_schema(), \
        f"schemas/ drifted: run `csibench schema -o schemas/report-v{SCHEMA_VERSION}.json`"


def test_the_schema_command_prints_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(SCHEMA_FILE.read_text())


def _stored(report: dict[str, Any]) -> dict[str, Any]:
    """A report as the engine stores it and loads it back."""
    import base64

    (configmap,) = build_report_configmaps("r1-report", "r1", "uid-1", report)
    return decode_report(base64.b64decode(configmap["binaryData"]["report.json.gz"]))


def test_this_version_writes_its_version_and_fits_its_schema() -> None:
    runs = json.loads((GOLDEN / "runs.json").read_text())
    report = {k: v for k, v in runs["report"].items() if k not in ("format", "schemaVersion")}
    stored = _stored(report)
    assert stored["format"] == REPORT_FORMAT and stored["schemaVersion"] == SCHEMA_VERSION == 2
    StoredReport.model_validate(stored)
    document = json.loads(render_json(runs["serial"], stored))
    assert schema_version(document) == SCHEMA_VERSION and readable(document) is document
    ReportDocument.model_validate(document)


def test_the_previous_version_is_read() -> None:
    document = json.loads(V1_OUTPUT.read_text())
    assert "schemaVersion" not in document and document["report"]["format"] == "csibench.io/report-v1"
    assert schema_version(document) == 1 and schema_version(document["report"]) == 1
    assert readable(document["report"]) is document["report"]


def test_a_newer_report_is_refused_by_name() -> None:
    newer = {"format": "csibench.io/report-v3", "steps": []}
    with pytest.raises(ReportTooNew, match="schema version 3; this csibench reads versions 1 to 2"):
        readable(newer)
    with pytest.raises(ReportTooNew, match="schema version 9"):
        readable({"schemaVersion": 9})

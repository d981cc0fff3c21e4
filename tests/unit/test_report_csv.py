"""``csibench report -o csv``: each table parsed back by Python's csv module equals the JSON output's numbers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from csibench import cli

GOLDEN = json.loads((Path(__file__).parent.parent / "golden" / "runs.json").read_text())


def _with_baseline(run: dict[str, Any]) -> dict[str, Any]:
    run = json.loads(json.dumps(run))
    run["status"]["baseline"] = {"run": "bench/base", "change": "Regression", "thresholdPercent": 10.0, "rows": [
        {"subject": "createVolume", "metric": "throughput", "change": "Regression", "ratio": 0.6180339887498949,
         "low": 0.5012345678901234, "high": 0.7123456789012345, "p": 1.2345678901234567e-05, "pBeyond": 0.0004}]}
    run["status"]["steps"][0]["throughput"] = 1.2345678901234567  # more digits than the printed tables keep
    return run


def _output(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], run: dict[str, Any],
            *argv: str) -> str:
    monkeypatch.setattr(cli, "_fetch", lambda args, *runs: [run])
    monkeypatch.setattr(cli, "_load_report", lambda args, found: None)
    assert cli.main(["report", "bench/r1", *argv]) == 0
    return capsys.readouterr().out


def _number(text: str) -> float | None:
    return None if text == "" else float(text)


@pytest.mark.parametrize(("table", "records", "fields"), [
    ("steps", lambda s: s["steps"], {"durationSeconds (s)": ("durationSeconds",), "throughput (unit/s)":
                                     ("throughput",), "latency.p99 (s)": ("latency", "p99"),
                                     "latency.mean (s)": ("latency", "mean"), "objects": ("objects",)}),
    ("datapath", lambda s: s["dataPath"], {"readMiBps (MiB/s)": ("readMiBps",), "writeIOPS (IO/s)": ("writeIOPS",),
                                           "latency.readP99 (s)": ("latency", "readP99"),
                                           "durationSeconds (s)": ("durationSeconds",)}),
    ("database", lambda s: s["database"], {"tps (transactions/s)": ("tps",), "walBytes (bytes)": ("walBytes",),
                                           "latencyAverageMs (ms)": ("latencyAverageMs",), "scale": ("scale",)}),
    ("baseline", lambda s: s["baseline"]["rows"], {"ratio (this/baseline)": ("ratio",), "p": ("p",),
                                                   "pBeyond": ("pBeyond",), "low (this/baseline)": ("low",)}),
])
def test_each_csv_table_read_back_equals_the_json_numbers(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], table: str,
                                                          records: Any, fields: dict[str, tuple[str, ...]]) -> None:
    run = _with_baseline(GOLDEN["workloads"] if table in ("datapath", "database") else GOLDEN["serial"])
    rows = list(csv.reader(io.StringIO(_output(monkeypatch, capsys, run, "-o", "csv", "--table", table))))
    document = json.loads(_output(monkeypatch, capsys, run, "-o", "json"))
    expected = records(document["run"]["status"])
    header, body = rows[0], rows[1:]
    assert len(body) == len(expected) > 0 and len(set(header)) == len(header)
    for row, record in zip(body, expected, strict=True):
        for column, path in fields.items():
            value: Any = record
            for key in path:
                value = (value or {}).get(key)
            assert _number(row[header.index(column)]) == value, (table, column)


def test_a_run_has_no_cells_table_and_a_suite_no_steps_table(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_fetch", lambda args, *runs: [GOLDEN["serial"]])
    assert cli.main(["report", "bench/r1", "-o", "csv", "--table", "cells"]) == 1
    assert "a run's tables are steps, datapath, database, baseline" in capsys.readouterr().err

"""Golden files for every output format, from fixed runs (set CSIBENCH_UPDATE_GOLDEN=1 to rewrite them)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from csibench.report.compare import CompareError, compare_runs, render_compare
from csibench.report.render import render_json, render_markdown, render_table

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
RUNS: dict[str, Any] = json.loads((GOLDEN / "runs.json").read_text())


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CSIBENCH_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {name}: run with CSIBENCH_UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{name} changed; if intended, regenerate with CSIBENCH_UPDATE_GOLDEN=1"


def test_table() -> None:
    check("report-serial.txt", render_table(RUNS["serial"]))
    check("report-concurrent.txt", render_table(RUNS["concurrent"]))


def test_markdown() -> None:
    check("report-serial.md", render_markdown(RUNS["serial"]))


def test_json_carries_the_full_report() -> None:
    text = render_json(RUNS["serial"], RUNS["report"])
    check("report-serial.json", text)
    assert json.loads(text)["report"]["steps"][0]["latencyMs"] == [1700100.0, 3100200.0, 3450900.0]


def test_compare_table_and_markdown() -> None:
    check("compare.txt", render_compare(RUNS["serial"], RUNS["concurrent"]))
    check("compare.md", render_compare(RUNS["serial"], RUNS["concurrent"], markdown=True))


def test_compare_ratios_are_b_over_a_throughput() -> None:
    comparisons, only = compare_runs(RUNS["serial"], RUNS["concurrent"])
    ratios = {c.step: c.ratio for c in comparisons}
    assert ratios["createVolume"] == pytest.approx(1.59 / 0.29)
    assert not only


def test_compare_refuses_a_run_in_progress() -> None:
    running = json.loads(json.dumps(RUNS["concurrent"]))
    running["status"]["phase"] = "Running"
    with pytest.raises(CompareError, match="bench/concurrent-1000 is still Running"):
        compare_runs(RUNS["serial"], running)


def test_compare_names_steps_only_one_run_has() -> None:
    partial = json.loads(json.dumps(RUNS["concurrent"]))
    partial["status"]["steps"] = [s for s in partial["status"]["steps"] if s["name"] == "createVolume"]
    text = render_compare(RUNS["serial"], partial)
    assert "not compared: publish (only in bench/serial-1000)" in text
    assert text.count("\n") < 8


def test_workload_tables() -> None:
    """The data-path and database tables of a run with both, and the step table's rows for those steps."""
    check("report-workloads.txt", render_table(RUNS["workloads"]))
    check("report-workloads.md", render_markdown(RUNS["workloads"]))
    check("compare-workloads.txt", render_compare(RUNS["workloads"], RUNS["workloads"]))

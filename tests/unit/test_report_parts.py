"""The parts rows under a step ('└ gone', '└ controller', ...) have a legend under the step table, in the text,
markdown and HTML reports: what each part spans, and that part percentiles do not add up to the step's."""

from __future__ import annotations

from typing import Any

from csibench.engine.catalog import STEPS
from csibench.report.html import build_run_html
from csibench.report.parts import MEANINGS
from csibench.report.render import render_markdown, render_table


def test_every_part_the_engine_cuts_has_a_meaning_in_the_reports() -> None:
    cut = {name: step.phases.names for name, step in STEPS.items() if step.phases is not None}
    assert set(cut) == {"moveVolume", "expandVolume", "createGroupSnapshot", "deleteGroupSnapshot"}
    assert {name: tuple(part for part, _ in MEANINGS[name]) for name in cut} == cut


def _moved(repeat: int = 1) -> dict[str, Any]:
    latency = {"p50": 4.0, "p90": 5.0, "p99": 6.0, "max": 6.5}
    phases = [{"name": name, "objects": 4, "latency": {"p50": p50, "p90": p50, "p99": p50 * 2, "max": p50 * 2}}
              for name, p50 in (("gone", 1.0), ("detach", 0.5), ("attach", 1.5), ("ready", 0.6))]
    status: dict[str, Any] = {"phase": "Succeeded", "steps": [
        {"name": "publish", "state": "Succeeded", "objects": 4, "succeeded": 4, "latency": latency},
        {"name": "moveVolume", "state": "Succeeded", "objects": 4, "succeeded": 4, "latency": latency,
         "phases": phases}]}
    if repeat > 1:
        status["iterations"] = {"total": repeat}
    return {"metadata": {"namespace": "runs", "name": "move"}, "spec": {"storageClassName": "sim"}, "status": status}


def test_the_parts_rows_have_a_legend_under_the_table_in_every_report() -> None:
    text = render_table(_moved()).splitlines()
    last_row = max(i for i, line in enumerate(text) if line.lstrip().startswith("└ ready"))
    legend = text[last_row + 1:]
    assert legend[1].startswith("└ parts of ") and "gone: from the delete until the old pod is gone" in legend[1]
    assert "attach: until each volume's VolumeAttachment to the new node says attached" in legend[1]
    assert "need not add up to the step's" in legend[2] and sum("└ parts of" in line for line in text) == 1
    assert "└ parts of" in render_markdown(_moved())
    page = build_run_html(_moved(), None)
    assert page.count('<p class="muted parts">') == 2 and page.index("parts of") > page.index('<table class="steps"')
    assert "└ parts of" not in render_table(_moved(repeat=3))  # its table holds medians, no parts rows

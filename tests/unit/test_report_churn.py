"""The churn in the reports: its windows' table (the tail marked), its drift table titled by its verdict, two runs'
churns side by side, and the HTML page's curves over time (one point per window); a run without a churn has none
of them."""

from __future__ import annotations

import re
from typing import Any

from csibench.api.churn import (
    PHASES,
    ChurnDrift,
    ChurnLeaks,
    ChurnPhaseWindow,
    ChurnWindow,
    ComponentMemory,
    DriftChange,
    DriftMeasure,
)
from csibench.api.run.common import StepState
from csibench.api.run.observations import Latency
from csibench.report import churn
from csibench.report.html import build_compare_html, build_run_html, churn_curves
from csibench.report.render import render_markdown, render_table
from csibench.report.tables import comparison_tables, run_tables
from tests.support.report_page import coinciding_without_a_note, plot_svgs

MIB = 1024 * 1024


def _latency(p50: float, p99: float) -> Latency:
    return Latency(p50=p50, p90=p99 * 0.9, p99=p99, max=p99 * 1.1, mean=p50 * 1.1)


def _phases(slower: float, phases: tuple[str, ...] = PHASES, failed: int = 0) -> list[ChurnPhaseWindow]:
    """Each phase 10 completions in 60 s; create 0.5 s p50, each later phase 0.5 s more, p99 2.4× the p50."""
    return [ChurnPhaseWindow(phase=phase, completed=10, failed=failed if phase == "publish" else 0,
                             throughput=10 / 60 + index / 100,
                             latency=_latency(0.5 * (index + 1) * slower, 1.2 * (index + 1) * slower))
            for index, phase in enumerate(PHASES) if phase in phases]


def _windows() -> list[ChurnWindow]:
    """Three windows of 60 s, each 20% slower than the one before, a leak and memory building up; then the tail
    (the last waves' unpublish and delete), its leaks counted by the cluster only."""
    rows = [ChurnWindow(index=i, startSeconds=60.0 * i, endSeconds=60.0 * (i + 1), state=StepState.SUCCEEDED,
                        wavesStarted=6, wavesLate=i, phases=_phases(1 + 0.2 * i, failed=1 if i == 1 else 0),
                        leaked=1 if i else 0, leaks=ChurnLeaks(source="Array", volumes=i, attachments=min(i, 1)),
                        memory=[ComponentMemory(component="csi-attacher", bytes=(80 + 8 * i) * MIB),
                                ComponentMemory(component="csi-provisioner", bytes=(60 + i) * MIB)])
            for i in range(3)]
    rows.append(ChurnWindow(index=3, startSeconds=180.0, endSeconds=203.5, tail=True, state=StepState.SUCCEEDED,
                            phases=_phases(2.0, ("unpublish", "delete")), leaked=0,
                            leaks=ChurnLeaks(source="Cluster", attachments=1, released=1,
                                             message="the array did not answer the audit"),
                            memory=[ComponentMemory(component="csi-attacher", bytes=100 * MIB)]))
    return rows


def _drift() -> ChurnDrift:
    measures = [DriftMeasure(measure="create latencyP50", first=0.5, last=0.6, ratio=0.83, low=0.82, high=0.98,
                             p=0.2, change="NoDrift"),
                DriftMeasure(measure="publish latencyP50", first=1.0, last=1.4, ratio=0.71, low=0.6, high=0.8,
                             p=0.0123, change="Drift", message="0.71× slower, beyond 25%"),
                DriftMeasure(measure="delete latencyP50", change="Inconclusive")]
    return ChurnDrift(change=DriftChange.DRIFT, message="windows 0-0 against 2-2: publish latencyP50: 0.71× slower",
                      windows=1, thresholdPercent=25.0, measures=measures, leaked=2, memoryGrowthPercent=20.0,
                      memoryComponent="csi-attacher")


def _run(windows: list[ChurnWindow] | None = None, drift: ChurnDrift | None = None,
         name: str = "churny") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Succeeded", "steps": []}
    if windows is not None:
        status["churn"] = [row.model_dump(mode="json", exclude_none=True) for row in windows]
    if drift is not None:
        status["churnDrift"] = drift.model_dump(mode="json", exclude_none=True)
    return {"metadata": {"namespace": "runs", "name": name}, "spec": {"storageClassName": "sim"}, "status": status}


def _section(text: str, title: str) -> list[str]:
    """The lines of a text report's table under ``title``, up to the blank line after it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start + 1:end]


def test_the_window_table_says_each_phase_the_leaks_and_the_memory_per_window_and_marks_the_tail() -> None:
    run = _run(_windows(), _drift())
    headers, rows = churn.table(run) or ([], [])
    assert headers[:3] == ["Window", "Span s", "Waves (late)"] and len(rows) == 4
    assert [row[0] for row in rows] == ["0", "1", "2", "3 tail"]
    assert [row[1] for row in rows] == ["0-60", "60-120", "120-180", "180-203.5"]
    assert [row[2] for row in rows] == ["6", "6 (1 late)", "6 (2 late)", "0"]
    create, publish, unpublish, delete = rows[1][3:7]
    assert create == "10 · 0.17/s · 600 ms / 1.44 s"
    assert publish == "10 (1 failed) · 0.18/s · 1.2 s / 2.88 s"
    assert unpublish == "10 · 0.19/s · 1.8 s / 4.32 s" and delete == "10 · 0.20/s · 2.4 s / 5.76 s"
    assert rows[3][3:5] == ["-", "-"]  # the tail: only the last waves' unpublish and delete
    assert rows[3][5] == "10 · 0.19/s · 3 s / 7.2 s"
    assert [row[7] for row in rows] == ["0", "1", "1", "0"]  # new leaks
    assert [row[8] for row in rows] == ["0 (0/0/0, array)", "2 (1/1/0, array)", "3 (2/1/0, array)",
                                        "2 (0/1/1, cluster)"]
    assert [row[9] for row in rows] == ["80.0 (csi-attacher)", "88.0 (csi-attacher)", "96.0 (csi-attacher)",
                                        "100.0 (csi-attacher)"]

    text = render_table(run)
    lines = _section(text, "Churn (per window)")
    assert len(lines) == 5 and lines[0].startswith("Window")
    assert lines[4].startswith("3 tail") and not any("tail" in line for line in lines[1:4])
    assert "10 (1 failed) · 0.18/s · 1.2 s / 2.88 s" in lines[2] and "2 (0/1/1, cluster)" in lines[4]
    assert "#### Churn (per window)" in render_markdown(run)


def test_the_drift_table_is_titled_by_its_verdict_and_says_each_measure_the_leaks_and_the_memory_growth() -> None:
    run = _run(_windows(), _drift())
    title = churn.drift_title(run)
    assert title == ("Churn drift (last windows against the first): Drift — windows 0-0 against 2-2: "
                     "publish latencyP50: 0.71× slower")
    headers, rows = churn.drift_table(run) or ([], [])
    assert headers == ["Measure", "First", "Last", "Ratio [90% interval]", "p", "Change"]
    assert rows == [["create latencyP50", "500 ms", "600 ms", "0.83× [0.82, 0.98]", "0.2", "NoDrift"],
                    ["publish latencyP50", "1 s", "1.4 s", "0.71× [0.60, 0.80]", "0.0123", "Drift"],
                    ["delete latencyP50", "-", "-", "-", "-", "Inconclusive"],
                    ["leaked over the churn", "-", "2", "-", "-", "-"],
                    ["peak memory growth (csi-attacher)", "-", "+20.0%", "-", "-", "-"]]
    text = render_table(run)
    assert text.count(title) == 1
    assert any(line.startswith("publish latencyP50") and line.rstrip().endswith("Drift")
               for line in _section(text, title))
    # In the registry's order: the windows, then their drift, each once.
    titles = [found for _, found, _ in run_tables(run)]
    assert titles == ["Churn (per window)", title]
    quiet = _run(_windows(), ChurnDrift(change=DriftChange.NO_DRIFT, windows=1, thresholdPercent=25.0))
    assert churn.drift_title(quiet) == "Churn drift (last windows against the first): NoDrift"
    assert churn.drift_table(quiet) == (headers, [])


def test_the_page_draws_the_churn_over_time_one_point_per_window() -> None:
    run = _run(_windows(), _drift())
    curves = {css: (title, lines) for css, title, _, lines in churn_curves(run)}
    assert list(curves) == ["churn-throughput", "churn-latency", "churn-leaks", "churn-memory"]
    throughput = curves["churn-throughput"][1]
    assert [line.label for line in throughput] == list(PHASES)
    assert [len(line.points) for line in throughput] == [3, 3, 4, 4]  # the tail has no create or publish
    assert throughput[0].points == [(60.0, 10 / 60), (120.0, 10 / 60), (180.0, 10 / 60)]
    latency = curves["churn-latency"][1]
    assert latency[3].points == [(60.0, 4.8), (120.0, 4.8 * 1.2), (180.0, 4.8 * 1.4), (203.5, 9.6)]
    assert [line.points for line in curves["churn-leaks"][1]] == [[(60.0, 0.0), (120.0, 2.0), (180.0, 3.0),
                                                                   (203.5, 2.0)]]
    memory = curves["churn-memory"][1]
    assert [line.label for line in memory] == ["csi-attacher", "csi-provisioner"]
    assert memory[0].points == [(60.0, 80.0), (120.0, 88.0), (180.0, 96.0), (203.5, 100.0)]
    assert [len(line.points) for line in memory] == [4, 3]

    page = build_run_html(run, None)
    assert re.findall(r'<div class="plot (churn-[a-z]+)">', page) == list(curves)
    assert page.index("<h2>Churn (per window)</h2>") < page.index('class="plot churn-throughput"')
    assert page.index('class="plot churn-memory"') < page.index("<h2>Churn drift")
    assert "churn window 3 leaks: the array did not answer the audit" in page
    svgs = dict(zip(curves, plot_svgs(page), strict=True))
    for css, (_, lines) in curves.items():
        svg = svgs[css]
        # One drawn data line per series, with as many vertices as it has windows.
        assert _data_lines(svg) == [len(line.points) for line in lines], css
        assert all(f">{line.label}" in svg for line in lines), css
        assert "tail (after durationSeconds)" in svg and "window end (seconds" in svg
        assert coinciding_without_a_note(svg) == []
    assert "(n=4 windows)" in svgs["churn-leaks"] and "csi-provisioner (n=3 windows)" in svgs["churn-memory"]


def _data_lines(svg: str) -> list[int]:
    """The vertices of each data line drawn on the axes (clipped to them, drawn 1.4 wide: not grid lines or the
    legend's samples)."""
    paths = re.findall(r'<g id="line2d_\d+">\s*<path d="([^"]*)" clip-path="[^"]*" style="[^"]*stroke-width: 1\.4',
                       svg)
    return [len(re.findall(r"[ML]", path)) for path in paths]


def test_two_runs_churns_side_by_side_per_phase() -> None:
    slow = [row.model_copy(update={"phases": _phases(2.0 * (1 + 0.2 * row.index), tuple(p.phase for p in row.phases))})
            for row in _windows()]
    run_a, run_b = _run(_windows(), name="a"), _run(slow, name="b")
    for run, seconds in ((run_a, 210.0), (run_b, 215.0)):  # a step in common, as compare needs
        run["status"]["steps"] = [{"name": "churn", "durationSeconds": seconds, "throughput": 0.3}]
    headers, rows = churn.compare_table(run_a, run_b) or ([], [])
    assert headers == ["Phase", "A: p50 · /s", "B: p50 · /s", "B vs A (p50)"]
    # Median over the windows before the tail: 0.6 s for A's create, twice that for B's.
    assert rows[0] == ["create", "600 ms · 0.17", "1.2 s · 0.17", "0.50×"]
    assert rows[3] == ["delete", "2.4 s · 0.20", "4.8 s · 0.20", "0.50×"]
    found = [(entry.css, note) for entry, _, note in comparison_tables(run_a, run_b)]
    assert found == [("churn", churn.COMPARE_NOTE)]
    assert "<h2>Churn (medians over the windows)</h2>" in build_compare_html(run_a, None, run_b, None)
    assert churn.compare_table(_run(), _run()) is None


def test_a_run_without_a_churn_has_no_churn_table_or_plot() -> None:
    run = _run()
    assert churn.table(run) is None and churn.drift_table(run) is None
    assert all(not line.points for _, _, _, lines in churn_curves(run) for line in lines)
    assert "Churn" not in render_table(run) and "Churn" not in render_markdown(run)
    page = build_run_html(run, None)
    assert "Churn" not in page and "churn-" not in page
    assert comparison_tables(run, run) == []

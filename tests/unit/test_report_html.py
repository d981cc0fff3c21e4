"""The HTML report of a run measured against the fake API server: its structure, the same page opened in headless
Chromium (no console errors, every plot drawn with a size), the comparison page, and the missing-extra message."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from csibench.report.html import build_compare_html, build_run_html, spans
from csibench.report.plots import PlottingUnavailable
from tests.support.browser import assert_run_page_drawn, render
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import REF, run, spec, stored_report
from tests.support.report_page import Outline, coinciding_without_a_note, plot_svgs

PLAN = ["createVolume", "publish", "unpublish", "deleteVolume"]


@pytest.fixture(scope="module")
def measured() -> tuple[dict[str, Any], dict[str, Any]]:
    fake = FakeKube(Behaviour(bind_delay=0.03, ready_delay=0.03))
    status = run(fake, spec(steps=PLAN, repeat=2, volumes=8, pvcsPerPod=2))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    body = {"metadata": {"namespace": REF.namespace, "name": REF.name}, "spec": {"storageClassName": "sim"},
            "status": status.model_dump(mode="json", exclude_none=True)}
    return body, stored_report(fake)


def test_the_page_has_the_table_and_two_plots_per_step_and_loads_nothing(
        measured: tuple[dict[str, Any], dict[str, Any]]) -> None:
    page = build_run_html(*measured)
    outline = Outline()
    outline.feed(page)
    assert outline.plots == {f"step-{name}": ["cdf", "timeline"] for name in PLAN}
    assert outline.rows["steps"] == 1 + len(PLAN) + 1  # header, one row per step, the sum
    assert outline.rows["iterations"] == 1 + 2 and outline.rows["environment"] >= 6
    assert outline.external == [] and not re.search(r'href="http|url\((?!#)|@import', page)
    assert "iteration 1 (n=8)" in page and "iteration 2 (n=8)" in page  # one distribution line per iteration
    assert "<h2>Preflight</h2>" in page and "sim.csibench.io" in page
    drawn = plot_svgs(page)
    assert len(drawn) == 2 * len(PLAN) and all("(n=" in svg and "seconds" in svg for svg in drawn)  # counts, units
    assert all(coinciding_without_a_note(svg) == [] for svg in drawn)


def test_the_timeline_is_each_objects_request_to_its_terminal_event() -> None:
    record = {"submitMs": [0.0, 5.0, None, 7.0], "latencyMs": [100.0, 50.0, None, None],
              "result": ["ok", "ProvisioningFailed", "Skipped", "Pending"]}
    found = spans(record)
    assert [(s.start_s, s.end_s, s.ok) for s in found] == [(0.0, 0.1, True), (0.005, 0.055, False),
                                                           (0.007, None, False)]


def test_headless_chromium_draws_every_plot_without_errors(measured: tuple[dict[str, Any], dict[str, Any]],
                                                           tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(build_run_html(*measured))
    shot = tmp_path / "report.png"
    assert_run_page_drawn(render(page, shot), f"csibench {REF.namespace}/{REF.name}", len(PLAN))
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000


def test_the_comparison_page_overlays_both_runs_per_step(measured: tuple[dict[str, Any], dict[str, Any]]) -> None:
    run_a, report = measured
    run_b = {**run_a, "metadata": {"namespace": "runs", "name": "other"}}
    page = build_compare_html(run_a, report, run_b, report)
    outline = Outline()
    outline.feed(page)
    assert outline.plots == {f"step-{name}": ["cdf"] for name in PLAN}
    assert "A runs/bench (n=16)" in page and "B runs/other (n=16)" in page
    assert "(not significant, n=2)" in page and "Welch&#x27;s t-test" in page


def test_without_the_plotting_extra_the_page_says_how_to_get_it(
        measured: tuple[dict[str, Any], dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlottingUnavailable, match=r"pip install 'csibench\[report\]'"):
        build_run_html(*measured)


def test_the_browser_check_sees_errors_and_missing_plots(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<html><head><title>broken</title></head><body><div class="plot"><svg></svg></div>'
                    '<img src="https://example.com/x.png"><script>console.error("boom"); undefined_call();</script>'
                    "</body></html>")
    seen = render(page, tmp_path / "broken.png")
    assert any("boom" in error for error in seen.errors) and any("exception" in e for e in seen.errors)
    assert any(e.startswith("log: ") for e in seen.errors)  # the image the network did not serve
    assert seen.external == 1 and seen.plots[0]["paths"] == 0


def test_the_machinery_and_each_finding_are_said_once(measured: tuple[dict[str, Any], dict[str, Any]]) -> None:
    run, report = measured
    status = {**run["status"], "preflight": [
        {"check": "ClientThrottling", "severity": "Warning", "component": "kube-system/prov/csi-provisioner",
         "message": "csi-provisioner's client needs at least 40s for createVolume"},
        {"check": "WorkerThreads", "severity": "Info", "message": "csi-attacher runs 10 workers"}]}
    status["environment"] = {**status["environment"], "machinery": {
        "visible": True, "driver": "sim.csibench.io", "components": [
            {"kind": "csi-provisioner", "namespace": "kube-system", "pod": "prov", "container": "csi-provisioner",
             "version": "v6.4.0", "flags": {"kube-api-qps": "5"}, "defaults": {"kube-api-burst": "10"}}]}}
    with_findings = {**run, "status": status}
    page = build_run_html(with_findings, {**report, "preflight": status["preflight"]})
    assert page.count("CSI machinery of sim.csibench.io: csi-provisioner v6.4.0") == 1
    assert page.count("needs at least 40s for createVolume") == 1 and page.count("runs 10 workers") == 1
    from csibench.report.render import render_table
    text = render_table(with_findings)  # the text report says each once as well, and keeps all of it
    assert text.count("CSI machinery of sim.csibench.io") == 1 and text.count("runs 10 workers") == 1


def test_the_page_and_the_text_report_print_the_same_tables_of_their_own_in_the_same_order() -> None:
    """One registry (report/tables.py) for the text, Markdown and HTML reports: a run with data-path and database
    rows shows the same titles in the same order in each."""
    import json

    from csibench.report.render import render_markdown, workload_tables
    from csibench.report.tables import RUN_TABLES
    golden = json.loads((Path(__file__).resolve().parent.parent / "golden" / "runs.json").read_text())
    titles = [title for title, _ in workload_tables(golden["workloads"])]
    assert len(titles) >= 2
    page = build_run_html(golden["workloads"], None)
    headings = [h for h in re.findall(r"<h2>([^<]*)</h2>", page) if h in {e.title(golden["workloads"])
                                                                          for e in RUN_TABLES}]
    assert headings == titles
    markdown = render_markdown(golden["workloads"])
    assert [line[5:] for line in markdown.splitlines() if line[5:] in titles and line.startswith("#### ")] == titles

"""The HTML reports of examples/move.yaml, examples/density.yaml and examples/datapath.yaml, each run against the
in-memory API server (on its storage class) and opened in headless Chromium: every plot drawn with a size, every
series in it drawn (a line over another said in its legend), units and sample counts on each, the parts' legend
under the step table. The screenshots stay in the test's directory (CSIBENCH_SAVE_SCREENSHOTS=dir copies them)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from csibench.api.models import BenchmarkRunSpec
from csibench.report.html import build_run_html
from localcluster.launcher import REPO_ROOT
from tests.support.browser import render
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import REF, run, stored_report
from tests.support.report_page import coinciding_without_a_note, drawn_series, plot_svgs

# What each page must hold beyond the per-step plots: (css class of a plot, how many)
EXPECTED = {"move": {"cdf": 5, "timeline": 5}, "density": {"cdf": 3, "timeline": 3, "density": 1},
            "datapath": {"completion": 5, "completion-tail": 5}}


def _example(name: str) -> BenchmarkRunSpec:
    body = yaml.safe_load((REPO_ROOT / "examples" / f"{name}.yaml").read_text())
    fields: dict[str, Any] = {**body["spec"], "storageClassName": "sim"}
    fields.pop("volumeSnapshotClassName", None)
    if "dataPath" in fields:  # the fake's fio does not wait: the same workloads without the waits
        fields["dataPath"] = {**fields["dataPath"], "rampSeconds": 0, "runtimeSeconds": 1, "startDelaySeconds": 1}
    return BenchmarkRunSpec.model_validate(fields)


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_the_examples_reports_draw_every_series_of_every_plot_in_headless_chromium(example: str,
                                                                                   tmp_path: Path) -> None:
    fake = FakeKube(Behaviour(ready_delay=0.02, release_delay=0.02))
    run_spec = _example(example)
    status = run(fake, run_spec)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    body = {"metadata": {"namespace": REF.namespace, "name": REF.name}, "spec": run_spec.model_dump(mode="json"),
            "status": status.model_dump(mode="json", exclude_none=True)}
    page = build_run_html(body, stored_report(fake))
    path = tmp_path / f"{example}.html"
    path.write_text(page)
    seen = render(path, tmp_path / f"{example}.png")
    if os.environ.get("CSIBENCH_SAVE_SCREENSHOTS"):
        shutil.copy(tmp_path / f"{example}.png", Path(os.environ["CSIBENCH_SAVE_SCREENSHOTS"]) / f"{example}.png")
    assert seen.errors == [] and seen.external == 0, seen
    classes = [plot["cls"].split()[1] for plot in seen.plots]
    for css, count in EXPECTED[example].items():
        assert classes.count(css) >= count, (css, classes)
    for plot in seen.plots:
        assert plot["width"] > 200 and plot["height"] > 100 and plot["paths"] > 10, plot
    for svg in plot_svgs(page):
        assert coinciding_without_a_note(svg) == [], svg[:200]
        assert "(n=" in svg, svg[:300]  # every plot says what it is drawn from
        assert len(set(drawn_series(svg))) > 1
    assert ("└ parts of" in page) == (example == "move")

"""A BenchmarkSuite's report from synthetic suites and runs: the scaling tables (medians over the rounds), the
comparisons of cells with the rounds as samples, the HTML page's curves, and ``csibench report --suite`` and
``compare --suite`` on pure data."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from csibench import cli
from csibench.api.regression import Change
from csibench.api.suite import (
    CELL_LABEL,
    ROUND_LABEL,
    SUITE_NAME_LABEL,
    SUITE_UID_LABEL,
    BenchmarkSuiteSpec,
    Cell,
    cells_of,
    child_spec,
    schedule,
)
from csibench.report.compare import CompareError
from csibench.report.suite import (
    UnknownCell,
    cell_runs,
    machinery_table,
    numeric_axis,
    render_suite,
    scaling_lines,
    scaling_table,
    suite_comparisons,
    suite_json,
    view_of,
)
from csibench.report.suite_queries import TITLE as OWN_QUERIES_TITLE
from csibench.report.suite_queries import own_queries_table, own_query_lines
from tests.support.report_page import Outline

UID = "5e1f0000-0000-4000-8000-00000000000a"
STEPS = ("createVolume", "deleteVolume")
# A step's throughput in one round of one cell: (cell, round, step) -> objects/s.
Rate = Callable[[Cell, int, str], float]


def _spec(matrix: dict[str, Any], repeat: int) -> BenchmarkSuiteSpec:
    return BenchmarkSuiteSpec.model_validate({"template": {"storageClassName": "sim", "volumes": 10,
                                                           "steps": list(STEPS)},
                                              "matrix": matrix, "repeat": repeat})


def measured(matrix: dict[str, Any], repeat: int, rate: Rate, steps: tuple[str, ...] = STEPS,
             phase: str = "Succeeded") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A finished suite ``bench/sweep`` and its runs, as the API returns them: every run Succeeded with one
    status step per name at ``rate``, p99 the time of ten objects at that rate."""
    spec = _spec(matrix, repeat)
    slots = schedule(spec)
    runs = []
    for slot in slots:
        cell = slot.cell
        status_steps = []
        for step in steps:
            throughput = rate(cell, slot.round, step)
            status_steps.append({"name": step, "state": "Succeeded", "objects": 10, "succeeded": 10, "failed": 0,
                                 "durationSeconds": 10 / throughput, "throughput": throughput,
                                 "latency": {"p50": 5 / throughput, "p99": 10 / throughput}})
        runs.append({"metadata": {"namespace": "bench", "name": slot.child_name("sweep"),
                                  "labels": {SUITE_UID_LABEL: UID, SUITE_NAME_LABEL: "sweep", CELL_LABEL: cell.id,
                                             ROUND_LABEL: str(slot.round)}},
                     "spec": child_spec(spec, cell),
                     "status": {"phase": "Succeeded", "verdict": "Pass", "steps": status_steps}})
    suite = {"metadata": {"namespace": "bench", "name": "sweep", "uid": UID},
             "spec": spec.model_dump(mode="json", exclude_none=True),
             "status": {"phase": phase, "progress": f"{len(slots)}/{len(slots)}", "total": len(slots),
                        "done": len(slots), "verdict": "Pass",
                        "cells": [{"id": cell.id, "values": cell.shown()} for cell in cells_of(spec.matrix)],
                        "runs": [{"name": slot.child_name("sweep"), "cell": slot.cell.id, "round": slot.round,
                                  "uid": f"uid-{index}", "phase": "Succeeded", "verdict": "Pass"}
                                 for index, slot in enumerate(slots)]}}
    return suite, runs


NOISE = (1.0, 1.04, 0.97, 1.02)  # a round's share of its cell's typical rate: a few percent, as a quiet cluster


def by_volumes(cell: Cell, round_: int, step: str) -> float:
    """Throughput grows with the batch (volumes / 10 per second), the second step half as fast."""
    volumes = float(dict(cell.values)["volumes"])
    return volumes / 10 * NOISE[(round_ - 1) % len(NOISE)] * (1.0 if step == "createVolume" else 0.5)


def fast_class_twice_as_fast(cell: Cell, round_: int, step: str) -> float:
    base = 2.0 if dict(cell.values)["storageClassName"] == "fast" else 1.0
    return base * NOISE[(round_ - 1) % len(NOISE)]


def test_the_scaling_table_is_each_cells_median_over_its_rounds() -> None:
    suite, runs = measured({"volumes": [10, 100, 1000]}, 3, by_volumes)
    view = view_of(suite, runs)
    headers, rows = scaling_table(view, "createVolume")
    assert headers == ["Cell", "volumes", "vol/s median", "min-max", "step s median", "p99 s median", "Rounds"]
    # Rounds at 1.0, 1.04, 0.97 of the rate: the median is the rate, p99 the median of 10 / rate of each round.
    assert rows == [["c0", "10", "1.00", "0.97-1.04", "10.00", "10.000", "3/3"],
                    ["c1", "100", "10.00", "9.70-10.40", "1.00", "1.000", "3/3"],
                    ["c2", "1000", "100.00", "97.00-104.00", "0.10", "0.100", "3/3"]]
    assert scaling_table(view, "deleteVolume")[1][2][2] == "50.00"
    text = render_suite(suite, runs)
    assert text.startswith("BenchmarkSuite bench/sweep: Succeeded\n")
    assert "progress 9/9, order Interleaved, rounds 3 (spec.repeat), parallelism 1, 3 cells, verdict Pass" in text
    assert "matrix: volumes = 10, 100, 1000" in text
    assert "Create Volume: median over the rounds, per cell" in text and "Delete Volume: median" in text
    assert "sweep-c2-r3  c2    1000     3      Succeeded  Pass" in text
    markdown = render_suite(suite, runs, markdown=True)
    assert markdown.startswith("### BenchmarkSuite bench/sweep") and "| c1 | 100 | 10.00 |" in markdown


def test_the_curve_runs_along_the_first_numeric_axis_one_line_per_class() -> None:
    suite, runs = measured({"storageClassName": ["slow", "fast"], "volumes": [10, 100]}, 2,
                           lambda cell, r, step: by_volumes(cell, r, step) * (
                               2 if dict(cell.values)["storageClassName"] == "fast" else 1))
    x_label, lines = scaling_lines(view_of(suite, runs), "createVolume")
    assert x_label == "volumes (batch size)"
    assert [(label, [x for x, _ in points]) for label, points in lines] == [
        ("storageClassName=slow", [10.0, 100.0]), ("storageClassName=fast", [10.0, 100.0])]
    assert [round(y, 2) for _, y in lines[1][1]] == [2.04, 20.4]  # the median of two rounds: their mean
    x_label, lines = scaling_lines(view_of(*measured({"storageClassName": ["slow", "fast"]}, 2,
                                                     fast_class_twice_as_fast)), "createVolume")
    assert x_label == "cell: c0 slow, c1 fast" and [x for x, _ in lines[0][1]] == [0.0, 1.0]


def test_comparisons_take_the_rounds_as_samples_and_pair_cells_that_agree_on_every_other_axis() -> None:
    suite, runs = measured({"storageClassName": ["slow", "fast"], "volumes": [10, 100]}, 2,
                           lambda cell, r, step: 1.0 * NOISE[r - 1])
    found = suite_comparisons(suite, runs)
    pairs = sorted({(c.axis, c.cell_a, c.cell_b, tuple(c.fixed.items())) for c in found})
    # c0 slow/10, c1 slow/100, c2 fast/10, c3 fast/100
    assert pairs == [("storageClassName", "c0", "c2", (("volumes", "10"),)),
                     ("storageClassName", "c1", "c3", (("volumes", "100"),)),
                     ("volumes", "c0", "c1", (("storageClassName", "slow"),)),
                     ("volumes", "c2", "c3", (("storageClassName", "fast"),))]
    assert len(found) == 4 * len(STEPS)
    assert all((c.judged.n_a, c.judged.n_b) == (2, 2) for c in found)  # repeat 2: two rounds per side
    text = render_suite(suite, runs)
    assert "samples: the rounds of each cell, one throughput per round (n = 2 per side" in text
    assert "fast (c2) vs slow (c0)" in text and "significance needs" not in text


def test_a_class_twice_as_fast_over_four_quiet_rounds_is_an_improvement() -> None:
    suite, runs = measured({"storageClassName": ["slow", "fast"], "volumes": [100]}, 4, fast_class_twice_as_fast)
    found = suite_comparisons(suite, runs)
    assert [(c.step, c.value_a, c.value_b, c.judged.change) for c in found] == [
        ("createVolume", "slow", "fast", Change.IMPROVEMENT), ("deleteVolume", "slow", "fast", Change.IMPROVEMENT)]
    judged = found[0].judged
    assert judged.ratio == pytest.approx(2.0) and judged.n_a == judged.n_b == 4
    assert judged.p is not None and judged.p < 0.05 and judged.low is not None and judged.low > 1.1
    assert found[0].fixed == {"volumes": "100"}  # an axis of one value: the same in both, never compared
    row = next(line for line in render_suite(suite, runs).splitlines() if line.startswith("storageClassName"))
    assert "2.00×" in row and "4/4" in row and row.endswith("Improvement")
    slower = suite_comparisons(suite, runs, max_regression_percent=150)  # 2x is within 150%: not beyond it
    assert {c.judged.change for c in slower} == {Change.EQUIVALENT}


def test_one_round_per_cell_is_never_a_finding_and_says_it_needs_repeat() -> None:
    suite, runs = measured({"storageClassName": ["slow", "fast"]}, 1, fast_class_twice_as_fast)
    found = suite_comparisons(suite, runs)
    assert {c.judged.change for c in found} == {Change.INCONCLUSIVE}
    assert all((c.judged.n_a, c.judged.n_b, c.judged.p) == (1, 1, None) for c in found)
    text = render_suite(suite, runs)
    assert "Inconclusive (one round on a side: needs spec.repeat >= 2)" in text
    assert "significance needs spec.repeat >= 2 on the suite" in text


def test_a_step_with_a_table_of_its_own_is_named_not_scaled_or_compared() -> None:
    suite, runs = measured({"storageClassName": ["slow", "fast"]}, 2, fast_class_twice_as_fast,
                           steps=("createVolume", "dataPath", "deleteVolume"))
    assert {c.step for c in suite_comparisons(suite, runs)} == {"createVolume", "deleteVolume"}
    text = render_suite(suite, runs)
    assert "Data Path (fio): median" not in text and "Data Path (fio): their numbers are tables of their own" in text
    body = suite_json(suite, runs)
    assert body["cells"][0]["steps"]["dataPath"]["rounds"] == 2  # the JSON keeps every step's samples


def test_the_json_has_per_cell_per_step_medians_and_samples() -> None:
    suite, runs = measured({"volumes": [10, 100]}, 2, by_volumes)
    body = json.loads(json.dumps(suite_json(suite, runs)))
    assert body["suite"]["metadata"]["name"] == "sweep"
    first = body["cells"][0]
    assert first["id"] == "c0" and first["values"] == {"volumes": "10"}
    assert first["runs"] == ["sweep-c0-r1", "sweep-c0-r2"]
    assert first["steps"]["createVolume"]["throughputs"] == [1.0, 1.04]
    assert first["steps"]["createVolume"]["throughput"] == pytest.approx(1.02)
    assert body["comparisons"][0]["a"] == {"cell": "c0", "value": "10"}
    assert body["comparisons"][0]["rounds"] == [2, 2]


def test_two_cells_become_two_runs_for_compare_and_an_unknown_cell_lists_the_cells() -> None:
    suite, runs = measured({"storageClassName": ["slow", "fast"]}, 4, fast_class_twice_as_fast)
    run_a, run_b = cell_runs(suite, runs, "c0", "c1")
    assert run_a["metadata"]["name"] == "sweep/c0" and run_b["metadata"]["name"] == "sweep/c1"
    assert run_b["status"]["phase"] == "Succeeded" and run_a["status"]["steps"][0]["throughput"] == pytest.approx(1.01)
    aggregate = run_b["status"]["aggregates"][0]
    assert aggregate["iterations"] == 4 and aggregate["throughputs"] == [2.0, 2.08, 1.94, 2.04]
    with pytest.raises(UnknownCell, match=r"no cell c9; its cells: c0 \(storageClassName=slow\); c1 "):
        cell_runs(suite, runs, "c0", "c9")
    running = {**suite, "status": {**suite["status"], "phase": "Running"}}
    with pytest.raises(CompareError, match="cell c1 of BenchmarkSuite bench/sweep is still running"):
        cell_runs(running, runs[:-1], "c0", "c1")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``csibench`` reading one suite ``bench/sweep`` (4 rounds, class fast twice as fast) and no run."""
    suite, runs = measured({"storageClassName": ["slow", "fast"]}, 4, fast_class_twice_as_fast)

    def fetch_suite(args: Any, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        return (suite, runs) if cli._split(name, args.namespace) == ("bench", "sweep") else None

    def fetch(args: Any, *names: str) -> list[dict[str, Any]]:
        raise cli.CliError(f"BenchmarkRun {names[0]} not found", cli.EXIT_NOT_FOUND)

    monkeypatch.setattr(cli, "_fetch_suite", fetch_suite)
    monkeypatch.setattr(cli, "_fetch", fetch)
    return suite, runs


@pytest.mark.usefixtures("cluster")
def test_compare_suite_feeds_the_cells_to_compare_and_its_regression_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", "-n", "bench", "--suite", "sweep", "c0", "c1", "--max-regression", "10"]) == 0
    out = capsys.readouterr().out
    assert "A: bench/sweep/c0 (median, min-max)" in out and "B: bench/sweep/c1 (median, min-max)" in out
    assert "regression check, B against A: Improvement" in out
    assert cli.main(["compare", "--suite", "bench/sweep", "c0", "c7"]) == cli.EXIT_NOT_FOUND
    err = capsys.readouterr().err
    assert "has no cell c7; its cells: c0 (storageClassName=slow); c1 (storageClassName=fast)" in err
    assert cli.main(["compare", "--suite", "bench/other", "c0", "c1"]) == cli.EXIT_NOT_FOUND


@pytest.mark.usefixtures("cluster")
def test_report_reads_a_suite_by_flag_or_when_no_run_has_the_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--suite", "sweep", "-n", "bench", "-o", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert set(body) == {"suite", "cells", "comparisons"} and [c["id"] for c in body["cells"]] == ["c0", "c1"]
    assert cli.main(["report", "bench/sweep"]) == 0  # no BenchmarkRun of that name: the suite of it
    assert capsys.readouterr().out.startswith("BenchmarkSuite bench/sweep: Succeeded")
    assert cli.main(["report", "bench/nothing"]) == cli.EXIT_NOT_FOUND
    assert "BenchmarkRun or BenchmarkSuite bench/nothing not found" in capsys.readouterr().err
    assert cli.main(["report", "--suite", "bench/sweep", "-o", "junit"]) == 1


@pytest.mark.usefixtures("cluster")
def test_the_cells_csv_read_back_equals_the_suite_json(capsys: pytest.CaptureFixture[str]) -> None:
    import csv
    import io

    assert cli.main(["report", "--suite", "bench/sweep", "-o", "json"]) == 0
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert cli.main(["report", "--suite", "bench/sweep", "-o", "csv", "--table", "cells"]) == 0
    header, *rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert header == ["cell", "storageClassName", "step", "rounds", "throughput median (objects/s)",
                      "p99 median (s)", "durationSeconds median (s)"]
    expected = [(c["id"], c["values"]["storageClassName"], step, s["rounds"], s["throughput"], s["p99"],
                 s["durationSeconds"]) for c in cells for step, s in c["steps"].items()]
    assert [(r[0], r[1], r[2], int(r[3]), float(r[4]), float(r[5]), float(r[6])) for r in rows] == expected
    assert len(rows) == 4  # 2 cells x 2 steps
    assert cli.main(["report", "--suite", "bench/sweep", "-o", "csv", "--table", "steps"]) == 1
    assert "a suite's CSV table is cells" in capsys.readouterr().err


def test_the_page_draws_a_scaling_curve_per_step() -> None:
    pytest.importorskip("matplotlib")
    from csibench.report.html import build_suite_html

    suite, runs = measured({"storageClassName": ["slow", "fast"], "volumes": [10, 100, 1000]}, 2, by_volumes)
    page = build_suite_html(suite, runs)
    outline = Outline()
    outline.feed(page)
    assert outline.plots == {f"suite-step-{step}": ["scaling"] for step in STEPS}
    assert outline.rows["suite-runs"] == 1 + 12 and outline.rows["scaling"] == len(STEPS) * (1 + 6)
    assert outline.rows["suite-compare"] == 1 + (3 + 2 * 2) * len(STEPS)  # class: 3 pairs; volumes: 2 per class
    assert outline.external == [] and "storageClassName=fast" in page and "volumes (batch size)" in page
    assert page.count("(n=3 cells)") == len(STEPS)  # each curve says what it is drawn from, once: its lines share it
    single = build_suite_html(*measured({"storageClassName": ["slow", "fast"]}, 1, fast_class_twice_as_fast))
    outline = Outline()
    outline.feed(single)
    assert outline.plots == {f"suite-step-{step}": ["scaling"] for step in STEPS}
    assert "significance needs spec.repeat &gt;= 2 on the suite" in single


def _with_memory(runs: list[dict[str, Any]], mib: Callable[[dict[str, Any]], float]) -> None:
    """Give each run's steps a collection: csi-provisioner's peak memory ``mib(run)`` in its second step (the first
    step a little lower), csi-snapshotter's a flat 50 MiB."""
    for run in runs:
        for index, step in enumerate(run["status"]["steps"]):
            peak = mib(run) - (1 if index == 0 else 0)
            step["collection"] = {"start": "s", "end": "e", "values": [
                {"query": "peakMemoryBytes", "labels": {"container": "csi-provisioner"}, "value": peak * 2**20},
                {"query": "peakMemoryBytes", "labels": {"container": "csi-snapshotter"}, "value": 50 * 2**20},
                {"query": "cpuSeconds", "labels": {"container": "csi-provisioner"}, "value": 9.0}]}


def test_a_population_axis_is_a_numeric_axis_with_the_components_memory_per_level() -> None:
    levels = [{"claims": 0}, {"claims": 1000, "snapshots": 1000}, {"claims": 5000, "snapshots": 5000}]
    suite, runs = measured({"population": levels}, 2, lambda cell, round_, step: 10.0)
    level = {"c0": 60.0, "c1": 90.0, "c2": 150.0}
    _with_memory(runs, lambda run: level[run["metadata"]["labels"][CELL_LABEL]] + _round_of_run(run))
    view = view_of(suite, runs)
    assert view.axes == [("population", ["0", "1000", "5000"])]
    assert numeric_axis(view) == "population"
    headers, rows = machinery_table(view) or ([], [])
    assert headers == ["Cell", "population", "csi-provisioner MiB", "csi-snapshotter MiB"]
    # the peak over the steps (the second step's), the median of rounds 1 and 2 (+1 and +2 MiB): +1.5
    assert rows == [["c0", "0", "62", "50"], ["c1", "1000", "92", "50"], ["c2", "5000", "152", "50"]]
    text = render_suite(suite, runs)
    assert "CSI components: peak memory over the run's steps" in text
    cells = suite_json(suite, runs)["cells"]
    assert cells[2]["machineryPeakMiB"] == {"csi-provisioner": 151.5, "csi-snapshotter": 50.0}
    assert runs[0]["spec"]["population"] == {"claims": 0}


def test_no_collection_means_no_machinery_table() -> None:
    suite, runs = measured({"volumes": [10, 100]}, 1, by_volumes)
    assert machinery_table(view_of(suite, runs)) is None
    assert "CSI components" not in render_suite(suite, runs)


def _round_of_run(run: dict[str, Any]) -> float:
    return float(run["metadata"]["labels"][ROUND_LABEL])


def test_the_page_draws_the_components_memory_against_the_level() -> None:
    pytest.importorskip("matplotlib")
    from csibench.report.html import build_suite_html

    levels = [{"claims": 0}, {"claims": 1000, "snapshots": 1000}, {"claims": 5000, "snapshots": 5000}]
    suite, runs = measured({"population": levels}, 1, lambda cell, round_, step: 10.0)
    _with_memory(runs, lambda run: {"c0": 60.0, "c1": 90.0, "c2": 150.0}[run["metadata"]["labels"][CELL_LABEL]])
    page = build_suite_html(suite, runs)
    outline = Outline()
    outline.feed(page)
    assert outline.plots["suite-machinery"] == ["scaling"]
    assert outline.rows["suite-machinery"] == 1 + 3
    assert "population (claims, and as many snapshots)" in page and "csi-provisioner" in page


def test_own_queries_show_their_highest_reading_per_cell_with_each_series_and_unit() -> None:
    """The envelope's own questions (the PV controller's queue, the snapshot-controller's operations in flight):
    per series, the highest reading over the steps, the median over the rounds; the profile's own stay out."""
    levels = [{"claims": 0}, {"claims": 1000, "snapshots": 1000}]
    suite, runs = measured({"population": levels}, 2, lambda cell, round_, step: 10.0)
    depth = {"c0": 10.0, "c1": 900.0}
    _with_memory(runs, lambda run: 60.0)
    for run in runs:
        level = depth[run["metadata"]["labels"][CELL_LABEL]] + _round_of_run(run)
        for index, step in enumerate(run["status"]["steps"]):
            step["collection"]["values"] += [
                {"query": "claimQueue", "labels": {"job": "kube-controller-manager"}, "value": level - index},
                {"query": "apiserverMemory", "labels": {}, "value": 1234567890.0, "unit": "bytes"},
                {"query": "snapshotsInFlight", "labels": {}, "value": 3.0 * index, "unit": "ops"}]
    view = view_of(suite, runs)
    headers, rows = own_queries_table(view.cells, [axis for axis, _ in view.axes]) or ([], [])
    assert headers == ["Cell", "population", "apiserverMemory bytes", "claimQueue{job=kube-controller-manager}",
                       "snapshotsInFlight ops"]
    last = 3.0 * (len(runs[0]["status"]["steps"]) - 1)
    # the first step's reading is the highest (minus index), the median of rounds 1 and 2 (+1 and +2): +1.5
    assert rows == [["c0", "0", "1234567890", "11.5", f"{last:.4g}"], ["c1", "1000", "1234567890", "901.5",
                                                                         f"{last:.4g}"]]
    assert OWN_QUERIES_TITLE in render_suite(suite, runs)
    assert suite_json(suite, runs)["cells"][1]["ownQueryPeaks"] == {
        "apiserverMemory": 1234567890.0, "claimQueue{job=kube-controller-manager}": 901.5, "snapshotsInFlight": last}
    # Drawn against the level: one plot per query, one line per series, a point per cell.
    assert own_query_lines(view.cells, "population") == [
        ("apiserverMemory", "bytes", [("apiserverMemory", [(0.0, 1234567890.0), (1000.0, 1234567890.0)])]),
        ("claimQueue", None, [("job=kube-controller-manager", [(0.0, 11.5), (1000.0, 901.5)])]),
        ("snapshotsInFlight", "ops", [("snapshotsInFlight", [(0.0, last), (1000.0, last)])])]
    pytest.importorskip("matplotlib")
    from csibench.report.html import build_suite_html
    outline = Outline()
    outline.feed(build_suite_html(suite, runs))
    assert outline.plots["suite-own-queries"] == ["scaling"] * 3, outline.plots


def test_a_suite_without_own_queries_has_no_such_table() -> None:
    suite, runs = measured({"volumes": [10, 100]}, 1, by_volumes)
    _with_memory(runs, lambda run: 60.0)
    assert own_queries_table(view_of(suite, runs).cells, ["volumes"]) is None
    assert OWN_QUERIES_TITLE not in render_suite(suite, runs)

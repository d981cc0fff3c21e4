"""``csibench history``: which runs form a series, the sparkline, and the change point (the latest runs against
the ones before) on series built to have one and not to."""

from __future__ import annotations

from typing import Any

from csibench.api.regression import Change
from csibench.report.history import Series, select, sparkline, step_histories, table


def _run(name: str, at: str, create: float, delete: float = 5.0, phase: str = "Succeeded",
         volumes: int = 10) -> dict[str, Any]:
    return {"metadata": {"namespace": "bench", "name": name, "creationTimestamp": at},
            "spec": {"storageClassName": "sim", "volumes": volumes, "steps": ["createVolume", "deleteVolume"]},
            "status": {"phase": phase, "completionTime": at, "steps": [
                {"name": "createVolume", "state": "Succeeded", "throughput": create,
                 "latency": {"p50": 0.1, "p90": 0.2, "p99": 1 / create, "max": 1.0, "mean": 0.1}},
                {"name": "deleteVolume", "state": "Succeeded", "throughput": delete}]}}


def _series(creates: list[float], deletes: list[float] | None = None) -> Series:
    deletes = deletes or [5.0 + 0.1 * (i % 3) for i in range(len(creates))]
    return select([_run(f"r{i}", f"2026-12-0{1 + i // 10}T10:{i % 10:02d}:00Z", c, d)
                   for i, (c, d) in enumerate(zip(creates, deletes, strict=True))])


def test_the_series_is_the_latest_shape_oldest_first_and_says_what_it_left_out() -> None:
    runs = [_run("late", "2026-12-02T00:00:00Z", 2.0), _run("early", "2026-12-01T00:00:00Z", 1.0),
            _run("failed", "2026-12-01T12:00:00Z", 1.0, phase="Failed"),
            _run("bigger", "2026-11-30T00:00:00Z", 1.0, volumes=100)]
    series = select(runs)
    assert [r["metadata"]["name"] for r in series.runs] == ["early", "late"] and series.left_out == 2


def test_sparkline_spans_the_range() -> None:
    assert sparkline([1.0, 2.0, None, 3.0]) == "▁▅ █" and sparkline([2.0, 2.0]) == "▁▁" and sparkline([]) == ""


def test_a_lasting_slowdown_is_a_change_point_and_one_odd_run_is_not() -> None:
    stepped = step_histories(_series([10.0, 10.4, 9.8, 10.1, 9.9, 10.2, 5.1, 4.9, 5.0]))
    create = next(h for h in stepped if h.step == "createVolume")
    delete = next(h for h in stepped if h.step == "deleteVolume")
    assert create.change == Change.REGRESSION and create.ratio is not None and 0.45 < create.ratio < 0.55
    assert delete.change != Change.REGRESSION
    odd = next(h for h in step_histories(_series([10.0, 10.4, 9.8, 10.1, 9.9, 10.2, 10.0, 4.0, 10.1]))
               if h.step == "createVolume")
    assert odd.change in (Change.INCONCLUSIVE, Change.EQUIVALENT)


def test_too_few_runs_are_not_tested_and_the_table_says_so() -> None:
    _, rows, notes = table(_series([10.0, 5.0, 5.1, 4.9]))
    assert rows[0][0] == "Create Volume" and rows[0][-1] == "-"
    assert "too few runs to test (2 needed on each side)" in notes[-1]
    assert notes[0].startswith("4 runs, oldest first: bench/r0, bench/r1")
    _, rows, _ = table(_series([10.0, 10.4, 9.8, 10.1, 9.9, 10.2, 5.1, 4.9, 5.0]))
    assert rows[0][1] == "10 → 5 vol/s" and rows[0][-1].startswith("Regression (0.")


def test_the_html_history_draws_both_curves_per_step() -> None:
    from csibench.report.html import build_history_html

    page = build_history_html(_series([10.0, 10.4, 9.8, 10.1, 9.9, 10.2, 5.1, 4.9, 5.0]))
    assert page.count('<section class="step" id="history-') == 2  # createVolume, deleteVolume
    assert page.count("<svg") == 4 and "Regression (0." in page
    assert "9 runs, oldest first: bench/r0" in page

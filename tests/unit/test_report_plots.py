"""What the HTML report's plots show: the completion latency's tail as far as the data reaches, series drawn over
each other said in the legend, legends beside the data, units and sample counts on every plot."""

from __future__ import annotations

from typing import Any

from csibench.api import histogram
from csibench.report import plots
from csibench.report.html import build_run_html
from tests.support.report_page import coinciding_without_a_note, drawn_series, plot_svgs


def _completions(bins: dict[int, int], label: str = "read") -> plots.Curve:
    count = sum(bins.values())
    return plots.Curve(label, [(ns / 1e6, share) for ns, share in histogram.cumulative(bins)], f"n={count:,} I/Os",
                       count)


def test_the_tail_view_reaches_p99_9_where_the_data_has_it_and_no_further_than_the_count() -> None:
    # 5,000 completions: 4,990 at 250 us, 9 at 2 ms, one at 40 ms: p99.9 is 2 ms, p99.99 is the last one.
    deep = _completions({250_000: 4990, 2_000_000: 9, 40_000_000: 1})
    assert plots.tail_ticks([deep]) == ["p50", "p90", "p99", "p99.9"]
    svg = plots.completion_tail("Random read", [deep])
    assert ">p99.9<" in svg and ">p99<" in svg and "n=5,000 I/Os" in svg
    assert (5000.0, 40.0) in plots.tail_points(deep)  # the slowest I/O is drawn, at the percentile n reaches
    shallow = _completions({250_000: 294, 900_000: 6})  # 300 I/Os: the tail ends at p99.67, short of p99.9
    assert plots.tail_ticks([shallow]) == ["p50", "p90", "p99"]
    assert ">p99.9<" not in plots.completion_tail("Sequential read", [shallow])


def _density_run(same: bool) -> dict[str, Any]:
    rows = []
    for level, ready in ((8, 0.4), (16, 0.7), (32, 1.5)):
        attach = ready if same else ready / 2
        rows.append({"volumesPerNode": level, "node": "node-0", "pods": level, "state": "Succeeded",
                     "latency": {"p50": ready, "p99": ready * 1.5}, "attach": {"p50": attach, "p99": attach * 1.5},
                     "throughput": 10.0})
    return {"metadata": {"namespace": "runs", "name": "dense"}, "spec": {"storageClassName": "sim"},
            "status": {"phase": "Succeeded", "steps": [], "density": rows}}


def test_no_two_drawn_series_are_identical_without_a_note() -> None:
    """The density ramp's ready p50 is its attach p50 when stage, publish and start take no time (the simulated
    kubelet): both lines are drawn and the legend says the second is the first's."""
    page = build_run_html(_density_run(same=True), None)
    [svg] = plot_svgs(page)
    paths = drawn_series(svg)
    assert any(paths.count(path) > 1 for path in paths)  # the checker sees the two lines drawn as one
    assert coinciding_without_a_note(svg) == []
    assert "attach p50, identical to ready p50" in svg and "(n=56 pods over 3 levels)" in svg  # n said once
    apart = plot_svgs(build_run_html(_density_run(same=False), None))[0]
    assert "identical to" not in apart and not any(drawn_series(apart).count(p) > 1 for p in drawn_series(apart))
    labels = plots.legend_labels([plots.Curve("a", [(1.0, 2.0)]), plots.Curve("b", [(1.0, 2.0)]),
                                  plots.Curve("c", [(1.0, 3.0)]), plots.Curve("d", [])])
    assert labels == ["a", "b, identical to a", "c", "d"]


def test_two_iterations_with_the_same_latencies_are_said_identical_in_the_cdf() -> None:
    """A fast array measured in whole milliseconds gives two iterations the very same latencies (it happened to the
    fake's deletions): the second CDF line hides under the first unless the legend says so."""
    same = [0.001, 0.001, 0.003, 0.003]
    svg = plots.latency_cdf("deleteVolume", [plots.Series("iteration 1", same), plots.Series("iteration 2", same[::-1]),
                                             plots.Series("iteration 3", [0.002, 0.004])])
    paths = drawn_series(svg)
    assert any(paths.count(path) > 1 for path in paths)  # drawn over each other
    assert coinciding_without_a_note(svg) == []
    assert "iteration 2 (n=4), identical to iteration 1" in svg and "iteration 3 (n=2)<" in svg


def test_legends_stand_beside_the_data_never_over_it() -> None:
    """The rate levels' plot ("latency under load") had its legend over the sequential-read p99 point."""
    curves = [plots.Curve("Sequential read read", [(3000.0, 1.0), (6000.0, 1.2), (12000.0, 9.0)], "n=3 fio runs"),
              plots.Curve("Random read read", [(800.0, 0.5), (1600.0, 0.6), (3200.0, 4.0)], "n=3 fio runs")]
    figure = plots.draw_lines(("Latency under load", "IOPS achieved", "clat p99 (ms)"), curves, steps=False)
    axes = figure.axes[0]
    figure.canvas.draw()
    legend, data = axes.get_legend().get_window_extent(), axes.get_window_extent()
    assert legend.x0 >= data.x1, (legend, data)


def test_every_plot_says_its_units_and_sample_count_and_a_single_point_why_it_is_no_curve() -> None:
    one = {**_density_run(same=False)}
    one["status"] = {**one["status"], "density": one["status"]["density"][:1]}
    [svg] = plot_svgs(build_run_html(one, None))
    assert "one point per line: a single volumes per node was measured" in svg and "n=8 pods over 1 levels" in svg
    svg = plots.timeline("Create volume", [plots.Span(0.0, 0.1, True), plots.Span(0.01, 0.2, True)])
    assert "(n=2 objects)" in svg and "seconds since" in svg

"""The HTML report's plots as inline SVG: per-object latency distributions, step timelines, curves and the data
path's completion-latency distributions (matplotlib).

matplotlib is an optional extra (``csibench[report]``): the operator never draws, so its image does not carry
it, and this module imports it only when a plot is asked for. Figures use the non-interactive SVG backend with
a fixed hash salt and no date, so the same report renders the same bytes; text stays text (``svg.fonttype:
none``), which keeps a 10,000-object timeline small and lets the browser pick the font.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MISSING = ("the HTML report draws its plots with matplotlib, an optional extra: "
           "pip install 'csibench[report]'")


class PlottingUnavailable(RuntimeError):
    """matplotlib is not installed; the message says how to get it."""


@dataclass(frozen=True)
class Series:
    label: str
    latencies_s: list[float]  # successful objects only


@dataclass(frozen=True)
class Span:
    start_s: float  # submitted, from the step's start
    end_s: float | None  # terminal event; None: never terminal
    ok: bool


@dataclass(frozen=True)
class Curve:
    label: str
    points: list[tuple[float, float]]  # (x, y), in x order
    samples: str = ""  # what the line is drawn from, said in its legend: "n=40 pods", "n=12,000 I/Os"
    count: int | None = None  # a distribution's sample count: how far into the tail it reaches


def shared_samples(curves: Sequence[Curve]) -> str:
    """The sample count every drawn line shares (said once, in the title, rather than in each legend entry)."""
    found = {item.samples for item in curves if item.points}
    return found.pop() if len(found) == 1 and len([c for c in curves if c.points]) > 1 else ""


def legend_labels(curves: Sequence[Curve]) -> list[str]:
    """Each curve's legend entry: its label, its sample count (unless all lines share it), and, where its points
    are exactly an earlier curve's (the density ramp's ready p50 can be its attach p50), that it is drawn under
    that one."""
    labels = []
    shared = shared_samples(curves)
    for index, item in enumerate(curves):
        label = f"{item.label} ({item.samples})" if item.samples and not shared else item.label
        same = next((other for other in curves[:index] if other.points and other.points == item.points), None)
        labels.append(f"{label}, identical to {same.label}" if same is not None and item.points else label)
    # A label is text from outside (a component's name from Prometheus): never matplotlib's math ("$...$").
    return [label.replace("$", r"\$") for label in labels]


def _coincides(curves: Sequence[Curve], index: int) -> bool:
    return bool(curves[index].points) and any(o.points == curves[index].points for o in curves[:index])


def _legend_outside(axes: Any) -> None:
    """Legends go right of the plot, never over its data (bbox_inches="tight" keeps them in the picture)."""
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7, frameon=False)


ONE_POINT = "one point per line: a single {x} was measured, so there is no curve to draw"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:
        raise PlottingUnavailable(MISSING) from error
    matplotlib.use("svg", force=True)
    matplotlib.rcParams.update({"svg.hashsalt": "csibench", "svg.fonttype": "none", "font.size": 9,
                                "axes.spines.top": False, "axes.spines.right": False})
    import matplotlib.pyplot as plt
    return plt


def _svg(plt: Any, figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.DOTALL)  # RDF that names the tool


def latency_cdf(title: str, series: Sequence[Series]) -> str:
    """Share of objects done within x seconds, one line per series (an iteration, or a run in a comparison)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(5.2, 3.0))
    drawn: list[tuple[str, list[float]]] = []
    for item in series:
        values = sorted(item.latencies_s)
        if not values:
            continue
        shares = [(index + 1) / len(values) for index in range(len(values))]
        label = f"{item.label} (n={len(values)})"
        # Two iterations can measure the very same latencies (whole milliseconds, a fast array): the second line
        # hides under the first, so it is dashed and its legend says whose it is, as the other plots do.
        same = next((earlier for earlier, seen in drawn if seen == values), None)
        style = {"linestyle": "--"} if same is not None else {}
        axes.step(values, shares, where="post", linewidth=1.4,
                  label=f"{label}, identical to {same}" if same is not None else label, **style)
        drawn.append((item.label, values))
    axes.set_title(f"{title}: per-object latency")
    axes.set_xlabel("seconds from request to terminal event")
    axes.set_ylabel("share of objects done")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    if any(item.latencies_s for item in series):
        _legend_outside(axes)
    return _svg(plt, figure)


def draw_lines(labels: tuple[str, str, str], curves: Sequence[Curve], steps: bool,
               shaded: Sequence[tuple[str, float, float]] = ()) -> Any:
    """The figure of ``_lines`` (tests measure its legend against its data); ``shaded``: (label, from x, to x),
    a span shaded behind the lines each (the churn's tail)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(5.2, 3.0))
    names = legend_labels(curves)
    for index, item in enumerate(curves):
        if item.points:
            xs, ys = [x for x, _ in item.points], [y for _, y in item.points]
            # A line with an earlier one's very points is drawn dashed with hollow, larger markers, so both show.
            again = {"linestyle": "--", "markerfacecolor": "none", "markersize": 9} if _coincides(curves, index) else {}
            if steps:
                axes.step(xs, ys, where="post", linewidth=1.4, label=names[index],
                          **{k: v for k, v in again.items() if k == "linestyle"})
            else:
                axes.plot(xs, ys, marker="o", linewidth=1.4, label=names[index], **again)
    title, x_label, y_label = labels
    shared = shared_samples(curves)
    axes.set_title(f"{title} ({shared})" if shared else title)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.set_ylim(*((0, 1.02) if steps else (0, None)))
    axes.grid(alpha=0.3)
    if any(item.points for item in curves):
        for label, start, end in shaded:
            axes.axvspan(start, end, color="#888888", alpha=0.15, linewidth=0, label=label)
        if steps:
            axes.set_xscale("log")
        elif max(len(item.points) for item in curves) == 1:
            axes.text(0.5, 0.5, ONE_POINT.format(x=x_label), transform=axes.transAxes, ha="center", va="center",
                      fontsize=7, color="#666666", wrap=True)
        _legend_outside(axes)
    return figure


def _lines(labels: tuple[str, str, str], curves: Sequence[Curve], steps: bool,
           shaded: Sequence[tuple[str, float, float]] = ()) -> str:
    """One line per curve, titled and labelled (title, x, y): drawn as steps (a distribution, on a log x axis, its
    share axis 0 to 1) or as points joined (a curve from 0 up)."""
    figure = draw_lines(labels, curves, steps, shaded)
    return _svg(_pyplot(), figure)


def curve(title: str, x_label: str, y_label: str, curves: Sequence[Curve],
          shaded: Sequence[tuple[str, float, float]] = ()) -> str:
    """Lines with markers, one per curve (the density ramp: seconds against volumes per node; the churn's windows
    over time, its tail shaded)."""
    return _lines((title, x_label, y_label), curves, steps=False, shaded=shaded)


def completion_cdf(title: str, curves: Sequence[Curve]) -> str:
    """Share of I/O completions within x ms, one line per curve (a direction of a data-path row, from the
    pods' fio histograms merged); a log x axis, so the tail stays readable."""
    return _lines((f"{title}: completion latency", "milliseconds (fio clat, log scale)", "share of I/Os completed"),
                  curves, steps=True)


TAIL_TICKS = ((2.0, "p50"), (10.0, "p90"), (100.0, "p99"), (1000.0, "p99.9"), (10000.0, "p99.99"),
              (100000.0, "p99.999"))


def tail_points(item: Curve) -> list[tuple[float, float]]:
    """A cumulative distribution (x, share) as the tail view draws it: (1 / (1 - percentile), x). The last
    completion sits at the percentile its count reaches, 1 - 1/n (n=1,000: p99.9); without a count it is left out.
    Drawn as steps to the left: every percentile up to a bin's share reads that bin's latency, as fio reads it."""
    points = [(1.0, item.points[0][0])] if item.points else []  # from p0: the fastest bin
    for x, share in item.points:
        if share < 1.0:
            points.append((1.0 / (1.0 - share), x))
        elif item.count:
            points.append((float(item.count), x))
    return points


def tail_ticks(curves: Sequence[Curve]) -> list[str]:
    """The percentile ticks the tail view's axis shows: up to the deepest percentile any line reaches."""
    reach = max((x for item in curves for x, _ in tail_points(item)), default=1.0)
    return [label for at, label in TAIL_TICKS if at <= reach * 1.0001]


def completion_tail(title: str, curves: Sequence[Curve]) -> str:
    """The same completions as ``completion_cdf`` read as fio and latency tools print them: latency against
    percentile, the percentile axis stretched by 1 / (1 - p) so p99, p99.9 and p99.99 each get a decade."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(5.2, 3.0))
    names = legend_labels(curves)
    drawn = False
    for index, item in enumerate(curves):
        points = tail_points(item)
        if points:
            drawn = True
            style = {"linestyle": "--"} if _coincides(curves, index) else {}
            axes.step([x for x, _ in points], [y for _, y in points], where="pre", linewidth=1.4,
                      label=names[index], **style)
    shared = shared_samples(curves)
    axes.set_title(f"{title}: completion latency, tail" + (f" ({shared})" if shared else ""))
    axes.set_xlabel("percentile of I/Os (axis: 1 / (1 - p), log)")
    axes.set_ylabel("milliseconds (fio clat, log scale)")
    axes.grid(alpha=0.3, which="both")
    if drawn:
        axes.set_xscale("log")
        axes.set_yscale("log")
        reach = max(x for item in curves for x, _ in tail_points(item))
        axes.set_xlim(1.0, max(reach * 1.3, 2.5))
        shown = [(at, label) for at, label in TAIL_TICKS if at <= reach * 1.0001]
        axes.set_xticks([at for at, _ in shown], [label for _, label in shown])
        axes.xaxis.set_minor_locator(_null_locator())
        _legend_outside(axes)
    return _svg(plt, figure)


def _null_locator() -> Any:
    from matplotlib.ticker import NullLocator
    return NullLocator()


def timeline(title: str, spans: Sequence[Span],
             marks: Sequence[tuple[str, float, float | None]] = ()) -> str:
    """One horizontal line per object, from the request leaving to its terminal event: stalls, throttling and
    stragglers show as steps and gaps. ``marks``: disruptions, (label, injected, recovered or None), shaded from
    their injection to their recovery (a line at the injection when it never recovered)."""
    plt = _pyplot()
    from matplotlib.collections import LineCollection

    figure, axes = plt.subplots(figsize=(5.2, 3.0))
    done = [((s.start_s, i), (s.end_s, i)) for i, s in enumerate(spans) if s.end_s is not None and s.ok]
    failed = [((s.start_s, i), (s.end_s, i)) for i, s in enumerate(spans) if s.end_s is not None and not s.ok]
    width = 1.0 if len(spans) < 300 else 0.5
    axes.add_collection(LineCollection(done, colors="#1f77b4", linewidths=width, label="done"))
    if failed:
        axes.add_collection(LineCollection(failed, colors="#d62728", linewidths=width, label="failed"))
    starts = [s.start_s for s in spans]
    axes.scatter(starts, range(len(spans)), s=2, color="#555555", label="request sent", zorder=3)
    ends = [s.end_s for s in spans if s.end_s is not None]
    for label, injected, recovered in marks:
        if recovered is None:
            axes.axvline(injected, color="#ff7f0e", linewidth=1.2, label=f"{label} (not recovered)")
        else:
            axes.axvspan(injected, recovered, color="#ff7f0e", alpha=0.25, label=f"{label}")
        ends.append(recovered if recovered is not None else injected)
    axes.set_xlim(0, max(ends + starts + [0.001]) * 1.03)
    axes.set_ylim(-1, max(len(spans), 1))
    axes.invert_yaxis()
    axes.set_title(f"{title}: timeline (n={len(spans)} objects)")
    axes.set_xlabel("seconds since the step's clock started")
    axes.set_ylabel("object (index)")
    axes.grid(alpha=0.3)
    _legend_outside(axes)
    return _svg(plt, figure)

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
    for item in series:
        values = sorted(item.latencies_s)
        if not values:
            continue
        shares = [(index + 1) / len(values) for index in range(len(values))]
        axes.step(values, shares, where="post", label=f"{item.label} (n={len(values)})", linewidth=1.4)
    axes.set_title(f"{title}: per-object latency")
    axes.set_xlabel("seconds from request to terminal event")
    axes.set_ylabel("share of objects done")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    if any(item.latencies_s for item in series):
        axes.legend(loc="lower right", fontsize=7)
    return _svg(plt, figure)


def _lines(labels: tuple[str, str, str], curves: Sequence[Curve], steps: bool) -> str:
    """One line per curve, titled and labelled (title, x, y): drawn as steps (a distribution, on a log x axis, its
    share axis 0 to 1) or as points joined (a curve from 0 up)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(5.2, 3.0))
    for item in curves:
        if item.points:
            xs, ys = [x for x, _ in item.points], [y for _, y in item.points]
            if steps:
                axes.step(xs, ys, where="post", linewidth=1.4, label=item.label)
            else:
                axes.plot(xs, ys, marker="o", linewidth=1.4, label=item.label)
    title, x_label, y_label = labels
    axes.set_title(title)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.set_ylim(*((0, 1.02) if steps else (0, None)))
    axes.grid(alpha=0.3)
    if any(item.points for item in curves):
        if steps:
            axes.set_xscale("log")
        axes.legend(loc="lower right" if steps else "upper left", fontsize=7)
    return _svg(plt, figure)


def curve(title: str, x_label: str, y_label: str, curves: Sequence[Curve]) -> str:
    """Lines with markers, one per curve (the density ramp: seconds against volumes per node)."""
    return _lines((title, x_label, y_label), curves, steps=False)


def completion_cdf(title: str, curves: Sequence[Curve]) -> str:
    """Share of I/O completions within x ms, one line per curve (a direction of a data-path row, from the
    pods' fio histograms merged); a log x axis, so the tail stays readable."""
    return _lines((f"{title}: completion latency", "milliseconds (fio clat, log scale)", "share of I/Os completed"),
                  curves, steps=True)


def timeline(title: str, spans: Sequence[Span]) -> str:
    """One horizontal line per object, from the request leaving to its terminal event: stalls, throttling and
    stragglers show as steps and gaps."""
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
    axes.set_xlim(0, max(ends + starts + [0.001]) * 1.03)
    axes.set_ylim(-1, max(len(spans), 1))
    axes.invert_yaxis()
    axes.set_title(f"{title}: timeline")
    axes.set_xlabel("seconds since the step's clock started")
    axes.set_ylabel("object (index)")
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize=7)
    return _svg(plt, figure)

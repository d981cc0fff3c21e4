"""One self-contained HTML page per run (or per comparison, history or suite), rendered from status
and the stored report.

Nothing is fetched when the page is viewed: styles are inline and every plot is inline SVG (``plots``). The page
holds the step table (medians over iterations for a repeated run) with its latency parts' legend, where each pod
moved (moveVolume), the run's tables of their own in the text report's order when it has their rows
(``tables.py``: density with its curve, the churn's windows with their curves over time and its drift, the
data path's with its rate levels' curve, the database's, the CSI machinery's cost, spec.collect's readings, the
thresholds), the data path's completion latency per workload, per
step a latency distribution over all objects (one line per iteration, or per run in a comparison) and a timeline
of the step (each object from its request to its terminal event, so stalls and throttling show), the iterations,
the environment with the CSI machinery and the preflight findings. A
suite's page holds its runs, per step the scaling table and curve over its cells, and its cells compared
(``suite``). It is built from what is stored, so any finished run can be rendered at any time; nothing is stored
beside the run. Builders are pure apart from drawing.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from csibench.api import histogram
from csibench.api.models import WORKLOAD_TITLES
from csibench.api.stats import ALPHA
from csibench.api.steps import title_and_unit
from csibench.api.stored_report import iteration_records
from csibench.report import churn, cost, datapath, density, disruptions, history, parts, plots, tables
from csibench.report import suite as suites
from csibench.report.compare import comparison_rows
from csibench.report.machinery import finding_lines, machinery_lines
from csibench.report.render import context_of, step_table
from csibench.report.suite_queries import TITLE as OWN_QUERIES_TITLE
from csibench.report.suite_queries import own_queries_table, own_query_lines
from csibench.report.tables import comparison_tables

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; } .plot { flex: 0 0 auto; }
.plot svg { max-width: 640px; height: auto; } .muted { color: #666; font-size: 0.85em; }
.warning { color: #9a4d00; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def _table(headers: list[str], rows: list[list[str]], css: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>\n" + "\n".join(body)
            + "\n</body></html>\n")


# -- the data behind the plots (pure) -----------------------------------------------------------------------
def steps_by_iteration(report: dict[str, Any] | None) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Per step name, in plan order: (iteration, its stored record) for every iteration that ran it."""
    found: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for record in iteration_records(report or {}):
        for step in record["steps"]:
            found.setdefault(str(step["status"]["name"]), []).append((int(record["iteration"]), step))
    return found


def latencies(step: dict[str, Any]) -> list[float]:
    """Seconds, successful objects only."""
    return [ms / 1000 for ms, result in zip(step["latencyMs"], step["result"], strict=True)
            if result == "ok" and ms is not None]


def spans(step: dict[str, Any]) -> list[plots.Span]:
    """Each submitted object: when its request left and when it became terminal, from the step's start."""
    found = []
    for sent, latency, result in zip(step["submitMs"], step["latencyMs"], step["result"], strict=True):
        if sent is None or result == "Skipped":
            continue
        end = (sent + latency) / 1000 if latency is not None and result != "Pending" else None
        found.append(plots.Span(sent / 1000, end, result == "ok"))
    return found


# -- one run ----------------------------------------------------------------------------------------------
def _step_section(name: str, runs: list[tuple[int, dict[str, Any]]],
                  marks: list[tuple[str, float, float | None]] | None = None) -> str:
    title, _ = title_and_unit(name)
    many = len(runs) > 1
    series = [plots.Series(f"iteration {n}" if many else "all objects", latencies(step)) for n, step in runs]
    shown, last = runs[-1]
    timeline = plots.timeline(title + (f" (iteration {shown})" if many else ""), spans(last), marks or [])
    return (f'<section class="step" id="step-{_e(name)}"><h2>{_e(title)}</h2><div class="plots">'
            f'<div class="plot cdf">{plots.latency_cdf(title, series)}</div>'
            f'<div class="plot timeline">{timeline}</div></div></section>')


def _iterations_section(report: dict[str, Any] | None) -> str:
    records = iteration_records(report or {})
    if len(records) < 2:
        return ""
    rows = []
    for record in records:
        times = "; ".join(f"{title_and_unit(s['status']['name'])[0]} {s['status'].get('durationSeconds', '-')}s"
                          for s in record["steps"])
        rows.append([str(record["iteration"]), str(record.get("state", "running")), record.get("message") or "",
                     times])
    return "<h2>Iterations</h2>" + _table(["Iteration", "State", "Failure", "Step times"], rows, "iterations")


def _environment_section(run: dict[str, Any], report: dict[str, Any] | None) -> str:
    status = run.get("status") or {}
    environment = status.get("environment") or (report or {}).get("environment") or {}
    facts = [[key, str(environment.get(key, "-"))] for key in ("serverVersion", "provisioner", "volumeBindingMode",
                                                               "nodeCount", "schedulableNodes")]
    facts.append(["storageClassParameters", ", ".join(f"{k}={v}" for k, v in
                                                      (environment.get("storageClassParameters") or {}).items())])
    parts = ["<h2>Environment</h2>", _table(["Fact", "Value"], facts, "environment")]
    machinery = environment.get("machinery") or {}
    components = machinery.get("components") or []
    if components:
        rows = [[c.get("kind", ""), f"{c.get('namespace', '')}/{c.get('pod', '')}", c.get("version") or "?",
                 " ".join(f"--{k}={v}" for k, v in (c.get("flags") or {}).items()),
                 " ".join(f"--{k}={v}" for k, v in (c.get("defaults") or {}).items())] for c in components]
        parts.append(_table(["Component", "Pod", "Version", "Flags set", "Upstream defaults in force"], rows,
                            "machinery"))
    parts += [f'<p class="muted">{_e(line)}</p>' for line in machinery_lines(environment)]
    findings = (report or {}).get("preflight") or status.get("preflight") or []
    parts.append("<h2>Preflight</h2>")
    parts += [f'<p class="{"warning" if f.get("severity") == "Warning" else "muted"}">{_e(line)}</p>'
              for f, line in zip(findings, finding_lines(findings), strict=True)] or \
        ['<p class="muted">no finding</p>']
    return "\n".join(parts)


def _density_plot(curves: list[plots.Curve]) -> list[str]:
    """The density table's curve: time to Ready (p50, p99) and attach (p50) against volumes per node."""
    if not any(curve.points for curve in curves):
        return []
    drawn = plots.curve("Attach as a node fills", "volumes per node", "seconds", curves)
    return [f'<div class="plots"><div class="plot density">{drawn}</div></div>']


def _density_curves(run: dict[str, Any], label: str = "") -> list[plots.Curve]:
    rows = [row for row in density.rows_of(run) if row.get("latency")]
    prefix = f"{label} " if label else ""
    pods = f"n={sum(int(row.get('pods') or 0) for row in rows)} pods over {len(rows)} levels"
    return [plots.Curve(f"{prefix}ready p50", [(row["volumesPerNode"], row["latency"]["p50"]) for row in rows],
                        pods),
            plots.Curve(f"{prefix}ready p99", [(row["volumesPerNode"], row["latency"]["p99"]) for row in rows],
                        pods),
            plots.Curve(f"{prefix}attach p50", [(row["volumesPerNode"], row["attach"]["p50"]) for row in rows
                                                 if row.get("attach")], pods)]


CHURN_X = "window end (seconds after the step's start)"
CHURN_TAIL = "tail (after durationSeconds)"


def _windows(label: str, points: list[tuple[float, float]]) -> plots.Curve:
    return plots.Curve(label, points, f"n={len(points)} windows")


def churn_curves(run: dict[str, Any]) -> list[tuple[str, str, str, list[plots.Curve]]]:
    """The churn's plots over time, each (class, title, y label, curves): per phase its throughput and its p99
    latency, the leaks total and each CSI component's peak memory, one point per window at the window's end."""
    return [("churn-throughput", "Churn: throughput per phase", "completed per second",
             [_windows(phase, points) for phase, points in churn.phase_points(run, "throughput")]),
            ("churn-latency", "Churn: p99 latency per phase", "seconds (p99 of the window)",
             [_windows(phase, points) for phase, points in churn.phase_points(run, "p99")]),
            ("churn-leaks", "Churn: left behind", "volumes + attachments + Released PVs",
             [_windows("leaks total", churn.leak_points(run))]),
            ("churn-memory", "Churn: CSI components' peak memory", "MiB (peak in the window)",
             [_windows(component, points) for component, points in churn.memory_points(run)])]


def _churn_plots(run: dict[str, Any]) -> list[str]:
    """Beside the churn's windows: its curves over time (the tail shaded) and its windows' messages."""
    tail = churn.tail_span(run)
    shaded = [(CHURN_TAIL, *tail)] if tail is not None else []
    drawn = [f'<div class="plot {css}">{plots.curve(title, CHURN_X, y_label, curves, shaded)}</div>'
             for css, title, y_label, curves in churn_curves(run) if any(c.points for c in curves)]
    return ([f'<div class="plots">{"".join(drawn)}</div>'] if drawn else []) + \
        [f'<p class="muted">{_e(line)}</p>' for line in churn.notes(run)]


def _levels_plot(run: dict[str, Any]) -> list[str]:
    """Latency under load: p99 against achieved IOPS per workload and direction, beside the rate levels' table."""
    curves = [plots.Curve(label, points, f"n={len(points)} fio runs") for label, points in datapath.level_curves(run)]
    drawn = plots.curve("Latency under load", "IOPS achieved", "clat p99 (ms)", curves)
    return [f'<div class="plots"><div class="plot levels">{drawn}</div></div>']


def _machinery_summary(run: dict[str, Any]) -> list[str]:
    return [f'<p class="muted">{_e(line)}</p>' for line in cost.summary_lines(run)]


# What the page draws or says beside a table of its own (``tables.py``), by the table's class.
BESIDE: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "density": lambda run: _density_plot(_density_curves(run)),
    "churn": _churn_plots,
    "datapath-levels": _levels_plot,
    "machinery-cost": _machinery_summary,
}


def _own_tables(run: dict[str, Any]) -> list[str]:
    """The run's tables of their own, in the text report's order (``tables.py``), each with what it draws."""
    return [part for entry, title, table in tables.run_tables(run)
            for part in (f"<h2>{_e(title)}</h2>", _table(*table, entry.css),
                         *(BESIDE[entry.css](run) if entry.css in BESIDE else []))]


NODE_LINES = 8  # nodes up to which a workload's completion CDF draws a line per node beside the whole row's


def _completion_section(by_step: dict[str, list[tuple[int, dict[str, Any]]]]) -> list[str]:
    """Per data-path workload, the distribution of every I/O completion (read and write), from the pods' fio
    histograms merged: the row's percentiles are points on these lines."""
    runs = by_step.get("dataPath") or []
    if not runs:
        return []
    record = runs[-1][1]
    workloads = datapath.merged_histograms(record)

    def curve(label: str, bins: histogram.Histogram) -> plots.Curve:
        count = sum(bins.values())
        return plots.Curve(label, [(ns / 1e6, share) for ns, share in histogram.cumulative(bins)],
                           f"n={count:,} I/Os", count)
    drawn = []
    for name, directions in workloads.items():
        nodes = datapath.node_histograms(record, name)
        per_node = [curve(f"{node} {direction}", bins) for node, found in nodes.items()
                    for direction, bins in found.items()] if 1 < len(nodes) <= NODE_LINES else []
        curves = [curve(f"all {direction}" if per_node else direction, bins)
                  for direction, bins in directions.items()] + per_node
        title = WORKLOAD_TITLES.get(name, name)
        drawn.append(f'<div class="plot completion">{plots.completion_cdf(title, curves)}</div>'
                     f'<div class="plot completion-tail">{plots.completion_tail(title, curves)}</div>')
    if not drawn:
        return []
    return ["<h2>Data path: completion latency</h2>",
            f'<p class="muted">{_e(TAIL_NOTE)}</p>',
            '<div class="plots">' + "".join(drawn) + "</div>"]


TAIL_NOTE = ("Per workload, the distribution of every I/O completion (fio's histograms of all pods merged; n is the "
             "I/Os counted) twice: as a CDF, and as its tail, latency against percentile with p90, p99, p99.9 and "
             "p99.99 a decade apart each, drawn as far as the count reaches (n=1,000 I/Os reach p99.9).")


def build_run_html(run: dict[str, Any], report: dict[str, Any] | None) -> str:
    meta = run.get("metadata") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    context = context_of(run)  # the machinery and the findings have their own sections below
    headers, rows = step_table(run)
    body = [f"<h1>{_e(context.title)}</h1>",
            *[f'<p class="muted">{_e(line)}</p>' for line in [*context.facts, *context.iterations]],
            "<h2>Steps</h2>", _table(headers, rows, "steps"),
            *[f'<p class="muted parts">{_e(line)}</p>' for line in parts.legend_lines(run)],
            *(["<h2>Where each pod moved</h2>", _table(*moved, "moves")]
              if (moved := parts.notes_table(report)) is not None else []),
            *_own_tables(run),
            *[f'<p class="warning">{_e(line)}</p>' for line in cost.finding_lines(run)],
            *[f'<p class="muted">{_e(line)}</p>' for line in [*context.notes, *context.tail]]]
    by_step = steps_by_iteration(report)
    body += _completion_section(by_step)
    if by_step:
        body += [_step_section(step, runs, disruptions.marks(run, step)) for step, runs in by_step.items()]
    else:
        body.append('<p class="warning">no stored report: per-object plots need status.reportConfigMap</p>')
    body += [_iterations_section(report), _environment_section(run, report)]
    return _page(f"csibench {name}", body)


# -- two runs ---------------------------------------------------------------------------------------------
def build_compare_html(run_a: dict[str, Any], report_a: dict[str, Any] | None, run_b: dict[str, Any],
                       report_b: dict[str, Any] | None) -> str:
    """The comparison table (with significance) and, per shared step, both runs' latency distributions
    overlaid (every iteration's objects pooled per run)."""
    headers, rows, notes = comparison_rows(run_a, run_b)
    names = ["/".join(str((r.get("metadata") or {}).get(k, "")) for k in ("namespace", "name"))
             for r in (run_a, run_b)]
    body = [f"<h1>csibench compare: A {_e(names[0])} vs B {_e(names[1])}</h1>", _table(headers, rows, "compare"),
            *[part for entry, table, note in comparison_tables(run_a, run_b)
              for part in (f"<h2>{_e(entry.title)}</h2>", _table(*table, entry.css),
                           *(_density_plot([c for c in _density_curves(run_a, "A") + _density_curves(run_b, "B")
                                            if "p99" not in c.label]) if entry.css == "density" else []),
                           *([f'<p class="muted">{_e(note)}</p>'] if note else []))],
            *[f'<p class="muted">{_e(line)}</p>' for line in notes]]
    steps_a, steps_b = steps_by_iteration(report_a), steps_by_iteration(report_b)
    for step in [s for s in steps_a if s in steps_b]:
        title, _ = title_and_unit(step)
        series = [plots.Series(f"A {names[0]}", [x for _, r in steps_a[step] for x in latencies(r)]),
                  plots.Series(f"B {names[1]}", [x for _, r in steps_b[step] for x in latencies(r)])]
        body.append(f'<section class="step" id="step-{_e(step)}"><h2>{_e(title)}</h2><div class="plots">'
                    f'<div class="plot cdf">{plots.latency_cdf(title, series)}</div></div></section>')
    return _page(f"csibench compare {names[0]} {names[1]}", body)


# -- a series of runs ---------------------------------------------------------------------------------------
def build_history_html(series: history.Series, window: int = 3, threshold: float = 0.10) -> str:
    """The history table and, per step, its throughput and p99 over the runs (x: the run's place, oldest 1)."""
    headers, rows, notes = history.table(series, window, threshold)
    body = ["<h1>csibench history</h1>", _table(headers, rows, "history"),
            *[f'<p class="muted">{_e(line)}</p>' for line in notes]]
    for item in history.step_histories(series, window, threshold):
        title, unit = title_and_unit(item.step)
        runs = [(float(i + 1), v) for i, v in enumerate(item.throughputs) if v is not None]
        throughput = plots.Curve("throughput", runs, f"n={len(runs)} runs")
        tails = [(float(i + 1), v) for i, v in enumerate(item.p99s) if v is not None]
        p99 = plots.Curve("p99", tails, f"n={len(tails)} runs")
        body.append(f'<section class="step" id="history-{_e(item.step)}"><h2>{_e(title)}</h2><div class="plots">'
                    f'<div class="plot">{plots.curve(title, "run (oldest first)", f"{unit}/s", [throughput])}</div>'
                    f'<div class="plot">{plots.curve(title, "run (oldest first)", "p99 s", [p99])}</div>'
                    "</div></section>")
    return _page("csibench history", body)


# -- a suite ----------------------------------------------------------------------------------------------------
def build_suite_html(suite: dict[str, Any], runs: list[dict[str, Any]],
                     max_regression_percent: float = suites.DEFAULT_MAX_REGRESSION_PERCENT,
                     alpha: float = ALPHA) -> str:
    """The suite's runs, per step its scaling table and the curve of its median throughput (against the first
    numeric axis, one line per combination of the other axes that vary; over the cells when no axis is
    numeric), and the cells compared along each axis (``report/suite.py``)."""
    view = suites.view_of(suite, runs)
    comparisons = suites.comparisons_of(view, max_regression_percent, alpha)
    header = suites.header_lines(view)
    body = [f"<h1>{_e(header[0])}</h1>", *[f'<p class="muted">{_e(line)}</p>' for line in header[1:]],
            "<h2>Runs</h2>", _table(*suites.runs_table(view), "suite-runs")]
    for step in suites.scaling_steps(view):
        title, unit = title_and_unit(step)
        x_label, lines = suites.scaling_lines(view, step)
        curves = [plots.Curve(label, points, f"n={len(points)} cells") for label, points in lines]
        drawn = (f'<div class="plots"><div class="plot scaling">'
                 f'{plots.curve(f"{title}: scaling", x_label, f"{unit}/s (median over rounds)", curves)}</div></div>'
                 if any(c.points for c in curves) else '<p class="muted">not measured yet</p>')
        body.append(f'<section class="step" id="suite-step-{_e(step)}"><h2>{_e(title)}</h2>'
                    f"{_table(*suites.scaling_table(view, step), 'scaling')}{drawn}</section>")
    machinery = suites.machinery_table(view)
    if machinery is not None:
        drawn_memory = suites.machinery_lines(view)
        plot = "" if drawn_memory is None else (
            '<div class="plots"><div class="plot scaling">' + plots.curve(
                "CSI components: peak memory", drawn_memory[0], "MiB (median over rounds)",
                [plots.Curve(label, points, f"n={len(points)} cells") for label, points in drawn_memory[1]])
            + "</div></div>")
        body += ['<section class="step" id="suite-machinery"><h2>CSI components: peak memory over the steps</h2>'
                 f"{_table(*machinery, 'suite-machinery')}{plot}</section>"]
    own = own_queries_table(view.cells, [axis for axis, _ in view.axes])
    if own is not None:
        axis = suites.numeric_axis(view)
        drawn_queries = [] if axis is None else [
            '<div class="plot scaling">' + plots.curve(
                query, suites.NUMERIC_AXES[axis], f"{unit or 'reading'} (highest over the steps, median over rounds)",
                [plots.Curve(label, points, f"n={len(points)} cells") for label, points in lines]) + "</div>"
            for query, unit, lines in own_query_lines(view.cells, axis)]
        queries_plot = f'<div class="plots">{"".join(drawn_queries)}</div>' if drawn_queries else ""
        body += [f'<section class="step" id="suite-own-queries"><h2>{_e(OWN_QUERIES_TITLE)}</h2>'
                 f"{_table(*own, 'suite-own-queries')}{queries_plot}</section>"]
    if comparisons:
        body += ["<h2>Comparisons</h2>", _table(*suites.comparison_table(comparisons), "suite-compare")]
    notes = [*suites.comparison_notes(view, comparisons, max_regression_percent, alpha), *suites.run_notes(view)]
    body += [f'<p class="muted">{_e(line)}</p>' for line in notes]
    return _page(f"csibench suite {view.name}", body)

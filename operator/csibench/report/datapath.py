"""The data-path table, shaped like the published vendor tables (workload, block, pattern, MiB/s), plus IOPS,
completion latency per direction (a 50/50 row's reads and writes are never mixed in one figure), the volumes and
the jobs on each behind a row and the spread across volumes; and two runs' data paths side by side (pure, over
the run's status as the API returns it).
"""

from __future__ import annotations

from typing import Any

from csibench.api import histogram
from csibench.api.models import WORKLOAD_TITLES
from csibench.api.skew import is_skewed, skew_message
from csibench.api.stats import ALPHA, compare_samples, significance_cell
from csibench.api.text import human_duration, seconds_text

HEADERS = ["Workload", "Block", "Pattern", "Read MiB/s", "Write MiB/s", "Read IOPS", "Write IOPS",
           "Read clat p50/p99/p99.9 ms", "Write clat p50/p99/p99.9 ms", "Volumes × jobs each", "Per volume MiB/s",
           "Time", "State"]
NODE_HEADERS = ["Workload", "Node", "Volumes", "Read MiB/s", "Write MiB/s", "Read IOPS", "Write IOPS",
                "Read clat p99 ms", "Write clat p99 ms"]
COMPARE_HEADERS = ["Workload", "A: MiB/s · IOPS", "B: MiB/s · IOPS", "B vs A (MiB/s)"]
PATTERNS = {"read": "100% read, sequential", "write": "100% write, sequential", "randread": "100% read, random",
            "randwrite": "100% write, random"}


def rows_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("status") or {}).get("dataPath") or [])


def title(row: dict[str, Any]) -> str:
    return str(WORKLOAD_TITLES.get(row["name"], row["name"]))


def pattern(row: dict[str, Any], read_percent: int | None = None) -> str:
    if row.get("pattern") == "randrw":
        share = 50 if read_percent is None else read_percent
        return f"{share}% read / {100 - share}% write, random"
    return PATTERNS.get(str(row.get("pattern")), str(row.get("pattern", "")))


def block(row: dict[str, Any]) -> str:
    size = str(row.get("blockSize", ""))
    return size.replace("Ki", " KiB").replace("Mi", " MiB")


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _latency(row: dict[str, Any], direction: str) -> str:
    """One direction's p50/p99/p99.9 in ms ("-" where the row did no I/O that way, or an older operator kept no
    p99.9)."""
    latency = row.get("latency") or {}
    if not latency.get(f"{direction}P99"):
        return "-"
    return "/".join("-" if latency.get(f"{direction}{p}") is None else f"{latency[f'{direction}{p}'] * 1000:.2f}"
                    for p in ("P50", "P99", "P999"))


def _volumes_and_jobs(row: dict[str, Any]) -> str:
    """"2 × 1": volumes, and fio jobs on each (status keeps the row's total jobs)."""
    volumes, jobs = int(row.get("volumes") or 0), int(row.get("jobs") or 0)
    return f"{volumes} × {jobs // volumes if volumes else 0}"


def _read_percents(run: dict[str, Any]) -> dict[str, int]:
    workloads = ((run.get("spec") or {}).get("dataPath") or {}).get("workloads") or []
    return {w["name"]: int(w.get("readPercent", 50)) for w in workloads}


def table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The data-path table's headers and rows, or None for a run without a data path."""
    found = rows_of(run)
    if not found:
        return None
    shares = _read_percents(run)
    rows = []
    for row in found:
        spread = "-" if row.get("minVolumeMiBps") is None else \
            f"{row['minVolumeMiBps']:,.1f}-{row['maxVolumeMiBps']:,.1f}"
        duration = row.get("durationSeconds")
        rows.append([title(row), block(row), pattern(row, shares.get(row["name"])), _number(row.get("readMiBps")),
                     _number(row.get("writeMiBps")), _number(row.get("readIOPS"), 0),
                     _number(row.get("writeIOPS"), 0), _latency(row, "read"), _latency(row, "write"),
                     _volumes_and_jobs(row), spread, "-" if duration is None else human_duration(duration),
                     row.get("state", "") + (f" ({row['failed']} failed)" if row.get("failed") else "")])
    return HEADERS, rows


def _ms(seconds: float | None) -> str:
    return "-" if not seconds else f"{seconds * 1000:.2f}"


def _share_table(run: dict[str, Any], part: str, key: str) -> list[list[str]]:
    """Per workload and node (or zone): the volumes there, their I/O summed and their completions' p99."""
    return [[title(row), str(share[key]), str(share.get("volumes", 0)), _number(share.get("readMiBps")),
             _number(share.get("writeMiBps")), _number(share.get("readIOPS"), 0), _number(share.get("writeIOPS"), 0),
             _ms(share.get("readP99")), _ms(share.get("writeP99"))]
            for row in rows_of(run) for share in row.get(part) or []]


def node_table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """Per workload and node (None: no row knows its nodes, e.g. a run of an older operator)."""
    rows = _share_table(run, "nodes", "node")
    return (NODE_HEADERS, rows) if rows else None


def zone_table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """Per workload and zone of its pods' nodes (None: no node had a zone label)."""
    rows = _share_table(run, "zones", "zone")
    return (["Workload", "Zone", *NODE_HEADERS[2:]], rows) if rows else None


BASELINE_HEADERS = ["Workload", "Class MiB/s", "Local MiB/s", "Class / local", "Class IOPS", "Local IOPS",
                    "Class clat p99 ms", "Local clat p99 ms", "Note"]


def baseline_table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """Per workload, the class beside the nodes' own disk (an emptyDir, same nodes, same workload); None when the
    run had no baseline. A class faster than local is flagged: reads from a cache rather than the storage."""
    rows = []
    for row in rows_of(run):
        local = row.get("baseline")
        if not local:
            continue
        ours, theirs = _total(row), _total(local)
        ratio = "-" if ours is None or not theirs else f"{ours / theirs:.2f}×"
        note = "faster than local: a cache, not the storage?" if local.get("fasterThanLocal") else \
            (local.get("message") or "")
        latency = row.get("latency") or {}
        rows.append([title(row), _number(ours), _number(theirs), ratio, _number(_iops(row), 0),
                     _number(_iops(local), 0), _ms(_worst(latency.get("readP99"), latency.get("writeP99"))),
                     _ms(_worst(local.get("readP99"), local.get("writeP99"))), note])
    return (BASELINE_HEADERS, rows) if rows else None


def _worst(*seconds: float | None) -> float | None:
    found = [s for s in seconds if s]
    return max(found) if found else None


LEVEL_HEADERS = ["Workload", "Level", "Target IOPS", "Achieved IOPS", "Of target", "Read clat p99 ms",
                 "Write clat p99 ms", "State"]


def level_table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """Latency under load: per workload, its unthrottled row, then each rate level (its target, what it achieved,
    its completions' p99); None when the run had no rate levels."""
    rows = []
    for row in rows_of(run):
        levels = row.get("levels") or []
        if not levels:
            continue
        latency = row.get("latency") or {}
        rows.append([title(row), "unthrottled", "-", _number(_iops(row), 0), "-", _ms(latency.get("readP99")),
                     _ms(latency.get("writeP99")), str(row.get("state", ""))])
        for level in levels:
            achieved, target = _iops(level), level.get("targetIOPS")
            share = "-" if achieved is None or not target else f"{achieved / target:.0%}"
            rows.append([title(row), f"{level['percent']}%", _number(target, 0), _number(achieved, 0), share,
                         _ms(level.get("readP99")), _ms(level.get("writeP99")),
                         str(level.get("state", "")) + (" (skewed)" if level.get("skewed") else "")])
    return (LEVEL_HEADERS, rows) if rows else None


def level_curves(run: dict[str, Any]) -> list[tuple[str, list[tuple[float, float]]]]:
    """Per workload and direction: (achieved IOPS, p99 ms) at each level, then unthrottled, for a curve."""
    curves = []
    for row in rows_of(run):
        levels = [level for level in row.get("levels") or [] if _iops(level) is not None]
        if not levels:
            continue
        for direction in ("read", "write"):
            points = [(float(_iops(level) or 0.0), float(level[f"{direction}P99"]) * 1000) for level in levels
                      if level.get(f"{direction}P99")]
            unthrottled = (row.get("latency") or {}).get(f"{direction}P99")
            if unthrottled and _iops(row) is not None:
                points.append((float(_iops(row) or 0.0), float(unthrottled) * 1000))
            if points:
                curves.append((f"{title(row)} {direction}", points))
    return curves


def _iops(row: dict[str, Any]) -> float | None:
    if row.get("readIOPS") is None and row.get("writeIOPS") is None:
        return None
    return float(row.get("readIOPS") or 0.0) + float(row.get("writeIOPS") or 0.0)


def notes(run: dict[str, Any]) -> list[str]:
    """Under the table: how to read it, and each failed row's message (the tool's own words)."""
    found = rows_of(run)
    if not found:
        return []
    lines = ["data path: MiB/s and IOPS summed over volumes; clat percentiles per direction are of every completion "
             "of every pod (fio's latency histograms merged)"]
    lines += [f"data path ({row['name']}): {row['message']}" for row in found if row.get("message")]
    runtime = float(((run.get("spec") or {}).get("dataPath") or {}).get("runtimeSeconds") or 0)
    lines += [f"data path ({row['name']}): {line}" for row in found if (line := skew_line(row, runtime))]
    lines += [f"data path ({row['name']}): faster than the nodes' own disk (an emptyDir on the same nodes): "
              "the numbers may come from a cache, not the storage" for row in found
              if (row.get("baseline") or {}).get("fasterThanLocal")]
    lines += [f"data path ({row['name']}): {len(row['slowVolumes'])} volume(s) ran under half the median "
              f"per-volume bandwidth: {', '.join(row['slowVolumes'])} (the stored report has each one's node and "
              "numbers)" for row in found if row.get("slowVolumes")]
    return lines


def skew_line(row: dict[str, Any], runtime_seconds: float) -> str | None:
    """What a row's sums claim when its pods did not run at once (None when they did, or it is not known)."""
    skew, together = row.get("startSkewSeconds"), row.get("togetherSeconds")
    if skew is None or together is None or not is_skewed(skew, runtime_seconds):
        return None
    return skew_message(float(skew), float(together), runtime_seconds)


def _total(row: dict[str, Any]) -> float | None:
    if row.get("readMiBps") is None and row.get("writeMiBps") is None:
        return None
    return float(row.get("readMiBps") or 0.0) + float(row.get("writeMiBps") or 0.0)


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    total = _total(row)
    if total is None:
        return str(row.get("state", "-"))
    iops = float(row.get("readIOPS") or 0.0) + float(row.get("writeIOPS") or 0.0)
    return f"{total:,.1f} MiB/s · {iops:,.0f} IOPS"


REPEATED_HEADERS = ["Workload", "A: MiB/s (median, min-max)", "B: MiB/s (median, min-max)", "B vs A (MiB/s)",
                    "B vs A (IOPS)", "B vs A (p99, lower is better)"]
REPEATED_NOTE = ("data path: B vs A per workload over the iterations, ratios of medians; each of MiB/s, IOPS and "
                 "p99 (the worse direction; a ratio above 1 is B slower) tested with Welch's t-test on the "
                 "logarithm of its per-iteration values, two-sided, alpha {alpha:g}, Holm-adjusted over every "
                 "workload and measure of the table; assumes independent, roughly log-normal iterations")


def compare_note(run_a: dict[str, Any], run_b: dict[str, Any]) -> str | None:
    """How to read the data-path comparison: the test when both repeated, else why there is none."""
    if not rows_of(run_a) and not rows_of(run_b):
        return None
    if aggregates_of(run_a) and aggregates_of(run_b):
        return REPEATED_NOTE.format(alpha=ALPHA)
    return ("data path: single rows compared (ratio of MiB/s), no significance test: set spec.repeat on both runs "
            "for one per workload")


def aggregates_of(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A repeated run's per-workload aggregates by name ({} for a single run or no data path)."""
    return {a["name"]: a for a in (run.get("status") or {}).get("dataPathAggregates") or []}


def _spread_cell(spread: dict[str, Any] | None) -> str:
    if not spread:
        return "-"
    return f"{spread['median']:,.1f} ({spread['min']:,.1f}-{spread['max']:,.1f})"


def _seconds_spread(spread: dict[str, Any] | None) -> str:
    """'125 µs (118 µs-131 µs)': times below a millisecond in µs, so an NVMe p99 keeps its digits."""
    if not spread:
        return "-"
    return f"{seconds_text(spread['median'])} ({seconds_text(spread['min'])}-{seconds_text(spread['max'])})"


AGGREGATE_HEADERS = ["Workload", "Iterations", "MiB/s (median, min-max)", "IOPS (median, min-max)",
                     "clat p99 (median, min-max)"]


def aggregate_table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """A repeated run's data path over its measured iterations (None for a single run); the table above it is
    the last iteration's."""
    found = aggregates_of(run)
    if not found:
        return None
    rows = []
    for name, aggregate in found.items():
        p99 = aggregate.get("p99")
        rows.append([WORKLOAD_TITLES.get(name, name), str(aggregate.get("iterations", 0)),
                     _spread_cell(aggregate.get("mibps")), _spread_cell(aggregate.get("iops")),
                     _seconds_spread(p99)])
    return AGGREGATE_HEADERS, rows


def repeated_compare_table(run_a: dict[str, Any],
                           run_b: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """Both runs repeated: per workload either has, B vs A with a significance test for each of MiB/s, IOPS and
    p99 ("-" where a run lacks the workload; None unless both have data-path aggregates)."""
    a, b = aggregates_of(run_a), aggregates_of(run_b)
    if not a or not b:
        return None
    names = list(a) + [name for name in b if name not in a]
    measures = ("mibpsValues", "iopsValues", "p99Values")
    differences = compare_samples([(list((a.get(name) or {}).get(m) or []), list((b.get(name) or {}).get(m) or []))
                                   for name in names for m in measures])
    rows = []
    for index, name in enumerate(names):
        cells = [significance_cell(d) for d in differences[index * len(measures):(index + 1) * len(measures)]]
        rows.append([WORKLOAD_TITLES.get(name, name), _spread_cell((a.get(name) or {}).get("mibps")),
                     _spread_cell((b.get(name) or {}).get("mibps")), *cells])
    return REPEATED_HEADERS, rows


def compare_table(run_a: dict[str, Any], run_b: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """B vs A per workload: over the iterations with significance when both runs repeated, else the bandwidth
    ratio (read + write) of their rows, for the workloads either run has."""
    repeated = repeated_compare_table(run_a, run_b)
    if repeated is not None:
        return repeated
    a = {row["name"]: row for row in rows_of(run_a)}
    b = {row["name"]: row for row in rows_of(run_b)}
    if not a and not b:
        return None
    names = list(a) + [name for name in b if name not in a]
    rows = []
    for name in names:
        total_a = _total(a[name]) if name in a else None
        total_b = _total(b[name]) if name in b else None
        ratio = "-" if not total_a or total_b is None else f"{total_b / total_a:.2f}×"
        rows.append([WORKLOAD_TITLES.get(name, name), _cell(a.get(name)), _cell(b.get(name)), ratio])
    return COMPARE_HEADERS, rows


def merged_histograms(step_record: dict[str, Any]) -> dict[str, dict[str, histogram.Histogram]]:
    """Workload -> direction -> every pod's fio completion histogram merged (what the row's percentiles were read
    from): the data-path step's record keeps it per workload (``extra.histograms``); a report of an older operator
    only per volume, merged here. Directions without I/O are left out."""
    kept = (step_record.get("extra") or {}).get("histograms")
    if isinstance(kept, dict) and kept:
        merged = {workload: {direction: bins for direction in ("read", "write")
                             if (bins := histogram.from_json(found.get(direction)))}
                  for workload, found in kept.items() if isinstance(found, dict)}
        return {workload: directions for workload, directions in merged.items() if directions}
    pods: dict[str, dict[str, list[histogram.Histogram]]] = {}
    for record in ((step_record.get("extra") or {}).get("volumes") or []):
        if record.get("ratePercent") is not None or record.get("local"):  # a rate level's or the baseline's pods:
            continue  # not the row's completions
        for direction in ("read", "write"):
            bins = histogram.from_json(record.get(f"{direction}ClatBins"))
            if bins:
                pods.setdefault(str(record["workload"]), {}).setdefault(direction, []).append(bins)
    return {workload: {direction: histogram.merge(found) for direction, found in directions.items()}
            for workload, directions in pods.items()}


def node_histograms(step_record: dict[str, Any], workload: str) -> dict[str, dict[str, histogram.Histogram]]:
    """Node -> direction -> the merged histogram of the workload's pods there (rows on at most 16 nodes)."""
    kept = ((step_record.get("extra") or {}).get("histograms") or {}).get(workload) or {}
    nodes = kept.get("nodes") if isinstance(kept, dict) else None
    if not isinstance(nodes, dict):
        return {}
    return {node: {direction: bins for direction in ("read", "write")
                   if (bins := histogram.from_json((found or {}).get(direction)))}
            for node, found in nodes.items()}



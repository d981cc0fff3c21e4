"""What a pipeline reads from a finished run: the thresholds table, the gate's exit code and JUnit XML (pure).

The gate's exit codes: 0 the run measured, every threshold held (or it has none) and it is no regression against
its baseline (equivalent, better, or Slower without failOnSlower, or no baseline); 1 it measured and broke a
threshold or regressed (or is Slower with failOnSlower); 2 it failed
to measure (phase Failed: its numbers prove nothing either way); 3 it measured but a threshold could not be judged
or the baseline comparison was inconclusive (say "inconclusive" rather than "pass"). The baseline is the run's
own (status.baseline) or one the caller compared (``--baseline``). The JUnit
document has one testcase per step, per data-path workload, per database run and per threshold, so a CI system
shows which measurement or bound failed; a step that failed to measure is an error, a broken bound a failure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

from csibench.api.baseline import fails
from csibench.api.models import SECONDS_METRICS
from csibench.api.text import seconds_text, shorten

EXIT_PASS = 0
EXIT_BROKEN = 1
EXIT_NOT_MEASURED = 2
EXIT_INCONCLUSIVE = 3
TERMINAL = ("Succeeded", "Failed")


def table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The thresholds and what each measured, when the run has them."""
    results = (run.get("status") or {}).get("thresholds") or []
    if not results:
        return None
    rows = [[r["subject"], r["metric"], r["bound"], _measured(r),
             {True: "met", False: "BROKEN"}.get(r.get("met"), "not measured")] for r in results]
    return ["threshold", "metric", "bound", "measured", "result"], rows


def _measured(result: dict[str, Any]) -> str:
    """The value judged, times in the unit that shows their digits (a p99 of 0.000125 s reads '125 µs')."""
    value = result.get("measured")
    if value is None:
        return "-"
    return seconds_text(float(value), 4) if result.get("metric") in SECONDS_METRICS else f"{float(value):.4g}"


def title(run: dict[str, Any]) -> str:
    verdict = (run.get("status") or {}).get("verdict") or "Unknown"
    return f"Thresholds (verdict: {verdict})"


@dataclass(frozen=True)
class Gate:
    code: int
    lines: list[str]


def gate(run: dict[str, Any], baseline: dict[str, Any] | None = None) -> Gate:
    """The exit code a pipeline acts on for a finished run, and the lines that say why; ``baseline`` is a
    comparison (a status.baseline-shaped dict) that replaces the run's own."""
    meta, status = run.get("metadata") or {}, run.get("status") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    phase = status.get("phase")
    if phase not in TERMINAL:
        raise ValueError(f"run {name} has not finished (phase {phase or 'Pending'})")
    results = status.get("thresholds") or []
    lines = [f"  {'ok    ' if r.get('met') else 'BROKEN' if r.get('met') is False else '?     '} "
             f"{r.get('message') or r.get('subject', '?')}" for r in results]
    comparison = baseline if baseline is not None else status.get("baseline")
    change = (comparison or {}).get("change")
    failing = fails(change, bool((comparison or {}).get("failOnSlower"))) if comparison else False
    if comparison:
        lines += [f"  baseline: {comparison.get('message', '')}"]
    if phase == "Failed":
        return Gate(EXIT_NOT_MEASURED, [f"NOT MEASURED {name}: the run failed to measure: "
                                        f"{status.get('message', '')}", *lines])
    broken = [r for r in results if r.get("met") is False]
    if broken or failing:
        why = [f"{len(broken)} of {len(results)} thresholds broken"] if broken else []
        if comparison and failing:
            why += [f"a regression against {comparison.get('run')}" if change == "Regression" else
                    f"significantly slower than {comparison.get('run')} (failOnSlower)"]
        return Gate(EXIT_BROKEN, [f"FAIL {name}: {'; '.join(why)}", *lines])
    if any(r.get("met") is None for r in results) or failing is None:
        why = ["a threshold could not be judged"] if any(r.get("met") is None for r in results) else []
        why += [f"inconclusive against {comparison.get('run')}"] if comparison and failing is None else []
        return Gate(EXIT_INCONCLUSIVE, [f"INCONCLUSIVE {name}: {'; '.join(why)}", *lines])
    parts = [f"all {len(results)} thresholds met"] if results else []
    parts += [f"{change or 'not judged'} against {comparison.get('run')}"] if comparison else []
    return Gate(EXIT_PASS, [f"PASS {name}: " + ("; ".join(parts) or "measured; no thresholds set"), *lines])


def _time(seconds: Any) -> str | None:
    """A time as the schema's SUREFIRE_TIME takes it ('1.500'); None for what is no time (negative, NaN, inf)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) \
            or seconds < 0:
        return None
    return f"{seconds:.3f}"


def _case(suite: ElementTree.Element, classname: str, name: str, seconds: Any = None) -> ElementTree.Element:
    case = ElementTree.SubElement(suite, "testcase", classname=classname, name=_clean(name))
    if (shown := _time(seconds)) is not None:
        case.set("time", shown)
    return case


# Not characters of XML 1.0 (a driver's or fio's bytes, U+FFFE/U+FFFF, lone surrogates), and DEL: each becomes
# U+FFFD, so the document stays well-formed whatever a message, a name or a reason holds.
_NOT_XML = re.compile("[^\t\n\r\x20-\x7e\x80-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\N{REPLACEMENT CHARACTER}", str(text))


def _fail(case: ElementTree.Element, kind: str, message: str) -> None:
    ElementTree.SubElement(case, kind, message=_clean(shorten(message, 1000)), type=kind).text = _clean(message)


def _skip(case: ElementTree.Element, message: str) -> None:
    ElementTree.SubElement(case, "skipped", message=_clean(shorten(message, 1000)))


def junit(run: dict[str, Any]) -> str:
    """JUnit XML of a finished run (or of one still running: its pending parts are skipped testcases)."""
    meta, status = run.get("metadata") or {}, run.get("status") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    suite = ElementTree.Element("testsuite", name=_clean(f"csibench {name}"))
    run_case = _case(suite, "csibench.run", name, status.get("totalStepSeconds"))
    phase = status.get("phase") or "Pending"
    if phase == "Failed":  # every step may have measured and the run still failed (cleanup, preflight)
        _fail(run_case, "error", f"run {phase}: {status.get('message', '')}")
    elif phase != "Succeeded":
        _skip(run_case, f"run {phase}")
    for step in status.get("steps") or []:
        case = _case(suite, "csibench.step", step["name"], step.get("durationSeconds"))
        state = step.get("state")
        if state in ("Failed", "Interrupted") or step.get("failed"):
            reasons = "; ".join(f"{r['count']}x {r['reason']}: {r.get('message', '')}"
                                for r in step.get("failureReasons") or [])
            _fail(case, "error", f"{step['name']} {state}: {step.get('failed', 0)} of {step.get('objects', 0)} "
                                 f"objects failed" + (f" ({reasons})" if reasons else ""))
        elif state != "Succeeded":
            _skip(case, f"{step['name']} {state}")
        else:  # the counts go in system-out: junit-10.xsd has no `assertions` on a testcase
            p99 = (step.get("latency") or {}).get("p99")
            ElementTree.SubElement(case, "system-out").text = _clean(
                f"{step.get('succeeded', 0)} of {step.get('objects', 0)} objects, "
                f"{step.get('throughput') or 0:.3f}/s, p99 {'-' if p99 is None else seconds_text(float(p99), 4)}")
    for row in status.get("dataPath") or []:
        case = _case(suite, "csibench.dataPath", row["name"], row.get("durationSeconds"))
        if row.get("state") in ("Failed", "Interrupted"):
            _fail(case, "error", f"workload {row['name']} {row.get('state')}: {row.get('message', '')}")
        elif row.get("state") != "Succeeded":
            _skip(case, f"workload {row['name']} {row.get('state')}")
    for row in status.get("database") or []:
        label = f"scale {row['scale']}" + (f" {row['mode']} {row['clients']} clients" if row.get("mode") else
                                          " initialize")
        case = _case(suite, "csibench.database", label, row.get("durationSeconds"))
        if row.get("state") in ("Failed", "Interrupted"):
            _fail(case, "error", f"database {label} {row.get('state')}: {row.get('message', '')}")
        elif row.get("state") != "Succeeded":
            _skip(case, f"database {label} {row.get('state')}")
    comparison = status.get("baseline") or {}
    for row in comparison.get("rows") or []:
        case = _case(suite, "csibench.baseline", f"{row['subject']} {row['metric']}")
        failing = fails(row.get("change"), bool(comparison.get("failOnSlower")))
        if failing:
            _fail(case, "failure", row.get("message", ""))
        elif failing is None:
            _skip(case, row.get("message", ""))
        else:  # passed; a Slower row says so in words
            ElementTree.SubElement(case, "system-out").text = _clean(str(row.get("message", "")))
    for result in status.get("thresholds") or []:
        case = _case(suite, "csibench.threshold",
                     f"{result.get('subject', '?')} {result.get('metric', '?')} {result.get('bound', '')}")
        if result.get("met") is False:
            _fail(case, "failure", result.get("message", ""))
        elif result.get("met") is None:
            _skip(case, result.get("message", ""))
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    if (total := _time(status.get("totalStepSeconds"))) is not None:
        suite.set("time", total)
    ElementTree.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suite, encoding="unicode") + "\n"

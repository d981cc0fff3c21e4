"""Ask Prometheus about one step's window: wait until it has scraped past the step, evaluate, and say what failed.

The window starts when the step's clock starts. It ends once Prometheus has scraped every target after the clock
stopped (``min(timestamp(up))`` past the stop, at most ``settleTimeoutSeconds``): the run waits for that before its
next step, so a counter read at the window's end holds the step's last seconds and nothing of the next step. That
wait is outside every step's clock; it costs one scrape interval per step.

Nothing here fails a run or leaves a step as an exception: an unreachable or too slow Prometheus, a query it
refuses, an answer of a shape Prometheus never sends, one without series, labels too long to keep, a value that is
infinite or NaN, and anything unforeseen become a finding (status.collection), once per query and kind, naming the
first step it happened in and counting the steps. A step's collection has a total budget: the settle wait
(``settleTimeoutSeconds``) plus ``QUERY_ALLOWANCE_SECONDS`` for the queries; past it the queries not yet asked are
a finding and the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field

from csibench.api.collect import MAX_COLLECTED_VALUES, Aggregation, CollectedValue, StepCollection
from csibench.api.models import MAX_FINDINGS, Finding, Severity
from csibench.api.text import shorten
from csibench.observe.prometheus import MAX_LABEL_NAME, MAX_LABEL_VALUE, SLOW, Prometheus, PrometheusError
from csibench.observe.queries import Query
from csibench.observe.window import highest, increase, latest, readings

log = logging.getLogger(__name__)

SETTLE_POLL_SECONDS = 0.25
QUERY_ALLOWANCE_SECONDS = 60.0  # the queries of one step together, after the settle wait
MAX_FINDING_MESSAGE = 600
MAX_FACT = 256
MAX_RANGE_POINTS = 2000  # Max: a step over 2,000 s is read on a coarser grid than 1 s
SCRAPED_SINCE = "min(timestamp(up))"


def rfc3339_ms(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"


@dataclass
class Findings:
    """Collection findings, one per (check, query), counting the steps each happened in."""

    found: dict[tuple[str, str], Finding] = field(default_factory=dict)

    def add(self, check: str, severity: Severity, query: str, step: str, message: str) -> None:
        key = (check, query)
        if key in self.found:
            finding = self.found[key]
            finding.facts["steps"] = str(int(finding.facts.get("steps", "1")) + 1)
            return
        if len(self.found) < MAX_FINDINGS:
            self.found[key] = Finding(check=check, severity=severity, message=shorten(message, MAX_FINDING_MESSAGE),
                                      facts={"query": shorten(query, MAX_FACT), "firstStep": step, "steps": "1"})

    def merge_saved(self, saved: list[Finding]) -> None:
        for finding in saved:
            self.found.setdefault((finding.check, finding.facts.get("query", "")), finding)

    def listed(self) -> list[Finding]:
        return list(self.found.values())


def fair_shares(wanted: list[int], room: int) -> list[int]:
    """How many values each query keeps of ``room``: an equal share each, and what a query needs less of goes to
    the others (water-filling; pure). A profile query over many containers then keeps them all beside a few
    single-series queries of the run's own, where equal fixed shares cut it to room / queries."""
    shares = [0] * len(wanted)
    left, pending = room, sorted(range(len(wanted)), key=lambda index: wanted[index])
    while pending:
        share = left // len(pending)
        index = pending.pop(0)
        shares[index] = min(wanted[index], share)
        left -= shares[index]
    return shares


@dataclass
class QueryReading:
    """One query's answer over the window as status keeps it, read in a worker thread (an answer may hold many
    series: building and sorting them never blocks the event loop), with what was left out or cut."""

    values: list[CollectedValue]
    series: int  # finite readings there were (status keeps the largest)
    missing_at_start: int = 0  # Increase/Rate: series without a value at the window's start
    labels_cut: int = 0  # series whose label names or values were shortened
    non_finite: list[float] = field(default_factory=list)  # readings left out: infinite or NaN


class StepCollector:
    def __init__(self, prometheus: Prometheus, queries: list[Query], settle_timeout: float,
                 query_allowance: float | None = None) -> None:
        self.prometheus = prometheus
        self.queries = queries
        self.settle_timeout = settle_timeout
        self.query_allowance = QUERY_ALLOWANCE_SECONDS if query_allowance is None else query_allowance
        self.findings = Findings()
        self.enabled = True  # False: nothing to ask (no URL); the finding says so

    @property
    def budget(self) -> float:
        """Seconds one step's collection may take at most: the settle wait and the queries' allowance."""
        return self.settle_timeout + self.query_allowance

    async def collect(self, step: str, start: float, stop: float) -> StepCollection:
        """The step's window, from ``start`` (its clock started, unix seconds) to once every target was scraped
        after ``stop``; the readings of every query over it, within the step's budget."""
        if not self.queries:
            now = time.time()
            return StepCollection(start=rfc3339_ms(start), end=rfc3339_ms(max(stop, now)), values=[])
        until = time.monotonic() + self.budget
        end = await self._settle(step, stop, until)
        reads: list[tuple[Query, QueryReading]] = []
        for index, query in enumerate(self.queries):
            if time.monotonic() >= until:
                left = [q.name for q in self.queries[index:]]
                self.findings.add("CollectionOverBudget", Severity.WARNING, left[0], step,
                                  f"the step's collection took its whole budget ({self.budget:.0f} s: "
                                  f"settleTimeoutSeconds + {self.query_allowance:.0f} s for the queries); not asked: "
                                  f"{', '.join(left)}")
                break
            try:
                # The thread ends by itself at ``until`` (the client's watchdog); the wait is bounded all the same.
                read = await asyncio.wait_for(asyncio.to_thread(self._evaluate, query, start, end, stop - start,
                                                                until),
                                              max(until - time.monotonic(), 0.0) + 5.0)
            except (PrometheusError, TimeoutError) as error:
                if isinstance(error, TimeoutError):  # the thread outlived its deadline (a name lookup that hangs)
                    error = PrometheusError(f"{self.prometheus.url} sent no whole answer within the step's "
                                            "collection budget", SLOW)
                self.findings.add(error.check, Severity.WARNING, query.name, step,
                                  f"Prometheus did not answer ({error}); the run goes on without its readings"
                                  if error.unreachable else f"{query.name}: {error}")
                if error.unreachable:
                    break  # one finding, not one per query: the next step tries again
                continue
            except Exception as error:  # whatever an answer does, it is a finding, not a failed step
                log.exception("collecting %s after %s", query.name, step)
                self.findings.add("CollectionFailed", Severity.WARNING, query.name, step,
                                  f"{query.name}: {type(error).__name__}: {error}")
                continue
            reads.append((query, read))
        values: list[CollectedValue] = []
        for (query, read), room in zip(reads, fair_shares([len(read.values) for _, read in reads],
                                                          MAX_COLLECTED_VALUES), strict=True):
            read.values = read.values[:room]  # each read is largest first
            self._say(step, query, read)
            values += read.values
        return StepCollection(start=rfc3339_ms(start), end=rfc3339_ms(end), values=values)

    def _say(self, step: str, query: Query, read: QueryReading) -> None:
        """The findings of one query's reading: what was left out or cut."""
        name = query.name
        if read.missing_at_start:
            self.findings.add("SeriesMissingAtStart", Severity.INFO, name, step,
                              f"{name}: {read.missing_at_start} series had no value at the window's start (a failed "
                              "scrape, or begun during the step); left out rather than counted from zero")
        if not read.series and not read.non_finite:
            self.findings.add("QueryEmpty", Severity.INFO, name, step,
                              f"{name}: no series over the window (is the metric scraped, and are its labels as the "
                              "query expects?)")
        if read.labels_cut:
            self.findings.add("LabelsCut", Severity.INFO, name, step,
                              f"{name}: {read.labels_cut} series had label names or values longer than status keeps "
                              f"({MAX_LABEL_NAME} and {MAX_LABEL_VALUE} characters); they are shortened")
        if read.non_finite:
            shown = ", ".join(sorted({str(value) for value in read.non_finite}))
            self.findings.add("NonFiniteValue", Severity.WARNING, name, step,
                              f"{name}: {len(read.non_finite)} series read {shown} over the window (a counter that "
                              "overflowed, or a division by zero); left out of the readings")
        if read.series > len(read.values):
            self.findings.add("TooManySeries", Severity.INFO, name, step,
                              f"{name}: {read.series} series over the window; status keeps the largest "
                              f"{len(read.values)} (aggregate with sum by (...) to keep fewer)")

    async def _settle(self, step: str, stop: float, until: float) -> float:
        """Wait until Prometheus scraped every target after ``stop``; the window's end (now, or ``stop`` when
        Prometheus cannot say)."""
        deadline = min(time.monotonic() + self.settle_timeout, until)
        while True:
            now = time.time()
            try:
                answer = await asyncio.wait_for(
                    asyncio.to_thread(self.prometheus.instant, SCRAPED_SINCE, now, deadline),
                    max(deadline - time.monotonic(), 0.0) + 5.0)
                oldest = answer[0].samples[-1][1] if answer and answer[0].samples else None
            except Exception:  # the queries will say what is wrong, each as a finding
                return max(stop, now)
            if oldest is None or not math.isfinite(oldest) or oldest >= stop:
                return now
            if time.monotonic() > deadline:
                self.findings.add("NotSettled", Severity.INFO, SCRAPED_SINCE, step,
                                  f"Prometheus had not scraped every target within {self.settle_timeout:.0f} s "
                                  "after the step; readings may miss its last seconds (a target scraped rarely, "
                                  "or down)")
                return now
            await asyncio.sleep(SETTLE_POLL_SECONDS)

    def _evaluate(self, query: Query, start: float, end: float, seconds: float, until: float) -> QueryReading:
        """One query over the window, read as status keeps it (in a worker thread)."""
        ask, missing = self.prometheus, 0
        if query.aggregation in (Aggregation.INCREASE, Aggregation.RATE):
            answer = ask.instant(query.promql, end, until)
            found, missing = increase(ask.instant(query.promql, start, until), answer)
        elif query.aggregation == Aggregation.MAX:
            step = max(1.0, (end - start) / MAX_RANGE_POINTS)
            # The range is evaluated on a grid from start; the end (the scrape after the stop) is read too.
            answer = [*ask.range(query.promql, start, end, step, until), *ask.instant(query.promql, end, until)]
            found = highest(answer)
        else:
            answer = ask.instant(query.promql, end, until)
            found = latest(answer)
        # Up to the whole room; collect() then shares it out among the queries (fair_shares).
        values, series, non_finite = readings(query.name, query.unit, query.aggregation, found, seconds,
                                              MAX_COLLECTED_VALUES)
        cut = {item.key() for item in answer if item.labels_cut}
        labels_cut = sum(1 for labels, _ in found if tuple(sorted(labels.items())) in cut)
        return QueryReading(values, series, missing, labels_cut, non_finite)

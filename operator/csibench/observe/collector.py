"""Ask Prometheus about one step's window: wait until it has scraped past the step, evaluate, and say what failed.

The window starts when the step's clock starts. It ends once Prometheus has scraped every target after the clock
stopped (``min(timestamp(up))`` past the stop, at most ``settleTimeoutSeconds``): the run waits for that before its
next step, so a counter read at the window's end holds the step's last seconds and nothing of the next step. That
wait is outside every step's clock; it costs one scrape interval per step.

Nothing here fails a run: an unreachable Prometheus, a query it refuses or one without series becomes a finding
(status.collection), once per query and kind, naming the first step it happened in and counting the steps.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from csibench.api.collect import MAX_COLLECTED_VALUES, Aggregation, CollectedValue, StepCollection
from csibench.api.models import MAX_FINDINGS, Finding, Severity
from csibench.observe.prometheus import Prometheus, PrometheusError, Series
from csibench.observe.queries import Query
from csibench.observe.window import highest, increase, latest, readings

SETTLE_POLL_SECONDS = 0.25
MAX_RANGE_POINTS = 10000
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
            self.found[key] = Finding(check=check, severity=severity, message=message,
                                      facts={"query": query, "firstStep": step, "steps": "1"})

    def merge_saved(self, saved: list[Finding]) -> None:
        for finding in saved:
            self.found.setdefault((finding.check, finding.facts.get("query", "")), finding)

    def listed(self) -> list[Finding]:
        return list(self.found.values())


class StepCollector:
    def __init__(self, prometheus: Prometheus, queries: list[Query], settle_timeout: float) -> None:
        self.prometheus = prometheus
        self.queries = queries
        self.settle_timeout = settle_timeout
        self.findings = Findings()
        self.enabled = True  # False: nothing to ask (no URL); the finding says so
        self._missing: list[tuple[str, int]] = []  # (query, series without a value at the window's start)

    async def collect(self, step: str, start: float, stop: float) -> StepCollection:
        """The step's window, from ``start`` (its clock started, unix seconds) to once every target was scraped
        after ``stop``; the readings of every query over it."""
        if not self.queries:
            now = time.time()
            return StepCollection(start=rfc3339_ms(start), end=rfc3339_ms(max(stop, now)), values=[])
        end = await self._settle(step, stop)
        values: list[CollectedValue] = []
        for query in self.queries:
            try:
                found = await asyncio.to_thread(self._evaluate, query, start, end)
            except PrometheusError as error:
                check = "PrometheusUnreachable" if error.unreachable else "QueryRefused"
                self.findings.add(check, Severity.WARNING, query.name, step,
                                  f"{query.name}: {error}" if not error.unreachable else
                                  f"Prometheus did not answer ({error}); the run goes on without its readings")
                if error.unreachable:
                    break  # one finding, not one per query: the next step tries again
                continue
            for name, count in self._missing:
                self.findings.add("SeriesMissingAtStart", Severity.INFO, name, step,
                                  f"{name}: {count} series had no value at the window's start (a failed scrape, "
                                  "or begun during the step); left out rather than counted from zero")
            self._missing.clear()
            if not found:
                self.findings.add("QueryEmpty", Severity.INFO, query.name, step,
                                  f"{query.name}: no series over the window (is the metric scraped, and are its "
                                  "labels as the query expects?)")
            read = readings(query.name, query.unit, query.aggregation, found, stop - start)
            room = max(1, MAX_COLLECTED_VALUES // len(self.queries))  # every query keeps its share
            if len(read) > room:
                self.findings.add("TooManySeries", Severity.INFO, query.name, step,
                                  f"{query.name}: {len(read)} series over the window; status keeps the largest "
                                  f"{room} (aggregate with sum by (...) to keep fewer)")
            values += read[:room]
        return StepCollection(start=rfc3339_ms(start), end=rfc3339_ms(end), values=values[:MAX_COLLECTED_VALUES])

    async def _settle(self, step: str, stop: float) -> float:
        """Wait until Prometheus scraped every target after ``stop``; the window's end (now, or ``stop`` when
        Prometheus cannot say)."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            now = time.time()
            try:
                answer = await asyncio.to_thread(self.prometheus.instant, SCRAPED_SINCE, now)
            except PrometheusError:
                return max(stop, now)  # the queries will say what is wrong
            oldest = answer[0].samples[-1][1] if answer and answer[0].samples else None
            if oldest is None or oldest >= stop:
                return now
            if time.monotonic() > deadline:
                self.findings.add("NotSettled", Severity.INFO, SCRAPED_SINCE, step,
                                  f"Prometheus had not scraped every target within {self.settle_timeout:.0f} s "
                                  "after the step; readings may miss its last seconds (a target scraped rarely, "
                                  "or down)")
                return now
            await asyncio.sleep(SETTLE_POLL_SECONDS)

    def _evaluate(self, query: Query, start: float, end: float) -> list[tuple[dict[str, str], float]]:
        if query.aggregation in (Aggregation.INCREASE, Aggregation.RATE):
            found, missing = increase(self.prometheus.instant(query.promql, start),
                                      self.prometheus.instant(query.promql, end))
            if missing:
                self._missing.append((query.name, missing))
            return found
        if query.aggregation == Aggregation.MAX:
            step = max(1.0, (end - start) / MAX_RANGE_POINTS)
            # The range is evaluated on a grid from start; the end (the scrape after the stop) is read too.
            over: list[Series] = self.prometheus.range(query.promql, start, end, step)
            return highest([*over, *self.prometheus.instant(query.promql, end)])
        return latest(self.prometheus.instant(query.promql, end))

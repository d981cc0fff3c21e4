"""The run's verdict (status.verdict): its thresholds and its baseline comparison together (pure).

Fail when a threshold broke or the baseline comparison found a regression (or a Slower measure, with
spec.failOnSlower: ``baseline.fails`` is the one decision); Unknown when the run failed to measure,
a threshold could not be judged, or the comparison was inconclusive; Pass otherwise. A run with neither thresholds
nor a baseline has no verdict. The parts keep conditions of their own (ThresholdsMet, NoRegression), so a reader
sees which one decided. A churn's drift (spec.churn, ``engine/drift.py``) is a third part, with its condition
NoDrift: Drift fails the verdict, Inconclusive leaves it Unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from csibench.api.baseline import fails
from csibench.api.churn import ChurnDrift, DriftChange
from csibench.api.models import BaselineComparison, Verdict
from csibench.api.regression import Change
from csibench.engine.thresholds import ThresholdVerdict

BASELINE_CONDITION = "NoRegression"
DRIFT_CONDITION = "NoDrift"
_DRIFT_VERDICT = {DriftChange.DRIFT: Verdict.FAIL, DriftChange.INCONCLUSIVE: Verdict.UNKNOWN,
                  DriftChange.NO_DRIFT: Verdict.PASS}


@dataclass(frozen=True)
class Judgement:
    thresholds: ThresholdVerdict | None
    baseline: BaselineComparison | None
    drift: ChurnDrift | None = None  # spec.churn: its last windows against its first

    @property
    def verdict(self) -> Verdict:
        parts = [self.thresholds.verdict] if self.thresholds is not None else []
        if self.baseline is not None:
            parts.append({True: Verdict.FAIL, None: Verdict.UNKNOWN, False: Verdict.PASS}[self._fails()])
        if self.drift is not None:
            parts.append(_DRIFT_VERDICT[self.drift.change])
        if self.thresholds is not None and self.thresholds.reason == "RunFailed":
            return Verdict.UNKNOWN
        for verdict in (Verdict.FAIL, Verdict.UNKNOWN):
            if verdict in parts:
                return verdict
        return Verdict.PASS

    def _fails(self) -> bool | None:
        assert self.baseline is not None
        return fails(self.baseline.change, self.baseline.failOnSlower)

    @property
    def broken(self) -> int:
        """Thresholds broken plus the baseline rows that fail (regressions, and Slower with failOnSlower): what
        the metric counts."""
        regressions = sum(1 for row in self.baseline.rows if fails(row.change, self.baseline.failOnSlower)) \
            if self.baseline is not None else 0
        drifted = int(self.drift is not None and self.drift.change == DriftChange.DRIFT)
        return len(self.thresholds.broken if self.thresholds is not None else []) + regressions + drifted

    def baseline_condition(self) -> tuple[str, str, str] | None:
        """NoRegression's (status, reason, message)."""
        if self.baseline is None:
            return None
        change = Change(self.baseline.change)
        status = {True: "False", None: "Unknown", False: "True"}[self._fails()]
        return status, change.value, self.baseline.message

    def drift_condition(self) -> tuple[str, str, str] | None:
        """NoDrift's (status, reason, message)."""
        if self.drift is None:
            return None
        status = {DriftChange.NO_DRIFT: "True", DriftChange.DRIFT: "False"}.get(self.drift.change, "Unknown")
        return status, self.drift.change.value, self.drift.message

    def events(self) -> list[tuple[str, str, bool]]:
        """(reason, message, warning) for each part."""
        found = []
        if self.thresholds is not None:
            found.append((self.thresholds.reason, self.thresholds.message,
                          self.thresholds.verdict != Verdict.PASS))
        condition = self.baseline_condition()
        if condition is not None:
            found.append((f"Baseline{condition[1]}", condition[2], condition[0] != "True"))
        drift = self.drift_condition()
        if drift is not None:
            found.append((f"Churn{drift[1]}", drift[2], drift[0] != "True"))
        return found

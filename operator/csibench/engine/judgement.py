"""The run's verdict (status.verdict): its thresholds and its baseline comparison together (pure).

Fail when a threshold broke or the baseline comparison found a regression; Unknown when the run failed to measure,
a threshold could not be judged, or the comparison was inconclusive; Pass otherwise. A run with neither thresholds
nor a baseline has no verdict. The parts keep conditions of their own (ThresholdsMet, NoRegression), so a reader
sees which one decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from csibench.api.models import BaselineComparison, Verdict
from csibench.api.regression import Change
from csibench.engine.thresholds import ThresholdVerdict

BASELINE_CONDITION = "NoRegression"


@dataclass(frozen=True)
class Judgement:
    thresholds: ThresholdVerdict | None
    baseline: BaselineComparison | None

    @property
    def verdict(self) -> Verdict:
        parts = [self.thresholds.verdict] if self.thresholds is not None else []
        if self.baseline is not None:
            parts.append({Change.REGRESSION: Verdict.FAIL, Change.INCONCLUSIVE: Verdict.UNKNOWN}.get(
                Change(self.baseline.change), Verdict.PASS))
        if self.thresholds is not None and self.thresholds.reason == "RunFailed":
            return Verdict.UNKNOWN
        for verdict in (Verdict.FAIL, Verdict.UNKNOWN):
            if verdict in parts:
                return verdict
        return Verdict.PASS

    @property
    def broken(self) -> int:
        """Thresholds broken plus regressions: what the metric counts."""
        regressions = sum(1 for row in self.baseline.rows if row.change == Change.REGRESSION) \
            if self.baseline is not None else 0
        return len(self.thresholds.broken if self.thresholds is not None else []) + regressions

    def baseline_condition(self) -> tuple[str, str, str] | None:
        """NoRegression's (status, reason, message)."""
        if self.baseline is None:
            return None
        change = Change(self.baseline.change)
        status = {Change.REGRESSION: "False", Change.INCONCLUSIVE: "Unknown"}.get(change, "True")
        return status, change.value, self.baseline.message

    def events(self) -> list[tuple[str, str, bool]]:
        """(reason, message, warning) for each part."""
        found = []
        if self.thresholds is not None:
            found.append((self.thresholds.reason, self.thresholds.message,
                          self.thresholds.verdict != Verdict.PASS))
        condition = self.baseline_condition()
        if condition is not None:
            found.append((f"Baseline{condition[1]}", condition[2], condition[0] != "True"))
        return found

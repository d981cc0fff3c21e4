"""What a suite does next, decided from what exists (pure): which runs to create, what status says, when it ends.

The suite's memory is its status: a run recorded with a uid was created, and is never created again, even when it
is gone (deleted by hand: it counts as Failed, "deleted before it ended"). What the API server lists, by the
suite's uid label, is the truth about each run's phase. So after an operator restart the same inputs give the same
decision, whatever moment the restart came at: a run created just before the restart, whose uid the status never
got, is listed and adopted, not created twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from csibench.api.models import Verdict
from csibench.api.suite import Slot, SuiteRunStatus

TERMINAL = ("Succeeded", "Failed")
DELETED_MESSAGE = "deleted before it ended"


@dataclass(frozen=True)
class Decision:
    runs: list[SuiteRunStatus]  # every slot, in schedule order
    create: list[Slot]  # to create now, in order
    finished: bool

    @property
    def done(self) -> int:
        return sum(1 for run in self.runs if run.phase in TERMINAL)

    @property
    def current(self) -> list[str]:
        return [run.name for run in self.runs if run.uid and run.phase not in TERMINAL]

    @property
    def failed(self) -> list[SuiteRunStatus]:
        return [run for run in self.runs if run.phase == "Failed"]

    @property
    def verdict(self) -> Verdict | None:
        """Once every run ended, over the runs when any judged one: Fail if any failed; Unknown if any is unknown
        or ended without one (failed to measure, deleted, refused); else Pass. None while runs are under way."""
        if not self.finished or not any(run.verdict for run in self.runs):
            return None
        verdicts = {run.verdict or Verdict.UNKNOWN.value for run in self.runs}
        for verdict in (Verdict.FAIL, Verdict.UNKNOWN, Verdict.PASS):
            if verdict.value in verdicts:
                return verdict
        return None  # pragma: no cover - every run has one of the three


def _observed(slot: Slot, name: str, child: dict[str, Any]) -> SuiteRunStatus:
    status = child.get("status") or {}
    return SuiteRunStatus(name=name, cell=slot.cell.id, round=slot.round, uid=child["metadata"]["uid"],
                          phase=status.get("phase") or "Pending", verdict=status.get("verdict"))


def decide(suite_name: str, slots: list[Slot], recorded: dict[str, SuiteRunStatus],
           children: dict[str, dict[str, Any]], parallelism: int) -> Decision:
    """``recorded``: status.runs by name; ``children``: the suite's own runs (ownership proven) by name."""
    runs: list[SuiteRunStatus] = []
    waiting: list[Slot] = []
    for slot in slots:
        name = slot.child_name(suite_name)
        child, known = children.get(name), recorded.get(name)
        if child is not None:
            runs.append(_observed(slot, name, child))
        elif known is not None and known.uid:
            gone = known.phase in TERMINAL
            runs.append(known if gone else known.model_copy(update={"phase": "Failed", "message": DELETED_MESSAGE}))
        elif known is not None and known.phase in TERMINAL:  # never created: the API server refused it
            runs.append(known)
        else:
            runs.append(SuiteRunStatus(name=name, cell=slot.cell.id, round=slot.round))
            waiting.append(slot)
    running = sum(1 for run in runs if run.uid and run.phase not in TERMINAL)
    create = waiting[:max(0, parallelism - running)]
    finished = not waiting and running == 0
    return Decision(runs, create, finished)

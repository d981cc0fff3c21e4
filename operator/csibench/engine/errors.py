"""The two ways a run stops early, kept apart because they mean different things to the user.

``PlanError``: the spec cannot run here (found before the first object; nothing was created). ``RunAborted``:
something the run depends on went away while it ran (its namespace, its class); objects exist and are cleaned up.
Both carry the condition reason that status, the Event and the verdict show.
"""

from __future__ import annotations

from csibench.api.models import ConditionReason


class PlanError(ValueError):
    """The spec cannot run; raised before anything is created."""

    def __init__(self, reason: ConditionReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class RunAborted(RuntimeError):
    """The run cannot go on (mid-run); what it created is cleaned up per policy."""

    def __init__(self, reason: ConditionReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason

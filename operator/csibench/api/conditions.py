"""Conditions as Kubernetes API conventions want them, for runs and suites alike (pure).

``lastTransitionTime`` moves only when a condition's status really changes, so a reader can tell how long a run
has been in its state; Ready stays first, where readers (and ``kubectl get``) look for it.
"""

from __future__ import annotations

from csibench.api.models import Condition

READY = "Ready"


def set_condition(conditions: list[Condition], type_: str, status: str, reason: str, message: str,
                  generation: int, at: str) -> list[Condition]:
    """The conditions with ``type_`` replaced; its transition time moves only when its status changes."""
    previous = next((c for c in conditions if c.type == type_), None)
    keep = previous is not None and previous.status == status
    updated = Condition(type=type_, status=status, reason=reason, message=message,
                        lastTransitionTime=previous.lastTransitionTime if previous is not None and keep else at,
                        observedGeneration=generation)
    return sorted([c for c in conditions if c.type != type_] + [updated], key=lambda c: c.type != READY)

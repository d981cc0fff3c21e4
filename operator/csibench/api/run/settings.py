"""How the run itself behaves: per-step timeouts (one field per step, generated from the step facts) and
the operator's API client for the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, create_model

from csibench.api.base import Model as _Model
from csibench.api.steps import STEP_FACTS


class TimeoutsBase(_Model):
    """Per-step timeouts in seconds. A step still running at its timeout ends; pending objects count as failed."""

    default: int = Field(1800, ge=1, le=604800, description="Timeout of any step without its own, in seconds.")
    if TYPE_CHECKING:  # a field of the generated model, after the steps' (its place in the schema and the CRD)
        cleanup: int = 600

    def own(self, step: str) -> int | None:
        """The step's own timeout, if the spec sets one."""
        value: int | None = getattr(self, step, None) if step in type(self).model_fields else None
        return value

    def for_step(self, step: str) -> int:
        value = self.own(step)
        return value if value is not None else self.default


def _build_timeouts() -> type[TimeoutsBase]:
    """One optional field per step (``api/steps.py``, in order, with its description), then ``cleanup``."""
    steps: dict[str, Any] = {
        name: (int | None, Field(None, ge=1, le=604800,
                                 description=facts.timeout_note or f"Timeout of {name}, in seconds."))
        for name, facts in STEP_FACTS.items()}
    cleanup = (int, Field(600, ge=1, le=86400,
                          description="How long cleanup waits for the run's objects and volumes to be gone, in "
                                      "seconds; what is left then is listed in status.cleanup."))
    return create_model("Timeouts", __base__=TimeoutsBase, __doc__=TimeoutsBase.__doc__, __module__=__name__,
                        **steps, cleanup=cleanup)


if TYPE_CHECKING:
    Timeouts = TimeoutsBase
else:
    Timeouts = _build_timeouts()


class ClientSettings(_Model):
    """The operator's API client for this run. Throttled clients distort results, so they are recorded."""

    qps: float = Field(100.0, ge=1, le=10000, description="Client-side rate limit: requests per second.")
    burst: int = Field(200, ge=1, le=20000, description="Client-side rate limit: burst size.")
    maxInFlight: int = Field(16, ge=1, le=256, description="Requests the run sends concurrently (threads).")

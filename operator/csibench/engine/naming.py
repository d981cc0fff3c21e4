"""Deterministic names of everything a run creates, and which volumes each publish pod mounts (pure).

Names are the run's name, a short uid prefix, a kind letter and an index, so that a restarted operator finds
what it created instead of creating it again, and two runs of the same name in different namespaces differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from csibench.api.models import MAX_RUN_NAME, ConditionReason
from csibench.engine.errors import PlanError


@dataclass(frozen=True)
class Names:
    """Deterministic names of everything a run creates."""

    prefix: str  # "<run name>-<uid[:5]>"

    @classmethod
    def for_run(cls, name: str, uid: str) -> Names:
        if len(name) > MAX_RUN_NAME:
            raise PlanError(ConditionReason.NAME_TOO_LONG, f"BenchmarkRun names are limited to {MAX_RUN_NAME} "
                            f"characters so that the objects it creates have valid names; {name!r} has {len(name)}")
        if "." in name:
            raise PlanError(ConditionReason.INVALID_SPEC, f"BenchmarkRun name {name!r} contains '.': the namespace "
                            "and objects named after the run must be DNS labels")
        return cls(f"{name}-{uid[:5]}")

    @property
    def namespace(self) -> str:
        return f"csibench-{self.prefix}"

    @property
    def report(self) -> str:
        return f"{self.prefix}-report"

    def volume(self, index: int) -> str:
        return f"{self.prefix}-v{index:05d}"

    def pod(self, index: int) -> str:
        return f"{self.prefix}-p{index:05d}"

    def snapshot(self, index: int) -> str:
        return f"{self.prefix}-s{index:05d}"

    def clone(self, index: int) -> str:
        return f"{self.prefix}-c{index:05d}"


def pod_count(volumes: int, per_pod: int) -> int:
    return math.ceil(volumes / per_pod)


def volumes_of_pod(pod_index: int, volumes: int, per_pod: int) -> list[int]:
    start = pod_index * per_pod
    return list(range(start, min(start + per_pod, volumes)))

"""Which steps a run executes and what each acts on (pure: decided before anything is created).

Step dependencies follow the lifecycle: everything needs createVolume; unpublish needs publish; clones need
snapshots; deleting clones needs clones. A spec that breaks them fails before the run touches the cluster.
Object names are deterministic (run name, a short uid prefix, kind letter, index) so that a restarted operator
finds what it created instead of creating it again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from csibench.api.models import MAX_RUN_NAME, BenchmarkRunSpec, StepName

LIFECYCLE = list(StepName)
SNAPSHOT_STEPS = {StepName.CREATE_SNAPSHOT, StepName.CLONE_FROM_SNAPSHOT, StepName.DELETE_CLONE,
                  StepName.DELETE_SNAPSHOT}
REQUIRES: dict[StepName, StepName] = {
    StepName.PUBLISH: StepName.CREATE_VOLUME,
    StepName.UNPUBLISH: StepName.PUBLISH,
    StepName.CREATE_SNAPSHOT: StepName.CREATE_VOLUME,
    StepName.CLONE_FROM_SNAPSHOT: StepName.CREATE_SNAPSHOT,
    StepName.DELETE_CLONE: StepName.CLONE_FROM_SNAPSHOT,
    StepName.DELETE_SNAPSHOT: StepName.CREATE_SNAPSHOT,
    StepName.DELETE_VOLUME: StepName.CREATE_VOLUME,
}


class PlanError(ValueError):
    """The spec cannot run; ``reason`` is a one-word condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def resolve_steps(spec: BenchmarkRunSpec) -> list[StepName]:
    """The spec's steps, or the default (every step the classes allow), checked for order and dependencies."""
    if spec.steps is None:
        steps = [s for s in LIFECYCLE if spec.volumeSnapshotClassName or s not in SNAPSHOT_STEPS]
    else:
        steps = list(spec.steps)
    if len(set(steps)) != len(steps):
        raise PlanError("InvalidSteps", f"steps must not repeat: {[s.value for s in steps]}")
    if steps != sorted(steps, key=LIFECYCLE.index):
        order = " → ".join(s.value for s in LIFECYCLE)
        raise PlanError("InvalidSteps", f"steps must follow the lifecycle order {order}")
    for step in steps:
        needed = REQUIRES.get(step)
        if needed is not None and needed not in steps:
            raise PlanError("InvalidSteps", f"step {step.value} needs step {needed.value} in the same run")
    if SNAPSHOT_STEPS & set(steps) and not spec.volumeSnapshotClassName:
        raise PlanError("MissingVolumeSnapshotClass",
                        "volumeSnapshotClassName is required when createSnapshot or cloneFromSnapshot runs")
    return steps


@dataclass(frozen=True)
class Names:
    """Deterministic names of everything a run creates."""

    prefix: str  # "<run name>-<uid[:5]>"

    @classmethod
    def for_run(cls, name: str, uid: str) -> Names:
        if len(name) > MAX_RUN_NAME:
            raise PlanError("NameTooLong", f"BenchmarkRun names are limited to {MAX_RUN_NAME} characters so "
                            f"that the objects it creates have valid names; {name!r} has {len(name)}")
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

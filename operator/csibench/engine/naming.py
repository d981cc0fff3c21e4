"""Deterministic names of everything a run creates, and which volumes each publish pod mounts (pure).

Names are the run's name, a short uid prefix, a kind letter and an index, so that a restarted operator finds
what it created instead of creating it again, and two runs of the same name in different namespaces differ.
Iterations after the first (``spec.repeat``) add ``-i<n>`` so that every iteration works on fresh objects whose
names never meet an earlier iteration's (still terminating) namesake: ``<run>-<uid5>-i2-v00042``.
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
    iteration: int = 1

    @classmethod
    def for_run(cls, name: str, uid: str) -> Names:
        if len(name) > MAX_RUN_NAME:
            raise PlanError(ConditionReason.NAME_TOO_LONG, f"BenchmarkRun names are limited to {MAX_RUN_NAME} "
                            f"characters so that the objects it creates have valid names; {name!r} has {len(name)}")
        if "." in name:
            raise PlanError(ConditionReason.INVALID_SPEC, f"BenchmarkRun name {name!r} contains '.': the namespace "
                            "and objects named after the run must be DNS labels")
        return cls(f"{name}-{uid[:5]}")

    def for_iteration(self, iteration: int) -> Names:
        return Names(self.prefix, iteration)

    @property
    def _objects(self) -> str:
        return self.prefix if self.iteration == 1 else f"{self.prefix}-i{self.iteration}"

    @property
    def namespace(self) -> str:
        return f"csibench-{self.prefix}"

    @property
    def report(self) -> str:
        return f"{self.prefix}-report"

    def volume(self, index: int) -> str:
        return f"{self._objects}-v{index:05d}"

    def pod(self, index: int) -> str:
        return f"{self._objects}-p{index:05d}"

    def snapshot(self, index: int) -> str:
        return f"{self._objects}-s{index:05d}"

    def clone(self, index: int) -> str:
        return f"{self._objects}-c{index:05d}"

    def group_snapshot(self, index: int) -> str:
        """A VolumeGroupSnapshot of group ``index`` (``-x`` + index); also the value of its claims' group label."""
        return f"{self._objects}-x{index:05d}"

    def data_pod(self, index: int) -> str:
        """Data-path pods (``-d`` + index): per workload, a pod per volume for its unthrottled run, then for each
        rate level, then for the local baseline; after every workload, verify's checksum pod per volume."""
        return f"{self._objects}-d{index:05d}"

    def verify_pod(self, index: int) -> str:
        """verifyClone's pods: one per clone, reading its files (``-k`` + index)."""
        return f"{self._objects}-k{index:05d}"

    def density_pod(self, index: int) -> str:
        """The density ramp's pods: level after level, each level's pods in order (``-n`` + index)."""
        return f"{self._objects}-n{index:05d}"

    def database_pod(self, index: int) -> str:
        """The database step's pod (PostgreSQL and pgbench): ``-g`` + index (one per run of the step)."""
        return f"{self._objects}-g{index:05d}"

    def ephemeral_pod(self, index: int) -> str:
        """createEphemeral's pods (``-e`` + index); each ephemeral claim is named ``<pod>-vol-<i>`` by Kubernetes
        (the pod's name, then its volume's)."""
        return f"{self._objects}-e{index:05d}"

    def modify_pod(self, index: int) -> str:
        """The modifyVolume step's fio pods: ``-f`` + index (volume i's: i before the change, volumes + i after)."""
        return f"{self._objects}-f{index:05d}"

    def shared_pod(self, index: int) -> str:
        """The sharedVolume step's probe pods: ``-r`` + index."""
        return f"{self._objects}-r{index:05d}"

    def shared_volume(self, index: int) -> str:
        """The sharedVolume step's ReadWriteMany claim: ``-w`` + index (one per run of the step)."""
        return f"{self._objects}-w{index:05d}"

    def churn_volume(self, index: int) -> str:
        """The churn's claims (``-u`` + index): wave w holds waveSize x w .. waveSize x (w + 1) - 1."""
        return f"{self._objects}-u{index:05d}"

    def churn_pod(self, index: int) -> str:
        """The churn's pods (``-t`` + index), pod i mounting claim i."""
        return f"{self._objects}-t{index:05d}"

    def database_volume(self, index: int) -> str:
        """The database step's own claim (its data directory and WAL): ``-q`` + index."""
        return f"{self._objects}-q{index:05d}"


def pod_count(volumes: int, per_pod: int) -> int:
    return math.ceil(volumes / per_pod)


def volumes_of_pod(pod_index: int, volumes: int, per_pod: int) -> list[int]:
    start = pod_index * per_pod
    return list(range(start, min(start + per_pod, volumes)))

"""What the run's disruptions did to objects it does not own, undone: the one call every exit path makes (the run's
end, the deleted run's cleanup, an operator that starts again, a finished run whose undo had failed).

Apart from ``scaling`` and ``cordoning`` because it changes with which kinds leave something to undo, not with how
each is undone: a ScaleDown's workload is given back the replicas its mark records (``scaling.restore``), a
DrainNode's nodes are uncordoned (``cordoning.uncordon_all``, found by the mark). Both are idempotent and act only
on objects carrying this run's uid.
"""

from __future__ import annotations

from collections.abc import Iterable

from csibench.api.models import DisruptionKind, DisruptionSpec
from csibench.engine.cordoning import uncordon_all
from csibench.engine.scaling import restore
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError


async def undo_all(client: KubeApi, run_uid: str, disruptions: Iterable[DisruptionSpec]) -> list[str]:
    """Every workload the run's ScaleDowns name, given back what this run's mark on it records, and every node its
    DrainNodes cordoned uncordoned; what could not be undone, with why (the caller says so: status, an Event, a
    retry)."""
    problems: list[str] = []
    disruptions = list(disruptions)
    if any(disruption.kind == DisruptionKind.DRAIN_NODE for disruption in disruptions):
        problems += await uncordon_all(client, run_uid)
    for disruption in disruptions:
        if disruption.kind != DisruptionKind.SCALE_DOWN or disruption.workload is None:
            continue
        try:
            await restore(client, disruption.workload, run_uid)
        except ApiError as error:
            problems.append(f"{disruption.workload.describe()}: {error.message}")
    return problems

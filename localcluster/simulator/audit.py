"""The array's audit: what it still holds of a run's volumes and snapshots, and what it did twice, asked through
the API.

csibench can count on any cluster what a run left behind that Kubernetes shows (PVs, snapshot contents). What
only the storage knows is what it still holds that no PV or content names: a delete the driver acknowledged
without doing, a volume created while its claim went away. A real array answers that through its own console;
this one answers through the API, so the operator needs no channel to it:

- the operator creates (or asks again on) a ConfigMap labelled ``csibench.io/array-audit`` in its run's
  namespace, with ``data.request``: ``{"id", "runUid"}``;
- this auditor watches those ConfigMaps and writes ``data.answer`` once per request id: the run's volumes and
  snapshots the array holds (their CreateVolume/CreateSnapshot names: the PV's ``pvc-<claim uid>``, the content's
  ``snapshot-<VolumeSnapshot uid>``), and each create or delete of them the array did more than once, with when
  it began each time after the first (``at``, RFC 3339: the run tells which of its disruptions made it).

The array attributes a volume to a run when it creates it: the claim's ``csibench.io/run-uid`` label (the
provisioner's ``--extra-create-metadata`` names the claim); a snapshot is its source volume's run's. So the answer
holds after the claim is gone, and counts only what the run itself made (``Driver.owners``). The CSIDriver
object says the array answers (annotation ``csibench.io/array-audit``), so a run on any other driver never waits
for an answer.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from localcluster.simulator import api
from localcluster.simulator.config import ARRAY_AUDIT
from localcluster.simulator.driver import Driver
from localcluster.simulator.requests import RequestWatcher

log = logging.getLogger(__name__)

AUDIT_LABEL = ARRAY_AUDIT
MAX_NAMED = 1000  # names listed per kind in an answer (well under a ConfigMap's 1 MiB); counts are always exact
MAX_STAMPS = 20  # times listed per repeated operation


def stamp(epoch: float) -> str:
    """An epoch time as RFC 3339 with microseconds (pure)."""
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def build_answer(driver: Driver, request: dict[str, Any]) -> dict[str, Any]:
    """The answer to one request, from the array's records as they are now (pure over ``driver``)."""
    run_uid = str(request.get("runUid") or "")

    def run_owns(name: str) -> bool:
        return bool(run_uid) and driver.owners.get(name) == run_uid

    creating = [name for name in driver.creating() if run_owns(name)]  # held once done: the array finishes them
    volumes = sorted({record.name for record in driver.volumes.values() if run_owns(record.name)}
                     | {name for name in creating if name.startswith("pvc-")})
    snapshots = sorted({name for name in (snapshot_id.split("@", 1)[0] for snapshot_id in driver.snapshots)
                        if run_owns(name)} | {name for name in creating if not name.startswith("pvc-")})
    repeated = sorted((operation, name, times) for (operation, name), times in driver.performed.items()
                      if times > 1 and run_owns(name))
    return {"id": request.get("id"), "volumeCount": len(volumes), "volumes": volumes[:MAX_NAMED],
            "snapshotCount": len(snapshots), "snapshots": snapshots[:MAX_NAMED],
            "repeatedCount": sum(times - 1 for _, _, times in repeated),
            "repeated": [{"operation": operation, "object": name, "times": times,
                          "at": [stamp(t) for t in driver.repeated_at.get((operation, name), [])[:MAX_STAMPS]]}
                         for operation, name, times in repeated[:MAX_NAMED]]}


class Auditor(RequestWatcher):
    """Answers each audit request once, from the driver's records."""

    def __init__(self, client: api.Client, driver: Driver) -> None:
        super().__init__(client, AUDIT_LABEL)
        self.driver = driver

    async def serve(self, configmap: api.Obj, request: dict[str, Any]) -> None:
        refused = foreign_request(configmap, request)
        answer = {"id": request["id"], "error": refused} if refused else build_answer(self.driver, request)
        if await self.write_answer(configmap, answer, precondition=True):
            log.info("audit %s answered: %s", api.key_of(configmap), refused or f"{answer['volumeCount']} volumes, "
                     f"{answer['snapshotCount']} snapshots held; {answer['repeatedCount']} operations repeated")


def foreign_request(configmap: api.Obj, request: dict[str, Any]) -> str | None:
    """Why a request may not be answered (pure): the run it asks about must be the one that owns the ConfigMap
    and that its label names, so a ConfigMap cannot ask about another run's objects. None: it may."""
    meta = configmap.get("metadata") or {}
    run_uid = str(request.get("runUid") or "")
    owners = {str(owner.get("uid")) for owner in meta.get("ownerReferences") or []}
    if not run_uid or (meta.get("labels") or {}).get(AUDIT_LABEL) != run_uid or run_uid not in owners:
        return "the request's runUid must be the ConfigMap's owner's uid and its csibench.io/array-audit label"
    return None

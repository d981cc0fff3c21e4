"""A schedule's runs as manifests (pure ``build_*``), and the proof that a run is the schedule's own.

A run carries a controller owner reference to its schedule (deleting the schedule deletes its runs, each cleaned up
by its own finalizer), the schedule's uid label (ownership: nothing is deleted without it) and name label (``csibench
history -l csibench.io/schedule=<name>``), and the time it was made for, as an annotation and in its name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from csibench.api.models import GROUP, KIND, VERSION
from csibench.api.schedule import (
    SCHEDULE_KIND,
    SCHEDULE_NAME_LABEL,
    SCHEDULE_UID_LABEL,
    SCHEDULED_AT_ANNOTATION,
    run_name,
)
from csibench.kube.ownership import MANAGED_BY_LABEL, MANAGER, controlled_by
from csibench.schedule.progress import rfc3339


def build_scheduled_run(schedule_name: str, schedule_uid: str, template: dict[str, Any],
                        at: datetime) -> dict[str, Any]:
    """The BenchmarkRun of one scheduled time."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": run_name(schedule_name, int(at.timestamp())),
            "labels": {SCHEDULE_UID_LABEL: schedule_uid, SCHEDULE_NAME_LABEL: schedule_name,
                       MANAGED_BY_LABEL: MANAGER},
            "annotations": {SCHEDULED_AT_ANNOTATION: rfc3339(at)},
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": SCHEDULE_KIND, "name": schedule_name,
                                 "uid": schedule_uid, "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": template,
    }


def owned_by(run: dict[str, Any], schedule_uid: str) -> bool:
    """Proof: the run carries the schedule's uid label and a controller owner reference to it."""
    return controlled_by(run, SCHEDULE_UID_LABEL, SCHEDULE_KIND, schedule_uid)

"""A suite's child runs as manifests (pure ``build_*``), and the proof that a run is the suite's own.

A child carries an owner reference to its suite (so deleting the suite deletes its runs, and each run's own
finalizer cleans up what it created) and the suite's labels (its uid proves ownership; cell and round say which
one it is). Its name is deterministic, ``<suite>-c<cell>-r<round>``: after an operator restart, creating it
again answers AlreadyExists instead of starting the cell twice.
"""

from __future__ import annotations

from typing import Any

from csibench.api.models import GROUP, KIND, VERSION
from csibench.api.suite import (
    CELL_LABEL,
    ROUND_LABEL,
    SUITE_KIND,
    SUITE_NAME_LABEL,
    SUITE_UID_LABEL,
    BenchmarkSuiteSpec,
    Slot,
    child_spec,
)
from csibench.kube.ownership import MANAGED_BY_LABEL, MANAGER, controlled_by


def child_labels(suite_name: str, suite_uid: str, slot: Slot) -> dict[str, str]:
    return {SUITE_UID_LABEL: suite_uid, SUITE_NAME_LABEL: suite_name, CELL_LABEL: slot.cell.id,
            ROUND_LABEL: str(slot.round), MANAGED_BY_LABEL: MANAGER}


def build_child(suite_name: str, suite_uid: str, spec: BenchmarkSuiteSpec, slot: Slot) -> dict[str, Any]:
    """The BenchmarkRun of one cell in one round."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": slot.child_name(suite_name),
            "labels": child_labels(suite_name, suite_uid, slot),
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": SUITE_KIND, "name": suite_name,
                                 "uid": suite_uid, "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": child_spec(spec, slot.cell),
    }


def owned_by(run: dict[str, Any], suite_uid: str) -> bool:
    """Proof: the run carries the suite's uid label and a controller owner reference to it."""
    return controlled_by(run, SUITE_UID_LABEL, SUITE_KIND, suite_uid)

"""Labels that mark what a run created: the run never reads, counts or deletes objects without them.

Selection is by the run's uid (unique even when two runs share a name in different namespaces, and stable
across operator restarts); the name label is for humans (``kubectl get pvc -l csibench.io/run=seed-1000``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RUN_UID_LABEL = "csibench.io/run-uid"
RUN_NAME_LABEL = "csibench.io/run"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
REPORT_OF_LABEL = "csibench.io/report-of"
MANAGER = "csibench"
OWNER_API_VERSION = "csibench.io/v1alpha1"  # of a suite or schedule that owns runs (the admission policy's check too)


def run_labels(run_name: str, run_uid: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Labels for every object a run creates; the user's extra labels cannot override ownership."""
    return {**(extra or {}), RUN_UID_LABEL: run_uid, RUN_NAME_LABEL: run_name, MANAGED_BY_LABEL: MANAGER}


def selector(run_uid: str) -> str:
    return f"{RUN_UID_LABEL}={run_uid}"


@dataclass(frozen=True)
class RunScope:
    """Everything a run may touch, carried into cleanup: the objects in ``namespace`` that carry its uid label,
    and ``owned_namespace``, the namespace the run creates when it has no target (deleted only while it still
    carries the label, whatever spec or status say)."""

    namespace: str
    prefix: str  # the run's object-name prefix, "<run name>-<uid[:5]>"
    run_uid: str
    owned_namespace: str | None = None

    @property
    def selector(self) -> str:
        return selector(self.run_uid)

    def owns(self, metadata: dict[str, Any]) -> bool:
        """Proof of ownership: the object carries this run's uid label."""
        return (metadata.get("labels") or {}).get(RUN_UID_LABEL) == self.run_uid


def controlled_by(obj: dict[str, Any], uid_label: str, owner_kind: str, owner_uid: str) -> bool:
    """Proof that a suite's or a schedule's run is its own: it carries the owner's uid label and a controller
    owner reference of that kind to that same uid (a label alone can be copied; a reference cannot be made to an
    object the maker may not see)."""
    meta = obj.get("metadata") or {}
    labelled = (meta.get("labels") or {}).get(uid_label) == owner_uid
    return labelled and any(ref.get("uid") == owner_uid and ref.get("kind") == owner_kind and ref.get("controller")
                            and ref.get("apiVersion") == OWNER_API_VERSION for ref in meta.get("ownerReferences") or [])

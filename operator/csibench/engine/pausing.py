"""PauseApiServer / PauseEtcd: how the operator asks csibench's local cluster to freeze a control-plane process.

Only the local cluster can do this, and only through the API: it registers a pod per control-plane process in
kube-system (kubeadm's names and labels: ``component=kube-apiserver``, ``component=etcd``) marked
``csibench.io/pausable``, and its pauser watches them. The operator writes a request on the pod (the annotation
``csibench.io/pause-request``: an id and the seconds); the pauser freezes the process (SIGSTOP), resumes it
(SIGCONT) after the seconds by its own clock — so a pause always ends, whatever happens to the operator or the
run — and answers on the same pod (``csibench.io/paused``: the id, when it stopped and resumed). On a real
cluster no pod carries the mark and a run asking for a pause fails before creating anything.
"""

from __future__ import annotations

import json

from csibench.api.models import DisruptionKind
from csibench.kube.client import Json

PAUSABLE_ANNOTATION = "csibench.io/pausable"  # value: the component the pod stands for (local cluster only)
REQUEST_ANNOTATION = "csibench.io/pause-request"  # {"id": ..., "seconds": ...}
ANSWER_ANNOTATION = "csibench.io/paused"  # {"id": ..., "stoppedAt": RFC 3339, "resumedAt": RFC 3339}
CONTROL_PLANE_NAMESPACE = "kube-system"  # where the local cluster registers the pods a pause is asked on


def pause_query(kind: DisruptionKind) -> dict[str, str]:
    """The pods of the process a pause freezes (kubeadm's component label)."""
    return {"labelSelector": f"component={kind.paused_component()}"}


def pausable(pod: Json, kind: DisruptionKind) -> bool:
    """Whether the local cluster marked this pod as the one to ask for this pause (pure)."""
    meta = pod.get("metadata") or {}
    return (meta.get("namespace") == CONTROL_PLANE_NAMESPACE and not meta.get("deletionTimestamp")
            and (meta.get("annotations") or {}).get(PAUSABLE_ANNOTATION) == kind.paused_component())


def not_local(kind: DisruptionKind) -> str:
    return (f"{kind} works only on csibench's local cluster: no pod in {CONTROL_PLANE_NAMESPACE} labelled "
            f"component={kind.paused_component()} carries {PAUSABLE_ANNOTATION} (a real cluster's control plane is "
            "not the operator's to freeze)")


def build_request(pod_uid: str, request_id: str, seconds: int) -> Json:
    """The merge patch asking for a pause (pure); the pod's uid is a precondition."""
    return {"metadata": {"uid": pod_uid, "annotations": {
        REQUEST_ANNOTATION: json.dumps({"id": request_id, "seconds": seconds}, sort_keys=True)}}}


def answer_of(pod: Json, request_id: str) -> tuple[str, str] | None:
    """(stoppedAt, resumedAt) when the pod's answer is to this request (pure); None otherwise or when another
    writer left something else there."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANSWER_ANNOTATION)
    try:
        answer = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("id") != request_id:
        return None
    stopped, resumed = answer.get("stoppedAt"), answer.get("resumedAt")
    if not isinstance(stopped, str) or not isinstance(resumed, str):
        return None
    return stopped, resumed

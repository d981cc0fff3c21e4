"""Helpers to create BenchmarkRuns on the local cluster and check what they leave behind."""

from __future__ import annotations

import base64
import gzip
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from localcluster.kube import (
    GROUP_HANDLE,
    GROUP_SNAPSHOT_GROUP,
    SNAPSHOT_GROUP,
    Kube,
    items,
    json_object,
    present,
    wait_until,
)

GROUP, VERSION, PLURAL = "csibench.io", "v1alpha1", "benchmarkruns"
TERMINAL = {"Succeeded", "Failed"}
POPULATION_LABEL = "csibench.io/population-of"  # a run's population (spec.population) carries its uid under it


def benchmark_run(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkRun", "metadata": {"name": name}, "spec": spec}


def create_run(kube: Kube, namespace: str, body: dict[str, Any], plural: str = PLURAL) -> dict[str, Any]:
    """Create a BenchmarkRun (or, with ``plural``, another csibench resource: benchmarksuites)."""
    return json_object(kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body))


def get_run(kube: Kube, namespace: str, name: str, plural: str = PLURAL) -> dict[str, Any] | None:
    """A BenchmarkRun (or, with ``plural``, another csibench resource), or None if there is none."""
    try:
        return json_object(kube.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name))
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _in_phase(run: dict[str, Any] | None, phases: set[str]) -> bool:
    return bool(run) and ((run or {}).get("status") or {}).get("phase") in phases


def wait_for_phase(kube: Kube, namespace: str, name: str, phases: set[str], timeout: float) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        run = get_run(kube, namespace, name)
        return run if _in_phase(run, phases) else None

    try:
        return wait_until(probe, timeout, f"BenchmarkRun {namespace}/{name} in phase {sorted(phases)}", interval=0.2)
    except AssertionError as error:
        raise _stuck(kube, namespace, name, error) from None


def watch_for_phase(kube: Kube, namespace: str, name: str, phases: set[str], timeout: float) -> dict[str, Any]:
    """``wait_for_phase`` from a watch of the one run instead of a GET every 0.2 s: for benches, whose own requests
    must not load the API server while the run measures (five GETs a second of a run with a data path's status
    cost it 0.02-0.05 of a core, which moved a sub-millisecond fio p99 on 2 cores: docs/benchmarks.md §6). A watch
    that ends (its timeout, a version too old or not yet in the API server's cache, a dropped connection) is
    followed by a GET and a new watch; a run deleted before it got there fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        run = get_run(kube, namespace, name)  # where it is now, and the version to watch from
        if run and _in_phase(run, phases):
            return run
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _stuck(kube, namespace, name, AssertionError(
                f"BenchmarkRun {namespace}/{name} not in phase {sorted(phases)} within {timeout:.0f}s"))
        since = {"resource_version": run["metadata"]["resourceVersion"]} if run else {}
        seconds = int(min(remaining, 60)) + 1
        try:
            for event in watch.Watch().stream(  # type: ignore[no-untyped-call]  # the watch module is unannotated
                    kube.custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL,
                    field_selector=f"metadata.name={name}", timeout_seconds=seconds,
                    _request_timeout=seconds + 10, **since):
                found = event["object"]
                if event["type"] == "DELETED":
                    raise _stuck(kube, namespace, name, AssertionError(
                        f"BenchmarkRun {namespace}/{name} was deleted before it reached phase {sorted(phases)}"))
                if event["type"] in ("ADDED", "MODIFIED") and _in_phase(found, phases):
                    return json_object(found)
        except ApiException as error:
            if error.status not in (410, 504):  # a version too old, or not yet in the watch cache: read it again
                raise
        except (ReadTimeoutError, ProtocolError):  # a stalled or dropped connection: read it again
            pass


def _stuck(kube: Kube, namespace: str, name: str, error: AssertionError) -> AssertionError:
    """A hung run's timeout: where it is, and what has not settled (the operator's log is attached to the failure
    by the integration tests' conftest)."""
    try:
        where = describe_stuck_run(kube, namespace, name)
    except Exception as failure:  # the timeout's own message must survive a cluster that no longer answers
        where = f"the run could not be described: {failure}"
    return AssertionError(f"{error}; {where}")


def run_to_end(kube: Kube, namespace: str, body: dict[str, Any], timeout: float = 180) -> dict[str, Any]:
    create_run(kube, namespace, body)
    return wait_for_phase(kube, namespace, body["metadata"]["name"], TERMINAL, timeout)


def step(run: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in run["status"]["steps"] if s["name"] == name)
    return found


def read_report(kube: Kube, run: dict[str, Any]) -> dict[str, Any]:
    configmap = kube.core.read_namespaced_config_map(run["status"]["reportConfigMap"], run["metadata"]["namespace"])
    compressed = base64.b64decode(present(configmap.binary_data)["report.json.gz"])
    return json_object(json.loads(gzip.decompress(compressed)))


def leftovers(kube: Kube, run: dict[str, Any]) -> dict[str, list[str]]:
    """Everything in the cluster that belongs to the run: labelled objects, and volumes that point at them (its
    population's too, "pop-<prefix>": the seed's volume and content carry no label)."""
    run_uid = run["metadata"]["uid"]
    target_namespace = run["status"]["targetNamespace"]
    prefix = f"{run['metadata']['name']}-{run_uid[:5]}-"  # the run's deterministic object-name prefix
    label = f"csibench.io/run-uid={run_uid}"
    found = {
        "namespaces": [present(present(n.metadata).name) for n in kube.core.list_namespace(label_selector=label).items],
        "pvcs": [present(present(p.metadata).name) for p in
                 kube.core.list_persistent_volume_claim_for_all_namespaces(label_selector=label).items],
        "pods": [present(present(p.metadata).name)
                 for p in kube.core.list_pod_for_all_namespaces(label_selector=label).items],
        "snapshots": [s["metadata"]["name"] for s in items(kube.custom.list_cluster_custom_object(
            *SNAPSHOT_GROUP, "volumesnapshots", label_selector=label))],
        "pvs": [present(present(p.metadata).name) for p in kube.core.list_persistent_volume().items
                if (ref := present(p.spec).claim_ref) and ref.namespace == target_namespace
                and present(ref.name).startswith((prefix, f"pop-{prefix}"))],
        "contents": [c["metadata"]["name"] for c in kube.snapshot_contents()
                     if c["spec"]["volumeSnapshotRef"]["namespace"] == target_namespace
                     and c["spec"]["volumeSnapshotRef"]["name"].startswith((prefix, f"pop-{prefix}"))],
        **group_leftovers(kube, target_namespace, prefix, label),
        **population_leftovers(kube, run_uid),
    }
    return {kind: names for kind, names in found.items() if names}


def population_leftovers(kube: Kube, owner_uid: str) -> dict[str, list[str]]:
    """A population's objects (spec.population): everything labelled with its owner's uid, in any namespace."""
    label = f"{POPULATION_LABEL}={owner_uid}"
    return {
        "populationPvcs": [present(present(p.metadata).name) for p in
                           kube.core.list_persistent_volume_claim_for_all_namespaces(label_selector=label).items],
        "populationPvs": [present(present(p.metadata).name)
                          for p in kube.core.list_persistent_volume(label_selector=label).items],
        "populationSnapshots": [s["metadata"]["name"] for s in items(kube.custom.list_cluster_custom_object(
            *SNAPSHOT_GROUP, "volumesnapshots", label_selector=label))],
        "populationContents": [c["metadata"]["name"] for c in items(kube.custom.list_cluster_custom_object(
            *SNAPSHOT_GROUP, "volumesnapshotcontents", label_selector=label))],
    }


def group_leftovers(kube: Kube, target_namespace: str, prefix: str, label: str) -> dict[str, list[str]]:
    """A run's group snapshots, their contents, and the snapshot-controller's member snapshots and contents
    (unlabelled: owned by one of the run's groups, or pointing at a member in the run's namespace)."""
    groups = items(kube.custom.list_cluster_custom_object(*GROUP_SNAPSHOT_GROUP, "volumegroupsnapshots",
                                                          label_selector=label))
    group_contents = items(kube.custom.list_cluster_custom_object(*GROUP_SNAPSHOT_GROUP,
                                                                  "volumegroupsnapshotcontents"))
    members = items(kube.custom.list_namespaced_custom_object(*SNAPSHOT_GROUP, target_namespace, "volumesnapshots"))
    return {
        "groupSnapshots": [g["metadata"]["name"] for g in groups],
        "groupContents": [c["metadata"]["name"] for c in group_contents
                          if c["spec"]["volumeGroupSnapshotRef"].get("namespace") == target_namespace
                          and c["spec"]["volumeGroupSnapshotRef"].get("name", "").startswith(prefix)],
        "memberSnapshots": [m["metadata"]["name"] for m in members
                            if any(ref.get("kind") == "VolumeGroupSnapshot" and ref.get("name", "").startswith(prefix)
                                   for ref in m["metadata"].get("ownerReferences") or [])],
        "memberContents": [c["metadata"]["name"] for c in kube.snapshot_contents()
                           if GROUP_HANDLE in (c["metadata"].get("annotations") or {})
                           and c["spec"]["volumeSnapshotRef"]["namespace"] == target_namespace],
    }


def wait_until_nothing_left(kube: Kube, run: dict[str, Any], timeout: float, what: str) -> None:
    """Wait until ``leftovers`` is empty; fail naming what is still there and what the run's cleanup said."""
    left: dict[str, list[str]] = {}

    def nothing_left() -> bool:
        nonlocal left
        left = leftovers(kube, run)
        return not left

    try:
        wait_until(nothing_left, timeout, what)
    except AssertionError as error:
        now = get_run(kube, run["metadata"]["namespace"], run["metadata"]["name"]) or run
        cleanup = (now.get("status") or {}).get("cleanup")
        raise AssertionError(f"{error}; still there: {left}; the run's cleanup: {cleanup!r}") from None


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:4]}"


def _unsettled(kind: str, items: list[dict[str, Any]], settled: Callable[[dict[str, Any]], bool],
               limit: int = 4) -> str:
    """'snapshots: 3 of 25 unsettled: s1 (deleting, finalizers [...], readyToUse False, error {...}); ...'"""
    stuck = [item for item in items if item["metadata"].get("deletionTimestamp") or not settled(item)]
    if not stuck:
        return f"{kind}: {len(items)}, all settled"
    shown = []
    for item in stuck[:limit]:
        meta, state = item["metadata"], item.get("status") or {}
        facts = ["deleting" if meta.get("deletionTimestamp") else "live",
                 f"finalizers {meta.get('finalizers') or []}"]
        facts += [f"{key} {state[key]}" for key in ("phase", "readyToUse", "error") if key in state]
        shown.append(f"{meta['name']} ({', '.join(facts)})")
    return f"{kind}: {len(stuck)} of {len(items)} unsettled: {'; '.join(shown)}"


def describe_stuck_run(kube: Kube, namespace: str, name: str) -> str:
    """One line on a run that did not end in time: where it is, and what in its namespace has not settled
    (deleting, not bound, not ready). A test's long output is cut in the middle by CI, so this goes first."""
    run = get_run(kube, namespace, name)
    if run is None:
        return f"run {namespace}/{name} does not exist"
    status = run.get("status") or {}
    steps = ", ".join(f"{s['name']} {s['state']} {s.get('succeeded', 0)}+{s.get('failed', 0)}/{s.get('objects', '?')}"
                      for s in status.get("steps", []))
    parts = [f"phase {status.get('phase')}, step {status.get('currentStep')} at {status.get('progress')}",
             f"message {status.get('message')!r}", f"steps [{steps}]"]
    target = status.get("targetNamespace")
    if target:
        claims = [kube.as_json(c) for c in kube.core.list_namespaced_persistent_volume_claim(target).items]
        pods = [kube.as_json(p) for p in kube.core.list_namespaced_pod(target).items]
        snapshots = kube.snapshots(target)
        contents = [c for c in kube.snapshot_contents() if c["spec"]["volumeSnapshotRef"]["namespace"] == target]
        parts += [_unsettled("claims", claims, lambda c: (c.get("status") or {}).get("phase") == "Bound"),
                  _unsettled("pods", pods, lambda p: (p.get("status") or {}).get("phase") == "Running"),
                  _unsettled("snapshots", snapshots, lambda s: (s.get("status") or {}).get("readyToUse") is True),
                  _unsettled("contents", contents, lambda c: (c.get("status") or {}).get("readyToUse") is True)]
    return "; ".join(parts)


def assert_failed_without_objects(kube: Kube, namespace: str, name: str, reason: str, words: str) -> None:
    """The run ended Failed before its first object: Ready False with ``reason`` and ``words``, no namespace or
    claim carrying its label, no target namespace recorded."""
    run = wait_for_phase(kube, namespace, name, {"Failed", "Succeeded"}, 60)
    status = run["status"]
    assert status["phase"] == "Failed"
    condition = status["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Ready", "False", reason)
    assert words in condition["message"]
    label = f"csibench.io/run-uid={run['metadata']['uid']}"
    assert kube.core.list_namespace(label_selector=label).items == []
    assert kube.core.list_persistent_volume_claim_for_all_namespaces(label_selector=label).items == []
    assert "targetNamespace" not in status

"""The full report of a run, stored where it survives operator restarts and outlives nothing it should.

Status holds aggregates only; the report holds everything (spec, environment, per-step aggregates and
per-object submit offsets, latencies and results). It is gzip-compressed JSON in a ConfigMap's binaryData,
in the run's namespace, owned by the run (garbage-collected with it) and labelled ``csibench.io/report-of``
rather than with the run's ownership label, so cleanup never removes the results it just produced.
Per-object arrays are in object-index order (names are deterministic), which keeps 10,000 volumes small
(about 650 KB compressed for 8 steps); larger reports are split over numbered ConfigMaps, each under 1 MiB.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from csibench.api.baseline import fails
from csibench.api.collect import StepCollection
from csibench.api.models import GROUP, KIND, VERSION
from csibench.api.stored_report import REPORT_FORMAT, SCHEMA_VERSION, iteration_records
from csibench.engine.catalog import STEPS
from csibench.engine.collection import record_metrics as record_collection_metrics
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.ownership import REPORT_OF_LABEL
from csibench.metrics import METRICS

REPORT_KEY = "report.json.gz"
CHUNK_BYTES = 700 * 1024  # gzip bytes per ConfigMap: base64 makes ~933 KiB, under the 1 MiB object limit
CHUNKS_ANNOTATION = "csibench.io/report-chunks"


def encode_report(report: dict[str, Any]) -> bytes:
    return gzip.compress(json.dumps(report, separators=(",", ":")).encode(), compresslevel=9)


def decode_report(encoded: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(gzip.decompress(encoded))
    return decoded


def chunk_name(name: str, index: int) -> str:
    return name if index == 0 else f"{name}-{index}"


def build_report_configmaps(name: str, run_name: str, run_uid: str, report: dict[str, Any]) -> list[dict[str, Any]]:
    """One ConfigMap per 700 KiB of compressed report; the first names how many there are."""
    data = encode_report({"format": REPORT_FORMAT, "schemaVersion": SCHEMA_VERSION, **report})
    chunks = [data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]
    return [{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": chunk_name(name, index), "labels": {REPORT_OF_LABEL: run_name},
            "annotations": {CHUNKS_ANNOTATION: str(len(chunks))},
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": run_name,
                                 "uid": run_uid, "controller": True, "blockOwnerDeletion": False}],
        },
        "binaryData": {REPORT_KEY: base64.b64encode(chunk).decode()},
    } for index, chunk in enumerate(chunks)]


class ReportNameTaken(RuntimeError):
    """A ConfigMap of the report's name exists and is not this run's report: it is left as it is."""


def _is_report_of(configmap: dict[str, Any], run_uid: str) -> bool:
    owners = (configmap.get("metadata") or {}).get("ownerReferences") or []
    return any(owner.get("uid") == run_uid and owner.get("kind") == KIND for owner in owners)


async def save_report(client: KubeApi, namespace: str, configmaps: list[dict[str, Any]], run_uid: str) -> None:
    """Create the report's ConfigMaps; one that exists is overwritten only if it is this run's own report."""
    for configmap in configmaps:
        if not await client.create(r.CONFIGMAPS.path(namespace), configmap):
            path = r.CONFIGMAPS.path(namespace, configmap["metadata"]["name"])
            existing = await client.get(path)
            if existing is not None and not _is_report_of(existing, run_uid):
                raise ReportNameTaken(f"ConfigMap {namespace}/{configmap['metadata']['name']} exists and is not "
                                      "this run's report; it was left untouched")
            await client.merge_patch(path, {"metadata": {"annotations": configmap["metadata"]["annotations"]},
                                            "binaryData": configmap["binaryData"]})


async def load_report(client: KubeApi, namespace: str, name: str,
                      run_uid: str | None = None) -> dict[str, Any] | None:
    """The stored report, or None; with ``run_uid``, only a report owned by that run counts."""
    first = await client.get(r.CONFIGMAPS.path(namespace, name))
    if first is None or (run_uid is not None and not _is_report_of(first, run_uid)):
        return None
    count = int((first["metadata"].get("annotations") or {}).get(CHUNKS_ANNOTATION, "1"))
    parts = [first]
    for index in range(1, count):
        part = await client.get(r.CONFIGMAPS.path(namespace, chunk_name(name, index)))
        if part is None:
            raise ValueError(f"report {namespace}/{name} is missing part {index} of {count}")
        parts.append(part)
    return decode_report(b"".join(base64.b64decode(p["binaryData"][REPORT_KEY]) for p in parts))


def restore_run_metrics(run_label: str, storage_class: str, status: dict[str, Any],
                        report: dict[str, Any] | None) -> None:
    """Re-create a finished run's series: step gauges, workload rows and the verdict from status, latency
    histograms from the report."""
    if status.get("verdict"):
        broken = sum(1 for r in status.get("thresholds") or [] if r.get("met") is False)
        comparison = status.get("baseline") or {}
        broken += sum(1 for r in comparison.get("rows") or []
                      if fails(r.get("change"), bool(comparison.get("failOnSlower"))))
        METRICS.set_verdict(run_label, str(status["verdict"]), broken)
    for step in STEPS.values():  # the workload steps' rows (data path, database)
        if step.results is not None:
            step.results.record_metrics(run_label, step.results.from_status(status))
    for index, disruption in enumerate(status.get("disruptions") or []):
        METRICS.record_disruption(run_label, index, disruption)
    if status.get("leaks"):
        METRICS.record_leaks(run_label, status["leaks"])
    for step in status.get("steps") or []:
        METRICS.record_step(run_label, step["name"], storage_class, step.get("durationSeconds"),
                            step.get("throughput"), step.get("succeeded", 0), step.get("failed", 0),
                            step.get("skipped", 0))
        METRICS.record_phases(run_label, step["name"], step.get("phases") or [])
        if step.get("collection"):
            record_collection_metrics(run_label, step["name"], StepCollection.model_validate(step["collection"]))
    steps = [step for record in iteration_records(report or {}) for step in record["steps"]]
    for step in steps:
        name = step["status"]["name"]
        for latency_ms, result in zip(step["latencyMs"], step["result"], strict=True):
            if latency_ms is not None and result not in ("Skipped", "Pending"):
                METRICS.observe_object(run_label, name, storage_class, result == "ok", latency_ms / 1000)

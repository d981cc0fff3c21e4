"""The full report of a run, stored where it survives operator restarts and outlives nothing it should.

Status holds aggregates only; the report holds everything (spec, environment, per-step aggregates and
per-object submit offsets, latencies and results). It is gzip-compressed JSON in a ConfigMap's binaryData,
in the run's namespace, owned by the run (garbage-collected with it) and labelled ``csibench.io/report-of``
rather than with the run's ownership label, so cleanup never removes the results it just produced.
Per-object arrays are in object-index order (names are deterministic), which keeps 10,000 volumes small.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from csibench.api.models import GROUP, KIND, VERSION
from csibench.kube import resources as r
from csibench.kube.client import KubeClient
from csibench.kube.ownership import REPORT_OF_LABEL

REPORT_KEY = "report.json.gz"
REPORT_FORMAT = "csibench.io/report-v1"


def encode_report(report: dict[str, Any]) -> str:
    raw = json.dumps(report, separators=(",", ":")).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6)).decode()


def decode_report(encoded: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(encoded)))
    return decoded


def build_report_configmap(name: str, run_name: str, run_uid: str, report: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": name, "labels": {REPORT_OF_LABEL: run_name},
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": run_name,
                                 "uid": run_uid, "controller": True, "blockOwnerDeletion": False}],
        },
        "binaryData": {REPORT_KEY: encode_report({"format": REPORT_FORMAT, **report})},
    }


async def save_report(client: KubeClient, namespace: str, configmap: dict[str, Any]) -> None:
    path = r.CONFIGMAPS.path(namespace)
    if not await client.create(path, configmap):
        await client.merge_patch(r.CONFIGMAPS.path(namespace, configmap["metadata"]["name"]),
                                 {"binaryData": configmap["binaryData"]})


async def load_report(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    configmap = await client.get(r.CONFIGMAPS.path(namespace, name))
    if configmap is None:
        return None
    return decode_report(configmap["binaryData"][REPORT_KEY])

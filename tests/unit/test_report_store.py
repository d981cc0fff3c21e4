"""The stored report: encoding, splitting over ConfigMaps, names."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

from csibench.api.stored_report import object_names
from csibench.engine.report_store import build_report_configmaps, decode_report


def _report_of(volumes: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    steps = [{"objectPrefix": "run-abcde-v", "objectCount": volumes,
              "submitMs": [round(i * 0.8 + rng.random(), 1) for i in range(volumes)],
              "latencyMs": [round(rng.uniform(200, 90_000), 1) for _ in range(volumes)],
              "result": ["ok"] * volumes} for _ in range(8)]
    return {"steps": steps}


def test_a_10000_volume_report_fits_one_configmap_and_round_trips() -> None:
    report = _report_of(10_000, seed=1)
    configmaps = build_report_configmaps("run-abcde-report", "run", "uid", report)
    assert len(configmaps) == 1
    assert len(json.dumps(configmaps[0])) < 1024 * 1024  # the API server's object size limit
    encoded = base64.b64decode(configmaps[0]["binaryData"]["report.json.gz"])
    assert decode_report(encoded) == {"format": "csibench.io/report-v2", "schemaVersion": 2, **report}
    assert object_names(report["steps"][0])[9999] == "run-abcde-v09999"


def test_a_100000_volume_report_is_split_into_configmaps_under_the_limit() -> None:
    report = _report_of(100_000, seed=2)
    configmaps = build_report_configmaps("big-report", "big", "uid", report)
    assert len(configmaps) > 1
    assert [c["metadata"]["name"] for c in configmaps[:2]] == ["big-report", "big-report-1"]
    assert all(len(json.dumps(c)) < 1024 * 1024 for c in configmaps)
    assert {c["metadata"]["annotations"]["csibench.io/report-chunks"] for c in configmaps} == {str(len(configmaps))}
    joined = b"".join(base64.b64decode(c["binaryData"]["report.json.gz"]) for c in configmaps)
    assert decode_report(joined)["steps"][7]["latencyMs"] == report["steps"][7]["latencyMs"]

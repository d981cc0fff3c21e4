"""A run's shape: what it measured on and how much (class, volumes, PVCs per pod, size, access and volume mode,
steps, pod, client limits, the workload parts, the faults injected), as opposed to what it measured. Two runs of
different shapes are not two measurements of the same storage: ``csibench history`` keeps one shape in a series,
and a baseline comparison says which parts differ (and, with ``spec.baselineRequireSameShape``, refuses to
compare) (pure).

A spec is read with the model's defaults filled, so a field one run spelled out at its default and the other left
out is not a difference; a spec an older or newer operator wrote that the model does not take is read as stored.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from pydantic import ValidationError

from csibench.api.models import BenchmarkRunSpec
from csibench.api.text import shorten

SHAPE_FIELDS = ("storageClassName", "volumes", "pvcsPerPod", "size", "accessModes", "volumeMode", "steps", "pod",
                "client", "dataPath", "database", "density", "move", "expand", "groupSnapshot", "disruptions")
VALUE_LENGTH = 80  # characters of one side of a difference as said


def shape_of(run: dict[str, Any]) -> dict[str, Any]:
    """The shape fields of a run's spec, as stored (``history`` groups runs by it)."""
    spec = run.get("spec") or {}
    return {field: spec.get(field) for field in SHAPE_FIELDS}


def _normalised(run: dict[str, Any]) -> dict[str, Any]:
    spec = run.get("spec") or {}
    with contextlib.suppress(ValidationError):  # a spec the model does not take is read as stored
        spec = BenchmarkRunSpec.model_validate(spec).model_dump(mode="json")
    return {field: spec.get(field) for field in SHAPE_FIELDS}


def _said(value: Any) -> str:
    return shorten(json.dumps(value, separators=(",", ":"), sort_keys=True), VALUE_LENGTH)


def shape_differences(baseline: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Each shape field that differs, as 'volumes 2 vs 12' (the baseline's value first); [] when either run carries
    no spec to compare."""
    if not baseline.get("spec") or not current.get("spec"):
        return []
    theirs, ours = _normalised(baseline), _normalised(current)
    return [f"{field} {_said(theirs[field])} vs {_said(ours[field])}" for field in SHAPE_FIELDS
            if theirs[field] != ours[field]]

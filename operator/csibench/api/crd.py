"""Generate the BenchmarkRun CRD from the pydantic models.

Kubernetes wants a structural OpenAPI v3 schema: no ``$ref``, no ``anyOf`` with null, no JSON-Schema-2020
keywords. This module turns pydantic's JSON schema into that, keeping descriptions (``kubectl explain``),
bounds, patterns, enums and defaults, so admission rejects bad specs with readable messages.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from csibench.api.models import (
    GROUP,
    KIND,
    MAX_RUN_NAME,
    PLURAL,
    VERSION,
    BenchmarkRunSpec,
    BenchmarkRunStatus,
)

Schema = dict[str, Any]
_DROP = {"title", "$defs"}
# Lists whose items are unique and order-insensitive for merging.
_SET_LISTS = {"accessModes", "scales", "modes", "clients"}


def _resolve(schema: Schema, definitions: Schema) -> Schema:
    if "$ref" in schema:
        target = definitions[schema["$ref"].rsplit("/", 1)[-1]]
        merged = {**_resolve(target, definitions), **{k: v for k, v in schema.items() if k != "$ref"}}
        return _resolve(merged, definitions)
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(schema["anyOf"])
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        if len(options) == 1:
            merged = {**_resolve(options[0], definitions), **rest}
            if nullable:
                merged["nullable"] = True
            return _resolve(merged, definitions)
    result: Schema = {}
    for key, value in schema.items():
        if key in _DROP:
            continue
        if key == "properties":
            result[key] = {name: _resolve(sub, definitions) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            result[key] = _resolve(value, definitions)
        elif key == "default" and value is None:
            continue
        elif key == "additionalProperties" and value is False:
            continue  # structural schemas prune unknown fields; kubectl's strict validation reports them
        else:
            result[key] = value
    if result.get("type") == "object" and "properties" not in result and "additionalProperties" not in result:
        result["x-kubernetes-preserve-unknown-fields"] = True
    return result


def _finish(schema: Schema, name: str = "") -> Schema:
    """Kubernetes-specific touches: list types and enum defaults as plain values."""
    if schema.get("type") == "array" and name in _SET_LISTS | {"steps"}:
        schema["x-kubernetes-list-type"] = "set" if name in _SET_LISTS else "atomic"
    for prop, sub in (schema.get("properties") or {}).items():
        _finish(sub, prop)
    if isinstance(schema.get("items"), dict):
        _finish(schema["items"])
    return schema


def openapi_schema(model: type[Any]) -> Schema:
    raw = model.model_json_schema(mode="serialization")
    return _finish(_resolve(raw, raw.get("$defs", {})))


IMMUTABLE_SPEC_MESSAGE = ("spec is immutable: a run measures the spec it started with; create a new BenchmarkRun "
                          "(a new name) to measure something else")
NAME_RULE_MESSAGE = (f"BenchmarkRun names are at most {MAX_RUN_NAME} characters, so that the names of the objects "
                     "a run creates stay valid")


def build_crd() -> Schema:
    spec_schema = openapi_schema(BenchmarkRunSpec)
    spec_schema["description"] = (BenchmarkRunSpec.__doc__ or "").strip()
    spec_schema["x-kubernetes-validations"] = [{"rule": "self == oldSelf", "message": IMMUTABLE_SPEC_MESSAGE},
                                               *spec_schema.get("x-kubernetes-validations", [])]
    status_schema = openapi_schema(BenchmarkRunStatus)
    status_schema["description"] = (BenchmarkRunStatus.__doc__ or "").strip()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": KIND.lower(),
                      "shortNames": ["br", "bench"], "categories": ["csibench"]},
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    {"name": "Step", "type": "string", "jsonPath": ".status.currentStep"},
                    {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
                    {"name": "Iteration", "type": "string", "jsonPath": ".status.iterations.summary"},
                    {"name": "Duration", "type": "string", "jsonPath": ".status.duration"},
                    {"name": "Verdict", "type": "string", "jsonPath": ".status.verdict"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A batch benchmark of a CSI storage class: the volume lifecycle, timed per step.",
                    "required": ["spec"],
                    "x-kubernetes-validations": [
                        {"rule": f"size(self.metadata.name) <= {MAX_RUN_NAME}", "message": NAME_RULE_MESSAGE},
                        {"rule": "!self.metadata.name.contains('.')",
                         "message": "BenchmarkRun names must not contain '.': the run's namespace and objects are "
                                    "named after it and must be DNS labels"}],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec_schema,
                        "status": status_schema,
                    },
                }},
            }],
        },
    }


CRD_HEADER = "# Generated from operator/csibench/api/models.py by `csibench crd`; do not edit by hand.\n"


def render_crd() -> str:
    """The CRD as YAML (stable key order, so ``crds/`` diffs stay readable)."""
    return CRD_HEADER + yaml.safe_dump(json.loads(json.dumps(build_crd())), sort_keys=False, width=120)

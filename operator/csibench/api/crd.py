"""Generate the BenchmarkRun, BenchmarkSuite and BenchmarkSchedule CRDs from the pydantic models.

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
from csibench.api.schedule import (
    MAX_SCHEDULE_NAME,
    SCHEDULE_KIND,
    SCHEDULE_PLURAL,
    BenchmarkScheduleSpec,
    BenchmarkScheduleStatus,
)
from csibench.api.suite import (
    MAX_SUITE_NAME,
    SUITE_KIND,
    SUITE_PLURAL,
    BenchmarkSuiteSpec,
    BenchmarkSuiteStatus,
)

Schema = dict[str, Any]
_DROP = {"title", "$defs"}
# Lists whose items are unique and order-insensitive for merging.
_SET_LISTS = {"accessModes", "scales", "modes", "clients",
              "storageClassName", "volumes", "pvcsPerPod", "size"}  # a suite's scalar axes: a value once


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


def _versions(spec_schema: Schema, status_schema: Schema, description: str, name_rules: list[Schema],
              columns: list[Schema]) -> list[Schema]:
    return [{
        "name": VERSION,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "additionalPrinterColumns": columns,
        "schema": {"openAPIV3Schema": {
            "type": "object",
            "description": description,
            "required": ["spec"],
            "x-kubernetes-validations": name_rules,
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": spec_schema,
                "status": status_schema,
            },
        }},
    }]


def _crd(kind: str, plural: str, short_names: list[str], versions: list[Schema]) -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        # deploy/'s label on everything it installs; written here too because Helm installs crds/ unrendered.
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "csibench"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "shortNames": short_names, "categories": ["csibench"]},
            "versions": versions,
        },
    }


def _spec_schema(model: type[Any], immutable_message: str) -> Schema:
    schema = openapi_schema(model)
    schema["description"] = (model.__doc__ or "").strip()
    schema["x-kubernetes-validations"] = [{"rule": "self == oldSelf", "message": immutable_message},
                                          *schema.get("x-kubernetes-validations", [])]
    return schema


def _status_schema(model: type[Any]) -> Schema:
    schema = openapi_schema(model)
    schema["description"] = (model.__doc__ or "").strip()
    return schema


def build_crd() -> Schema:
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Step", "type": "string", "jsonPath": ".status.currentStep"},
        {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
        {"name": "Iteration", "type": "string", "jsonPath": ".status.iterations.summary"},
        {"name": "Duration", "type": "string", "jsonPath": ".status.duration"},
        {"name": "Verdict", "type": "string", "jsonPath": ".status.verdict"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    name_rules = [
        {"rule": f"size(self.metadata.name) <= {MAX_RUN_NAME}", "message": NAME_RULE_MESSAGE},
        {"rule": "!self.metadata.name.contains('.')",
         "message": "BenchmarkRun names must not contain '.': the run's namespace and objects are "
                    "named after it and must be DNS labels"}]
    versions = _versions(_spec_schema(BenchmarkRunSpec, IMMUTABLE_SPEC_MESSAGE), _status_schema(BenchmarkRunStatus),
                         "A batch benchmark of a CSI storage class: the volume lifecycle, timed per step.",
                         name_rules, columns)
    return _crd(KIND, PLURAL, ["br", "bench"], versions)


SUITE_IMMUTABLE_MESSAGE = ("spec is immutable: a suite's runs share the spec it started with; create a new "
                           "BenchmarkSuite (a new name) to measure something else")


def template_schema() -> Schema:
    """A run's spec, as a suite's template: every field's own rules hold, but nothing is required and the rules
    across fields are left to each cell (an axis may supply the storage class or the data path a rule needs);
    the suite validates every cell as a run, with a server-side dry run, before its first run starts."""
    schema = openapi_schema(BenchmarkRunSpec)
    schema.pop("required", None)
    schema.pop("x-kubernetes-validations", None)
    schema["description"] = "A BenchmarkRun spec shared by every cell; each matrix axis overrides its field."
    return schema


def _owner_name_rules(kind: str, longest: int, runs_named: str) -> list[Schema]:
    """A suite's or a schedule's name: short enough, and without dots, for its runs' names to be run names."""
    return [
        {"rule": f"size(self.metadata.name) <= {longest}",
         "message": f"{kind} names are at most {longest} characters, so that its runs' names ({runs_named}) stay "
                    "valid run names"},
        {"rule": "!self.metadata.name.contains('.')",
         "message": f"{kind} names must not contain '.': its runs are named after it"}]


def build_suite_crd() -> Schema:
    spec_schema = _spec_schema(BenchmarkSuiteSpec, SUITE_IMMUTABLE_MESSAGE)
    spec_schema["properties"]["template"] = template_schema()
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
        {"name": "Current", "type": "string", "jsonPath": ".status.current"},
        {"name": "Verdict", "type": "string", "jsonPath": ".status.verdict"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    name_rules = _owner_name_rules(SUITE_KIND, MAX_SUITE_NAME, "<suite>-c<cell>-r<round>")
    versions = _versions(spec_schema, _status_schema(BenchmarkSuiteStatus),
                         "A matrix of BenchmarkRuns: a template, axes over it, rounds, run one after another.",
                         name_rules, columns)
    return _crd(SUITE_KIND, SUITE_PLURAL, ["bs", "suite"], versions)


def build_schedule_crd() -> Schema:
    """The schedule's template is a whole run spec, with every rule of the run CRD (required fields, CEL): a
    template that could never make a valid run is refused at admission, not at its first time. The spec is
    mutable, as a CronJob's: suspend, the schedule and the limits are edited in place; runs made already keep
    the spec they were made with."""
    spec_schema = openapi_schema(BenchmarkScheduleSpec)
    spec_schema["description"] = (BenchmarkScheduleSpec.__doc__ or "").strip()
    template = openapi_schema(BenchmarkRunSpec)
    template["description"] = "The spec of every run the schedule makes (a BenchmarkRun spec, checked as one)."
    spec_schema["properties"]["template"] = template
    columns = [
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
        {"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"},
        {"name": "Last", "type": "string", "jsonPath": ".status.lastRun.name"},
        {"name": "Verdict", "type": "string", "jsonPath": ".status.lastVerdict"},
        {"name": "Next", "type": "string", "jsonPath": ".status.nextScheduleTime"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    name_rules = _owner_name_rules(SCHEDULE_KIND, MAX_SCHEDULE_NAME, "<schedule>-<unix seconds>")
    versions = _versions(spec_schema, _status_schema(BenchmarkScheduleStatus),
                         "A BenchmarkRun on a cron schedule, as a CronJob makes Jobs.", name_rules, columns)
    return _crd(SCHEDULE_KIND, SCHEDULE_PLURAL, ["bsched"], versions)


CRD_HEADER = "# Generated from operator/csibench/api/models.py by `csibench crd`; do not edit by hand.\n"


def render_crd(kind: str = KIND) -> str:
    """A CRD as YAML (stable key order, so ``crds/`` diffs stay readable): BenchmarkRun, BenchmarkSuite or
    BenchmarkSchedule."""
    built = {SUITE_KIND: build_suite_crd, SCHEDULE_KIND: build_schedule_crd}.get(kind, build_crd)()
    return CRD_HEADER + yaml.safe_dump(json.loads(json.dumps(built)), sort_keys=False, width=120)

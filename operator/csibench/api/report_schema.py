"""The result schema as models (pure): the stored report and ``report -o json``'s document, for the JSON Schema
that ``csibench schema`` prints and ``schemas/report-v<N>.json`` keeps (a unit test holds the file to these models).

They describe what the engine writes (``engine/report_builder.py``); readers read the dicts and check only the
version (``api/stored_report.py``). Fields a newer report adds are allowed, so the schema never refuses a report
for knowing more; what a field means is said once, in the run's models that the report embeds.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from csibench.api.models import BenchmarkRunSpec, DisruptionResult, Environment, Finding, StepStatus
from csibench.api.stored_report import REPORT_FORMAT, SCHEMA_VERSION


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ReportRun(_Open):
    namespace: str = Field(..., description="The run's namespace.")
    name: str = Field(..., description="The run's name.")
    uid: str | None = Field(None, description="The run's uid.")


class ReportClient(_Open):
    qps: float = Field(..., description="spec.client.qps.")
    burst: int = Field(..., description="spec.client.burst.")
    maxInFlight: int = Field(..., description="spec.client.maxInFlight.")
    throttledSeconds: float = Field(..., description="Time the client waited on its rate limiter, seconds.")


class ReportStep(_Open):
    """One started step: its status and per-object arrays in object-index order (names are objectPrefix plus a
    five-digit index)."""

    status: StepStatus = Field(..., description="The step's aggregates, as in the run's status.")
    objectPrefix: str = Field(..., description="Object names without their five-digit index.")
    objectCount: int = Field(..., description="Objects of the step.")
    startWall: float = Field(..., description="The step's start, epoch seconds.")
    submitMs: list[float | None] = Field(..., description="Per object: submitted, ms after the step's start.")
    latencyMs: list[float | None] = Field(..., description="Per object: submit to terminal event, ms.")
    result: list[str] = Field(..., description="Per object: ok, a failure reason, Skipped or Pending.")
    retries: list[int] | None = Field(None, description="Per object: Warnings Kubernetes retried past.")
    phaseMs: list[list[float] | None] | None = Field(None, description="Per succeeded object: its parts, ms.")
    notes: list[str | None] | None = Field(None, description="Per object: a note, or null.")
    extra: Any = Field(None, description="The step's own records (data path, database, density).")


class ReportIteration(_Open):
    iteration: int = Field(..., description="1-based iteration number (spec.repeat).")
    steps: list[ReportStep] = Field(default_factory=list, description="The iteration's step records.")
    state: str | None = Field(None, description="How the iteration ended.")
    message: str | None = Field(None, description="Why, when it failed.")


class StoredReport(_Open):
    """The full report of a run, as stored (gzip JSON in ConfigMaps) and as ``report -o json``'s ``report``."""

    format: Literal[REPORT_FORMAT] = Field(..., description="The format and its version, as a name.")  # type: ignore[valid-type]
    schemaVersion: Literal[SCHEMA_VERSION] = Field(..., description="The schema version, as a number.")  # type: ignore[valid-type]
    run: ReportRun
    spec: BenchmarkRunSpec
    environment: Environment
    preflight: list[Finding] = Field(default_factory=list, description="Every preflight finding.")
    client: ReportClient
    manifests: dict[str, Any] = Field(default_factory=dict, description="Representative manifests as submitted.")
    steps: list[ReportStep] = Field(default_factory=list, description="The current (last) iteration's steps.")
    iteration: int = Field(1, description="The current iteration.")
    iterationState: str | None = None
    iterationMessage: str | None = None
    iterations: list[ReportIteration] = Field(default_factory=list, description="Earlier iterations.")
    interruptedAttempts: list[dict[str, Any]] = Field(default_factory=list,
                                                      description="Attempts an operator restart interrupted.")
    disruptions: list[DisruptionResult] = Field(default_factory=list,
                                                description="What each of spec.disruptions did and cost its step, "
                                                            "as in the run's status.")


class ReportDocument(_Open):
    """``csibench report -o json``: the run as the API returns it and its stored report."""

    schemaVersion: Literal[SCHEMA_VERSION] = Field(..., description="The schema version, as a number.")  # type: ignore[valid-type]
    run: dict[str, Any] = Field(..., description="The BenchmarkRun object as the API returns it (its CRD's schema).")
    report: StoredReport | None = Field(..., description="The stored report; null when none was stored.")


def report_json_schema() -> dict[str, Any]:
    schema = ReportDocument.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def render_report_schema() -> str:
    return json.dumps(report_json_schema(), indent=2, sort_keys=True) + "\n"

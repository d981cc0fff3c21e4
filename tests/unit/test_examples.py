"""Every example a user may apply is valid as it stands: each BenchmarkRun, BenchmarkSuite and BenchmarkSchedule
in examples/ passes the models' validation, a schedule's cron expression and template too (the CRD's schema says
the same; tests/unit/test_api.py holds the two together)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from csibench.api.cron import parse
from csibench.api.models import BenchmarkRunSpec
from csibench.api.schedule import BenchmarkScheduleSpec
from csibench.api.suite import BenchmarkSuiteSpec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def documents(path: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text()):
        found += doc.get("items", []) if doc and doc.get("kind") == "List" else [doc] if doc else []
    return found


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_each_example_is_valid(path: Path) -> None:
    specs: dict[str, type[BaseModel]] = {"BenchmarkRun": BenchmarkRunSpec, "BenchmarkSuite": BenchmarkSuiteSpec,
                                         "BenchmarkSchedule": BenchmarkScheduleSpec}
    ours = [doc for doc in documents(path) if doc.get("kind") in specs]
    assert ours, f"{path.name} holds no BenchmarkRun, BenchmarkSuite or BenchmarkSchedule"
    for doc in ours:
        specs[doc["kind"]].model_validate(doc["spec"])
        if doc["kind"] == "BenchmarkSchedule":
            parse(doc["spec"]["schedule"])
            BenchmarkRunSpec.model_validate(doc["spec"]["template"])

"""The BenchmarkSuite API: its generated CRD, the cells of a matrix, the order runs start in, a cell's spec."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from csibench.api.crd import build_suite_crd, render_crd
from csibench.api.models import BenchmarkRunSpec
from csibench.api.suite import (
    MAX_SUITE_NAME,
    MAX_SUITE_RUNS,
    BenchmarkSuiteSpec,
    SuiteOrder,
    cells_of,
    child_spec,
    schedule,
)
from localcluster.launcher import REPO_ROOT
from tests.support.schema import walk

TEMPLATE = {"volumes": 2, "steps": ["createVolume", "deleteVolume"]}


def suite(**fields: Any) -> BenchmarkSuiteSpec:
    return BenchmarkSuiteSpec.model_validate({"template": TEMPLATE, **fields})


def test_suite_crd_file_matches_the_models() -> None:
    assert (REPO_ROOT / "crds" / "benchmarksuite.yaml").read_text() == render_crd("BenchmarkSuite"), \
        "crds/ drifted: run `csibench crd --kind BenchmarkSuite -o crds/benchmarksuite.yaml`"
    assert "benchmarksuite.yaml" in (REPO_ROOT / "crds" / "kustomization.yaml").read_text()


def test_suite_schema_is_structural_and_its_template_is_a_run_spec_without_cross_field_rules() -> None:
    version = build_suite_crd()["spec"]["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    for path, node in walk(root["properties"]["spec"], "spec") + walk(root["properties"]["status"], "status"):
        assert "$ref" not in node and "anyOf" not in node and "title" not in node, path
    template = root["properties"]["spec"]["properties"]["template"]
    assert set(template["properties"]) == set(BenchmarkRunSpec.model_fields)
    assert "required" not in template and "x-kubernetes-validations" not in template
    assert template["properties"]["volumes"]["maximum"] == 100000  # a field's own bounds still hold
    assert {rule["rule"].split(" <=")[0] for rule in root["x-kubernetes-validations"]} >= {
        "size(self.metadata.name)"}
    assert f"<= {MAX_SUITE_NAME}" in root["x-kubernetes-validations"][0]["rule"]


def test_cells_are_numbered_with_the_first_axis_varying_slowest() -> None:
    spec = suite(matrix={"storageClassName": ["a", "b"], "volumes": [10, 100], "client": [{"qps": 5}]})
    shown = [(cell.id, cell.shown()) for cell in cells_of(spec.matrix)]
    assert shown == [
        ("c0", {"storageClassName": "a", "volumes": "10", "client": "qps=5.0"}),
        ("c1", {"storageClassName": "a", "volumes": "100", "client": "qps=5.0"}),
        ("c2", {"storageClassName": "b", "volumes": "10", "client": "qps=5.0"}),
        ("c3", {"storageClassName": "b", "volumes": "100", "client": "qps=5.0"}),
    ]


@pytest.mark.parametrize(("order", "expected"), [
    (SuiteOrder.INTERLEAVED, ["s-c0-r1", "s-c1-r1", "s-c0-r2", "s-c1-r2"]),
    (SuiteOrder.SEQUENTIAL, ["s-c0-r1", "s-c0-r2", "s-c1-r1", "s-c1-r2"]),
])
def test_interleaved_goes_round_by_round_and_sequential_cell_by_cell(order: SuiteOrder,
                                                                     expected: list[str]) -> None:
    spec = suite(matrix={"storageClassName": ["a", "b"]}, repeat=2, order=order)
    assert [slot.child_name("s") for slot in schedule(spec)] == expected


def test_a_cell_spec_is_the_template_with_its_axis_values_and_the_suite_verdict_settings() -> None:
    spec = suite(matrix={"storageClassName": ["a"], "dataPath": [{"workloads": [
        {"name": "seq", "pattern": "read", "blockSize": "64Ki"}]}]},
        thresholds=[{"step": "createVolume", "metric": "throughput", "min": 1}], baseline="other/base")
    (cell,) = cells_of(spec.matrix)
    merged = child_spec(spec, cell)
    assert merged["storageClassName"] == "a" and merged["volumes"] == 2
    assert merged["dataPath"] == {"workloads": [{"name": "seq", "pattern": "read", "blockSize": "64Ki"}]}
    assert merged["thresholds"] == [{"step": "createVolume", "metric": "throughput", "min": 1.0}]
    assert merged["baseline"] == "other/base"
    assert cell.shown()["dataPath"] == "dataPath[0]"


def test_the_longest_child_name_is_a_valid_run_name() -> None:
    spec = suite(matrix={"storageClassName": [f"c{i}" for i in range(8)], "volumes": [1, 2, 3, 4, 5, 6, 7, 8]})
    longest = max((slot.child_name("s" * MAX_SUITE_NAME) for slot in schedule(spec)), key=len)
    assert len(longest) <= 40 and len(schedule(spec)) == MAX_SUITE_RUNS


@pytest.mark.parametrize(("fields", "words"), [
    ({"matrix": {"volumes": [0]}}, "greater than or equal to 1"),
    ({"matrix": {"size": ["0"]}}, "greater than 0"),
    ({"matrix": {"size": ["1 Gi"]}}, "should match pattern"),
    ({"matrix": {"storageClassName": ["Bad_Name"]}}, "should match pattern"),
    ({"matrix": {"storageClassName": []}}, "at least 1 item"),
    ({"repeat": 11}, "less than or equal to 10"),
    ({"parallelism": 0}, "greater than or equal to 1"),
    ({"order": "Random"}, "Interleaved"),
    ({"matrix": {"volumes": [10, 10]}}, "volumes lists a value twice"),
    ({"matrix": {"client": [{"qps": 5}, {"qps": 5}]}}, "client lists a value twice"),
])
def test_bad_suites_are_refused(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        suite(**fields)


@pytest.mark.parametrize(("example", "runs"), [("suite-scaling.yaml", 3), ("suite-classes.yaml", 6)])
def test_the_suite_examples_are_valid_and_every_cell_is_a_valid_run(example: str, runs: int) -> None:
    documents = list(yaml.safe_load_all((REPO_ROOT / "examples" / example).read_text()))
    (body,) = [d for d in documents if d["kind"] == "BenchmarkSuite"]
    spec = BenchmarkSuiteSpec.model_validate(body["spec"])
    assert len(schedule(spec)) == runs
    for cell in cells_of(spec.matrix):
        BenchmarkRunSpec.model_validate(child_spec(spec, cell))
    classes = {d["metadata"]["name"] for d in documents if d["kind"] == "StorageClass"} | {"csibench-sim"}
    assert set(spec.matrix.storageClassName or [spec.template["storageClassName"]]) <= classes

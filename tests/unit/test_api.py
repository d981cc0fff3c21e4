"""The models and the CRD generated from them."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from csibench.api.crd import build_crd, render_crd
from csibench.api.models import BenchmarkRunSpec, BenchmarkRunStatus, StepName
from localcluster.launcher import REPO_ROOT
from tests.support.schema import walk

CRD_FILE = REPO_ROOT / "crds" / "benchmarkrun.yaml"


def test_crds_directory_matches_the_models() -> None:
    assert CRD_FILE.read_text() == render_crd(), "crds/ drifted: run `csibench crd -o crds/benchmarkrun.yaml`"


def test_schema_is_structural_and_described() -> None:
    version = build_crd()["spec"]["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    for path, node in walk(root["properties"]["spec"], "spec") + walk(root["properties"]["status"], "status"):
        assert "$ref" not in node and "anyOf" not in node and "title" not in node, path
        if not path.endswith("[]"):  # list items are explained by their field's description
            assert node.get("description"), f"{path} has no description (kubectl explain would be empty)"
        assert not ("properties" in node and "additionalProperties" in node), path
        # OpenAPI v3.0, as the API server reads it: an exclusive bound is a flag beside minimum/maximum, and a
        # number there (JSON Schema 2020's form, pydantic's for gt/lt) makes it refuse the whole CRD.
        for bound in ("exclusiveMinimum", "exclusiveMaximum"):
            assert isinstance(node.get(bound, False), bool), f"{path}: {bound} {node[bound]!r} (use ge/le)"
    assert version["subresources"] == {"status": {}}


def test_every_status_field_is_declared() -> None:
    status = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert set(status["properties"]) == set(BenchmarkRunStatus.model_fields)
    step_fields = status["properties"]["steps"]["items"]["properties"]
    assert {"durationSeconds", "throughput", "latency", "failureReasons", "skipped", "note"} <= set(step_fields)


def test_validation_bounds_are_in_the_schema() -> None:
    spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["storageClassName"]
    assert spec["properties"]["volumes"]["minimum"] == 1
    assert spec["properties"]["steps"]["items"]["enum"] == [s.value for s in StepName]
    assert spec["properties"]["cleanup"]["enum"] == ["Always", "OnSuccess", "Never"]
    assert "pattern" in spec["properties"]["size"]


def test_crd_file_is_yaml_with_a_do_not_edit_header() -> None:
    text = CRD_FILE.read_text()
    assert text.startswith("# Generated")
    assert yaml.safe_load(text)["metadata"]["name"] == "benchmarkruns.csibench.io"


@pytest.mark.parametrize("bad", [{"volumes": 0}, {"size": "lots"}, {"steps": ["fly"]}, {"unknown": 1},
                                 {"client": {"qps": 0}}, {"cleanup": "Sometimes"}])
def test_models_reject_what_the_schema_rejects(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        BenchmarkRunSpec.model_validate({"storageClassName": "sc", **bad})


def test_timeouts_have_one_field_per_step_generated_from_the_step_facts() -> None:
    from csibench.api.models import Timeouts
    from csibench.api.steps import STEP_FACTS
    assert list(Timeouts.model_fields) == ["default", *STEP_FACTS, "cleanup"]
    assert Timeouts.model_fields["dataPath"].description == STEP_FACTS["dataPath"].timeout_note
    assert Timeouts.model_fields["publish"].description == "Timeout of publish, in seconds."
    timeouts = Timeouts.model_validate({"database": 99})
    assert (timeouts.own("database"), timeouts.own("publish"), timeouts.for_step("publish")) == (99, None, 1800)


def test_the_models_module_is_every_part_of_the_run_api_under_one_name() -> None:
    """``csibench.api.models`` re-exports what each part module under ``csibench.api.run`` defines (its classes,
    functions and public constants), so every reader keeps importing one module while the parts stay small."""
    import importlib
    import pkgutil

    import csibench.api.models as models
    import csibench.api.run as parts
    missing = []
    for found in pkgutil.iter_modules(parts.__path__):
        module = importlib.import_module(f"{parts.__name__}.{found.name}")
        source = (REPO_ROOT / "operator" / "csibench" / "api" / "run" / f"{found.name}.py").read_text()
        for name, value in vars(module).items():
            defined_here = getattr(value, "__module__", None) == module.__name__ or f"\n{name} = " in source \
                or f"\n{name}: " in source
            if not name.startswith("_") and defined_here and getattr(models, name, None) is not value:
                missing.append(f"{module.__name__}.{name}")
    assert missing == []
    assert len((REPO_ROOT / "operator" / "csibench" / "api" / "models.py").read_text().splitlines()) < 330

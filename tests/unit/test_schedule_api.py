"""The BenchmarkSchedule CRD: generated from the models (crds/ and the chart's copy cannot drift), structural, its
template held to every rule of a run's spec, its name short enough for its runs' names, its spec mutable."""

from __future__ import annotations

from csibench.api.crd import build_crd, build_schedule_crd, render_crd
from csibench.api.models import MAX_RUN_NAME, BenchmarkRunSpec
from csibench.api.schedule import MAX_SCHEDULE_NAME, run_name
from localcluster.launcher import REPO_ROOT
from tests.support.schema import walk


def test_schedule_crd_files_match_the_models() -> None:
    expected = render_crd("BenchmarkSchedule")
    assert (REPO_ROOT / "crds" / "benchmarkschedule.yaml").read_text() == expected, \
        "crds/ drifted: run `csibench crd --kind BenchmarkSchedule -o crds/benchmarkschedule.yaml`"
    assert (REPO_ROOT / "charts" / "csibench" / "crds" / "benchmarkschedule.yaml").read_text() == expected, \
        "the chart's CRD drifted: copy crds/benchmarkschedule.yaml to charts/csibench/crds/"
    assert "benchmarkschedule.yaml" in (REPO_ROOT / "crds" / "kustomization.yaml").read_text()


def test_the_template_is_a_whole_run_spec_with_the_run_crds_rules_and_the_spec_is_mutable() -> None:
    root = build_schedule_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in walk(root["properties"]["spec"], "spec") + walk(root["properties"]["status"], "status"):
        assert "$ref" not in node and "anyOf" not in node and "title" not in node, path
    run_spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    template = root["properties"]["spec"]["properties"]["template"]
    assert set(template["properties"]) == set(BenchmarkRunSpec.model_fields)
    assert template["required"] == run_spec["required"]
    run_rules = [rule for rule in run_spec["x-kubernetes-validations"] if rule["rule"] != "self == oldSelf"]
    assert template["x-kubernetes-validations"] == run_rules
    spec_rules = root["properties"]["spec"].get("x-kubernetes-validations") or []
    assert not any(rule["rule"] == "self == oldSelf" for rule in spec_rules), "a schedule's spec is edited in place"
    assert f"<= {MAX_SCHEDULE_NAME}" in root["x-kubernetes-validations"][0]["rule"]


def test_the_longest_schedule_name_gives_a_valid_run_name_until_2286() -> None:
    assert len(run_name("s" * MAX_SCHEDULE_NAME, 9_999_999_999)) == MAX_RUN_NAME

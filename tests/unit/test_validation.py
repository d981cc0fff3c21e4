"""Names and values that reach URLs, labels and manifests: checked in code exactly as the CRD checks them."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api import validation as v
from csibench.api.crd import build_crd
from csibench.api.models import BenchmarkRunSpec
from csibench.kube import resources as r
from csibench.kube.ownership import RunScope

BAD_NAMESPACES = ["default#", "default?x=", "..", ".", "a/b", "UPPER", "-lead", "trail-", "a" * 64, "ns\n", ""]


@pytest.mark.parametrize("name", BAD_NAMESPACES)
def test_paths_refuse_namespaces_that_are_not_dns_labels(name: str) -> None:
    with pytest.raises(r.InvalidName):
        r.PVCS.path(name)


@pytest.mark.parametrize("name", ["..", ".", "a/b", "x%2F..", ""])
def test_paths_refuse_object_names_that_would_change_the_path(name: str) -> None:
    with pytest.raises(r.InvalidName):
        r.NAMESPACES.path(name=name)


def test_paths_escape_what_they_accept() -> None:
    assert r.PVCS.path("bench", "v-1") == "/api/v1/namespaces/bench/persistentvolumeclaims/v-1"
    assert r.STORAGE_CLASSES.path(name="fast?x=1#y") == "/apis/storage.k8s.io/v1/storageclasses/fast%3Fx%3D1%23y"
    assert r.BENCHMARK_RUNS.path("ns", "run", "status").endswith("/namespaces/ns/benchmarkruns/run/status")
    with pytest.raises(r.InvalidName):
        r.PODS.path("ns", "p", "exec")


def test_a_run_and_a_suite_are_referred_to_by_one_record_each_naming_its_resource() -> None:
    run, suite = r.RunRef("ns", "x", "u1", 3), r.SuiteRef("ns", "x", "u1", 3)
    assert run.status_path == "/apis/csibench.io/v1alpha1/namespaces/ns/benchmarkruns/x/status"
    assert suite.status_path == "/apis/csibench.io/v1alpha1/namespaces/ns/benchmarksuites/x/status"
    assert run.label == suite.label == "ns/x" and run.generation == 3
    assert len({run, suite, r.RunRef("ns", "x", "u1", 3)}) == 2  # the same fields of another resource differ
    with pytest.raises(r.InvalidName):
        _ = r.RunRef("ns#", "x", "u1").status_path


@pytest.mark.parametrize("bad", [
    {"targetNamespace": "default#"}, {"targetNamespace": "default?x="}, {"targetNamespace": ".."},
    {"targetNamespace": "kube-system"}, {"targetNamespace": "csibench-system"},
    {"storageClassName": "fast?x="}, {"storageClassName": "fast#"}, {"volumeSnapshotClassName": "snap?x="},
    {"labels": {"team": "team-a\n"}}, {"labels": {"csibench.io/run-uid": "forged"}},
    {"labels": {"app.kubernetes.io/managed-by": "me"}}, {"labels": {"bad key!": "x"}},
    {"size": "0"}, {"size": "99999999999999999999Ei"}, {"size": "2Pi"},
    {"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"]},
    {"pod": {"image": "pause image"}}, {"pod": {"image": "img;rm -rf /"}},
    {"pod": {"nodeSelector": {"zone": "z" * 100_000}}},
    {"pod": {"tolerations": [{"key": "k", "operator": "Sometimes"}]}},
    {"pod": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
    {"pod": {"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]}},
    {"pod": {"resources": {"requests": {"cpu": "lots"}}}},
    {"pod": {"resources": {"requests": {"memory": "64Mi"}, "limits": {"memory": "16Mi"}}}},
])
def test_models_refuse_what_admission_refuses(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        BenchmarkRunSpec.model_validate({"storageClassName": "sc", **bad})


def test_models_accept_realistic_specs() -> None:
    spec = BenchmarkRunSpec.model_validate({
        "storageClassName": "fast.example.com", "targetNamespace": "bench", "size": "1.5Gi",
        "accessModes": ["ReadWriteOncePod"], "labels": {"team": "storage", "example.com/cost-center": "a_1.b",
                                                        "empty": ""},
        "pod": {"image": "registry.example.com:5000/tools/pause@sha256:" + "a" * 64,
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"operator": "Exists"}, {"key": "k", "operator": "Equal", "value": "v",
                                                         "effect": "NoExecute", "tolerationSeconds": 30}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "16Mi"}}}})
    assert spec.pod.resources.requests["cpu"] == "10m"


def test_quantities_parse_exactly() -> None:
    assert v.parse_quantity("1Gi") == 2**30
    assert v.parse_quantity("250m") == Decimal("0.25")
    assert v.parse_quantity("1.5k") == 1500
    with pytest.raises(ValueError):
        v.parse_quantity("1 Gi")


def test_label_checks_use_the_whole_string() -> None:
    assert not v.is_label_value("team-a\n")
    assert not v.is_dns_label("ns\n")
    assert v.is_label_key("example.com/x") and not v.is_label_key("Example.com/x") and not v.is_label_key("a" * 64)


def test_the_operator_namespace_and_system_namespaces_are_refused_in_code() -> None:
    assert v.namespace_problem("bench", "csibench-system") is None
    assert "system namespace" in (v.namespace_problem("kube-public", "ops") or "")
    assert "operator's own" in (v.namespace_problem("ops", "ops") or "")


def test_crd_patterns_match_the_code_patterns() -> None:
    spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    properties = spec["properties"]
    assert properties["targetNamespace"]["pattern"] == v.DNS_LABEL_PATTERN
    assert properties["storageClassName"]["pattern"] == v.DNS_SUBDOMAIN_PATTERN
    assert properties["labels"]["additionalProperties"]["pattern"] == v.LABEL_VALUE_PATTERN
    assert spec["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
    for pattern in (v.DNS_LABEL_PATTERN, v.LABEL_KEY_PATTERN, v.IMAGE_PATTERN):
        re.compile(pattern)


def test_ownership_is_proven_by_the_uid_label() -> None:
    scope = RunScope("bench", "run-abcde", "uid-1", owned_namespace=None)
    assert scope.owns({"labels": {"csibench.io/run-uid": "uid-1"}})
    assert not scope.owns({"labels": {"csibench.io/run-uid": "uid-2"}})
    assert not scope.owns({})

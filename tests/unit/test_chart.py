"""The Helm chart installs what deploy/ installs: rendered by the pinned helm and by kustomize for the same choices,
the objects are equal (labels included), so the two cannot drift; and ``helm lint`` passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from localcluster import versions
from tests.support.chart import CHART, DEPLOY, by_key, differences, helm, local_values, render_chart, render_kustomize

OPTIONAL_PARTS: list[tuple[dict[str, Any], list[str]]] = [
    ({"serviceMonitor": {"enabled": True}}, ["components/servicemonitor"]),
    ({"prometheusRule": {"enabled": True}}, ["components/alerts"]),
    ({"grafanaDashboard": {"enabled": True}}, ["grafana"]),
    ({"disruptions": {"enabled": True}}, ["components/disruptions"]),
    ({"population": {"enabled": True}}, ["components/population"]),
    ({"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}},
     ["components/servicemonitor", "components/alerts", "grafana"]),
]


def test_the_default_values_render_what_deploy_renders(tmp_path: Path) -> None:
    chart, kustomize = render_chart({}, tmp_path), render_kustomize([], tmp_path)
    diff = differences(chart, kustomize)
    assert not diff, diff
    kinds = sorted(obj["kind"] for obj in chart)
    assert kinds.count("CustomResourceDefinition") == 3 and kinds.count("ValidatingAdmissionPolicy") == 4, kinds
    assert all(obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "csibench" for obj in chart)


@pytest.mark.parametrize(("values", "components"), OPTIONAL_PARTS,
                         ids=["servicemonitor", "alerts", "grafana", "disruptions", "population", "all"])
def test_each_optional_part_renders_what_its_kustomize_component_adds(
        tmp_path: Path, values: dict[str, Any], components: list[str]) -> None:
    chart, kustomize = render_chart(values, tmp_path), render_kustomize(components, tmp_path)
    diff = differences(chart, kustomize)
    assert not diff, diff
    assert len(chart) > len(render_chart({}, tmp_path)), "the part added nothing"


def test_the_dashboard_configmap_holds_the_dashboard_file_byte_for_byte(tmp_path: Path) -> None:
    rendered = render_chart({"grafanaDashboard": {"enabled": True}}, tmp_path)
    (dashboard,) = [o for o in rendered if o["kind"] == "ConfigMap"]
    assert dashboard["data"]["csibench-dashboard.json"] == (DEPLOY / "grafana" / "csibench-dashboard.json").read_text()
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_the_local_clusters_values_render_what_the_local_overlay_renders(tmp_path: Path) -> None:
    # deploy/overlays/local names the default local cluster's Prometheus (API port 17443 + 6).
    chart = render_chart(local_values("http://127.0.0.1:17449"), tmp_path)
    kustomize = render_kustomize([], tmp_path, base=DEPLOY / "overlays" / "local")
    diff = differences(chart, kustomize)
    assert not diff, diff


def test_discovery_off_leaves_out_exactly_the_discovery_role_and_its_binding(tmp_path: Path) -> None:
    everything = by_key(render_chart({}, tmp_path))
    without = by_key(render_chart({"discovery": {"enabled": False}}, tmp_path))
    assert sorted(set(everything) - set(without)) == [
        ("rbac.authorization.k8s.io/v1", "ClusterRole", "", "csibench-discovery"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "csibench-discovery")]
    assert all(everything[k] == without[k] for k in without)


def test_another_namespace_moves_every_reference_to_the_operator_namespace(tmp_path: Path) -> None:
    # The CRDs are not templated (Helm installs crds/ as they are): their validation refuses csibench-system as a
    # run's target namespace, and the operator refuses its own namespace, wherever it is, at run time.
    rendered = [o for o in render_chart({"namespace": {"name": "bench-ops"}}, tmp_path)
                if o["kind"] != "CustomResourceDefinition"]
    text = repr(rendered)
    assert "csibench-system" not in text, [o["metadata"]["name"] for o in rendered if "csibench-system" in repr(o)]
    assert "system:serviceaccount:bench-ops:csibench-operator" in text  # the admission policies' matchConditions
    namespaced = {o["kind"]: o["metadata"].get("namespace") for o in rendered if o["kind"] != "Namespace"}
    assert {namespaced[kind] for kind in ("ServiceAccount", "Deployment", "Service")} == {"bench-ops"}
    bindings = [o for o in rendered if o["kind"] == "ClusterRoleBinding"]
    assert {s["namespace"] for b in bindings for s in b["subjects"]} == {"bench-ops"}
    assert [o["metadata"]["name"] for o in rendered if o["kind"] == "Namespace"] == ["bench-ops"]
    assert not [o for o in render_chart({"namespace": {"create": False}}, tmp_path) if o["kind"] == "Namespace"]


def test_image_and_command_values_reach_the_container(tmp_path: Path) -> None:
    values = {"image": {"repository": "registry.example/csibench", "tag": "9.9.9"}, "command": ["csibench"],
              "extraArgs": ["--prometheus-url=http://prometheus.monitoring:9090"]}
    (deployment,) = [o for o in render_chart(values, tmp_path) if o["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/csibench:9.9.9" and container["command"] == ["csibench"]
    assert container["args"] == ["operator", "--metrics-port=8080", "--health-port=8081",
                                 "--prometheus-url=http://prometheus.monitoring:9090"]


@pytest.mark.parametrize("values", [[], ["--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,"
                                                  "grafanaDashboard.enabled=true,discovery.enabled=false"]],
                         ids=["defaults", "every-option-flipped"])
def test_helm_lint_passes_strictly(values: list[str]) -> None:
    output = helm("lint", "--strict", str(CHART), *values)
    assert "0 chart(s) failed" in output and "[ERROR]" not in output and "[WARNING]" not in output, output


def test_the_helm_binary_is_the_pinned_build() -> None:
    # The build stamps the version into helm's internal/version package (an unstamped build says "v4.3").
    assert helm("version", "--template={{ .Version }}") == versions.HELM.version

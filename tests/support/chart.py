"""The two installs side by side: the Helm chart (charts/csibench) rendered or run by the pinned helm, and deploy/
rendered by kustomize (the pinned kubectl's), with the same choices, as objects that compare equal.

A choice is a pair: the chart's values, and the kustomize components an overlay of deploy/ lists for it.
"""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from localcluster import build
from localcluster.launcher import REPO_ROOT

CHART = REPO_ROOT / "charts" / "csibench"
DEPLOY = REPO_ROOT / "deploy"
RELEASE = "csibench"
Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
# kustomize's namespace transformer sets metadata.namespace on the admission policies and their bindings (its list of
# cluster-scoped kinds predates them); the API server ignores a namespace on a cluster-scoped object, so the
# comparison does too, on these kinds only.
CLUSTER_SCOPED = frozenset({"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})


def _binary(path: Path) -> Path:
    assert path.exists(), f"{path} is missing: run scripts/bootstrap (it builds the pinned Go binaries)"
    return path


def helm(*args: str, kubeconfig: Path | None = None, timeout: float = 120, check: bool = True) -> str:
    """Run the pinned helm; fail with its stderr (unless ``check`` is off). ``kubeconfig``: the cluster to act
    on."""
    command = [str(_binary(build.expected_binaries().helm)), *args,
               *([f"--kubeconfig={kubeconfig}"] if kubeconfig else [])]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0 or not check, \
        f"helm {' '.join(args)} failed ({completed.returncode}):\n{completed.stderr}"
    return completed.stdout


def value_args(values: dict[str, Any], directory: Path) -> list[str]:
    """``-f FILE`` for a values dict (written as YAML into ``directory``): no --set quoting of lists and URLs."""
    if not values:
        return []
    path = directory / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return ["-f", str(path)]


# libyaml's parser where PyYAML has it: the chart with its CRDs is half a megabyte, 0.65 s to parse in Python and
# 0.08 s in C, and the chart tests parse it some thirty times (2026-12-07).
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(text, Loader=_LOADER) if doc]  # a safe loader either way


def render_chart(values: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    """``helm template`` of the chart with its CRDs, as Helm would install it."""
    text = helm("template", RELEASE, str(CHART), "--include-crds", *value_args(values, directory))
    return _documents(text)


def render_kustomize(components: list[str], directory: Path, base: Path = DEPLOY) -> list[dict[str, Any]]:
    """``kubectl kustomize`` of ``base`` (deploy/ or one of its overlays), with deploy/'s ``components`` (paths
    relative to deploy/) added by an overlay written into ``directory``, as a user's own overlay would."""
    if components:
        overlay = directory / "overlay"
        overlay.mkdir()
        (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
            # kustomize takes no absolute paths here, only relative ones.
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [os.path.relpath(base, overlay)],
            "components": [os.path.relpath(DEPLOY / component, overlay) for component in components]}))
        base = overlay
    kubectl = _binary(build.expected_binaries().kubectl)
    completed = subprocess.run([str(kubectl), "kustomize", str(base)], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, f"kubectl kustomize {base} failed:\n{completed.stderr}"
    return _documents(completed.stdout)


def key(obj: dict[str, Any]) -> Key:
    metadata = obj["metadata"]
    return obj["apiVersion"], obj["kind"], metadata.get("namespace", ""), metadata["name"]


def normalised(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server keeps it: no namespace on a cluster-scoped kind (nothing else changes)."""
    if obj["kind"] not in CLUSTER_SCOPED or "namespace" not in obj["metadata"]:
        return obj
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "namespace"}}


def by_key(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Objects by identity (the order of the two renderers differs and means nothing), normalised; a duplicate is
    an error."""
    keyed: dict[Key, dict[str, Any]] = {}
    for obj in map(normalised, objects):
        assert key(obj) not in keyed, f"rendered twice: {key(obj)}"
        keyed[key(obj)] = obj
    return keyed


def differences(chart: list[dict[str, Any]], kustomize: list[dict[str, Any]]) -> str:
    """What differs between the two renders ("" when nothing): objects only one has, and a diff of each object both
    have that is not equal."""
    helm_objects, kustomize_objects = by_key(chart), by_key(kustomize)
    lines = [f"only in the chart: {k}" for k in sorted(set(helm_objects) - set(kustomize_objects))]
    lines += [f"only in deploy/: {k}" for k in sorted(set(kustomize_objects) - set(helm_objects))]
    for k in sorted(set(helm_objects) & set(kustomize_objects)):
        if helm_objects[k] != kustomize_objects[k]:
            lines.append(f"differs: {k}")
            lines += difflib.unified_diff(yaml.safe_dump(kustomize_objects[k]).splitlines(),
                                          yaml.safe_dump(helm_objects[k]).splitlines(), "deploy/", "chart",
                                          lineterm="")
    return "\n".join(lines)


def local_values(prometheus_url: str) -> dict[str, Any]:
    """The chart's values for deploy/overlays/local: the simulated kubelet has no images and runs the command
    (``csibench``, the image's ENTRYPOINT), and runs with spec.collect read the local cluster's Prometheus."""
    return {"command": ["csibench"], "extraArgs": [f"--prometheus-url={prometheus_url}"]}

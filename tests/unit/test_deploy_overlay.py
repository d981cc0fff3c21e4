"""deploy/overlays/local differs from deploy/ only where an image cannot exist: the operator container's command (the
image's entrypoint, which the simulated kubelet cannot read from an image) and its args (deploy/'s, plus the local
Prometheus). Everything else, probes and security context included, is deploy/'s, so the local cluster runs the
install users take."""

from __future__ import annotations

import re
from typing import Any

import yaml

from localcluster.launcher import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"


def _operator_container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "operator")


def test_the_local_overlay_gives_the_images_entrypoint_and_the_local_prometheus_only() -> None:
    overlay = yaml.safe_load((DEPLOY / "overlays" / "local" / "kustomization.yaml").read_text())
    assert overlay["resources"] == ["../../base"]
    assert set(overlay) == {"apiVersion", "kind", "resources", "patches"}
    patch, = (yaml.safe_load(p["patch"]) for p in overlay["patches"])
    assert (patch["kind"], patch["metadata"]) == ("Deployment", {"name": "csibench-operator"})
    container = _operator_container(patch)
    assert set(container) == {"name", "command", "args"}
    entrypoint = re.search(r'^ENTRYPOINT \["(\w+)"\]$', (REPO_ROOT / "Dockerfile").read_text(), re.M)
    assert entrypoint is not None and container["command"] == [entrypoint.group(1)]
    base = yaml.safe_load((DEPLOY / "base" / "deployment.yaml").read_text())
    assert container["args"] == [*_operator_container(base)["args"], "--prometheus-url=http://127.0.0.1:17449"]
    assert yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"] == ["base"]

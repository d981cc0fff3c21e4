"""The pure build_* functions of the objects a run creates."""

from __future__ import annotations

from typing import Any

from csibench.api.models import BenchmarkRunSpec
from csibench.engine import manifests
from csibench.engine.steps.clone import build_clone_pvc


def spec(**fields: Any) -> BenchmarkRunSpec:
    return BenchmarkRunSpec.model_validate({"storageClassName": "sc", **fields})


def test_pods_meet_pod_security_restricted() -> None:
    pod = manifests.build_pod("p", ["a", "b"], spec(), {"l": "v"}, block=False)
    security, container = pod["spec"]["securityContext"], pod["spec"]["containers"][0]
    assert security["runAsNonRoot"] and security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]] == ["a", "b"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    block = manifests.build_pod("p", ["a"], spec(volumeMode="Block"), {}, block=True)
    assert "volumeDevices" in block["spec"]["containers"][0]


def test_clone_claims_point_at_their_snapshot() -> None:
    clone = build_clone_pvc("c", "s", spec(size="2Gi"), {"l": "v"})
    assert clone["spec"]["dataSource"] == {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                           "name": "s"}
    assert clone["spec"]["resources"]["requests"]["storage"] == "2Gi" and clone["metadata"]["labels"] == {"l": "v"}

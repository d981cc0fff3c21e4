"""The data path by zone: a workload's pods kept to the zones it names (spread over their nodes), each row split
by the zone of its pods' nodes, a volume that lives in another zone failed at once rather than left Pending, and
a zone without a usable node refused before anything is made; and the simulated array's home zone, whose volumes
any node may use but a node of another zone only at the class's cross-zone limits (fake API server, and the
driver on its sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from pydantic import ValidationError

from csibench.api.models import DataPathWorkload
from csibench.report.datapath import zone_table
from localcluster.csi import csi_pb2 as csi
from localcluster.simulator import qos
from localcluster.simulator.driver import home_zone_of
from tests.support.csi_driver import CLAIM as CLAIM_PARAMETERS
from tests.support.csi_driver import capability, driver_stubs, records
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import run, spec

NODE_ZONES = {"node-0": "zone-a", "node-1": "zone-b", "node-2": "zone-b"}


def _zoned(fake: FakeKube) -> FakeKube:
    for name, zone in NODE_ZONES.items():
        fake.put("nodes", "", {"metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
                               "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                          "allocatable": {"pods": "110"}}})
    return fake


def _data_spec(workloads: list[dict[str, Any]],
               steps: tuple[str, ...] = ("createVolume", "dataPath", "deleteVolume")) -> Any:
    return spec(volumes=4, pvcsPerPod=1, size="64Mi", steps=list(steps),
                dataPath={"rampSeconds": 0, "runtimeSeconds": 1, "workloads": workloads})


def _as_run(status: Any) -> dict[str, Any]:
    return {"status": status.model_dump(mode="json", exclude_none=True)}


def test_a_workloads_zones_are_unique_label_values() -> None:
    for zones in (["zone-a", "zone-a"], ["-a"], [""], ["a" * 64]):
        with pytest.raises(ValidationError):
            DataPathWorkload(name="r", pattern="read", blockSize="4Ki", zones=zones)


def test_a_workload_runs_in_its_zones_and_each_row_is_split_by_the_zones_its_pods_ran_in() -> None:
    fake = _zoned(FakeKube())
    status = run(fake, _data_spec([{"name": "inB", "pattern": "randread", "blockSize": "8Ki", "zones": ["zone-b"]},
                                   {"name": "anywhere", "pattern": "read", "blockSize": "64Ki"}]))
    assert status.phase == "Succeeded", status.message
    pods = {body["metadata"]["name"]: body for path, body in fake.created if path.endswith("/pods")
            and body["metadata"]["labels"].get("csibench.io/workload") in ("inB", "anywhere")}

    def affinity(pod: dict[str, Any]) -> dict[str, Any]:
        return dict(pod["spec"]["affinity"]["nodeAffinity"])

    zoned = [p for p in pods.values() if p["metadata"]["labels"]["csibench.io/workload"] == "inB"]
    assert len(zoned) == 4
    for pod in zoned:
        required = affinity(pod)["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert required == [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                                   "values": ["zone-b"]}]}]
    preferred = sorted(affinity(p)["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"][
        "matchFields"][0]["values"][0] for p in zoned)
    assert preferred == ["node-1", "node-1", "node-2", "node-2"]  # spread over zone-b's nodes only
    free = [p for p in pods.values() if p["metadata"]["labels"]["csibench.io/workload"] == "anywhere"]
    assert all("requiredDuringSchedulingIgnoredDuringExecution" not in affinity(p) for p in free)
    in_b, anywhere = status.dataPath
    assert [(z.zone, z.volumes) for z in in_b.zones] == [("zone-b", 4)]
    assert [(z.zone, z.volumes) for z in anywhere.zones] == [("zone-a", 2), ("zone-b", 2)]
    assert sum(z.readMiBps or 0 for z in anywhere.zones) == pytest.approx(anywhere.readMiBps)
    headers, rows = zone_table(_as_run(status)) or ([], [])
    assert headers[:3] == ["Workload", "Zone", "Volumes"] and [row[1] for row in rows] == ["zone-b", "zone-a",
                                                                                            "zone-b"]
    from csibench.report.render import render_table
    assert "Data path per zone" in render_table({"metadata": {"name": "z"}, "spec": {}, **_as_run(status)})


def test_rows_have_no_zones_where_the_nodes_have_no_zone_label() -> None:
    status = run(FakeKube(), _data_spec([{"name": "r", "pattern": "read", "blockSize": "64Ki"}]))
    assert status.phase == "Succeeded" and status.dataPath[0].zones == []
    assert zone_table(_as_run(status)) is None


def test_a_zone_without_a_usable_node_is_refused_before_anything_is_made() -> None:
    fake = _zoned(FakeKube())
    status = run(fake, _data_spec([{"name": "r", "pattern": "read", "blockSize": "64Ki", "zones": ["zone-x"]}]))
    assert status.phase == "Failed" and status.conditions[0].reason == "NotEnoughNodes", status
    assert "zone-x" in (status.message or "") and "zone-a, zone-b" in (status.message or "")
    assert not [path for path, _ in fake.created if path.endswith(("/pods", "/persistentvolumeclaims"))]


def test_a_volume_that_lives_outside_a_workloads_zones_fails_its_pod_at_once_with_why() -> None:
    # The PVs come 300 ms after their claims are Bound (a PV watch lagging the claims'): the data path, right after
    # createVolume, waits for them before it judges a volume's zone.
    fake = _zoned(FakeKube(Behaviour(volume_zone=lambda claim: "zone-a" if claim.endswith("1") else "zone-b",
                                     pv_delay=0.3)))
    status = run(fake, _data_spec([{"name": "inB", "pattern": "read", "blockSize": "64Ki", "zones": ["zone-b"]}]))
    row = status.dataPath[0]
    assert row.state == "Failed" and row.failed == 1 and row.volumes == 4, row
    assert "VolumeZoneConflict" in (row.message or "") and "zone-a" in (row.message or "")
    made = [body["metadata"]["name"] for path, body in fake.created if path.endswith("/pods")
            and body["metadata"]["labels"].get("csibench.io/workload") == "inB"]
    assert len(made) == 3  # the pod of the zone-a volume was never made
    assert [(z.zone, z.volumes) for z in row.zones] == [("zone-b", 3)]


def test_a_home_zones_parameters_are_checked_before_a_volume_is_made() -> None:
    assert home_zone_of({}, "ext4") == (None, {}, None)
    assert home_zone_of({"homeZone": "zone-b", "crossZoneMaxIOPS": "500"}, "ext4") == ("zone-b", {"maxIOPS": 500},
                                                                                          None)
    for params, kind in (({"homeZone": "zone-x"}, "ext4"), ({"crossZoneMaxIOPS": "5"}, "ext4"),
                         ({"homeZone": "zone-a", "zonal": "true"}, "ext4"),
                         ({"homeZone": "zone-a", "crossZoneMaxMiBps": "many"}, "ext4"),
                         ({"homeZone": "zone-a", "crossZoneMaxIOPS": "5"}, "directory")):
        assert home_zone_of(params, kind)[2], params
    assert qos.lower({"maxIOPS": 200}, {"maxIOPS": 1000, "maxMiBps": 10}) == {"maxIOPS": 200, "maxMiBps": 10}
    assert qos.lower({}, {}) == {}


def test_a_home_zone_volume_staged_in_another_zone_is_held_to_the_cross_zone_limits(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):  # node-a is in zone-a, node-b in zone-a too: no index
            ext4 = capability(fs_type="ext4")
            created = await stubs.controller.CreateVolume(csi.CreateVolumeRequest(
                name="pvc-h1", volume_capabilities=[ext4],
                parameters={**CLAIM_PARAMETERS, "homeZone": "zone-b", "crossZoneMaxIOPS": "300"}))
            volume = created.volume
            assert list(volume.accessible_topology) == []  # any node may use it
            volume_dir = next((tmp_path / "data").rglob(volume.volume_id.split("/")[-1]))
            def stage(node: str, volume_id: str = volume.volume_id, nodes: Any = stubs.nodes,
                      capability: Any = ext4) -> Any:
                return nodes[node].NodeStageVolume(csi.NodeStageVolumeRequest(
                    volume_id=volume_id, staging_target_path=str(tmp_path / node), volume_capability=capability))

            def unstage(node: str, volume_id: str = volume.volume_id, nodes: Any = stubs.nodes) -> Any:
                return nodes[node].NodeUnstageVolume(csi.NodeUnstageVolumeRequest(
                    volume_id=volume_id, staging_target_path=str(tmp_path / node)))

            await stage("node-a")  # node-a: zone-a, not the volume's zone-b
            assert qos.effective(volume_dir) == {"maxIOPS": 300}
            await stage("node-b")  # both nodes read it from afar (one host: one device, the strictest limit)
            await unstage("node-a")
            assert qos.effective(volume_dir) == {"maxIOPS": 300}  # node-b still stages it from zone-a
            await unstage("node-b")
            assert qos.effective(volume_dir) == {} and not list(volume_dir.glob(qos.CROSS_ZONE_PREFIX + "*"))
            near = (await stubs.controller.CreateVolume(csi.CreateVolumeRequest(
                name="pvc-h3", volume_capabilities=[ext4],
                parameters={**CLAIM_PARAMETERS, "homeZone": "zone-a", "crossZoneMaxIOPS": "300"}))).volume
            near_dir = next((tmp_path / "data").rglob(near.volume_id.split("/")[-1]))
            await stage("node-a", near.volume_id)  # in its home zone: no cross-zone limit
            assert qos.effective(near_dir) == {}
            await unstage("node-a", near.volume_id)
            refused = csi.CreateVolumeRequest(name="pvc-h2", volume_capabilities=[ext4],
                                              parameters={**CLAIM_PARAMETERS, "homeZone": "zone-z"})
            try:
                await stubs.controller.CreateVolume(refused)
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "zone-z" in str(error.details())
            else:
                raise AssertionError("a home zone the array does not have was taken")

    asyncio.run(scenario())
    found = [r for r in records(tmp_path) if r["op"] in ("createVolume", "mount")]
    assert [(r["op"], r.get("homeZone"), r.get("crossZone")) for r in found] == [
        ("createVolume", "zone-b", None), ("mount", None, True), ("mount", None, True),
        ("createVolume", "zone-a", None), ("mount", None, None)]

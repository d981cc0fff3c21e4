"""Zones: the simulated nodes' zones and a zonal class's volumes (placed where the provisioner prefers, attachable
only there), and how a step's objects are split by the zone of their volumes (pure parts and the driver on its
sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc

from csibench.engine.observed import CLAIM, POD, Observed, zone_of_volume
from csibench.engine.tracker import Outcome, StepTracker
from csibench.kube.watch import WatchEvent
from csibench.report import zones as zones_report
from localcluster.csi import csi_pb2 as csi
from localcluster.simulator.config import TOPOLOGY_KEY, ZONES, zone_of_node
from localcluster.simulator.nodes import build_csi_node, build_node
from tests.support.csi_driver import CLAIM as CLAIM_PARAMETERS
from tests.support.csi_driver import MOUNT, driver_stubs, records


def _affinity(key: str, values: list[str], operator: str = "In") -> dict[str, Any]:
    return {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": operator, "values": values}]}]}}}}


def test_a_volumes_zone_is_what_its_node_affinity_names_under_a_zone_key() -> None:
    assert zone_of_volume(_affinity("topology.kubernetes.io/zone", ["eu-1a"])) == "eu-1a"
    assert zone_of_volume(_affinity("topology.ebs.csi.aws.com/zone", ["us-east-1b"])) == "us-east-1b"
    assert zone_of_volume(_affinity("kubernetes.io/hostname", ["node-1"])) is None  # a node is not a zone
    assert zone_of_volume(_affinity("topology.kubernetes.io/zone", ["eu-1a"], "NotIn")) is None
    assert zone_of_volume({"spec": {}}) is None and zone_of_volume({}) is None
    regional = {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [  # a term per zone, as provisioned
        {"matchExpressions": [{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-central1-a"]}]},
        {"matchExpressions": [{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-central1-b"]}]}]}}}}
    assert zone_of_volume(regional) is None  # several zones: no single zone's row
    assert zone_of_volume(_affinity("topology.kubernetes.io/zone", ["eu-1a", "eu-1b"])) is None
    assert zone_of_volume(_affinity("topology.kubernetes.io/zone", [""])) is None


def test_the_simulated_nodes_are_in_three_zones_their_node_and_csinode_say_so() -> None:
    assert [zone_of_node(f"sim-node-{i}") for i in range(4)] == [*ZONES, ZONES[0]]
    node = build_node("sim-node-1", 1)
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-b"
    assert node["metadata"]["labels"][TOPOLOGY_KEY] == "zone-b"
    assert build_csi_node("sim-node-1", "uid", 8)["spec"]["drivers"][0]["topologyKeys"] == [TOPOLOGY_KEY]


def test_a_steps_objects_are_split_by_the_zone_of_their_volumes() -> None:
    observed = Observed("ns", "r-abcde")
    for index, zone in enumerate(("zone-a", "zone-b", "zone-a")):
        claim, pv = f"r-abcde-v{index:05d}", f"pv-{index}"
        observed.apply(WatchEvent("claims", "ADDED", {"metadata": {"name": claim, "uid": f"c{index}"},
                                                      "spec": {"volumeName": pv}, "status": {"phase": "Bound"}}, 1.0))
        observed.apply(WatchEvent("pvs", "ADDED", {"metadata": {"name": pv}, **_affinity(
            "topology.kubernetes.io/zone", [zone]), "spec": {**_affinity("topology.kubernetes.io/zone", [zone])[
                "spec"], "claimRef": {"namespace": "ns", "name": claim, "uid": f"c{index}"}}}, 1.0))
    observed.apply(WatchEvent("pods", "ADDED", {"metadata": {"name": "r-abcde-p00000", "uid": "p"}, "spec": {
        "volumes": [{"persistentVolumeClaim": {"claimName": "r-abcde-v00001"}}]}}, 1.0))
    assert [observed.zone_of(CLAIM, f"r-abcde-v{i:05d}") for i in range(3)] == ["zone-a", "zone-b", "zone-a"]
    assert observed.zone_of(POD, "r-abcde-p00000") == "zone-b"
    tracker = StepTracker("createVolume", [f"r-abcde-v{i:05d}" for i in range(3)])
    tracker.zone_of = lambda name: observed.zone_of(CLAIM, name)
    for index, (latency, ok) in enumerate(((1.0, True), (2.0, True), (3.0, False))):
        tracker.submitted[f"r-abcde-v{index:05d}"] = 0.0
        tracker.outcomes[f"r-abcde-v{index:05d}"] = Outcome(ok, latency)
    rows = {row.zone: row for row in tracker.zones()}
    assert (rows["zone-a"].objects, rows["zone-a"].succeeded) == (2, 1)
    assert rows["zone-a"].latency is not None and rows["zone-a"].latency.p50 == 1.0
    assert rows["zone-b"].latency is not None and rows["zone-b"].latency.p50 == 2.0
    # A claim bound before its PV's event arrived (the PV watch lags): counted once the PV is seen, after the end.
    observed.apply(WatchEvent("claims", "ADDED", {"metadata": {"name": "r-abcde-v00003", "uid": "c3"},
                                                  "spec": {"volumeName": "pv-3"}, "status": {"phase": "Bound"}}, 1.0))
    tracker.objects.append("r-abcde-v00003")
    tracker.submitted["r-abcde-v00003"] = 0.0
    tracker.outcomes["r-abcde-v00003"] = Outcome(True, 4.0)
    tracker.zones_known = lambda: len(observed.volume_zones)
    tracker.start()
    tracker.stopped = tracker.started
    assert "zone-c" not in {row.zone for row in tracker.status().zones}
    observed.apply(WatchEvent("pvs", "ADDED", {"metadata": {"name": "pv-3"}, "spec": {
        **_affinity("topology.kubernetes.io/zone", ["zone-c"])["spec"],
        "claimRef": {"namespace": "ns", "name": "r-abcde-v00003", "uid": "c3"}}}, 1.0))
    assert {row.zone: row.objects for row in tracker.status().zones} == {"zone-a": 2, "zone-b": 1, "zone-c": 1}
    run = {"status": {"steps": [{"name": "createVolume", "zones": [r.model_dump() for r in tracker.zones()]}]}}
    headers, table = zones_report.table(run) or ([], [])
    assert headers[:2] == ["Step", "Zone"] and [row[1] for row in table] == ["zone-a", "zone-b", "zone-c"]
    assert zones_report.table({"status": {"steps": [{"name": "createVolume"}]}}) is None


def test_a_zonal_volume_lives_where_the_provisioner_prefers_and_attaches_only_there(tmp_path: Path) -> None:
    async def code(call: Any) -> grpc.StatusCode:
        try:
            await call
        except grpc.aio.AioRpcError as error:
            return error.code()
        return grpc.StatusCode.OK

    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            info = await stubs.node.NodeGetInfo(csi.NodeGetInfoRequest())
            assert dict(info.accessible_topology.segments) == {TOPOLOGY_KEY: "zone-a"}  # no index: the first zone
            capabilities = await stubs.identity.GetPluginCapabilities(csi.GetPluginCapabilitiesRequest())
            assert csi.PluginCapability.Service.VOLUME_ACCESSIBILITY_CONSTRAINTS in [
                c.service.type for c in capabilities.capabilities]

            def create(name: str, zone: str, zonal: bool = True) -> Any:
                wanted = csi.TopologyRequirement(
                    requisite=[csi.Topology(segments={TOPOLOGY_KEY: z}) for z in ZONES],
                    preferred=[csi.Topology(segments={TOPOLOGY_KEY: zone})])
                return csi.CreateVolumeRequest(name=name, volume_capabilities=[MOUNT],
                                               parameters={**CLAIM_PARAMETERS, **({"zonal": "true"} if zonal else {})},
                                               accessibility_requirements=wanted)

            far = (await stubs.controller.CreateVolume(create("pvc-z1", "zone-b"))).volume
            assert [dict(t.segments) for t in far.accessible_topology] == [{TOPOLOGY_KEY: "zone-b"}]
            near = (await stubs.controller.CreateVolume(create("pvc-z2", "zone-a"))).volume
            anywhere = (await stubs.controller.CreateVolume(create("pvc-z3", "zone-c", zonal=False))).volume
            assert list(anywhere.accessible_topology) == []  # not a zonal class: any node
            only_c = create("pvc-z4", "zone-a")  # preferred outside what it allows: the requisite wins
            del only_c.accessibility_requirements.requisite[:]
            only_c.accessibility_requirements.requisite.append(csi.Topology(segments={"topology.kubernetes.io/zone":
                                                                                        "zone-c"}))
            placed = (await stubs.controller.CreateVolume(only_c)).volume
            assert [dict(t.segments) for t in placed.accessible_topology] == [{TOPOLOGY_KEY: "zone-c"}]
            again = create("pvc-z1", "zone-c")  # the zone-b volume asked again, allowed only in zone-c
            del again.accessibility_requirements.requisite[:]
            again.accessibility_requirements.requisite.append(csi.Topology(segments={TOPOLOGY_KEY: "zone-c"}))
            assert await code(stubs.controller.CreateVolume(again)) == grpc.StatusCode.ALREADY_EXISTS
            nowhere = create("pvc-z5", "zone-x")
            del nowhere.accessibility_requirements.requisite[:]
            nowhere.accessibility_requirements.requisite.append(csi.Topology(segments={TOPOLOGY_KEY: "zone-x"}))
            assert await code(stubs.controller.CreateVolume(nowhere)) == grpc.StatusCode.RESOURCE_EXHAUSTED
            publish = csi.ControllerPublishVolumeRequest(node_id="node-a", volume_capability=MOUNT)
            publish.volume_id = far.volume_id
            assert await code(stubs.controller.ControllerPublishVolume(publish)) == \
                grpc.StatusCode.FAILED_PRECONDITION
            for volume in (near, anywhere):
                publish.volume_id = volume.volume_id
                assert await code(stubs.controller.ControllerPublishVolume(publish)) == grpc.StatusCode.OK

    asyncio.run(scenario())
    zones = {r["volume"]: r.get("zone") for r in records(tmp_path) if r["op"] == "createVolume"}
    assert zones == {"pvc-z1": "zone-b", "pvc-z2": "zone-a", "pvc-z3": None, "pvc-z4": "zone-c"}


def test_a_zonal_volume_is_cloned_in_its_own_zone_or_not_at_all(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            def create(name: str, prefer: str, allow: tuple[str, ...] = ZONES, source: str = "") -> Any:
                wanted = csi.TopologyRequirement(
                    requisite=[csi.Topology(segments={TOPOLOGY_KEY: z}) for z in allow],
                    preferred=[csi.Topology(segments={TOPOLOGY_KEY: prefer})])
                request = csi.CreateVolumeRequest(name=name, volume_capabilities=[MOUNT],
                                                  parameters={**CLAIM_PARAMETERS, "zonal": "true"},
                                                  accessibility_requirements=wanted)
                if source:
                    request.volume_content_source.volume.volume_id = source
                return request

            source = (await stubs.controller.CreateVolume(create("pvc-s1", "zone-b"))).volume
            clone = (await stubs.controller.CreateVolume(create("pvc-c1", "zone-c", source=source.volume_id))).volume
            assert [dict(t.segments) for t in clone.accessible_topology] == [{TOPOLOGY_KEY: "zone-b"}]
            try:  # only zone-a allowed (a pod scheduled there): the source's zone is not, so no clone
                await stubs.controller.CreateVolume(create("pvc-c2", "zone-a", ("zone-a",), source.volume_id))
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "zone-b" in str(error.details())
            else:
                raise AssertionError("a clone was made outside its source's zone")

    asyncio.run(scenario())
    zones = {r["volume"]: r.get("zone") for r in records(tmp_path) if r["op"] in ("createVolume", "cloneVolume")}
    assert zones == {"pvc-s1": "zone-b", "pvc-c1": "zone-b"}

"""The simulated driver answers as the CSI spec asks, one test per family of csi-sanity specs it used to fail:
required fields, idempotency conflicts, unknown objects, expansion from the array's own records, and the
capabilities real drivers of its kind offer. Each refusal is checked to leave the ground truth untouched: a
refused call performs no array operation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from localcluster.csi import csi_pb2 as csi
from localcluster.csi import csi_pb2_grpc as csi_grpc
from localcluster.simulator.backend import GroundTruth
from localcluster.simulator.driver import Driver, serve
from localcluster.simulator.standalone import StandaloneArray, parse_parameters
from tests.support.csi_driver import CLAIM, MOUNT, capability, driver_stubs, records

GiB = 1 << 30
SINGLE_WRITER = csi.VolumeCapability.AccessMode.SINGLE_NODE_SINGLE_WRITER


def _run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


async def _code(call: Awaitable[Any]) -> grpc.StatusCode:
    """The status code a call fails with (OK when it succeeds)."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def _create(name: str, size: int = 0, limit: int = 0, **fields: Any) -> Any:
    return csi.CreateVolumeRequest(name=name, parameters=CLAIM, volume_capabilities=[MOUNT],
                                   capacity_range=csi.CapacityRange(required_bytes=size, limit_bytes=limit),
                                   **fields)


# Each request lacks one field the spec requires; the named volume exists, so only the missing field is wrong.
MISSING: list[tuple[str, str, Callable[[str], Any]]] = [
    ("controller", "CreateVolume", lambda v: csi.CreateVolumeRequest(name="pvc-x", parameters=CLAIM)),
    ("controller", "CreateVolume", lambda v: csi.CreateVolumeRequest(parameters=CLAIM, volume_capabilities=[MOUNT])),
    ("controller", "DeleteVolume", lambda v: csi.DeleteVolumeRequest()),
    ("controller", "ValidateVolumeCapabilities", lambda v: csi.ValidateVolumeCapabilitiesRequest(volume_id=v)),
    ("controller", "ValidateVolumeCapabilities",
     lambda v: csi.ValidateVolumeCapabilitiesRequest(volume_capabilities=[MOUNT])),
    ("controller", "ControllerPublishVolume",
     lambda v: csi.ControllerPublishVolumeRequest(node_id="node-a", volume_capability=MOUNT)),
    ("controller", "ControllerPublishVolume",
     lambda v: csi.ControllerPublishVolumeRequest(volume_id=v, volume_capability=MOUNT)),
    ("controller", "ControllerPublishVolume", lambda v: csi.ControllerPublishVolumeRequest(volume_id=v,
                                                                                          node_id="node-a")),
    ("controller", "ControllerUnpublishVolume", lambda v: csi.ControllerUnpublishVolumeRequest(node_id="node-a")),
    ("controller", "ControllerExpandVolume", lambda v: csi.ControllerExpandVolumeRequest(volume_id=v)),
    ("controller", "ControllerExpandVolume", lambda v: csi.ControllerExpandVolumeRequest(
        capacity_range=csi.CapacityRange(required_bytes=2 * GiB))),
    ("controller", "CreateSnapshot", lambda v: csi.CreateSnapshotRequest(name="snap")),
    ("controller", "CreateSnapshot", lambda v: csi.CreateSnapshotRequest(source_volume_id=v)),
    ("controller", "DeleteSnapshot", lambda v: csi.DeleteSnapshotRequest()),
    ("controller", "GetSnapshot", lambda v: csi.GetSnapshotRequest()),
    ("controller", "ControllerGetVolume", lambda v: csi.ControllerGetVolumeRequest()),
    ("group", "GetVolumeGroupSnapshot", lambda v: csi.GetVolumeGroupSnapshotRequest()),
    ("group", "DeleteVolumeGroupSnapshot", lambda v: csi.DeleteVolumeGroupSnapshotRequest()),
    ("node", "NodeStageVolume",
     lambda v: csi.NodeStageVolumeRequest(staging_target_path="/s", volume_capability=MOUNT)),
    ("node", "NodeStageVolume", lambda v: csi.NodeStageVolumeRequest(volume_id=v, volume_capability=MOUNT)),
    ("node", "NodeStageVolume", lambda v: csi.NodeStageVolumeRequest(volume_id=v, staging_target_path="/s")),
    ("node", "NodeUnstageVolume", lambda v: csi.NodeUnstageVolumeRequest(staging_target_path="/s")),
    ("node", "NodeUnstageVolume", lambda v: csi.NodeUnstageVolumeRequest(volume_id=v)),
    ("node", "NodePublishVolume", lambda v: csi.NodePublishVolumeRequest(target_path="/t", volume_capability=MOUNT)),
    ("node", "NodePublishVolume", lambda v: csi.NodePublishVolumeRequest(volume_id=v, volume_capability=MOUNT)),
    ("node", "NodePublishVolume", lambda v: csi.NodePublishVolumeRequest(volume_id=v, target_path="/t")),
    ("node", "NodeUnpublishVolume", lambda v: csi.NodeUnpublishVolumeRequest(target_path="/t")),
    ("node", "NodeUnpublishVolume", lambda v: csi.NodeUnpublishVolumeRequest(volume_id=v)),
    ("node", "NodeExpandVolume", lambda v: csi.NodeExpandVolumeRequest(volume_path="/t")),
    ("node", "NodeExpandVolume", lambda v: csi.NodeExpandVolumeRequest(volume_id=v)),
    ("node", "NodeGetVolumeStats", lambda v: csi.NodeGetVolumeStatsRequest(volume_path="/t")),
    ("node", "NodeGetVolumeStats", lambda v: csi.NodeGetVolumeStatsRequest(volume_id=v)),
]


@pytest.mark.parametrize(("service", "method", "build"), MISSING,
                         ids=[f"{method}-{index}" for index, (_, method, _) in enumerate(MISSING)])
def test_a_request_without_a_required_field_is_invalid_and_costs_the_array_nothing(
        tmp_path: Path, service: str, method: str, build: Callable[[str], Any]) -> None:
    codes = []

    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            volume_id = (await stubs.controller.CreateVolume(_create("pvc-u1"))).volume.volume_id
            codes.append(await _code(getattr(getattr(stubs, service), method)(build(volume_id))))

    _run(scenario())
    assert codes == [grpc.StatusCode.INVALID_ARGUMENT]
    assert [r["op"] for r in records(tmp_path)] == ["createVolume"]


def test_a_name_taken_with_other_arguments_is_already_exists_and_performs_nothing(tmp_path: Path) -> None:
    """CreateVolume of an existing name with a capacity the volume does not meet, and CreateSnapshot of an existing
    name from another volume, are conflicts (ALREADY_EXISTS); the same arguments again are the same object."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            first = await stubs.controller.CreateVolume(_create("pvc-u1", GiB, GiB))
            again = await stubs.controller.CreateVolume(_create("pvc-u1", GiB, GiB))
            assert first.volume == again.volume and first.volume.capacity_bytes == GiB
            assert await _code(stubs.controller.CreateVolume(_create("pvc-u1", 2 * GiB, 2 * GiB))) == (
                grpc.StatusCode.ALREADY_EXISTS)
            other = await stubs.controller.CreateVolume(_create("pvc-u2"))
            snapshot = csi.CreateSnapshotRequest(name="snap", source_volume_id=first.volume.volume_id)
            taken = await stubs.controller.CreateSnapshot(snapshot)
            assert (await stubs.controller.CreateSnapshot(snapshot)).snapshot == taken.snapshot
            assert await _code(stubs.controller.CreateSnapshot(csi.CreateSnapshotRequest(
                name="snap", source_volume_id=other.volume.volume_id))) == grpc.StatusCode.ALREADY_EXISTS

    _run(scenario())
    assert sorted(r["op"] for r in records(tmp_path)) == ["createSnapshot", "createVolume", "createVolume"]


def test_unknown_volumes_and_nodes_are_not_found_and_perform_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            known = (await stubs.controller.CreateVolume(_create("pvc-u1"))).volume.volume_id
            controller, node = stubs.controller, stubs.node
            not_found = [
                controller.ValidateVolumeCapabilities(csi.ValidateVolumeCapabilitiesRequest(
                    volume_id="nope@gold", volume_capabilities=[MOUNT])),
                controller.ControllerPublishVolume(csi.ControllerPublishVolumeRequest(
                    volume_id="nope@gold", node_id="node-a", volume_capability=MOUNT)),
                controller.ControllerPublishVolume(csi.ControllerPublishVolumeRequest(
                    volume_id=known, node_id="no-such-node", volume_capability=MOUNT)),
                controller.ControllerExpandVolume(csi.ControllerExpandVolumeRequest(
                    volume_id="nope@gold", capacity_range=csi.CapacityRange(required_bytes=2 * GiB))),
                controller.CreateSnapshot(csi.CreateSnapshotRequest(name="s", source_volume_id="nope@gold")),
                controller.ControllerGetVolume(csi.ControllerGetVolumeRequest(volume_id="nope@gold")),
                controller.GetSnapshot(csi.GetSnapshotRequest(snapshot_id="nope@gold")),
                node.NodeStageVolume(csi.NodeStageVolumeRequest(volume_id="nope@gold", staging_target_path="/s",
                                                                volume_capability=MOUNT)),
                node.NodeExpandVolume(csi.NodeExpandVolumeRequest(volume_id="nope@gold", volume_path="/t")),
                node.NodeGetVolumeStats(csi.NodeGetVolumeStatsRequest(volume_id="nope@gold", volume_path="/t")),
                node.NodeGetVolumeStats(csi.NodeGetVolumeStatsRequest(volume_id=known, volume_path="/not/there")),
            ]
            codes = [await _code(call) for call in not_found]
            assert codes == [grpc.StatusCode.NOT_FOUND] * len(not_found)
            valid = await controller.ValidateVolumeCapabilities(csi.ValidateVolumeCapabilitiesRequest(
                volume_id=known, volume_capabilities=[MOUNT]))
            assert list(valid.confirmed.volume_capabilities) == [MOUNT]
            xfs = await controller.ValidateVolumeCapabilities(csi.ValidateVolumeCapabilitiesRequest(
                volume_id=known, volume_capabilities=[capability(fs_type="xfs")]))
            assert not xfs.HasField("confirmed") and "xfs" in xfs.message

    _run(scenario())
    assert [r["op"] for r in records(tmp_path)] == ["createVolume"]


def test_expansion_finds_a_volume_by_its_id_whatever_its_name_and_the_node_grows_it_once_published(
        tmp_path: Path) -> None:
    """A volume whose CreateVolume name is not a PV's (``pvc-<uid>``) grows like any other: the array finds it
    in its own records; NodeExpandVolume at the published target path works."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            created = await stubs.controller.CreateVolume(_create("sanity-expand", GiB))
            volume_id = created.volume.volume_id
            grown = await stubs.controller.ControllerExpandVolume(csi.ControllerExpandVolumeRequest(
                volume_id=volume_id, capacity_range=csi.CapacityRange(required_bytes=2 * GiB)))
            assert grown.capacity_bytes == 2 * GiB
            await stubs.controller.ControllerPublishVolume(csi.ControllerPublishVolumeRequest(
                volume_id=volume_id, node_id="node-a", volume_capability=MOUNT))
            staging, target = str(tmp_path / "staging"), str(tmp_path / "target")
            await stubs.node.NodeStageVolume(csi.NodeStageVolumeRequest(
                volume_id=volume_id, staging_target_path=staging, volume_capability=MOUNT))
            await stubs.node.NodePublishVolume(csi.NodePublishVolumeRequest(
                volume_id=volume_id, staging_target_path=staging, target_path=target, volume_capability=MOUNT))
            node = await stubs.node.NodeExpandVolume(csi.NodeExpandVolumeRequest(
                volume_id=volume_id, volume_path=target, capacity_range=csi.CapacityRange(required_bytes=2 * GiB)))
            assert node.capacity_bytes == 2 * GiB

    _run(scenario())
    expansions = [r for r in records(tmp_path) if r["op"] == "expandVolume"]
    assert [r["object"] for r in expansions] == ["sanity-expand"]


def test_volumes_are_listed_and_got_with_their_nodes_and_condition_and_capacity_is_reported(tmp_path: Path) -> None:
    """ListVolumes pages (a token that is not the driver's is ABORTED), names the nodes each volume is attached
    to and its condition; ControllerGetVolume answers the same for one; GetCapacity shrinks by what is
    provisioned; none of these reads is an array operation."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            controller = stubs.controller
            capacity = (await controller.GetCapacity(csi.GetCapacityRequest())).available_capacity
            ids = [(await controller.CreateVolume(_create(f"pvc-u{index}", GiB))).volume.volume_id
                   for index in range(3)]
            after = (await controller.GetCapacity(csi.GetCapacityRequest())).available_capacity
            assert capacity - after == 3 * GiB
            await controller.ControllerPublishVolume(csi.ControllerPublishVolumeRequest(
                volume_id=ids[1], node_id="node-b", volume_capability=MOUNT))
            first = await controller.ListVolumes(csi.ListVolumesRequest(max_entries=2))
            rest = await controller.ListVolumes(csi.ListVolumesRequest(starting_token=first.next_token))
            assert len(first.entries) == 2 and first.next_token and not rest.next_token
            entries = {e.volume.volume_id: e for e in [*first.entries, *rest.entries]}
            assert sorted(entries) == sorted(ids)
            assert list(entries[ids[1]].status.published_node_ids) == ["node-b"]
            assert not entries[ids[0]].status.published_node_ids
            assert not entries[ids[0]].status.volume_condition.abnormal
            assert await _code(controller.ListVolumes(csi.ListVolumesRequest(starting_token="bogus"))) == (
                grpc.StatusCode.ABORTED)
            got = await controller.ControllerGetVolume(csi.ControllerGetVolumeRequest(volume_id=ids[1]))
            assert got.volume.capacity_bytes == GiB and list(got.status.published_node_ids) == ["node-b"]
            await controller.DeleteVolume(csi.DeleteVolumeRequest(volume_id=ids[0]))
            listed = await controller.ListVolumes(csi.ListVolumesRequest())
            assert sorted(e.volume.volume_id for e in listed.entries) == sorted(ids[1:])
            (tmp_path / "data" / "volumes" / ids[2]).rmdir()  # the array lost a volume's data
            lost = await controller.ControllerGetVolume(csi.ControllerGetVolumeRequest(volume_id=ids[2]))
            assert lost.status.volume_condition.abnormal

    _run(scenario())
    assert sorted(r["op"] for r in records(tmp_path)) == ["attach", *["createVolume"] * 3, "deleteVolume"]


def test_snapshots_are_listed_by_id_or_source_in_pages_and_got(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            controller = stubs.controller
            sources = [(await controller.CreateVolume(_create(f"pvc-u{index}"))).volume.volume_id
                       for index in range(3)]
            taken = [(await controller.CreateSnapshot(csi.CreateSnapshotRequest(
                name=f"snap-{index}", source_volume_id=source))).snapshot for index, source in enumerate(sources)]
            everything = await controller.ListSnapshots(csi.ListSnapshotsRequest())
            assert sorted(e.snapshot.snapshot_id for e in everything.entries) == sorted(s.snapshot_id for s in taken)
            by_id = await controller.ListSnapshots(csi.ListSnapshotsRequest(snapshot_id=taken[1].snapshot_id))
            assert [e.snapshot for e in by_id.entries] == [taken[1]]
            by_source = await controller.ListSnapshots(csi.ListSnapshotsRequest(source_volume_id=sources[2]))
            assert [e.snapshot for e in by_source.entries] == [taken[2]]
            assert not (await controller.ListSnapshots(csi.ListSnapshotsRequest(snapshot_id="none"))).entries
            page = await controller.ListSnapshots(csi.ListSnapshotsRequest(max_entries=2))
            rest = await controller.ListSnapshots(csi.ListSnapshotsRequest(starting_token=page.next_token))
            assert (len(page.entries), len(rest.entries), rest.next_token) == (2, 1, "")
            got = await controller.GetSnapshot(csi.GetSnapshotRequest(snapshot_id=taken[0].snapshot_id))
            assert got.snapshot == taken[0]

    _run(scenario())
    assert sorted(r["op"] for r in records(tmp_path)) == [*["createSnapshot"] * 3, *["createVolume"] * 3]


def test_node_reports_usage_where_published_and_a_single_writer_volume_has_one_target(tmp_path: Path) -> None:
    """NodeGetVolumeStats: capacity, the bytes the data takes, condition, at a published or staged path. A
    SINGLE_NODE_SINGLE_WRITER publish at a second target path is FAILED_PRECONDITION (the node plugin offers
    SINGLE_NODE_MULTI_WRITER, under which that mode means one target); multi-writer volumes take several."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            single = capability(SINGLE_WRITER)
            volume_id = (await stubs.controller.CreateVolume(_create("pvc-u1", GiB))).volume.volume_id
            staging = str(tmp_path / "staging")
            targets = [str(tmp_path / name) for name in ("one", "two")]
            await stubs.node.NodeStageVolume(csi.NodeStageVolumeRequest(
                volume_id=volume_id, staging_target_path=staging, volume_capability=single))
            publish = [csi.NodePublishVolumeRequest(volume_id=volume_id, staging_target_path=staging,
                                                    target_path=target, volume_capability=single)
                       for target in targets]
            await stubs.node.NodePublishVolume(publish[0])
            await stubs.node.NodePublishVolume(publish[0])  # the same target again: idempotent
            assert await _code(stubs.node.NodePublishVolume(publish[1])) == grpc.StatusCode.FAILED_PRECONDITION
            (Path(targets[0]) / "data").write_bytes(b"x" * 65536)
            stats = await stubs.node.NodeGetVolumeStats(csi.NodeGetVolumeStatsRequest(volume_id=volume_id,
                                                                                      volume_path=targets[0]))
            (usage,) = stats.usage
            assert usage.unit == csi.VolumeUsage.BYTES and usage.total == GiB
            assert 65536 <= usage.used < 1 << 20 and usage.available == GiB - usage.used
            assert not stats.volume_condition.abnormal
            await stubs.node.NodeUnpublishVolume(csi.NodeUnpublishVolumeRequest(volume_id=volume_id,
                                                                                target_path=targets[0]))
            assert not Path(targets[0]).exists()
            shared = [csi.NodePublishVolumeRequest(volume_id=volume_id, staging_target_path=staging,
                                                   target_path=target, volume_capability=MOUNT)
                      for target in targets]
            for request in shared:
                await stubs.node.NodePublishVolume(request)

    _run(scenario())
    assert sorted(r["op"] for r in records(tmp_path)) == ["createVolume", "mount"]


def test_both_sockets_describe_one_plugin(tmp_path: Path) -> None:
    """The node's identity names the controller and group controller services too (csi-sanity, and any client
    of a node socket, learns from it what the plugin offers), as a one-binary driver's does, and that volumes have
    topology (the nodes' zones)."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            service = csi.PluginCapability.Service
            for identity in (stubs.identity, stubs.node_identity):
                plugin = await identity.GetPluginCapabilities(csi.GetPluginCapabilitiesRequest())
                assert {c.service.type for c in plugin.capabilities if c.HasField("service")} == {
                    service.CONTROLLER_SERVICE, service.GROUP_CONTROLLER_SERVICE,
                    service.VOLUME_ACCESSIBILITY_CONSTRAINTS}

    _run(scenario())


def test_the_standalone_driver_puts_a_volume_without_claim_metadata_on_its_one_class(tmp_path: Path) -> None:
    """Without a cluster (csi-sanity's case) CreateVolume names no claim: the volume is on the driver's default
    class, with the array the parameters describe; a claim it cannot look up is NOT_FOUND."""
    async def scenario() -> None:
        truth = GroundTruth(tmp_path / "truth.jsonl")
        array = StandaloneArray("plain", parse_parameters(["createVolumeLatency=30ms"]), truth)
        servers = await serve(Driver(array, tmp_path / "data", default_class="plain"), tmp_path / "c.sock", {})
        async with grpc.aio.insecure_channel(f"unix://{tmp_path}/c.sock") as channel:
            controller = csi_grpc.ControllerStub(channel)
            created = await controller.CreateVolume(csi.CreateVolumeRequest(name="sanity-1",
                                                                            volume_capabilities=[MOUNT]))
            assert created.volume.volume_id == "sanity-1@plain"
            assert await _code(controller.CreateVolume(_create("pvc-u1"))) == grpc.StatusCode.NOT_FOUND
        for server in servers:
            await server.stop(None)
        truth.close()

    _run(scenario())
    (created,) = records(tmp_path)
    assert (created["op"], created["object"], created["storageClass"]) == ("createVolume", "sanity-1", "plain")
    assert created["finish"] - created["start"] >= 0.03
    with pytest.raises(ValueError, match="not key=value"):
        parse_parameters(["latency"])


def test_mutable_parameters_are_checked_and_a_change_is_one_array_operation(tmp_path: Path) -> None:
    """The array takes one mutable parameter (qosPolicy, a VolumeAttributesClass's): CreateVolume and
    ControllerModifyVolume refuse others (INVALID_ARGUMENT, nothing done); a change is one modifyVolume
    operation, and asking for what the volume has already is none."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            controller = stubs.controller
            assert await _code(controller.CreateVolume(_create("pvc-u0", mutable_parameters={"XXX": "y"}))) == (
                grpc.StatusCode.INVALID_ARGUMENT)
            volume_id = (await controller.CreateVolume(_create("pvc-u1", mutable_parameters={"qosPolicy": "gold"}))
                         ).volume.volume_id
            modify = csi.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters={"qosPolicy": "gold"})
            await controller.ControllerModifyVolume(modify)  # what it has: nothing to do
            modify.mutable_parameters["qosPolicy"] = "bronze"
            await controller.ControllerModifyVolume(modify)
            refused = [
                csi.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters={"XXX": "y"}),
                csi.ControllerModifyVolumeRequest(volume_id=volume_id),
                csi.ControllerModifyVolumeRequest(mutable_parameters={"qosPolicy": "x"}),
            ]
            assert [await _code(controller.ControllerModifyVolume(r)) for r in refused] == (
                [grpc.StatusCode.INVALID_ARGUMENT] * 3)
            assert await _code(controller.ControllerModifyVolume(csi.ControllerModifyVolumeRequest(
                volume_id="nope@gold", mutable_parameters={"qosPolicy": "x"}))) == grpc.StatusCode.NOT_FOUND

    _run(scenario())
    operations = [(r["op"], r.get("parameters")) for r in records(tmp_path)]
    assert operations == [("createVolume", None), ("modifyVolume", {"qosPolicy": "bronze"})]


def test_a_volume_clones_with_its_data_and_a_publish_read_only_clash_is_already_exists(tmp_path: Path) -> None:
    """CLONE_VOLUME: a clone of a volume holds its data, at least its capacity, is one cloneVolume operation
    naming its source; an unknown source is NOT_FOUND. PUBLISH_READONLY: publishing a volume to a node read-only
    where it is published read-write (or the reverse) is ALREADY_EXISTS, with no operation."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            controller = stubs.controller
            source = (await controller.CreateVolume(_create("pvc-u1", 2 * GiB))).volume.volume_id
            (tmp_path / "data" / "volumes" / source / "file").write_text("data")
            of = csi.VolumeContentSource(volume=csi.VolumeContentSource.VolumeSource(volume_id=source))
            clone = (await controller.CreateVolume(_create("pvc-u2", GiB, volume_content_source=of))).volume
            assert clone.capacity_bytes == 2 * GiB and clone.content_source.volume.volume_id == source
            assert (tmp_path / "data" / "volumes" / clone.volume_id / "file").read_text() == "data"
            missing = csi.VolumeContentSource(volume=csi.VolumeContentSource.VolumeSource(volume_id="nope@gold"))
            assert await _code(controller.CreateVolume(_create("pvc-u3", volume_content_source=missing))) == (
                grpc.StatusCode.NOT_FOUND)
            publish = csi.ControllerPublishVolumeRequest(volume_id=source, node_id="node-a", volume_capability=MOUNT)
            await controller.ControllerPublishVolume(publish)
            publish.readonly = True
            assert await _code(controller.ControllerPublishVolume(publish)) == grpc.StatusCode.ALREADY_EXISTS

    _run(scenario())
    operations = [(r["op"], r.get("sourceVolume")) for r in records(tmp_path)]
    assert operations == [("createVolume", None), ("cloneVolume", "u1@gold"), ("attach", None)]


def _ext4(name: str, **fields: Any) -> Any:
    ext4 = csi.VolumeCapability(mount=csi.VolumeCapability.MountVolume(fs_type="ext4"),
                                access_mode=csi.VolumeCapability.AccessMode(
                                    mode=csi.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))
    return csi.CreateVolumeRequest(name=name, parameters=CLAIM, volume_capabilities=[ext4], **fields)


def test_qos_limits_are_kept_only_where_the_array_can_enforce_them_and_zero_lifts_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """maxIOPS on a directory volume is refused (INVALID_ARGUMENT: it has no device to throttle); on an ext4 volume
    it is kept beside the data; 0 lifts it (mutable parameters merge); a limit the host cannot set fails the
    modify every time, never recorded as kept; a change of name alone needs no throttling host."""
    from localcluster.simulator import qos

    refusing = {"on": False}

    def apply(device: str, limits: dict[str, int], root: Path = qos.BLKIO) -> None:
        if refusing["on"]:
            raise qos.QosUnavailable("cannot throttle here")

    monkeypatch.setattr(qos, "apply", apply)
    monkeypatch.setattr("localcluster.simulator.volumes.loop_devices_of", lambda image: ["/dev/loop7"])

    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            controller = stubs.controller
            assert await _code(controller.CreateVolume(_create("pvc-d1", mutable_parameters={"maxIOPS": "200"}))) \
                == grpc.StatusCode.INVALID_ARGUMENT
            plain = (await controller.CreateVolume(_create("pvc-d2", mutable_parameters={"maxIOPS": "0"}))
                     ).volume.volume_id  # "no limit" fits any volume
            assert await _code(controller.ControllerModifyVolume(csi.ControllerModifyVolumeRequest(
                volume_id=plain, mutable_parameters={"maxIOPS": "200"}))) == grpc.StatusCode.INVALID_ARGUMENT
            volume_id = (await controller.CreateVolume(_ext4("pvc-e1", mutable_parameters={"maxIOPS": "200"}))
                         ).volume.volume_id
            folder = next(tmp_path.rglob(volume_id.split("@")[0] + "*"), None)
            assert folder is not None and qos.read(folder) == {"maxIOPS": 200}
            lift = csi.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters={
                "qosPolicy": "unlimited", "maxIOPS": "0", "maxMiBps": "0"})
            await controller.ControllerModifyVolume(lift)
            assert qos.read(folder) == {}
            refusing["on"] = True
            limit = csi.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters={"maxIOPS": "100"})
            assert [await _code(controller.ControllerModifyVolume(limit)) for _ in range(2)] == [
                grpc.StatusCode.INTERNAL] * 2  # not recorded, so the retry fails too
            assert qos.read(folder) == {}
            rename = csi.ControllerModifyVolumeRequest(volume_id=plain, mutable_parameters={"qosPolicy": "gold"})
            await controller.ControllerModifyVolume(rename)  # no limit before or after: no host needed

    _run(scenario())

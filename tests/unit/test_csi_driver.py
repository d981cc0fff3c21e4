"""The simulated CSI driver over a real unix socket, with the array model behind it and no cluster: what the
sidecars and the kubelet can rely on (idempotent calls, one array operation per object, errors as gRPC codes)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from localcluster.csi import csi_pb2 as csi
from localcluster.simulator.audit import build_answer, foreign_request
from localcluster.simulator.config import ParameterError, parse_backend_model
from localcluster.simulator.requests import pending_request
from tests.support.csi_driver import CLAIM, MOUNT, RUN_UID, create_volumes, driver_stubs, records


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_identity_and_capabilities_are_what_the_sidecars_probe(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            info = await stubs.identity.GetPluginInfo(csi.GetPluginInfoRequest())
            assert info.name == "sim.csibench.io"
            assert (await stubs.identity.Probe(csi.ProbeRequest())).ready.value
            capabilities = await stubs.controller.ControllerGetCapabilities(csi.ControllerGetCapabilitiesRequest())
            kinds = {c.rpc.type for c in capabilities.capabilities}
            rpc = csi.ControllerServiceCapability.RPC
            assert kinds == {rpc.CREATE_DELETE_VOLUME, rpc.PUBLISH_UNPUBLISH_VOLUME, rpc.CREATE_DELETE_SNAPSHOT,
                             rpc.EXPAND_VOLUME, rpc.LIST_VOLUMES, rpc.LIST_VOLUMES_PUBLISHED_NODES, rpc.GET_VOLUME,
                             rpc.VOLUME_CONDITION, rpc.LIST_SNAPSHOTS, rpc.GET_SNAPSHOT, rpc.GET_CAPACITY,
                             rpc.SINGLE_NODE_MULTI_WRITER, rpc.MODIFY_VOLUME, rpc.CLONE_VOLUME, rpc.PUBLISH_READONLY}
            node = await stubs.node.NodeGetCapabilities(csi.NodeGetCapabilitiesRequest())
            node_rpc = csi.NodeServiceCapability.RPC
            assert {c.rpc.type for c in node.capabilities} == {
                node_rpc.STAGE_UNSTAGE_VOLUME, node_rpc.EXPAND_VOLUME, node_rpc.GET_VOLUME_STATS,
                node_rpc.VOLUME_CONDITION, node_rpc.SINGLE_NODE_MULTI_WRITER}
            info = await stubs.node.NodeGetInfo(csi.NodeGetInfoRequest())
            assert (info.node_id, info.max_volumes_per_node) == ("node-a", 128)

    _run(scenario())


def test_full_lifecycle_performs_each_array_operation_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, latency="50ms"):
            request = csi.CreateVolumeRequest(name="pvc-u1", parameters=CLAIM, volume_capabilities=[MOUNT])
            # Two sidecar attempts at once (a retry after a timeout) join one operation.
            first, second = await asyncio.gather(stubs.controller.CreateVolume(request),
                                                 stubs.controller.CreateVolume(request))
            volume_id = first.volume.volume_id
            assert volume_id == second.volume.volume_id == "u1@gold"
            await stubs.controller.CreateVolume(request)  # already exists: answered at once
            attach = csi.ControllerPublishVolumeRequest(volume_id=volume_id, node_id="node-a",
                                                        volume_capability=MOUNT)
            await stubs.controller.ControllerPublishVolume(attach)
            await stubs.controller.ControllerPublishVolume(attach)
            staging = str(tmp_path / "kubelet" / "globalmount")
            target = str(tmp_path / "kubelet" / "pod" / "mount")
            await stubs.node.NodeStageVolume(csi.NodeStageVolumeRequest(
                volume_id=volume_id, staging_target_path=staging, volume_capability=MOUNT))
            await stubs.node.NodePublishVolume(csi.NodePublishVolumeRequest(
                volume_id=volume_id, staging_target_path=staging, target_path=target, volume_capability=MOUNT))
            (Path(target) / "file").write_text("data")  # lands in the volume's data directory
            snapshot = await stubs.controller.CreateSnapshot(csi.CreateSnapshotRequest(
                source_volume_id=volume_id, name="snapshot-s1"))
            assert snapshot.snapshot.ready_to_use and snapshot.snapshot.size_bytes == 1 << 30
            restored = await stubs.controller.CreateVolume(csi.CreateVolumeRequest(
                name="pvc-u2", parameters=CLAIM, volume_capabilities=[MOUNT],
                volume_content_source=csi.VolumeContentSource(snapshot=csi.VolumeContentSource.SnapshotSource(
                    snapshot_id=snapshot.snapshot.snapshot_id))))
            assert restored.volume.content_source.snapshot.snapshot_id == snapshot.snapshot.snapshot_id
            assert (tmp_path / "data" / "volumes" / restored.volume.volume_id / "file").read_text() == "data"
            await stubs.node.NodeUnpublishVolume(csi.NodeUnpublishVolumeRequest(volume_id=volume_id,
                                                                                target_path=target))
            for _ in range(2):
                await stubs.node.NodeUnstageVolume(csi.NodeUnstageVolumeRequest(volume_id=volume_id,
                                                                                staging_target_path=staging))
                await stubs.controller.ControllerUnpublishVolume(csi.ControllerUnpublishVolumeRequest(
                    volume_id=volume_id, node_id="node-a"))
                await stubs.controller.DeleteSnapshot(csi.DeleteSnapshotRequest(
                    snapshot_id=snapshot.snapshot.snapshot_id))
                for volume in (volume_id, restored.volume.volume_id):
                    await stubs.controller.DeleteVolume(csi.DeleteVolumeRequest(volume_id=volume))
            assert not Path(target).exists() and not (tmp_path / "data" / "volumes" / volume_id).exists()

    _run(scenario())
    operations = sorted(r["op"] for r in records(tmp_path))
    assert operations == sorted(["createVolume", "attach", "mount", "createSnapshot", "cloneVolume", "unmount",
                                 "detach", "deleteSnapshot", "deleteVolume", "deleteVolume"])
    assert all(r["result"] == "ok" for r in records(tmp_path))
    assert next(r for r in records(tmp_path) if r["op"] == "createVolume")["object"] == "ns/data"


def test_injected_failure_is_an_internal_error_and_a_retry_is_a_new_operation(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, failureRate="1", failureOperations="createVolume"):
            request = csi.CreateVolumeRequest(name="pvc-u1", parameters=CLAIM, volume_capabilities=[MOUNT])
            for _ in range(2):
                with pytest.raises(grpc.aio.AioRpcError) as failure:
                    await stubs.controller.CreateVolume(request)
                assert failure.value.code() == grpc.StatusCode.INTERNAL
                assert "injected failure of createVolume on array gold" in str(failure.value.details())

    _run(scenario())
    assert [r["result"] for r in records(tmp_path)] == ["error", "error"]


async def leak_some(stubs: Any) -> tuple[list[str], list[str]]:
    """Seven volumes and three snapshots of the first made, then every one deleted, snapshots first: on an array
    that leaks every 3rd delete, the 3rd and 6th volume and the 3rd snapshot stay. (volume IDs, snapshot IDs)"""
    ids = await create_volumes(stubs, 7)
    snapshots = [(await stubs.controller.CreateSnapshot(csi.CreateSnapshotRequest(
        source_volume_id=ids[0], name=f"snapshot-s{index}"))).snapshot.snapshot_id for index in range(3)]
    for snapshot_id in snapshots:
        await stubs.controller.DeleteSnapshot(csi.DeleteSnapshotRequest(snapshot_id=snapshot_id))
    for volume_id in ids:
        await stubs.controller.DeleteVolume(csi.DeleteVolumeRequest(volume_id=volume_id))
    return ids, snapshots


def test_a_leaking_array_acknowledges_every_nth_delete_and_keeps_that_volume_and_snapshot(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, leakEvery="3", leakOperations="deleteVolume,deleteSnapshot"):
            ids, snapshots = await leak_some(stubs)  # every delete answered as done
            # The array still holds the 3rd and 6th volume and the 3rd snapshot: CSI's own listing says so.
            listed = await stubs.controller.ListVolumes(csi.ListVolumesRequest())
            assert sorted(e.volume.volume_id for e in listed.entries) == sorted([ids[2], ids[5]])
            kept = await stubs.controller.ListSnapshots(csi.ListSnapshotsRequest())
            assert [e.snapshot.snapshot_id for e in kept.entries] == [snapshots[2]]
            assert (tmp_path / "data" / "volumes" / ids[2]).is_dir() and not (tmp_path / "data" / "volumes" / ids[0]
                                                                              ).exists()

    _run(scenario())
    deletes = [r for r in records(tmp_path) if r["op"] in ("deleteVolume", "deleteSnapshot")]
    assert [(r["op"], r.get("leaked", False)) for r in deletes] == [
        ("deleteSnapshot", False), ("deleteSnapshot", False), ("deleteSnapshot", True),
        *[("deleteVolume", index % 3 == 2) for index in range(7)]]
    assert all(r["result"] == "ok" for r in deletes)


def test_the_arrays_audit_names_what_it_still_holds_of_a_run_and_what_it_did_twice(tmp_path: Path) -> None:
    """The answer csibench's operator reads after cleanup: the run's volumes and snapshots the array still holds
    (the leaked ones: every 3rd delete), by their create names, and a create done twice (a volume created again
    after its delete); another run's audit finds none of it."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, leakEvery="3", leakOperations="deleteVolume,deleteSnapshot"):
            await leak_some(stubs)
            before = time.time()
            await create_volumes(stubs, 1)  # pvc-u0 again: its first was deleted for real
            answer = build_answer(stubs.driver, {"id": "r1", "runUid": RUN_UID})
            (again,) = answer["repeated"][0].pop("at")  # when the array began the create it did the second time
            assert before <= dt.datetime.fromisoformat(again.replace("Z", "+00:00")).timestamp() <= time.time()
            assert answer == {"id": "r1", "volumeCount": 3, "volumes": ["pvc-u0", "pvc-u2", "pvc-u5"],
                              "snapshotCount": 1, "snapshots": ["snapshot-s2"], "repeatedCount": 1,
                              "repeated": [{"operation": "createVolume", "object": "pvc-u0", "times": 2}]}
            other = build_answer(stubs.driver, {"id": "r2", "runUid": "another-run"})
            assert (other["volumeCount"], other["snapshotCount"], other["repeatedCount"]) == (0, 0, 0)
            assert build_answer(stubs.driver, {"id": "r3"})["volumeCount"] == 0  # no run named: nothing is its

    _run(scenario())


def test_a_create_still_in_flight_is_held_and_a_failed_attempt_is_not_work_done_twice(tmp_path: Path) -> None:
    """The array finishes what it started: a volume whose create is still running when the audit comes is the
    run's (its claim may be gone already). A create the array failed and the sidecar retried was done once."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, hangOperations="createSnapshot", failureRate="1",
                                        failureOperations="deleteVolume"):
            (volume_id,) = await create_volumes(stubs, 1)
            hanging = asyncio.ensure_future(stubs.controller.CreateSnapshot(csi.CreateSnapshotRequest(
                source_volume_id=volume_id, name="snapshot-h")))
            await asyncio.sleep(0.2)
            for _ in range(2):  # failed, and retried: the array did nothing twice
                with pytest.raises(grpc.aio.AioRpcError):
                    await stubs.controller.DeleteVolume(csi.DeleteVolumeRequest(volume_id=volume_id))
            answer = build_answer(stubs.driver, {"id": "r", "runUid": RUN_UID})
            assert (answer["volumes"], answer["snapshots"], answer["repeatedCount"]) == (
                ["pvc-u0"], ["snapshot-h"], 0), answer
            hanging.cancel()

    _run(scenario())


def test_an_audit_is_answered_only_about_the_run_that_owns_its_request() -> None:
    def configmap(label: str, owner: str) -> dict[str, Any]:
        return {"metadata": {"labels": {"csibench.io/array-audit": label}, "ownerReferences": [{"uid": owner}]}}

    assert foreign_request(configmap("u1", "u1"), {"id": "r", "runUid": "u1"}) is None
    for found, asked in ((configmap("u1", "u2"), "u1"), (configmap("u2", "u1"), "u1"), (configmap("u1", "u1"), "u2"),
                         (configmap("", ""), "")):
        assert foreign_request(found, {"id": "r", "runUid": asked}) is not None, (found, asked)


def test_an_audit_request_is_answered_once_per_id_and_a_malformed_one_never() -> None:
    def configmap(**data: str) -> dict[str, Any]:
        return {"metadata": {"name": "a", "namespace": "ns"}, "data": data}

    asked = '{"id": "r1", "runUid": "u"}'
    assert pending_request(configmap(request=asked)) == {"id": "r1", "runUid": "u"}
    assert pending_request(configmap(request=asked, answer='{"id": "r0"}')) == {"id": "r1", "runUid": "u"}
    assert pending_request(configmap(request=asked, answer='{"id": "r1"}')) is None
    for request in ("{", "[]", '{"runUid": "u"}', ""):
        assert pending_request(configmap(request=request)) is None, request


def test_retries_neither_undo_a_leak_nor_shift_which_deletes_leak(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, leakEvery="2", deleteVolumeLatency="200ms"):
            ids = await create_volumes(stubs, 4)

            async def delete(volume_id: str, controller: Any = stubs.controller) -> None:
                await controller.DeleteVolume(csi.DeleteVolumeRequest(volume_id=volume_id))
            await delete(ids[0])
            await delete(ids[1])  # the 2nd delete: leaked
            await delete(ids[1])  # the provisioner's retry: answered as before, nothing done or recorded again
            await asyncio.gather(delete(ids[2]), delete(ids[2]))  # a retry joining the 3rd, still in flight
            await delete(ids[3])  # so the 4th is the next to leak
            listed = await stubs.controller.ListVolumes(csi.ListVolumesRequest())
            assert sorted(e.volume.volume_id for e in listed.entries) == sorted([ids[1], ids[3]])

    _run(scenario())
    deletes = [(r["object"], r.get("leaked", False)) for r in records(tmp_path) if r["op"] == "deleteVolume"]
    assert deletes == [("pvc-u0", False), ("pvc-u1", True), ("pvc-u2", False), ("pvc-u3", True)]


def test_without_the_claim_metadata_create_volume_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stubs.controller.CreateVolume(csi.CreateVolumeRequest(name="pvc-u1",
                                                                            volume_capabilities=[MOUNT]))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "--extra-create-metadata" in str(refused.value.details())

    _run(scenario())


def test_an_undo_waits_for_its_do_still_in_flight(tmp_path: Path) -> None:
    """A pod deleted while its volume is being staged: the kubelet unstages at once, and the unstage must see the
    stage the array is still finishing, or the volume would stay staged (and attached) for ever."""
    async def scenario() -> None:
        # The stage is given 300 ms to reach the array before the kubelet gives up (50 ms was not always enough
        # under two CPU burners: the stage never started, and nothing was left to undo), and takes 1 s there.
        async for stubs in driver_stubs(tmp_path, mountLatency="1s"):
            await stubs.controller.CreateVolume(csi.CreateVolumeRequest(name="pvc-u1", parameters=CLAIM,
                                                                        volume_capabilities=[MOUNT]))
            staging = str(tmp_path / "globalmount")
            stage = asyncio.ensure_future(stubs.node.NodeStageVolume(csi.NodeStageVolumeRequest(
                volume_id="u1@gold", staging_target_path=staging, volume_capability=MOUNT)))
            await asyncio.sleep(0.3)
            stage.cancel()  # the kubelet gave up on the pod; the array goes on
            await stubs.node.NodeUnstageVolume(csi.NodeUnstageVolumeRequest(volume_id="u1@gold",
                                                                            staging_target_path=staging))

    _run(scenario())
    assert [r["op"] for r in records(tmp_path)] == ["createVolume", "mount", "unmount"]


def test_expansion_grows_the_volume_once_and_says_whether_the_node_must_grow_a_filesystem(tmp_path: Path) -> None:
    """ControllerExpandVolume is one array operation per new size (a repeat answers at once); only a volume with a
    filesystem (an fs_type in its capability) needs the node's NodeExpandVolume; a volume the array does not have
    is NOT_FOUND; a plain directory's NodeExpandVolume has nothing to grow."""
    def expand(volume_id: str, size: int, fs_type: str = "") -> csi.ControllerExpandVolumeRequest:
        mount = csi.VolumeCapability(mount=csi.VolumeCapability.MountVolume(fs_type=fs_type))
        return csi.ControllerExpandVolumeRequest(volume_id=volume_id, volume_capability=mount,
                                                 capacity_range=csi.CapacityRange(required_bytes=size))

    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, expandLatency="50ms"):
            created = await stubs.controller.CreateVolume(csi.CreateVolumeRequest(
                name="pvc-u1", parameters=CLAIM, volume_capabilities=[MOUNT]))
            volume_id = created.volume.volume_id
            grown = await stubs.controller.ControllerExpandVolume(expand(volume_id, 2 << 30))
            assert (grown.capacity_bytes, grown.node_expansion_required) == (2 << 30, False)
            again = await stubs.controller.ControllerExpandVolume(expand(volume_id, 2 << 30, "ext4"))
            assert (again.capacity_bytes, again.node_expansion_required) == (2 << 30, True)
            node = await stubs.node.NodeExpandVolume(csi.NodeExpandVolumeRequest(
                volume_id=volume_id, volume_path=str(tmp_path / "target"),
                capacity_range=csi.CapacityRange(required_bytes=2 << 30)))
            assert node.capacity_bytes == 2 << 30
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await stubs.controller.ControllerExpandVolume(expand("nope@gold", 2 << 30))
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    _run(scenario())
    expansions = [r for r in records(tmp_path) if r["op"] == "expandVolume"]
    assert len(expansions) == 1 and expansions[0]["object"] == "pvc-u1"
    assert expansions[0]["finish"] - expansions[0]["start"] >= 0.05


def test_a_group_snapshot_is_one_array_operation_over_its_members_and_each_member_restores(tmp_path: Path) -> None:
    """CreateVolumeGroupSnapshot takes every member in one operation (recorded with its members), answers the same
    group to a retry without a second operation, and each member is a snapshot a volume can be restored from;
    DeleteVolumeGroupSnapshot removes every member in one operation too."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, latency="20ms"):
            plugin = await stubs.identity.GetPluginCapabilities(csi.GetPluginCapabilitiesRequest())
            service = csi.PluginCapability.Service
            assert service.GROUP_CONTROLLER_SERVICE in {c.service.type for c in plugin.capabilities}
            group_rpc = csi.GroupControllerServiceCapability.RPC
            offered = await stubs.group.GroupControllerGetCapabilities(csi.GroupControllerGetCapabilitiesRequest())
            assert [c.rpc.type for c in offered.capabilities] == [group_rpc.CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT]
            volume_ids = []
            for uid in ("u1", "u2", "u3"):
                created = await stubs.controller.CreateVolume(csi.CreateVolumeRequest(
                    name=f"pvc-{uid}", parameters=CLAIM, volume_capabilities=[MOUNT]))
                volume_ids.append(created.volume.volume_id)
            (tmp_path / "data" / "volumes" / volume_ids[0] / "row").write_text("before")
            request = csi.CreateVolumeGroupSnapshotRequest(name="groupsnapshot-g1", source_volume_ids=volume_ids,
                                                           parameters={
                                                               "csi.storage.k8s.io/volumegroupsnapshot/name": "db",
                                                               "csi.storage.k8s.io/volumegroupsnapshot/namespace":
                                                                   "ns"})
            first, again = [await stubs.group.CreateVolumeGroupSnapshot(request) for _ in range(2)]
            group = first.group_snapshot
            assert group.ready_to_use and group == again.group_snapshot
            assert [m.source_volume_id for m in group.snapshots] == volume_ids
            assert len({m.snapshot_id for m in group.snapshots}) == 3
            assert all(m.group_snapshot_id == group.group_snapshot_id and m.ready_to_use for m in group.snapshots)
            got = await stubs.group.GetVolumeGroupSnapshot(csi.GetVolumeGroupSnapshotRequest(
                group_snapshot_id=group.group_snapshot_id))
            assert got.group_snapshot == group
            (tmp_path / "data" / "volumes" / volume_ids[0] / "row").write_text("after")  # not in the snapshot
            restored = await stubs.controller.CreateVolume(csi.CreateVolumeRequest(
                name="pvc-u9", parameters=CLAIM, volume_capabilities=[MOUNT],
                volume_content_source=csi.VolumeContentSource(snapshot=csi.VolumeContentSource.SnapshotSource(
                    snapshot_id=group.snapshots[0].snapshot_id))))
            assert (tmp_path / "data" / "volumes" / restored.volume.volume_id / "row").read_text() == "before"
            for _ in range(2):  # the second delete finds nothing left and performs nothing
                await stubs.group.DeleteVolumeGroupSnapshot(csi.DeleteVolumeGroupSnapshotRequest(
                    group_snapshot_id=group.group_snapshot_id,
                    snapshot_ids=[m.snapshot_id for m in group.snapshots]))
            assert not any((tmp_path / "data" / "snapshots").iterdir())
            with pytest.raises(grpc.aio.AioRpcError) as gone:
                await stubs.group.GetVolumeGroupSnapshot(csi.GetVolumeGroupSnapshotRequest(
                    group_snapshot_id=group.group_snapshot_id))
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND

    _run(scenario())
    (taken,) = [r for r in records(tmp_path) if r["op"] == "createGroupSnapshot"]
    assert taken["object"] == "ns/db" and taken["members"] == ["pvc-u1", "pvc-u2", "pvc-u3"]
    assert taken["result"] == "ok" and taken["groupSnapshotId"] == "groupsnapshot-g1@gold"
    (deleted,) = [r for r in records(tmp_path) if r["op"] == "deleteGroupSnapshot"]
    assert deleted["object"] == "groupsnapshot-g1@gold" and len(deleted["members"]) == 3


def test_a_group_across_two_arrays_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stubs.group.CreateVolumeGroupSnapshot(csi.CreateVolumeGroupSnapshotRequest(
                    name="g", source_volume_ids=["a@gold", "b@silver"]))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "one array" in (refused.value.details() or "")

    _run(scenario())


def test_attach_slows_with_the_volumes_attached_to_the_node_and_staging_stops_at_the_limit(tmp_path: Path) -> None:
    """attachLatencyPerAttached: the i-th of a batch of attaches to one node, all at once, sees i - 1 volumes there
    (counted when its call starts), so its latency is the base plus i - 1 steps; another node starts from 0. A node
    stages at most max_volumes_per_node volumes: one more is refused, RESOURCE_EXHAUSTED with the limit named."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, max_volumes_per_node=2, attachLatency="20ms",
                                  attachLatencyPerAttached="40ms"):
            ids = await create_volumes(stubs, 4)
            await asyncio.gather(*(stubs.controller.ControllerPublishVolume(
                csi.ControllerPublishVolumeRequest(volume_id=volume, node_id="node-a", volume_capability=MOUNT))
                for volume in ids[:3]))
            await stubs.controller.ControllerPublishVolume(csi.ControllerPublishVolumeRequest(
                volume_id=ids[3], node_id="node-b", volume_capability=MOUNT))
            attaches = [r for r in records(tmp_path) if r["op"] == "attach"]
            on_a = sorted((r for r in attaches if r["object"].endswith(":node-a")), key=lambda r: r["attachedBefore"])
            assert [r["attachedBefore"] for r in on_a] == [0, 1, 2]
            for record in on_a:
                modelled = 0.020 + 0.040 * record["attachedBefore"]
                assert modelled - 0.005 <= record["finish"] - record["start"] <= modelled + 0.1, record
            assert [r["attachedBefore"] for r in attaches if r["object"].endswith(":node-b")] == [0]
            for index, volume in enumerate(ids[:2]):
                await stubs.node.NodeStageVolume(csi.NodeStageVolumeRequest(
                    volume_id=volume, staging_target_path=str(tmp_path / f"stage-{index}"), volume_capability=MOUNT))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stubs.node.NodeStageVolume(csi.NodeStageVolumeRequest(
                    volume_id=ids[2], staging_target_path=str(tmp_path / "stage-2"), volume_capability=MOUNT))
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "its limit (max_volumes_per_node) is 2" in (refused.value.details() or "")

    _run(scenario())


def test_one_slow_node_attaches_later_than_the_others(tmp_path: Path) -> None:
    """nodeAttachLatency adds its duration to attaches on that node only (a node held back, for tests that need
    one late pod)."""
    async def scenario() -> None:
        async for stubs in driver_stubs(tmp_path, attachLatency="10ms", nodeAttachLatency="node-b=300ms"):
            ids = await create_volumes(stubs, 2, prefix="pvc-s")
            await asyncio.gather(*(stubs.controller.ControllerPublishVolume(csi.ControllerPublishVolumeRequest(
                volume_id=volume, node_id=node, volume_capability=MOUNT))
                for volume, node in zip(ids, ["node-a", "node-b"], strict=True)))
            attaches = {r["object"].rsplit(":", 1)[1]: r for r in records(tmp_path) if r["op"] == "attach"}
            # The array's own record says which attach was held back and by how much; the clock only bounds it
            # from below (a busy machine stretched node-a's 10 ms attach past 50 ms: a difference is no test).
            assert attaches["node-b"].get("nodeDelay") == 0.3 and "nodeDelay" not in attaches["node-a"], attaches
            assert attaches["node-b"]["finish"] - attaches["node-b"]["start"] >= 0.3, attaches

    _run(scenario())


def test_node_attach_latency_must_name_node_and_duration() -> None:
    assert parse_backend_model({"nodeAttachLatency": "a=1s, b=250ms"}).node_attach_latency == {"a": 1.0, "b": 0.25}
    for bad in ("a", "=1s", "a=soon"):
        with pytest.raises(ParameterError):
            parse_backend_model({"nodeAttachLatency": bad})

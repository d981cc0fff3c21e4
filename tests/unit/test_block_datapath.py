"""The data path on raw block volumes (volumeMode Block): fio's command on the device, the pods' volumeDevices, the
regions' layout and checksums (the real shell script, run on a file), and the local array's side of it (its device
file, the sandbox's plan that binds it at the devicePath)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest

from csibench.api.models import BenchmarkRunSpec, DataPathSpec, default_workloads
from csibench.engine.steps.datapath import checksum
from csibench.engine.steps.datapath.fio import (
    DEVICE_PATH,
    MIB,
    build_block_layout_command,
    build_fio_command,
    files_that_do_not_fit,
)
from localcluster.simulator import volumes
from localcluster.simulator.runtime import ContainerConfigError, device_paths
from localcluster.simulator.sandbox import Action, plan_root
from tests.support.fake_kube import FakeKube
from tests.support.fake_runs import run, spec


def arguments(command: list[str]) -> dict[str, str]:
    return dict(part.removeprefix("--").split("=", 1) for part in command if part.startswith("--") and "=" in part)


def block_spec(**data: Any) -> BenchmarkRunSpec:
    return spec(volumes=2, pvcsPerPod=1, size="64Mi", volumeMode="Block",
                dataPath={"rampSeconds": 0, "runtimeSeconds": 1, **data})


def test_fio_works_on_the_device_each_job_in_a_region_of_its_own() -> None:
    data = DataPathSpec(fileSize="4Mi", jobsPerVolume=3)
    on_block = arguments(build_fio_command(data, default_workloads()[2], block=True))
    assert on_block["filename"] == DEVICE_PATH and on_block["offset_increment"] == on_block["size"] == str(4 * MIB)
    assert "directory" not in on_block and "filename_format" not in on_block
    on_files = arguments(build_fio_command(data, default_workloads()[2]))
    assert "filename" not in on_files and "offset_increment" not in on_files
    # the rest of the line is the same: the rows compare
    same = {key: value for key, value in on_files.items() if key not in ("directory", "filename_format")}
    assert same == {key: value for key, value in on_block.items() if key not in ("filename", "offset_increment")}


def test_the_layout_writes_every_region_of_the_largest_file_once() -> None:
    data = DataPathSpec(fileSize="4Mi", jobsPerVolume=2, workloads=[
        {"name": "small", "pattern": "randread", "blockSize": "4Ki"},
        {"name": "large", "pattern": "read", "blockSize": "64Ki", "fileSize": "8Mi"}])
    layout = arguments(build_block_layout_command(data))
    assert (layout["rw"], layout["size"], layout["offset_increment"], layout["numjobs"]) == (
        "write", str(8 * MIB), str(8 * MIB), "2")
    assert layout["filename"] == DEVICE_PATH and layout["direct"] == "1"


def test_a_block_runs_pods_get_the_volume_as_a_device_and_only_the_first_workload_writes_the_regions() -> None:
    fake = FakeKube()
    status = run(fake, block_spec(localBaseline=True, workloads=[
        {"name": "seqWrite", "pattern": "write", "blockSize": "64Ki"},
        {"name": "randRead", "pattern": "randread", "blockSize": "4Ki"}]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    data_path = next(s for s in status.steps if s.name == "dataPath")
    assert data_path.failed == 0 and data_path.succeeded == data_path.objects == 8  # 2 workloads x (class, local)
    pods = [body for path, body in fake.created
            if path.endswith("/pods") and body["metadata"].get("labels", {}).get("csibench.io/workload")]
    on_volumes = [p for p in pods if any("persistentVolumeClaim" in v for v in p["spec"]["volumes"])]
    local = [p for p in pods if p not in on_volumes]
    assert len(on_volumes) == len(local) == 4
    for pod in on_volumes:
        for container in (pod["spec"]["containers"][0], pod["spec"]["initContainers"][0]):
            assert container["volumeDevices"] == [{"name": "data", "devicePath": DEVICE_PATH}]
            assert all(m["name"] != "data" for m in container["volumeMounts"])
    layouts = {p["metadata"]["labels"]["csibench.io/workload"]: arguments(p["spec"]["initContainers"][0]["command"])
               for p in on_volumes}
    assert layouts["seqWrite"]["rw"] == "write" and "create_only" not in layouts["seqWrite"]
    assert layouts["randRead"]["create_only"] == "1"  # the regions are there: nothing is written again
    for pod in local:  # the baseline is the node's disk, an emptyDir with files, on a block run too
        container = pod["spec"]["containers"][0]
        assert "volumeDevices" not in container and {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
        assert "--directory=/data" in " ".join(container["command"])


def test_a_class_that_formats_its_volumes_takes_no_room_from_a_raw_device() -> None:
    assert files_that_do_not_fit(block_spec(fileSize="32Mi"), {"csi.storage.k8s.io/fstype": "ext4"}) is None
    filesystem = spec(volumes=2, pvcsPerPod=1, size="64Mi", dataPath={"fileSize": "32Mi"})
    assert files_that_do_not_fit(filesystem, {"csi.storage.k8s.io/fstype": "ext4"}) is not None


def test_the_checksum_script_digests_each_region_and_fails_saying_why_when_it_cannot(tmp_path: Path) -> None:
    """The pod's own shell script, run by dash (``sh``) on a file standing for the device."""
    data = DataPathSpec(fileSize="1Mi", jobsPerVolume=3)
    device = tmp_path / "device"
    content = bytes(range(256)) * (4 * MIB // 256)  # 4 MiB: three regions and a tail fio never wrote
    device.write_bytes(content)
    command = checksum.build_block_checksum_command(data)
    script = command[2].replace(DEVICE_PATH, str(device))

    def checksums(env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([command[0], command[1], script], capture_output=True, text=True, env=env)

    answer = checksums()
    assert answer.returncode == 0, answer.stderr
    sums = checksum.parse_checksums(answer.stdout)
    assert sums == {f"block.{i}": hashlib.sha256(content[i * MIB:(i + 1) * MIB]).hexdigest() for i in range(3)}
    device.write_bytes(content[:int(2.5 * MIB)])  # a clone that lost its last half region
    short = checksums()
    assert short.returncode == 1 and "fewer than 3 x 1048576 bytes" in short.stderr and short.stdout == ""
    device.write_bytes(content)
    # dd failing on a region (an I/O error) fails the pod, though the pipe's status is sha256sum's
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    failing_dd = bin_dir / "dd"
    failing_dd.write_text('#!/bin/sh\ncase "$*" in *count_bytes*) echo "dd: error reading: Input/output error" >&2; '
                          'exit 1;; esac\nexec /bin/dd "$@"\n')
    failing_dd.chmod(0o755)
    broken = checksums({"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert broken.returncode == 1 and "could not read region block.0" in broken.stderr, broken
    assert "Input/output error" in broken.stderr and checksum.parse_checksums(broken.stdout) == {}


def test_the_array_keeps_a_block_volume_as_a_sparse_device_file_of_its_capacity(tmp_path: Path) -> None:
    volume = tmp_path / "v"
    device = volumes.prepare_device(volume, 32 * MIB, 1 << 30)
    assert device == volumes.device_of(volume) and device.stat().st_size == 32 * MIB
    assert device.stat().st_blocks == 0  # a hole until written
    with device.open("r+b") as opened:
        opened.seek(MIB)
        opened.write(b"data")
    volumes.prepare_device(volume, 32 * MIB, 1 << 30)  # a second stage keeps the data
    volumes.grow_device(volume, 48 * MIB)  # ControllerExpandVolume
    assert device.stat().st_size == 48 * MIB and device.read_bytes()[MIB:MIB + 4] == b"data"
    assert volumes.kind_of(volume) == "block"
    assert volumes.prepare_device(tmp_path / "lost", None, 16 * MIB).stat().st_size == 16 * MIB


def test_a_block_snapshot_restores_only_into_a_block_volume(tmp_path: Path) -> None:
    raw, directory = tmp_path / "raw", tmp_path / "dir"
    volumes.prepare_device(raw, 16 * MIB, 1 << 30)
    directory.mkdir()
    (directory / "file").write_text("x")
    volumes.check_restore(raw, "", block=True)
    volumes.check_restore(raw, "ext4", block=True)  # a class's fstype does not apply to a Block volume
    with pytest.raises(volumes.UnsupportedFsType, match="raw block device: restore it into a volume of volumeMode"):
        volumes.check_restore(raw, "")
    with pytest.raises(volumes.UnsupportedFsType, match="holds a filesystem"):
        volumes.check_restore(directory, "", block=True)


def test_the_runtime_gives_each_device_its_path_and_refuses_a_path_that_is_none() -> None:
    container = {"name": "fio", "volumeDevices": [{"name": "data", "devicePath": "/dev/csibench/data"}],
                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}
    assert device_paths(container, {"data": "/k/pods/u/volumes/pv/mount", "scratch": "/k/empty"}) == {
        "/dev/csibench/data": "/k/pods/u/volumes/pv/mount"}
    with pytest.raises(ContainerConfigError, match="devicePath"):
        device_paths({"name": "c", "volumeDevices": [{"name": "d", "devicePath": "/dev/../"}]}, {"d": "/k"})


def test_the_sandbox_binds_the_device_file_and_keeps_the_hosts_dev_nodes_and_a_private_shm() -> None:
    host = {"/": [("dev", "dir", ""), ("usr", "dir", "")],
            "/dev": [("null", "other", ""), ("shm", "dir", ""), ("pts", "dir", ""), ("fd", "symlink", "/proc/self/fd")]}
    actions = plan_root({}, lambda d: host.get(d, []), devices={"/dev/csibench/data": "/k/volumes/v/block.dev"})
    assert Action("dir", "/dev") in actions and Action("dir", "/dev/csibench") in actions
    assert Action("bind", "/dev", "/dev") not in actions  # /dev is made, not bound whole
    assert [Action("file", "/dev/null"), Action("bind", "/dev/null", "/dev/null")] == [
        a for a in actions if a.path == "/dev/null"]
    assert Action("tmpfs", "/dev/shm") in actions and Action("bind", "/dev/shm", "/dev/shm") not in actions
    assert Action("bind", "/dev/pts", "/dev/pts") in actions
    assert Action("symlink", "/dev/fd", "/proc/self/fd") in actions
    device = actions.index(Action("device", "/dev/csibench/data", "/k/volumes/v/block.dev"))
    assert actions[device - 1] == Action("file", "/dev/csibench/data")
    without = plan_root({}, lambda d: host.get(d, []))  # no device: /dev is the host's, bound whole
    assert Action("bind", "/dev", "/dev") in without and Action("tmpfs", "/dev/shm") in without


def test_the_example_runs_the_lifecycle_and_the_data_path_on_block_and_verifies_its_clones() -> None:
    import yaml

    from localcluster.launcher import REPO_ROOT
    example = yaml.safe_load((REPO_ROOT / "examples" / "block.yaml").read_text())
    run_spec = BenchmarkRunSpec.model_validate(example["spec"])
    assert run_spec.volumeMode.value == "Block" and run_spec.dataPath is not None and run_spec.dataPath.verify
    assert run_spec.dataPath.workloads[0].pattern.value == "read"  # the layout wrote its regions first
    on_the_fake = run_spec.model_copy(update={"storageClassName": "sim", "volumeSnapshotClassName": "snap"})
    status = run(FakeKube(), on_the_fake)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert {s.name for s in status.steps} >= {"createVolume", "publish", "dataPath", "verifyClone", "deleteVolume"}


def test_a_link_a_pod_wrote_is_never_taken_for_the_arrays_device_or_image(tmp_path: Path) -> None:
    """On a directory class a pod writes what it likes into the array's directory, links named block.dev or
    ext4.img included, and snapshots copy links: none of them may reach a host file."""
    host_file = tmp_path / "host-secret"
    host_file.write_bytes(b"secret")
    volume = tmp_path / "v"
    volume.mkdir()
    (volume / "block.dev").symlink_to(host_file)
    (volume / "ext4.img").symlink_to(host_file)
    assert volumes.kind_of(volume) == "directory"
    with pytest.raises(volumes.UnsupportedFsType):
        volumes.check_restore(volume, "", block=True)
    with pytest.raises(volumes.NotTheArraysFile):
        volumes.prepare_device(volume, 32 * MIB, 1 << 30)
    with pytest.raises(volumes.NotTheArraysFile):
        volumes.prepare_filesystem(volume, 32 * MIB, 1 << 30)
    with pytest.raises(volumes.NotTheArraysFile):
        volumes.grow_filesystem(volume, 64 * MIB)
    volumes.grow_device(volume, 64 * MIB)
    assert volumes.corrupt_one_byte(volume) is None  # the only "files" are links: nothing to flip
    assert host_file.read_bytes() == b"secret" and host_file.stat().st_size == 6


def test_the_sandbox_binds_only_the_arrays_own_device_file(tmp_path: Path) -> None:
    from localcluster.simulator.sandbox import array_device

    volume = tmp_path / "volumes" / "vol-1"
    device = volumes.prepare_device(volume, MIB, 1 << 30)
    staging = tmp_path / "staging"
    staging.symlink_to(device)
    target = tmp_path / "target"
    target.symlink_to(staging)
    assert array_device(str(target)) == str(device)  # the kubelet's link, the driver's, then the device
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "block.dev").write_bytes(b"host")
    linked = tmp_path / "linked" / "block.dev"
    linked.parent.mkdir()
    linked.symlink_to(evil / "block.dev")  # a device file that is a link: never followed past
    for source, words in ((linked, "not a raw block volume's device"), (volume, "not a raw block volume's device"),
                          (tmp_path / "ext4" / "ext4.img", "not a raw block volume's device")):
        with pytest.raises(OSError, match=words):
            array_device(str(source))


def test_a_block_runs_regions_must_be_whole_mib_and_a_filesystem_runs_need_not() -> None:
    with pytest.raises(ValueError, match="whole number of MiB"):
        block_spec(fileSize="1536Ki")
    with pytest.raises(ValueError, match="whole number of MiB"):
        block_spec(workloads=[{"name": "odd", "pattern": "read", "blockSize": "4Ki", "fileSize": "150000"}])
    assert block_spec(fileSize="2Mi").dataPath is not None
    assert spec(volumes=2, pvcsPerPod=1, size="64Mi", dataPath={"fileSize": "1536Ki"}).dataPath is not None

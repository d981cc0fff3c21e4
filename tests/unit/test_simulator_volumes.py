"""The array's per-volume storage: ext4 images of the volume's size (real mkfs/resize2fs on sparse files in a
temporary directory, no mount needed), copies that keep holes, and the sandbox's reading of mountinfo."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from localcluster.simulator import volumes
from localcluster.simulator.runtime import end_leftovers
from localcluster.simulator.sandbox import apply_fs_group, loop_device_of

MIB = 1 << 20
DEFAULT = 1 << 30
NO_GROUP = (1 << 22) + 1  # above any pid_max: no process group has it


def block_count(image: Path) -> int:
    return int(subprocess.run(["dumpe2fs", "-h", str(image)], capture_output=True, text=True, check=True)
               .stdout.split("Block count:")[1].split()[0])


def test_an_image_is_formatted_once_at_its_capacity_and_grown_for_a_larger_clone(tmp_path: Path) -> None:
    volume = tmp_path / "v"
    image = volumes.prepare_filesystem(volume, 32 * MIB, DEFAULT)
    assert volumes.has_ext4(image) and image.stat().st_size == 32 * MIB == volumes.filesystem_bytes(image)
    assert image.stat().st_blocks * 512 < 8 * MIB  # sparse: formatting writes metadata only
    blocks = block_count(image)
    # a second stage must not format again: the image's bytes (its data) stay exactly as they are
    before = image.read_bytes()
    assert volumes.prepare_filesystem(volume, 32 * MIB, DEFAULT) == image and image.read_bytes() == before
    assert volumes.prepare_filesystem(volume, None, DEFAULT) == image and image.read_bytes() == before  # no record
    with image.open("r+b") as device:
        device.truncate(40 * MIB)  # a grow that failed after lengthening the file: the filesystem is still 32 MiB
    volumes.prepare_filesystem(volume, 48 * MIB, DEFAULT)
    assert image.stat().st_size == 48 * MIB == volumes.filesystem_bytes(image)
    assert block_count(image) == blocks * 3 // 2


def test_a_volume_without_a_record_gets_the_default_size_once(tmp_path: Path) -> None:
    image = volumes.prepare_filesystem(tmp_path / "v", None, 16 * MIB)
    assert volumes.filesystem_bytes(image) == 16 * MIB


def test_a_snapshot_restores_only_into_a_volume_of_its_kind(tmp_path: Path) -> None:
    image_snapshot, directory_snapshot, empty = tmp_path / "img", tmp_path / "dir", tmp_path / "empty"
    volumes.prepare_filesystem(image_snapshot, 16 * MIB, DEFAULT)
    directory_snapshot.mkdir()
    (directory_snapshot / "ext4.img").write_text("a file a pod wrote, not an image")
    (directory_snapshot / "data").write_text("x")
    empty.mkdir()
    volumes.check_restore(image_snapshot, "ext4")
    volumes.check_restore(empty, "ext4")  # nothing was written: either kind restores it
    volumes.check_restore(empty, "")
    with pytest.raises(volumes.UnsupportedFsType, match="holds an ext4 filesystem"):
        volumes.check_restore(image_snapshot, "")
    (directory_snapshot / "ext4.img").unlink()
    with pytest.raises(volumes.UnsupportedFsType, match="holds a directory"):
        volumes.check_restore(directory_snapshot, "ext4")


def test_a_file_that_is_not_ext4_is_not_taken_for_one(tmp_path: Path) -> None:
    assert not volumes.has_ext4(tmp_path / "missing.img")
    zeros = tmp_path / "zeros.img"
    zeros.write_bytes(bytes(4096))
    assert not volumes.has_ext4(zeros)


def test_only_ext4_or_no_filesystem_is_supported() -> None:
    volumes.check_fs_type("")
    volumes.check_fs_type("ext4")
    with pytest.raises(volumes.UnsupportedFsType, match="fsType 'xfs' is not supported"):
        volumes.check_fs_type("xfs")


def test_copies_keep_holes_and_an_empty_volume_is_just_made(tmp_path: Path) -> None:
    source, target = tmp_path / "src", tmp_path / "dst"
    image = volumes.prepare_filesystem(source, 64 * MIB, DEFAULT)
    assert volumes.holds_data(source)
    volumes.copy_data(source, target)
    copy = volumes.image_of(target)
    assert copy.read_bytes() == image.read_bytes()
    assert copy.stat().st_blocks * 512 < 8 * MIB  # the 64 MiB image's holes stayed holes
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not volumes.holds_data(empty) and not volumes.holds_data(tmp_path / "absent")
    assert volumes.removal(empty) is None and volumes.removal(target) is not None


def test_the_sandbox_finds_no_loop_device_where_none_is_mounted() -> None:
    assert loop_device_of("/") is None


def test_the_fs_group_walk_never_follows_a_link_out_of_the_volume(tmp_path: Path) -> None:
    outside, volume = tmp_path / "outside", tmp_path / "volume"
    outside.mkdir(mode=0o700)
    (outside / "secret").write_text("host")
    (volume / "sub").mkdir(parents=True)
    (volume / "sub" / "file").write_text("data")
    (volume / "dir-link").symlink_to(outside, target_is_directory=True)
    (volume / "file-link").symlink_to(outside / "secret")
    before = {p: (p.stat().st_gid, p.stat().st_mode) for p in (outside, outside / "secret")}
    apply_fs_group(str(volume), 4321)
    assert {p: (p.stat().st_gid, p.stat().st_mode) for p in before} == before
    assert (volume / "sub").stat().st_gid == 4321 and (volume / "sub").stat().st_mode & 0o2070 == 0o2070
    assert (volume / "sub" / "file").stat().st_gid == 4321 and (volume / "sub" / "file").stat().st_mode & 0o060
    assert (volume / "file-link").lstat().st_gid == 4321  # the link itself, as a kubelet's walk does


def test_what_a_container_left_in_its_mount_namespace_is_ended(tmp_path: Path) -> None:
    recorded = tmp_path / "mnt-namespace"
    script = f'printf %s "$(readlink /proc/self/ns/mnt)" > {recorded}; setsid sleep 300 </dev/null >/dev/null 2>&1 &'
    container = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script + " echo $!"],
                               capture_output=True, text=True, check=True)
    daemon = int(container.stdout.split()[-1])  # left the process group with setsid: killpg cannot reach it
    assert Path(f"/proc/{daemon}").exists()
    end_leftovers(NO_GROUP, recorded)
    for _ in range(50):
        if not Path(f"/proc/{daemon}").exists() or "Z" in Path(f"/proc/{daemon}/stat").read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the daemon outlived its container")
    recorded.write_text(os.readlink("/proc/self/ns/mnt"))
    end_leftovers(NO_GROUP, recorded)  # a file naming the simulator's own namespace kills nothing (we are alive)


def test_expansion_grows_the_device_then_the_filesystem_on_it_and_keeps_the_data(tmp_path: Path) -> None:
    """The controller grows the image (a device), the node grows the filesystem; unmounted here, offline."""
    volume = tmp_path / "v"
    volumes.grow_device(volume, 64 * MIB)  # never staged: no image yet, nothing to grow (formatted at 64 MiB later)
    assert not volumes.image_of(volume).exists()
    image = volumes.prepare_filesystem(volume, 32 * MIB, DEFAULT)
    subprocess.run(["debugfs", "-w", "-R", "mkdir kept", str(image)], check=True, capture_output=True)
    volumes.grow_device(volume, 48 * MIB)
    assert image.stat().st_size == 48 * MIB and volumes.filesystem_bytes(image) == 32 * MIB
    volumes.grow_filesystem(volume, 48 * MIB)
    assert volumes.filesystem_bytes(image) == 48 * MIB
    volumes.grow_filesystem(volume, 64 * MIB)  # a node ahead of the controller's device: the image grows too
    assert image.stat().st_size == 64 * MIB == volumes.filesystem_bytes(image)
    listing = subprocess.run(["debugfs", "-R", "ls", str(image)], capture_output=True, text=True, check=True)
    assert "kept" in listing.stdout


def test_an_image_no_container_mounts_has_no_namespace_to_grow_it_in(tmp_path: Path) -> None:
    image = volumes.prepare_filesystem(tmp_path / "v", 16 * MIB, DEFAULT)
    assert volumes.loop_devices_of(image) == []

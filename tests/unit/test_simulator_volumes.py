"""The array's per-volume storage: ext4 images of the volume's size (real mkfs/resize2fs on sparse files in a
temporary directory, no mount needed), copies that keep holes, and the sandbox's reading of mountinfo."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from localcluster.simulator import volumes
from localcluster.simulator.sandbox import loop_device_of

MIB = 1 << 20


def block_count(image: Path) -> int:
    return int(subprocess.run(["dumpe2fs", "-h", str(image)], capture_output=True, text=True, check=True)
               .stdout.split("Block count:")[1].split()[0])


def test_an_image_is_formatted_once_at_its_capacity_and_grown_for_a_larger_clone(tmp_path: Path) -> None:
    volume = tmp_path / "v"
    image = volumes.prepare_filesystem(volume, 32 * MIB)
    assert volumes.has_ext4(image) and image.stat().st_size == 32 * MIB
    assert image.stat().st_blocks * 512 < 8 * MIB  # sparse: formatting writes metadata only
    blocks = block_count(image)
    # a second stage must not format again: the image's bytes (its data) stay exactly as they are
    before = image.read_bytes()
    assert volumes.prepare_filesystem(volume, 32 * MIB) == image and image.read_bytes() == before
    volumes.prepare_filesystem(volume, 48 * MIB)
    assert image.stat().st_size == 48 * MIB and block_count(image) == blocks * 3 // 2


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
    image = volumes.prepare_filesystem(source, 64 * MIB)
    assert volumes.holds_data(source)
    volumes.copy_data(source, target)
    copy = volumes.image_of(target)
    assert copy.read_bytes() == image.read_bytes()
    assert copy.stat().st_blocks * 512 < 8 * MIB  # the 64 MiB image's holes stayed holes
    empty, made = tmp_path / "empty", tmp_path / "made"
    empty.mkdir()
    assert not volumes.holds_data(empty) and not volumes.holds_data(tmp_path / "absent")
    volumes.copy_data(empty, made)
    assert made.is_dir() and not any(made.iterdir())


def test_the_sandbox_finds_the_loop_device_mounted_at_a_path() -> None:
    mountinfo = ("24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
                 "66 46 7:0 / /state/root/data rw,nosuid,nodev - ext4 /dev/loop0 rw\n"
                 "67 46 7:3 / /state/root/data rw,nosuid,nodev - ext4 /dev/loop3 rw\n")
    assert loop_device_of("/state/root/data", mountinfo) == "/dev/loop3"
    assert loop_device_of("/elsewhere", mountinfo) is None

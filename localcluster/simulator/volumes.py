"""How the simulated array keeps a volume's data: a directory, or a real filesystem of the volume's size.

A volume of a class without ``csi.storage.k8s.io/fstype`` is a plain directory: free to create, never full, the
right thing for lifecycle benchmarks of thousands of volumes. A volume of a class with ``fstype: ext4`` holds a
sparse image file of exactly its capacity, formatted at its first NodeStageVolume as a node plugin formats a
fresh device (``mkfs.ext4 -m 0``, the options Kubernetes' mount-utils use), grown (``resize2fs``) when a clone
asks for more than its snapshot held. The pod's sandbox loop-mounts that image inside the container's private
mount namespace, so writing past the size fails with the kernel's own ENOSPC ("No space left on device"), ``df``
shows the volume's size, and no mount or loop device outlives the container.

Snapshots and clones copy a volume's directory with ``cp --sparse=always``: an image's holes stay holes, so a
64 GiB volume that holds 4 MiB costs 4 MiB to snapshot.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # e2fsprogs and losetup live in sbin
IMAGE_NAME = "ext4.img"
SUPPORTED_FS_TYPES = frozenset({"ext4"})
EXT4_MAGIC_OFFSET, EXT4_MAGIC = 1024 + 0x38, b"\x53\xef"  # s_magic in the superblock, little-endian 0xEF53


class UnsupportedFsType(ValueError):
    """A class asks for a filesystem the simulated node plugin cannot make."""


def check_fs_type(fs_type: str) -> None:
    if fs_type and fs_type not in SUPPORTED_FS_TYPES:
        raise UnsupportedFsType(f"fsType {fs_type!r} is not supported by the simulated driver (supported: "
                                f"{', '.join(sorted(SUPPORTED_FS_TYPES))}, or none for an unlimited directory)")


def image_of(volume_dir: Path) -> Path:
    return volume_dir / IMAGE_NAME


def has_ext4(image: Path) -> bool:
    """Whether the image already carries an ext4 superblock (a node plugin formats only unformatted devices)."""
    try:
        with image.open("rb") as device:
            device.seek(EXT4_MAGIC_OFFSET)
            return device.read(2) == EXT4_MAGIC
    except FileNotFoundError:
        return False


def tool(name: str) -> str:
    """The system tool's path, found whatever PATH this process was given (a sandbox's is minimal)."""
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SYSTEM_PATH}")
    if found is None:
        raise OSError(f"{name} not found (e2fsprogs, util-linux and coreutils are needed for volumes with a "
                      "filesystem)")
    return found


def run_tool(*command: str) -> None:
    """Run a system tool; a failure raises OSError with the tool's own message."""
    result = subprocess.run([tool(command[0]), *command[1:]], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise OSError(f"{command[0]} failed ({result.returncode}): {(result.stderr or result.stdout).strip()}")


def prepare_filesystem(volume_dir: Path, capacity: int) -> Path:
    """Make the volume's image hold an ext4 filesystem of at least ``capacity`` bytes; return its path.
    Idempotent: a formatted image of the right size is left as it is (its data is the volume's data)."""
    volume_dir.mkdir(parents=True, exist_ok=True)
    image = image_of(volume_dir)
    if not has_ext4(image):
        with image.open("wb") as device:
            device.truncate(capacity)
        run_tool("mkfs.ext4", "-F", "-q", "-m", "0", "-E", "nodiscard", str(image))
    elif image.stat().st_size < capacity:
        with image.open("r+b") as device:
            device.truncate(capacity)
        run_tool("e2fsck", "-f", "-p", str(image))
        run_tool("resize2fs", str(image))
    return image


def holds_data(directory: Path) -> bool:
    """Whether there is anything to copy (most volumes of a lifecycle benchmark never hold a byte)."""
    return directory.is_dir() and any(directory.iterdir())


def copy_data(source: Path, target: Path) -> None:
    """Copy a volume's data (directory or image) keeping holes. Blocking: the driver runs it in a thread."""
    target.mkdir(parents=True, exist_ok=True)
    if holds_data(source):
        run_tool("cp", "-a", "--sparse=always", f"{source}/.", str(target))

"""How the simulated array keeps a volume's data: a directory, a real filesystem of the volume's size, or a raw
device.

A volume of a class without ``csi.storage.k8s.io/fstype`` is a plain directory: free to create, never full, the
right thing for lifecycle benchmarks of thousands of volumes. A volume of a class with ``fstype: ext4`` holds a
sparse image file of exactly its capacity, formatted at its first NodeStageVolume as a node plugin formats a
fresh device (``mkfs.ext4 -m 0``, the options Kubernetes' mount-utils use), grown (``resize2fs``) when a clone
asks for more than its snapshot held. The pod's sandbox loop-mounts that image inside the container's private
mount namespace, so writing past the size fails with the kernel's own ENOSPC ("No space left on device"), ``df``
shows a filesystem of the volume's size (less ext4's own metadata), and the loop device clears itself with the
namespace's last mount (the runtime ends every process left in that namespace when the container ends).

A Block volume (``volumeMode: Block``) is a sparse device file of exactly its capacity (``block.dev``) with no
filesystem, made at its first NodeStageVolume and lengthened when the volume grows; the pod's sandbox binds it at
the container's devicePath, so fio's direct I/O on it is direct I/O on a file of the host's disk.

Snapshots and clones copy a volume's directory with ``cp --sparse=always``: an image's holes stay holes, so a
fresh 1 GiB volume costs about 32 MiB of host disk (ext4's metadata), a 64 GiB one about 0.5 GiB, and a copy only
what was written. Limits, stated rather than hidden: a snapshot of a volume a pod is writing to is a copy taken
over time, not a point-in-time image (the data path and the lifecycle snapshot volumes no pod holds); images
overcommit the host's disk, and a host that fills up gives the pod EIO from the loop device, not ENOSPC.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # e2fsprogs and losetup live in sbin
IMAGE_NAME = "ext4.img"
DEVICE_NAME = "block.dev"
SUPPORTED_FS_TYPES = frozenset({"ext4"})
SUPERBLOCK, SUPERBLOCK_READ = 1024, 0x158  # ext4's superblock: where it starts, the part read here
EXT4_MAGIC, INCOMPAT_64BIT = b"\x53\xef", 0x80  # s_magic (0xEF53, little-endian); s_feature_incompat's 64bit
E2FSCK_OK = (0, 1)  # 1: errors corrected, e.g. the journal of a volume snapshotted while mounted was replayed
_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


class UnsupportedFsType(ValueError):
    """A class asks for a filesystem the simulated node plugin cannot make."""


def check_fs_type(fs_type: str) -> None:
    if fs_type and fs_type not in SUPPORTED_FS_TYPES:
        raise UnsupportedFsType(f"fsType {fs_type!r} is not supported by the simulated driver (supported: "
                                f"{', '.join(sorted(SUPPORTED_FS_TYPES))}, or none for an unlimited directory)")


def regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file itself, not a link to one: a pod writes what it likes into a directory
    volume, a link named like an image or a device included, and copies keep links (``cp -a``)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def kind_of(directory: Path) -> str:
    """What a volume's (or snapshot's) data is: "ext4" (an image), "block" (a raw device file) or "directory"
    (anything else, a link named like an image or a device included)."""
    return "ext4" if regular_file(image_of(directory)) else "block" if regular_file(device_of(directory)) \
        else "directory"


class NotTheArraysFile(OSError):
    """Where the array keeps a volume's image or device there is something it did not make (a link a pod wrote
    into a directory volume): it is never opened, grown or handed to a container."""


def _check_own(path: Path) -> None:
    if (path.exists() or path.is_symlink()) and not regular_file(path):
        raise NotTheArraysFile(f"{path.name} of volume {path.parent.name} is not a regular file the array made")


def check_restore(snapshot_dir: Path, fs_type: str, block: bool = False) -> None:
    """A snapshot restores only into a volume of its own kind: an ext4 image into an ext4 class, a raw device
    into a Block volume, a directory into a class without an fstype (otherwise the pod would see a raw image file,
    or an empty filesystem hiding the data, and a file a pod named like the image could reach the kernel's ext4
    code as a filesystem). Kubernetes refuses such a change of volumeMode itself unless a snapshot allows it."""
    if not holds_data(snapshot_dir):
        return  # nothing was written: either kind restores it
    held, wanted = kind_of(snapshot_dir), "block" if block else "ext4" if fs_type == "ext4" else "directory"
    if held == wanted:
        return
    if "block" in (held, wanted):
        what, mode = ("a raw block device", "Block") if held == "block" else ("a filesystem", "Filesystem")
        raise UnsupportedFsType(f"the snapshot holds {what}: restore it into a volume of volumeMode {mode}")
    kind = "an ext4 filesystem" if held == "ext4" else "a directory (no fstype)"
    raise UnsupportedFsType(f"the snapshot holds {kind}: restore it into a class with the same "
                            "csi.storage.k8s.io/fstype")


def removal(directory: Path) -> Callable[[], None] | None:
    """The blocking removal of a volume's or snapshot's data, for a thread; None when it holds nothing (the
    empty directory is removed on the spot: thousands of lifecycle volumes need no thread each)."""
    return functools.partial(shutil.rmtree, directory, ignore_errors=True) if holds_data(directory) else None


def image_of(volume_dir: Path) -> Path:
    return volume_dir / IMAGE_NAME


def device_of(volume_dir: Path) -> Path:
    """A Block volume's device: a sparse file of the volume's capacity, no filesystem on it."""
    return volume_dir / DEVICE_NAME


def has_ext4(image: Path) -> bool:
    """Whether the image already carries an ext4 superblock (a node plugin formats only unformatted devices)."""
    return filesystem_bytes(image) is not None


def filesystem_bytes(image: Path) -> int | None:
    """The size of the ext4 filesystem in the image, from its superblock (None: no ext4 there). This, not the
    file's length, says whether a clone still has to grow: the file may have been lengthened by a try that
    failed before resize2fs."""
    try:
        with image.open("rb") as device:
            device.seek(SUPERBLOCK)
            block = device.read(SUPERBLOCK_READ)
    except FileNotFoundError:
        return None
    if len(block) < SUPERBLOCK_READ or block[0x38:0x3A] != EXT4_MAGIC:
        return None
    blocks = int.from_bytes(block[0x04:0x08], "little")
    if int.from_bytes(block[0x60:0x64], "little") & INCOMPAT_64BIT:
        blocks |= int.from_bytes(block[0x150:0x154], "little") << 32
    return blocks * (1024 << int.from_bytes(block[0x18:0x1C], "little"))


def tool(name: str) -> str:
    """The system tool's path, found whatever PATH this process was given (a sandbox's is minimal)."""
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SYSTEM_PATH}")
    if found is None:
        raise OSError(f"{name} not found (e2fsprogs, util-linux and coreutils are needed for volumes with a "
                      "filesystem)")
    return found


def run_tool(*command: str, ok: tuple[int, ...] = (0,)) -> None:
    """Run a system tool; an exit code outside ``ok`` raises OSError with the tool's own message."""
    result = subprocess.run([tool(command[0]), *command[1:]], capture_output=True, text=True, check=False)
    if result.returncode not in ok:
        raise OSError(f"{command[0]} failed ({result.returncode}): {(result.stderr or result.stdout).strip()}")


def _lock_of(volume_dir: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(volume_dir, threading.Lock())


def _lengthen(image: Path, capacity: int) -> None:
    """The image (a device) becomes at least ``capacity`` bytes long; the new part is a hole."""
    if image.stat().st_size < capacity:
        with image.open("r+b") as device:
            device.truncate(capacity)


def prepare_filesystem(volume_dir: Path, capacity: int | None, default_capacity: int) -> Path:
    """Make the volume's image hold an ext4 filesystem of at least ``capacity`` bytes (``None``: the array lost
    its record, so the image stays as it is, or a new one gets ``default_capacity``); return its path.
    Idempotent, and serialized per volume (two nodes staging one RWX volume format it once): a formatted image
    of the right size is left as it is, since its data is the volume's data."""
    with _lock_of(volume_dir):
        volume_dir.mkdir(parents=True, exist_ok=True)
        image = image_of(volume_dir)
        _check_own(image)
        size = filesystem_bytes(image)
        if size is None:
            with image.open("wb") as device:
                device.truncate(capacity or default_capacity)
            run_tool("mkfs.ext4", "-F", "-q", "-m", "0", "-E", "nodiscard", str(image))
        elif capacity is not None and size < capacity:
            _lengthen(image, capacity)
            run_tool("e2fsck", "-f", "-p", str(image), ok=E2FSCK_OK)
            run_tool("resize2fs", str(image))
        return image


def prepare_device(volume_dir: Path, capacity: int | None, default_capacity: int) -> Path:
    """Make the Block volume's device file at least ``capacity`` bytes long (``None``: as it is, or a new one of
    ``default_capacity``); its data, if any, is kept. Idempotent and serialized per volume, like
    ``prepare_filesystem``; return its path."""
    with _lock_of(volume_dir):
        volume_dir.mkdir(parents=True, exist_ok=True)
        device = device_of(volume_dir)
        _check_own(device)
        if not device.exists():
            device.touch()
            _lengthen(device, capacity or default_capacity)
        elif capacity is not None:
            _lengthen(device, capacity)
        return device


def grow_device(volume_dir: Path, capacity: int) -> None:
    """The array grows a volume: its image or device file, if it has one yet, becomes ``capacity`` bytes long (a
    filesystem on an image is grown by the node, or at its next stage). Blocking: the driver runs it in a
    thread."""
    with _lock_of(volume_dir):
        for device in (image_of(volume_dir), device_of(volume_dir)):
            if regular_file(device):  # a link a pod wrote is not the array's: never followed
                _lengthen(device, capacity)


def loop_devices_of(image: Path) -> list[str]:
    """The loop devices attached to a volume image (``losetup -j``): containers on one node share one."""
    listed = subprocess.run([tool("losetup"), "-n", "-O", "NAME", "-j", str(image)], capture_output=True, text=True,
                            check=False)
    return [line.strip() for line in listed.stdout.splitlines() if line.strip()]


def namespace_mounting(device: str) -> int | None:
    """A process in a mount namespace where ``device`` is mounted (a container's: the host never mounts volume
    images), from ``/proc/<pid>/mountinfo``; None when no container has it mounted."""
    number = os.stat(device).st_rdev
    wanted = f"{os.major(number)}:{os.minor(number)}"
    seen: set[str] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            namespace = os.readlink(f"/proc/{entry.name}/ns/mnt")
            if namespace in seen:
                continue
            seen.add(namespace)
            with open(f"/proc/{entry.name}/mountinfo") as mounts:
                if any(line.split()[2] == wanted for line in mounts):
                    return int(entry.name)
        except (OSError, IndexError):  # the process ended meanwhile, or is not ours to read
            continue
    return None


CAP_SYS_RESOURCE = 24


@functools.cache
def can_resize_online() -> bool:
    """Whether this process may grow a mounted ext4 filesystem: the kernel's online resize (EXT4_IOC_RESIZE_FS)
    requires CAP_SYS_RESOURCE, which some container sandboxes drop (a development machine of this project's did)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


class MountedFilesystem(OSError):
    """The filesystem is mounted and cannot be grown online here: it grows at its next mount."""


def grow_filesystem(volume_dir: Path, capacity: int) -> None:
    """NodeExpandVolume of an ext4 volume: the image becomes ``capacity`` bytes (if the controller had not grown it
    yet) and its filesystem fills it. Mounted in a container, the loop device learns the new size (``losetup -c``)
    and ``resize2fs`` grows the mounted filesystem online, run inside that container's mount namespace (where the
    mount is; outside it the filesystem would look unmounted and be resized offline under the container's feet).
    Not mounted, it is checked and grown offline. Never formatted, there is nothing to grow: its first stage
    formats it at its capacity. Blocking: the driver runs it in a thread."""
    with _lock_of(volume_dir):
        image = image_of(volume_dir)
        _check_own(image)
        size = filesystem_bytes(image)
        if size is None or size >= capacity:  # never formatted, or grown already (at its last stage)
            return
        _lengthen(image, capacity)
        for loop in loop_devices_of(image):
            holder = namespace_mounting(loop)
            if holder is not None:
                if not can_resize_online():
                    raise MountedFilesystem(
                        "the filesystem is mounted and this host cannot grow it online (the kernel's online ext4 "
                        "resize needs CAP_SYS_RESOURCE, which this simulator's process lacks): it grows at the "
                        "volume's next mount")
                run_tool("losetup", "-c", loop)
                run_tool("nsenter", f"--mount=/proc/{holder}/ns/mnt", tool("resize2fs"), loop)
                return
        run_tool("e2fsck", "-f", "-p", str(image), ok=E2FSCK_OK)
        run_tool("resize2fs", str(image))


def holds_data(directory: Path) -> bool:
    """Whether there is anything to copy (most volumes of a lifecycle benchmark never hold a byte)."""
    return directory.is_dir() and any(directory.iterdir())


def corrupt_one_byte(directory: Path) -> str | None:
    """The array's bug, on purpose (the ``corruptCloneSuffix`` parameter): flip the middle byte of the largest
    regular file of a directory volume, the image's name excluded (an image's byte would land in the filesystem,
    not in a file's data); the file's path inside the volume, or None when there is none."""
    files = [path for path in directory.rglob("*") if regular_file(path) and path.name != IMAGE_NAME
             and path.stat().st_size > 0]
    if not files:
        return None
    largest = max(files, key=lambda path: (path.stat().st_size, str(path)))
    with largest.open("r+b") as handle:
        handle.seek(largest.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    return str(largest.relative_to(directory))


def copy_data(source: Path, target: Path) -> None:
    """Copy a volume's data (directory or image; the caller checked ``holds_data``) keeping holes. Blocking: the
    driver runs it in a thread."""
    target.mkdir(parents=True, exist_ok=True)
    run_tool("cp", "-a", "--sparse=always", f"{source}/.", str(target))


def used_bytes(directory: Path) -> int:
    """Bytes a volume's data takes on the host (allocated blocks, so an image's holes count for nothing): what
    NodeGetVolumeStats reports as used. Blocking: the driver runs it in a thread."""
    used = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                used += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:  # removed while walking: it no longer counts
                continue
    return used

"""Start one container of a simulated pod: a private mount namespace, its volumes at their mountPath, its user.

The simulated kubelet runs ``python -m localcluster.simulator.sandbox SPEC`` (SPEC is JSON: command, env,
workingDir, uid, gid, groups, fsGroup, the per-container root directory and the volumes). This process is
single-threaded and becomes the container by ``exec``:

1. ``unshare(CLONE_NEWNS | CLONE_NEWIPC)`` and make every mount private (``MS_REC | MS_PRIVATE``), so nothing it
   mounts is seen on the host and every mount disappears with the namespace when the container's last process
   exits; System V IPC objects (PostgreSQL's shared-memory interlock) go with the IPC namespace likewise, even when
   the process is killed, as in a pod's own IPC namespace;
2. a tmpfs at the container's root directory, holding a view of the host's root: each top-level entry bind-mounted
   (recursively), symlinks recreated, fresh tmpfs for ``/tmp``, ``/run`` and ``/dev/shm`` (POSIX shared memory,
   as a container runtime gives each container), and the directories leading to a mountPath made in the tmpfs (the
   host's entries beside them bound one by one), so a mountPath such as ``/data/vol-0`` needs no directory on the
   host;
3. each volume at its mountPath: a data directory (or a pod's emptyDir) bind-mounted, or a volume image (an ext4
   filesystem of the volume's size, see ``volumes.py``) loop-mounted with direct I/O on the loop device, so the
   container's direct I/O reaches the disk rather than the host's page cache; the loop device is set to clear
   itself, so it goes with the namespace's last mount; and the container's own ``/etc/passwd`` and ``/etc/group``
   (when the runtime wrote them: its user is not the host's) bound over the host's; each raw block volume
   (``volumeDevices``) is the array's device file bound at its devicePath (``/dev`` then made like a mountPath's
   directories, the host's device nodes bound one by one): a regular file, so fio's direct I/O reaches the host's
   disk through no filesystem of the volume's;
4. fsGroup applied to each volume as a kubelet does for a driver with fsGroupPolicy File (group ownership, group
   rw, setgid directories), each device file given to the container's user and group (0660), then ``chroot`` into
   that root;
5. no_new_privs, the supplementary groups (fsGroup), the group and then the user: never root (the kubelet refuses a
   container without a non-root runAsUser before it gets here, and this helper checks again), then ``execvpe``.

Volume mounts with ``readOnly: true`` (a projected ServiceAccount token's) are remounted read-only. When the
image's interpreter (the virtualenv's base Python) lies where the container's user cannot walk (a pyenv under a
0700 /root), the directories on the way to it are made in the tmpfs showing that directory alone ("exposed"), so
the user can run it without seeing anything else the host keeps there.

``SPEC`` with ``join`` (a container's pid) runs a command in that running container instead, as an exec probe
does: ``setns`` into its mount and IPC namespaces, ``chroot`` into its root, its user, ``execvpe``.

A failure before ``exec`` is written to stderr (the container's log) and exits 128, like a runtime's start error.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.simulator import qos
from localcluster.simulator.volumes import DEVICE_NAME, SYSTEM_PATH, run_tool

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
START_ERROR_EXIT = 128
MAX_LINKS = 8  # links followed from the kubelet's path for a raw block volume to the array's device file
PRIVATE_TMPFS = frozenset({"/tmp", "/run"})  # fresh per container: nothing it writes there reaches the host
NESTED_TMPFS = ("/dev/shm",)  # below a bound host directory: a fresh tmpfs over it


@dataclass(frozen=True)
class Action:
    """One step of building the container's root (paths inside the root are absolute, e.g. "/data")."""

    kind: str  # "dir", "file", "symlink", "bind", "tmpfs", "volume", "device", "readonly"
    path: str
    source: str = ""  # host path (bind, volume) or link target (symlink)


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) if i else "/" for i in range(len(parts))]


def _depth(path: str) -> tuple[int, str]:
    return (path.count("/") if path != "/" else 0, path)


def plan_root(volumes: dict[str, str], entries: Callable[[str], list[tuple[str, str, str]]],
              files: dict[str, str] | None = None, read_only: list[str] | tuple[str, ...] = (),
              exposed: list[str] | tuple[str, ...] = (), devices: dict[str, str] | None = None) -> list[Action]:
    """How to build a root that shows the host plus ``volumes`` (mountPath -> host directory) and ``files`` (path
    -> host file bound over the host's, e.g. /etc/passwd), touching nothing on the host (pure: ``entries(dir)``
    lists a host directory as (name, "dir"|"file"|"symlink"|"other", link target)). Directories on the way to a
    mountPath are made in the tmpfs; their host entries are bound one by one, except the one leading on to the
    mountPath. ``read_only`` mountPaths are remounted read-only. An ``exposed`` host directory is bound at its own
    path with the directories on the way to it made in the tmpfs holding nothing else (unless a mountPath already
    leads through them). ``devices`` (devicePath -> host file: a raw block volume's device file) are bound as files
    at their paths; the directories on the way (``/dev``) are made likewise, the host's device nodes in them bound
    one by one and ``/dev/shm`` a fresh tmpfs."""
    devices = devices or {}
    shadowed = {"/"} | {a for path in [*volumes, *devices] for a in _ancestors(path)}
    shown = [path for path in exposed if path not in shadowed and path not in volumes]
    # On the way to an exposed directory only; not inside a private tmpfs (/tmp stays the container's own: the
    # exposed directory is bound inside it, or inside the volume mounted there, once those are in place).
    private = {a for path in shown for a in _ancestors(path) if not in_private_tmpfs(a)} - shadowed
    order = sorted(shadowed, key=_depth)
    actions = [Action("dir", directory) for directory in sorted(shadowed | private, key=_depth) if directory != "/"]
    for directory in order:
        for name, kind, target in entries(directory):
            path = directory.rstrip("/") + "/" + name
            if path in shadowed or path in volumes or path in devices or path in private or path in shown:
                continue  # made by the plan itself
            if path in PRIVATE_TMPFS or path in NESTED_TMPFS:
                actions += [Action("dir", path), Action("tmpfs", path)]
            elif kind == "symlink":
                actions.append(Action("symlink", path, target))
            elif kind == "dir":
                actions += [Action("dir", path), Action("bind", path, path)]
            elif kind in ("file", "other"):  # "other": a device node or socket (in /dev when a device is there)
                actions += [Action("file", path), Action("bind", path, path)]
    for path in NESTED_TMPFS:
        parent, _, name = path.rpartition("/")
        if parent not in shadowed and any(n == name and kind == "dir" for n, kind, _ in entries(parent)):
            actions.append(Action("tmpfs", path))
    for path, source in sorted((files or {}).items()):
        actions.append(Action("bind", path, source))
    for path, source in sorted(volumes.items()):
        actions += [Action("dir", path), Action("volume", path, source)]
        if path in read_only:
            actions.append(Action("readonly", path))
    for path, source in sorted(devices.items()):
        actions += [Action("file", path), Action("device", path, source)]
    for path in shown:  # last: a volume or private tmpfs on its way (an emptyDir at /tmp) must not hide it
        actions += [Action("dir", path), Action("bind", path, path)]
    return actions


def in_private_tmpfs(path: str) -> bool:
    """Whether a path lies in (or is) a directory every container gets a fresh tmpfs for (pure)."""
    return any(path == top or path.startswith(top + "/") for top in PRIVATE_TMPFS)


def host_entries(directory: str) -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    if not os.path.isdir(directory) or os.path.islink(directory):
        return found  # a directory the plan makes (e.g. /data): nothing of the host's to show in it
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            found.append((name, "symlink", os.readlink(path)))
        elif stat.S_ISDIR(mode):
            found.append((name, "dir", ""))
        elif stat.S_ISREG(mode):
            found.append((name, "file", ""))
        else:
            found.append((name, "other", ""))
    return found


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                       ctypes.c_ulong(flags), data.encode() if data else None), f"mount {source} on {target}")


def build_root(root: str, actions: list[Action], record: Path | None = None) -> None:
    """Carry out ``plan_root`` under ``root`` (a directory that is about to become a tmpfs in this namespace);
    ``record``: where the devices throttled for the container's volumes are noted (``qos.release``)."""
    _mount("tmpfs", root, "tmpfs", 0, "mode=0755")
    for action in actions:
        inside = root + action.path
        if action.kind == "dir":
            os.makedirs(inside, exist_ok=True)
        elif action.kind == "file":
            open(inside, "a").close()
        elif action.kind == "symlink":
            os.symlink(action.source, inside)
        elif action.kind == "tmpfs":
            _mount("tmpfs", inside, "tmpfs", 0, "mode=1777")
        elif action.kind == "volume" and os.path.isfile(action.source):
            _mount_image(action.source, inside, record)
        elif action.kind in ("bind", "volume", "device"):
            _mount(action.source, inside, None, MS_BIND | MS_REC)
        elif action.kind == "readonly":
            _mount(None, inside, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def _mount_image(image: str, target: str, record: Path | None = None) -> None:
    """Loop-mount a volume image (util-linux sets up a self-clearing loop device, and reuses the one already on
    this image, so two containers share one superblock; ``-n`` writes nothing to the host's /run/mount), then
    switch that device to direct I/O. A device left on buffered I/O is said in the container's log: its numbers
    would then include the host's page cache."""
    run_tool("mount", "-n", "-t", "ext4", "-o", "loop,nosuid,nodev", image, target)
    device = loop_device_of(target)
    try:
        if device is None:
            raise OSError(f"no loop device found at {target}")
        run_tool("losetup", "--direct-io=on", device)
    except OSError as error:
        print(f"sandbox: direct I/O not enabled on the volume at {target} ({error}); the loop device stays "
              "buffered", file=sys.stderr, flush=True)
    if device is not None:
        _throttle(device, os.path.realpath(image), record)


def _throttle(device: str, image: str, record: Path | None) -> None:
    """The volume's QoS limits on its loop device (``qos.py``), noted in ``record`` for the runtime to clear when
    the container ends; a device of a volume without limits has an earlier volume's cleared. A volume with limits
    the host cannot enforce does not start: a limit silently not kept would be measured as the array's."""
    limits = qos.effective(Path(image).parent)
    try:
        qos.apply(device, limits)
    except qos.QosUnavailable:
        if limits:
            raise
        return
    if limits and record is not None:
        qos.record(record, device, image)


def loop_device_of(target: str) -> str | None:
    """The loop device whose filesystem is mounted at ``target`` (from the mount's device number, so no path
    escaping in /proc/self/mountinfo can hide it); None when it is not a loop device."""
    device = os.stat(target).st_dev
    name = os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}"))
    return f"/dev/{name}" if name.startswith("loop") else None


SKIPPED = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR)  # an entry that went or changed kind during the walk


def apply_fs_group(directory: str, fs_group: int) -> None:
    """fsGroup, as a kubelet applies it for a driver with fsGroupPolicy File: the volume's files belong to the
    group, which may read and write them, and new files inherit it (setgid directories).

    This runs as root while other containers may be changing the same volume, so it never follows a link:
    ``os.fwalk`` holds each directory open and checks it is the one it listed, entries are changed through
    that descriptor (a regular file opened with O_NOFOLLOW and checked to be the file that was listed, anything
    else only ``lchown``ed), and an entry that vanished or changed kind meanwhile is passed over."""
    for _base, _dirs, files, dir_fd in os.fwalk(directory, follow_symlinks=False):
        mode = os.fstat(dir_fd).st_mode
        os.fchown(dir_fd, -1, fs_group)
        os.fchmod(dir_fd, (mode & 0o7777) | 0o2070)
        for name in files:
            try:
                _give_to_group(name, dir_fd, fs_group)
            except OSError as error:
                if error.errno not in SKIPPED:
                    raise


def _give_to_group(name: str, dir_fd: int, fs_group: int) -> None:
    listed = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISREG(listed.st_mode):
        os.chown(name, -1, fs_group, dir_fd=dir_fd, follow_symlinks=False)
        return
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
            return  # replaced between the listing and the open: not the file that was listed
        os.fchown(fd, -1, fs_group)
        os.fchmod(fd, (opened.st_mode & 0o7777) | 0o060)
    finally:
        os.close(fd)


def array_device(source: str) -> str:
    """The array's device file the kubelet's path for a raw block volume leads to (through the driver's links),
    refused unless it is one: a regular file named as the array names them (a Filesystem volume's directory or
    image is no device, as a kubelet refuses volumeDevices on a Filesystem volume; a link is never followed past)."""
    path = source
    for _ in range(MAX_LINKS):  # the kubelet's target path, the driver's staging path, then the device
        if os.path.basename(path) == DEVICE_NAME or not os.path.islink(path):
            break
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    resolved = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    if os.path.basename(resolved) != DEVICE_NAME or not stat.S_ISREG(os.lstat(resolved).st_mode):
        raise OSError(f"{source} is not a raw block volume's device (volumeDevices needs a volume of volumeMode "
                      "Block)")
    return resolved


def give_device(path: str, uid: int, gid: int) -> None:
    """A bound device file becomes the container user's, read-write for user and group only. Only a regular
    file is changed (opened without following a link, checked to be what was bound): the array's device file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a device file of the array's")
        os.fchown(fd, uid, gid)
        os.fchmod(fd, 0o660)
    finally:
        os.close(fd)


def enter(spec: dict[str, Any]) -> None:
    uid, gid = int(spec["uid"]), int(spec["gid"])
    if uid == 0:
        raise PermissionError("the simulated kubelet runs nothing as root (runAsUser 0)")
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare(CLONE_NEWNS | CLONE_NEWIPC)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    if spec.get("namespaceFile"):  # the runtime ends whatever is left in this namespace when the container ends
        with open(spec["namespaceFile"], "w") as recorded:
            recorded.write(os.readlink("/proc/self/ns/mnt"))
    volumes = {str(path): os.path.realpath(str(source)) for path, source in spec["volumes"].items()}
    devices = {str(path): array_device(str(source)) for path, source in (spec.get("devices") or {}).items()}
    files = {str(path): str(source) for path, source in (spec.get("files") or {}).items()}
    build_root(spec["root"], plan_root(volumes, host_entries, files, [str(p) for p in spec.get("readOnly") or []],
                                       [str(p) for p in spec.get("exposed") or []], devices),
               Path(spec["throttleFile"]) if spec.get("throttleFile") else None)
    if spec.get("fsGroup") is not None:  # not on a read-only volume, as a kubelet's csi mounter skips those
        for path in volumes:
            if path not in (spec.get("readOnly") or []):
                apply_fs_group(spec["root"] + path, int(spec["fsGroup"]))
    for path in devices:  # the container's user may use its raw block volumes, as containerd gives a device node
        give_device(spec["root"] + path, uid, gid)  # to runAsUser/runAsGroup (device_ownership_from_security_context)
    os.chroot(spec["root"])
    _become(spec, uid, gid)


def _become(spec: dict[str, Any], uid: int, gid: int) -> None:
    os.chdir(spec.get("workingDir") or "/")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    os.setgroups([int(g) for g in spec.get("groups") or []])
    os.setgid(gid)
    os.setuid(uid)


def join(spec: dict[str, Any]) -> None:
    """Enter a running container (its pid is ``join``): its mount and IPC namespaces, its root, its user."""
    uid, gid = int(spec["uid"]), int(spec["gid"])
    if uid == 0:
        raise PermissionError("the simulated kubelet runs nothing as root (runAsUser 0)")
    pid = int(spec["join"])
    for kind, flag in (("mnt", CLONE_NEWNS), ("ipc", CLONE_NEWIPC)):
        fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            _check(_libc.setns(fd, flag), f"setns({kind} of {pid})")
        finally:
            os.close(fd)
    os.chroot(spec["root"])  # setns put this process at the namespace's root: the host's view, then the container's
    _become(spec, uid, gid)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    command = [str(part) for part in spec["command"]]
    env = {str(k): str(v) for k, v in spec.get("env", {}).items()}
    env.setdefault("PATH", SYSTEM_PATH)
    env.setdefault("HOME", "/tmp")
    try:
        join(spec) if spec.get("join") else enter(spec)
        os.execvpe(command[0], command, env)
    except OSError as error:
        print(f"sandbox: cannot start {command[0]!r}: {error}", file=sys.stderr, flush=True)
    return START_ERROR_EXIT


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

"""What a test can see on the host: mounts and processes the simulated kubelet must not leave behind."""

from __future__ import annotations

import os
from pathlib import Path

SANDBOX_MODULE = "localcluster.simulator.sandbox"


def host_mounts_under(directory: Path) -> list[str]:
    """Mount points in the host's mount namespace under ``directory`` (the cluster's state directory)."""
    root = str(directory.resolve())
    lines = Path("/proc/mounts").read_text().splitlines()
    return [line.split()[1] for line in lines if line.split()[1].startswith(root)]


def loop_devices_under(directory: Path) -> list[str]:
    """Loop devices whose backing file lies under ``directory`` (volume images the sandbox mounted)."""
    root = str(directory.resolve())
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            path = backing.read_text().strip()
        except OSError:
            continue  # detached meanwhile
        if path.startswith(root):
            found.append(f"/dev/{backing.parent.parent.name}: {path}")
    return found


def processes_with(marker: str) -> list[str]:
    """Command lines of running processes that contain ``marker`` (this test process excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and "pytest" not in cmdline:
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def processes_rooted_under(directory: Path) -> list[str]:
    """Processes whose root directory (their chroot) is under ``directory``: a simulated container's, of this
    cluster only. PostgreSQL renames its processes ("postgres: checkpointer"), so their command lines cannot
    tell; the root they run in can."""
    root = str(directory.resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "root").startswith(root):
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {cmdline.strip()}")
        except OSError:
            continue
    return found

"""What each part of a step's per-object latency spans (the '└' rows under moveVolume, expandVolume and the group
snapshot steps), said under the step table of every report, with what the parts' percentiles are not.

The parts are cut at watch events (each step's entry in ``engine/steps/`` names them; a unit test holds that each
has a meaning here); the words follow the tables of docs/guides/lifecycle-steps.md. Pure, over the run's status as
the API returns it.
"""

from __future__ import annotations

from typing import Any

from csibench.api.steps import title_and_unit

MEANINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "moveVolume": (
        ("gone", "from the delete until the old pod is gone from the API (the kubelet stops the container and "
                 "unmounts its volumes)"),
        ("detach", "until every VolumeAttachment of its volumes to the old node is gone (unstage, the node's "
                   "volumesInUse, ControllerUnpublishVolume)"),
        ("attach", "until each volume's VolumeAttachment to the new node says attached (scheduling, "
                   "ControllerPublishVolume)"),
        ("ready", "until the successor is Ready on the new node (stage, publish, the container starting)")),
    "expandVolume": (
        ("controller", "from the PATCH until the claim says FileSystemResizePending (csi-resizer's "
                       "ControllerExpandVolume)"),
        ("node", "from there until the claim's capacity is the new size with no resize condition left (the "
                 "kubelet's NodeExpandVolume; a real kubelet's sync period is in here)")),
    "createGroupSnapshot": (
        ("content", "from the group's creation until the snapshot-controller made its VolumeGroupSnapshotContent "
                    "and the group names it"),
        ("taken", "until the content carries the storage's group handle (csi-snapshotter's "
                  "CreateVolumeGroupSnapshot: the storage's own time)"),
        ("members", "until a VolumeSnapshot and its content exist per member, bound, and all are ready "
                    "(the snapshot-controller's work)")),
    "deleteGroupSnapshot": (
        ("content", "from the delete until the group's content is gone (csi-snapshotter's "
                    "DeleteVolumeGroupSnapshot: the storage's time)"),
        ("group", "until the group is gone (the controller removes its finalizer)"),
        ("members", "until every member VolumeSnapshot and its content are gone")),
}

ADDING_UP = ("per object the parts add up to its latency, but each part's percentile is of that part alone: the "
             "parts' p50s (p90s, p99s) need not add up to the step's")


def legend_lines(run: dict[str, Any]) -> list[str]:
    """Under the step table: for each step whose parts are rows in it, what each part spans, and once that part
    percentiles do not add up. Empty when no row has parts (a repeated run's table shows medians, no parts)."""
    steps = [step for step in (run.get("status") or {}).get("steps") or [] if step.get("phases")]
    if not steps or int((((run.get("status") or {}).get("iterations")) or {}).get("total") or 1) > 1:
        return []
    lines = []
    for step in steps:
        meanings = dict(MEANINGS.get(step["name"], ()))
        spans = [f"{phase['name']}: {meanings[phase['name']]}" for phase in step["phases"]
                 if phase["name"] in meanings]
        if spans:
            lines.append(f"└ parts of {title_and_unit(step['name'])[0]}: " + "; ".join(spans))
    return [*lines, f"└ {ADDING_UP}"] if lines else []


def notes_table(report: dict[str, Any] | None) -> tuple[list[str], list[list[str]]] | None:
    """From the stored report, what steps noted about their objects (moveVolume: each pod's old and new node),
    counted: ``(["Step", "Moved from → to", "Pods"], rows)``, or None when no step noted anything."""
    counted: dict[tuple[str, str], int] = {}
    for record in (report or {}).get("steps") or []:
        name = (record.get("status") or {}).get("name", "")
        for note in record.get("notes") or []:
            if isinstance(note, str):
                counted[(name, note)] = counted.get((name, note), 0) + 1
    if not counted:
        return None
    rows = [[title_and_unit(step)[0], note, str(count)] for (step, note), count in sorted(counted.items())]
    return ["Step", "Moved from → to", "Pods"], rows

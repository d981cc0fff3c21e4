"""What the run has seen of its objects, kept small (a few fields each) so that 10,000 volumes fit easily.

Fed by watch events. Each event is mapped to the run's own objects it concerns: a PV event to its claim
(through claimRef), a VolumeAttachment to the pods using that volume on that node, a snapshot content to its
snapshot, a Warning event to its involved object (by uid). Objects of other runs or users in a shared
namespace never enter: claims, pods, snapshots and group snapshots come from label-selected watches, and
cluster-scoped objects are kept only when they point back at one of ours. What one claim, pod, snapshot or group
snapshot is made of, and how an event updates it, is its kind's module (``kinds/``); what relates them (volumes,
attachments, contents, Warnings) is here, but for a group snapshot's members and contents (``observed_groups.py``);
what of it all cleanup counts as left is ``observed_leftovers.py``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from csibench.api.text import shorten
from csibench.engine.kinds import claim, group_snapshot, pod, snapshot
from csibench.engine.kinds.claim import CLAIM as CLAIM
from csibench.engine.kinds.claim import ClaimState as ClaimState
from csibench.engine.kinds.group_snapshot import GROUP_SNAPSHOT as GROUP_SNAPSHOT
from csibench.engine.kinds.group_snapshot import GroupSnapshotState as GroupSnapshotState
from csibench.engine.kinds.pod import POD as POD
from csibench.engine.kinds.pod import PodState as PodState
from csibench.engine.kinds.snapshot import SNAPSHOT as SNAPSHOT
from csibench.engine.kinds.snapshot import SnapshotState as SnapshotState
from csibench.engine.observed_groups import GROUP_HANDLE, GroupRelations
from csibench.engine.observed_leftovers import ContentRef as ContentRef
from csibench.engine.observed_leftovers import Leftovers
from csibench.engine.retries import RetriedWarning, retry_cause
from csibench.kube.watch import WatchEvent

CONTENT_FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"  # the controller's
# csi-snapshotter's mark while its CreateSnapshot call has not answered; it will not delete the content until then
BEING_CREATED = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"

Key = tuple[str, str]  # (kind, name) of one of the run's objects
S = TypeVar("S", ClaimState, PodState, SnapshotState, GroupSnapshotState)
States = dict[str, ClaimState] | dict[str, PodState] | dict[str, SnapshotState] | dict[str, GroupSnapshotState]

MAX_EVENTS_PER_OBJECT = 20  # distinct retried Events kept per object (a repeat updates its own)
EARLY_WARNINGS = 1000  # uids whose Warnings wait for the object itself (a bound, not a queue per object)


@dataclass(frozen=True)
class WarningEvent:
    reason: str
    message: str
    at: float


ZONE_KEY = "topology.kubernetes.io/zone"


def zone_of_volume(pv: dict[str, Any]) -> str | None:
    """The one zone a PV's required node affinity allows (pure): the well-known key, or a driver's own ``*/zone``
    key (``topology.ebs.csi.aws.com/zone``, ``topology.gke.io/zone``), with operator In. None for a volume any
    node may use, and for one several zones may use (a regional disk: the provisioner writes a term per zone), which
    belongs to no single zone's row."""
    terms = ((((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {})
             .get("nodeSelectorTerms") or [])
    zones: set[str] = set()
    for term in terms if isinstance(terms, list) else []:
        expressions = (term or {}).get("matchExpressions") if isinstance(term, dict) else None
        for expression in expressions if isinstance(expressions, list) else []:
            if not isinstance(expression, dict) or expression.get("operator") != "In":
                continue
            key, values = str(expression.get("key") or ""), expression.get("values") or []
            if key == ZONE_KEY or key.endswith("/zone"):
                zones.update(str(value) for value in values if value)
    return zones.pop() if len(zones) == 1 else None


class Observed(GroupRelations, Leftovers):
    """The run's view; the group snapshots' relations (``observed_groups.py``) and what cleanup counts as left
    (``observed_leftovers.py``) are parts of it kept in modules of their own."""

    def __init__(self, namespace: str, prefix: str) -> None:
        super().__init__()
        self.namespace = namespace
        self._prefix = prefix + "-"
        self._prefix_bytes = f'"{self._prefix}'.encode()
        self.claims: dict[str, ClaimState] = {}
        self.pods: dict[str, PodState] = {}
        self.snapshots: dict[str, SnapshotState] = {}
        self.pv_claim: dict[str, str] = {}  # existing PV -> claim (by name: may be a namesake's, see owned_volumes)
        self.volume_zones: dict[str, str] = {}  # PV -> the zone its node affinity names (kept after it is gone)
        self._pv_claim_uid: dict[str, str] = {}  # existing PV -> uid of the claim it is bound to
        self.attachments: dict[str, tuple[str, str]] = {}  # existing VolumeAttachment -> (PV, node)
        self.attached: Counter[tuple[str, str]] = Counter()  # (PV, node) -> VolumeAttachments present
        self._attach_done: set[str] = set()  # existing VolumeAttachments whose status says attached
        self.attached_done: Counter[tuple[str, str]] = Counter()  # (PV, node) -> those of them
        self.last_attached_at: float | None = None  # arrival of the latest line that said a volume attached
        self.contents: dict[str, str] = {}  # existing snapshot content -> snapshot (by name, like pv_claim)
        self._content_refs: dict[str, ContentRef] = {}  # existing snapshot content -> what it says of itself
        self.warnings: dict[Key, WarningEvent] = {}
        # Warnings Kubernetes retries past (retries.retry_cause: a CSI call past its --timeout, a Multi-Attach
        # error, ...), per object and Event name: the Event's count (a repeated Event is one object whose count
        # grows), as last seen. Bounded by the run's objects times the distinct Events about each.
        self.retried: dict[Key, dict[str, RetriedWarning]] = defaultdict(dict)
        self.fail_after: int | None = None  # spec.failAfterWarnings: an object fails at this many retried Warnings
        self.groups: dict[str, GroupSnapshotState] = {}
        self._by_uid: dict[str, Key] = {}
        # Warnings about a uid not seen yet: each watch is its own thread, so the scheduler's FailedScheduling for a
        # pod just created can arrive before the pod does; kept (bounded) until the object is seen.
        self._early_warnings: dict[str, list[WatchEvent]] = {}
        self._pods_of_claim: dict[str, set[str]] = defaultdict(set)
        self._claim_of_pv: dict[str, str] = {}  # every PV ever bound to one of our claims (survives deletion)
        self._pvs_seen: set[str] = set()  # PVs of our claims seen on the PV watch (their node affinity read)

    def ours(self, name: str) -> bool:
        return name.startswith(self._prefix)

    def mentions_ours(self, line: bytes) -> bool:
        """A raw watch line that can concern the run: it names one of its objects (a PV's claimRef, a content's
        snapshotRef). Lines that do not are passed over undecoded (other runs' and users' volumes)."""
        return self._prefix_bytes in line

    def apply(self, event: WatchEvent) -> list[Key]:
        """Update state from one event; return the run's objects whose state may have changed."""
        handler = getattr(self, f"_on_{event.source}")
        if event.type == "SYNC":
            return self._sync(event)
        affected: list[Key] = handler(event)
        return affected

    # -- namespaced objects of the run (label-selected) ------------------------------------------------------
    def _track(self, kind: str, states: dict[str, S], event: WatchEvent, new: Callable[[], S]) -> tuple[str, S]:
        """The state of one of the run's objects, with identity and existence updated from the event."""
        meta = event.obj["metadata"]
        name = meta["name"]
        state = states.setdefault(name, new())
        state.uid = meta.get("uid", state.uid)
        self._by_uid[state.uid] = (kind, name)
        state.exists = event.type != "DELETED"
        state.gone_at = None if state.exists else event.at
        for early in self._early_warnings.pop(state.uid, ()):
            self._on_events(early)
        return name, state

    def _on_claims(self, event: WatchEvent) -> list[Key]:
        name, state = self._track(CLAIM, self.claims, event, ClaimState)
        claim.update(state, event.obj)
        for ref in event.obj["metadata"].get("ownerReferences") or []:  # a generic ephemeral volume's: its pod
            if ref.get("kind") == "Pod" and ref.get("controller") and self.ours(ref.get("name", "")):
                self._pods_of_claim[name].add(ref["name"])
        if state.volume:
            self._claim_of_pv[state.volume] = name
        return [(CLAIM, name), *self._pods_mounting(name)]

    def _pods_mounting(self, claim: str) -> list[Key]:
        """The run's pods that mount a claim: a pod's judge may wait on its claims (deleteEphemeral's: the pod's
        ephemeral claims and their volumes gone)."""
        return [(POD, pod) for pod in self._pods_of_claim.get(claim, ())]

    def _on_pods(self, event: WatchEvent) -> list[Key]:
        name, state = self._track(POD, self.pods, event, PodState)
        for mounted in pod.update(state, event.obj):
            self._pods_of_claim[mounted].add(name)
        return [(POD, name)]

    def _on_snapshots(self, event: WatchEvent) -> list[Key]:
        name, state = self._track(SNAPSHOT, self.snapshots, event, SnapshotState)
        snapshot.update(state, event.obj)
        return [(SNAPSHOT, name)]

    def _on_groups(self, event: WatchEvent) -> list[Key]:
        name, state = self._track(GROUP_SNAPSHOT, self.groups, event, GroupSnapshotState)
        group_snapshot.update(state, event.obj)
        return [(GROUP_SNAPSHOT, name)]

    def _on_events(self, event: WatchEvent) -> list[Key]:
        involved = event.obj.get("involvedObject") or {}
        uid = involved.get("uid", "")
        key = self._by_uid.get(uid)
        if event.type == "DELETED" or event.obj.get("type") != "Warning":
            return []
        if key is None:
            if uid and self.ours(str(involved.get("name", ""))) and len(self._early_warnings) < EARLY_WARNINGS:
                self._early_warnings.setdefault(uid, []).append(event)
            return []
        state = self._states(key[0]).get(key[1])
        if state is None or state.uid != uid:  # about a namesake a restore deleted: not about the object now
            return []
        reason, message = event.obj.get("reason", ""), event.obj.get("message", "")
        cause = retry_cause(message)
        if cause is not None:
            count = int(event.obj.get("count") or (event.obj.get("series") or {}).get("count") or 1)
            event_name = (event.obj.get("metadata") or {}).get("name", "")
            seen = self.retried[key].get(event_name)
            if seen is not None or len(self.retried[key]) < MAX_EVENTS_PER_OBJECT:
                self.retried[key][event_name] = RetriedWarning(
                    reason, cause, shorten(message, 300), max(count, seen.count if seen else 0),
                    seen.first if seen else event.at, event.at)
        self.warnings[key] = WarningEvent(reason, message, event.at)
        return [key, *self._pods_mounting(key[1])] if key[0] == CLAIM else [key]

    def _states(self, kind: str) -> States:
        kinds: dict[str, States] = {CLAIM: self.claims, POD: self.pods, SNAPSHOT: self.snapshots,
                                    GROUP_SNAPSHOT: self.groups}
        return kinds[kind]

    def complaints(self, kind: str) -> dict[str, str]:
        """What was last said against each of the run's objects of a kind, quoted when one times out: its last
        Warning, else its status error (a snapshot's: the snapshot-controller copies it there without an event)."""
        said = {name: shorten(f"{w.reason}: {w.message}", 200) for (k, name), w in self.warnings.items() if k == kind}
        errors: dict[str, str | None] = {}
        if kind == SNAPSHOT:
            errors = {name: state.error for name, state in self.snapshots.items()}
        elif kind == GROUP_SNAPSHOT:
            errors = {name: state.error for name, state in self.groups.items()}
        for name, error in errors.items():
            if error and name not in said:
                said[name] = shorten(f"status.error: {error}", 200)
        return said

    # -- cluster-scoped objects that point back at the run's ------------------------------------------------
    def _on_pvs(self, event: WatchEvent) -> list[Key]:
        name = event.obj["metadata"]["name"]
        ref = (event.obj.get("spec") or {}).get("claimRef") or {}
        if ref.get("namespace") != self.namespace or not self.ours(ref.get("name", "")):
            return []
        claim = ref["name"]
        self._claim_of_pv[name] = claim
        self._pvs_seen.add(name)
        zone = zone_of_volume(event.obj)
        if zone is not None:
            self.volume_zones[name] = zone
        if event.type == "DELETED":
            self.pv_claim.pop(name, None)
            self._pv_claim_uid.pop(name, None)
        else:
            self.pv_claim[name] = claim
            self._pv_claim_uid[name] = ref.get("uid", "")
        return [(CLAIM, claim), *self._pods_mounting(claim)]

    def _on_attachments(self, event: WatchEvent) -> list[Key]:
        name = event.obj["metadata"]["name"]
        spec = event.obj.get("spec") or {}
        pv = (spec.get("source") or {}).get("persistentVolumeName") or ""
        claim = self.pv_claim.get(pv)
        if claim is None and name not in self.attachments:
            return []
        if event.type == "DELETED":
            pair = self.attachments.pop(name, None)
            if pair is not None:
                self.attached[pair] -= 1
            self._set_attach_done(name, pair, False)
        else:
            if name not in self.attachments:
                self.attachments[name] = (pv, spec.get("nodeName", ""))
                self.attached[self.attachments[name]] += 1
            self._set_attach_done(name, self.attachments[name], (event.obj.get("status") or {}).get("attached") is True,
                                  event.at)
        claim = claim or self._claim_of_volume(pv)
        return [(POD, pod) for pod in self._pods_of_claim.get(claim or "", ())]

    def _on_contents(self, event: WatchEvent) -> list[Key]:
        name = event.obj["metadata"]["name"]
        ref = (event.obj.get("spec") or {}).get("volumeSnapshotRef") or {}
        if GROUP_HANDLE in (event.obj["metadata"].get("annotations") or {}) and ref.get("namespace") == self.namespace:
            return self._on_member_content(event, name, ref.get("name", ""))
        if ref.get("namespace") != self.namespace or not self.ours(ref.get("name", "")):
            return []
        if event.type == "DELETED":
            self.contents.pop(name, None)
            self._content_refs.pop(name, None)
        else:
            spec = event.obj.get("spec") or {}
            snapshot_uid = ref.get("uid", "")
            self.contents[name] = ref["name"]
            meta = event.obj["metadata"]
            self._content_refs[name] = ContentRef(
                snapshot_uid, meta.get("uid", ""),
                dynamic=bool(snapshot_uid) and name == f"snapcontent-{snapshot_uid}"
                and bool((spec.get("source") or {}).get("volumeHandle")),
                delete_policy=spec.get("deletionPolicy") == "Delete",
                protected=CONTENT_FINALIZER in (meta.get("finalizers") or []),
                creating=BEING_CREATED in (meta.get("annotations") or {}), snapshot=ref["name"])
        return [(SNAPSHOT, ref["name"])]

    def _claim_of_volume(self, pv: str) -> str | None:
        return self._claim_of_pv.get(pv)

    def _sync(self, event: WatchEvent) -> list[Key]:
        """After a relist: whatever we track that the list no longer has was deleted while we were away."""
        present = {key.split("/", 1)[1] for key in event.obj["present"]}
        affected: list[Key] = []
        if event.source in ("claims", "pods", "snapshots", "groups"):
            kind = {"claims": CLAIM, "pods": POD, "snapshots": SNAPSHOT, "groups": GROUP_SNAPSHOT}[event.source]
            states = self._states(kind)
            for name, state in states.items():
                if state.exists and name not in present:
                    state.exists, state.gone_at = False, event.at
                    affected.append((kind, name))
                    affected.extend(self._pods_mounting(name) if kind == CLAIM else ())
        elif event.source in ("members", "group_contents"):
            affected.extend(self._sync_groups(event.source, present, event.at))
        elif event.source == "pvs":
            for pv in [pv for pv in self.pv_claim if pv not in present]:
                self._pv_claim_uid.pop(pv, None)
                gone = self.pv_claim.pop(pv)
                affected += [(CLAIM, gone), *self._pods_mounting(gone)]
        elif event.source == "contents":
            affected.extend(self._sync_groups(event.source, present, event.at))  # the members' contents first
            for content in [c for c in self.contents if c not in present]:
                self._content_refs.pop(content, None)
                affected.append((SNAPSHOT, self.contents.pop(content)))
        elif event.source == "attachments":
            for name in [a for a in self.attachments if a not in present]:
                pair = self.attachments.pop(name)
                self.attached[pair] -= 1
                self._set_attach_done(name, pair, False)
                claim = self.pv_claim.get(pair[0]) or self._claim_of_volume(pair[0])
                affected.extend((POD, pod) for pod in self._pods_of_claim.get(claim or "", ()))
        return affected

    def existing(self, kind: str) -> set[str]:
        """The run's objects of one kind that exist as last seen."""
        return {name for name, state in self._states(kind).items() if state.exists}

    def uids_of(self, kind: str) -> dict[str, str]:
        """The run's objects of one kind that its label-selected watches have seen, name -> uid."""
        return {name: state.uid for name, state in self._states(kind).items() if state.uid}

    def volume_of(self, claim: str) -> str | None:
        """The PV bound to one of the run's claims, as last seen (kept after the claim is deleted)."""
        state = self.claims.get(claim)
        return state.volume if state is not None else None

    def volume_seen(self, claim: str) -> bool:
        """Whether the PV bound to the claim was seen on the PV watch (its zone known, if it has one); a claim not
        bound yet has none to see."""
        volume = self.volume_of(claim)
        return volume is None or volume in self._pvs_seen

    def zone_of(self, kind: str, name: str) -> str | None:
        """An object's zone, where its volume has one: a claim's volume's; a pod's first volume's that has one."""
        if kind == CLAIM:
            volume = self.volume_of(name)
            return self.volume_zones.get(volume) if volume is not None else None
        if kind == POD:
            state = self.pods.get(name)
            for claim in state.claims if state is not None else []:
                zone = self.zone_of(CLAIM, claim)
                if zone is not None:
                    return zone
        return None

    def volume_attached(self, pv: str | None, node: str | None) -> bool:
        """A VolumeAttachment of the PV to the node exists (attached, or being attached or detached)."""
        return bool(pv and node and self.attached[(pv, node)] > 0)

    def volume_attach_done(self, pv: str | None, node: str | None) -> bool:
        """A VolumeAttachment of the PV to the node says attached (the external-attacher's
        ControllerPublishVolume answered); O(1), as every lookup a judge makes on an event."""
        return bool(pv and node and self.attached_done[(pv, node)] > 0)

    def _set_attach_done(self, name: str, pair: tuple[str, str] | None, done: bool, at: float | None = None) -> None:
        if done and name not in self._attach_done and pair is not None:
            self._attach_done.add(name)
            self.attached_done[pair] += 1
            if at is not None:
                self.last_attached_at = max(at, self.last_attached_at or at)
        elif not done and name in self._attach_done:
            self._attach_done.discard(name)
            if pair is not None:
                self.attached_done[pair] -= 1

    def retried_since(self, kind: str, names: Iterable[str], since: float) -> dict[str, list[RetriedWarning]]:
        """Per object, its retried warnings whose latest line came at or after ``since`` (objects with none left
        out)."""
        found = {name: [warning for warning in self.retried.get((kind, name), {}).values() if warning.at >= since]
                 for name in names}
        return {name: warnings for name, warnings in found.items() if warnings}

    def retried_count(self, key: Key, since: float) -> int:
        """The object's retried Warnings whose latest line came at or after ``since``, counted with repeats."""
        return sum(warning.count for warning in self.retried.get(key, {}).values() if warning.at >= since)

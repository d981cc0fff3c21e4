"""Which pods run the CSI machinery of a driver, and with which result-changing flags (pure).

A sidecar is recognised by its image name (``.../csi-provisioner:v6.4.0``), else its container name, else its
binary. It serves the class's driver when (in this order) another container of its pod names the driver (the
driver container, ``--drivername=...``, ``--endpoint=...``, env — as a whole token, so ``nfs.csi.example.com``
never matches ``csi.example.com``), its ``--csi-address`` path names it as a segment (the kubelet's
``/var/lib/kubelet/plugins/<driver>/csi.sock`` convention), or it is the only sidecar of its kind in the cluster
and the driver has a CSIDriver object. The snapshot-controller and the controller-manager are cluster-wide:
every one found is recorded.

Upstream defaults are those of the binaries' flag definitions (external-provisioner v6.4.0, external-attacher
v4.13.0, external-snapshotter v8.7.0, csi-lib-utils' standard flags; controller-manager: Kubernetes' defaults),
so a flag absent from the command line is recorded with the value the binary really runs with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from csibench.api.models import Component
from csibench.preflight.flags import container_env, image_name_and_tag, parse_flags

RESULT_FLAGS = ("kube-api-qps", "kube-api-burst", "worker-threads", "timeout", "retry-interval-start",
                "retry-interval-max", "feature-gates")
_CLIENT_DEFAULTS = {"kube-api-qps": "5", "kube-api-burst": "10"}
_RETRY_DEFAULTS = {"retry-interval-start": "1s", "retry-interval-max": "5m"}


@dataclass(frozen=True)
class ComponentKind:
    name: str
    defaults: Mapping[str, str]
    per_driver: bool  # a sidecar beside one driver, or a cluster-wide controller


KINDS: Mapping[str, ComponentKind] = {kind.name: kind for kind in (
    ComponentKind("csi-provisioner", {**_CLIENT_DEFAULTS, "worker-threads": "100", "timeout": "10s",
                                      **_RETRY_DEFAULTS}, True),
    ComponentKind("csi-attacher", {**_CLIENT_DEFAULTS, "worker-threads": "10", "timeout": "15s", **_RETRY_DEFAULTS},
                  True),
    ComponentKind("csi-snapshotter", {**_CLIENT_DEFAULTS, "worker-threads": "10", "timeout": "1m",
                                      **_RETRY_DEFAULTS}, True),
    # external-resizer v2.3.0: --workers; each ControllerExpandVolume gets --resize-timeout, unless --timeout is on
    # the command line, which then overrides it (its own default is only how long to wait for the CSI socket).
    ComponentKind("csi-resizer", {**_CLIENT_DEFAULTS, "workers": "10", "timeout": "10s", "resize-timeout": "10s",
                                  **_RETRY_DEFAULTS}, True),
    ComponentKind("snapshot-controller", {**_CLIENT_DEFAULTS, "worker-threads": "10", **_RETRY_DEFAULTS}, False),
    # Kubernetes' controller-manager: the PV binder and the attach/detach controller share its client.
    ComponentKind("kube-controller-manager", {"kube-api-qps": "20", "kube-api-burst": "30"}, False),
)}
RESULT_FLAG_NAMES = frozenset(RESULT_FLAGS) | {"workers", "resize-timeout"}
WORKER_FLAGS = {"csi-resizer": "workers"}  # the others: --worker-threads


def kind_of(container: Mapping[str, Any]) -> str | None:
    """The component a container runs, from its image name, container name or binary (None: not machinery)."""
    image_name, _ = image_name_and_tag(str(container.get("image") or ""))
    binary = str((container.get("command") or [""])[0]).rsplit("/", 1)[-1]
    for candidate in (image_name, str(container.get("name") or ""), binary):
        if candidate in KINDS:
            return candidate
    return None


def names_driver(text: str, driver: str) -> bool:
    """``text`` names ``driver`` as a whole token: a value (``--drivername=d``, ``d``) or a path segment
    (``/var/lib/kubelet/plugins/d/csi.sock``), never as part of a longer name (``nfs.d`` is not ``d``)."""
    for token in text.replace("=", " ").replace(",", " ").split():
        if token == driver or driver in token.split("/"):
            return True
    return False


def _mentions(container: Mapping[str, Any], driver: str) -> bool:
    words = [*map(str, container.get("command") or []), *map(str, container.get("args") or []),
             *container_env(container).values()]
    return any(names_driver(word, driver) for word in words)


@dataclass(frozen=True)
class Found:
    kind: str
    pod: Mapping[str, Any]
    container: Mapping[str, Any]
    flags: dict[str, str]

    def component(self, matched_by: str) -> Component:
        meta = self.pod.get("metadata") or {}
        image = str(self.container.get("image") or "") or None
        defaults = KINDS[self.kind].defaults
        return Component(
            kind=self.kind, namespace=str(meta.get("namespace", "")), pod=str(meta.get("name", "")),
            container=str(self.container.get("name", "")), image=image,
            version=image_name_and_tag(image)[1] if image else None,
            flags={k: v for k, v in self.flags.items() if k in RESULT_FLAG_NAMES},
            defaults={k: v for k, v in defaults.items() if k not in self.flags}, matchedBy=matched_by)


def _found(pods: Iterable[Mapping[str, Any]]) -> list[Found]:
    found = []
    for pod in pods:
        for container in (pod.get("spec") or {}).get("containers") or []:
            kind = kind_of(container)
            if kind is not None:
                found.append(Found(kind, pod, container, parse_flags(
                    [str(x) for x in container.get("command") or []], [str(x) for x in container.get("args") or []],
                    container_env(container))))
    return found


def _match(item: Found, driver: str, only_of_kind: bool) -> str | None:
    """Why ``item`` serves ``driver``, or None."""
    if not KINDS[item.kind].per_driver:
        return "cluster-wide controller"
    siblings = [c for c in (item.pod.get("spec") or {}).get("containers") or [] if kind_of(c) is None]
    if any(_mentions(sibling, driver) for sibling in siblings):
        return "a container of its pod names the driver"
    if names_driver(item.flags.get("csi-address", ""), driver):
        return "its --csi-address names the driver"
    if only_of_kind:
        return f"the only {item.kind} in the cluster"
    return None


def _replica_key(component: Component) -> tuple[str, ...]:
    """What replicas of one workload share (the flags kept are the results' only: never an endpoint, a replica's
    own)."""
    return (component.kind, component.namespace, component.container, component.image or "",
            repr(sorted(component.flags.items())))


def components_for(pods: Iterable[Mapping[str, Any]], driver: str, registered: bool = True) -> list[Component]:
    """The machinery serving ``driver`` among ``pods``, in a stable order (kind, namespace, pod). The lone
    sidecar of a kind is taken only for a ``registered`` driver (a CSIDriver object exists): otherwise it
    serves some other driver, or the class is not CSI at all."""
    found = _found(pods)
    # Replicas of one Deployment or DaemonSet (same namespace, container, image and flags) are one component with
    # a count: upstream's snapshot-controller runs two, and its findings must not come twice; and two replicas are
    # still the only sidecar of their kind.
    groups: dict[str, set[tuple[str, ...]]] = {}
    for item in found:
        groups.setdefault(item.kind, set()).add(_replica_key(item.component("")))
    components: dict[tuple[str, ...], Component] = {}
    for item in found:
        reason = _match(item, driver, registered and len(groups[item.kind]) == 1)
        if reason is None:
            continue
        component = item.component(reason)
        key = _replica_key(component)
        if key in components:
            components[key].replicas += 1
        else:
            components[key] = component
    return sorted(components.values(), key=lambda c: (list(KINDS).index(c.kind), c.namespace, c.pod, c.container))


def effective(component: Component, flag: str) -> str | None:
    """The value the component runs with: as set, else its upstream default."""
    return component.flags.get(flag, component.defaults.get(flag))


def worker_flag(component: Component) -> str:
    """The flag that sets how many objects the component works on at once."""
    return WORKER_FLAGS.get(component.kind, "worker-threads")


def call_timeout_flag(component: Component) -> str:
    """The flag whose value bounds each CSI call of the component: csi-resizer's --resize-timeout, unless its
    --timeout is set on the command line (which then overrides it); every other sidecar's --timeout."""
    if component.kind == "csi-resizer" and "timeout" not in component.flags:
        return "resize-timeout"
    return "timeout"

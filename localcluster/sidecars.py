"""The CSI sidecars and the snapshot-controller as the local cluster runs them: command lines, RBAC, mirror pods.

Each runs as a process with ``--kubeconfig`` and an identity of its own: a token the API server maps to the
ServiceAccount its upstream manifests use (``system:serviceaccount:kube-system:csi-provisioner``, ...), bound by
the upstream RBAC manifests shipped in the pinned modules, with the namespace set to ``kube-system``. Leader
election is on, with upstream's timings (a lease of 15 s), in ``kube-system``: one replica each, so the lease
matters when a component restarts, as it does on a real cluster. Each runs under ``localcluster.staticpod``,
which registers its pod in ``kube-system`` carrying the real command line, so ``kubectl get pods -n
kube-system`` shows what runs and with which flags, and restarts the process when that pod is deleted. Each
serves its metrics on ``--http-endpoint`` (the first node's address, a port of the cluster's own), and its pod
is host-network with that port named ``http-metrics``, as control-plane static pods are: the local Prometheus
finds it there (``localcluster.prometheus``).

Flags: the launcher sets what wiring needs (kubeconfig, CSI socket, leader election, ``--extra-create-metadata``
so the driver learns a volume's claim and class) and raises every client's ``--kube-api-qps`` /
``--kube-api-burst`` to 500 / 1000, as it does for the controller-manager, so that the cluster does not throttle
itself and tests measure the storage. Any flag can be set per component (``flags`` below, ``--sidecar`` on the
command line), and ``upstream_defaults`` drops the raised limits to start the sidecars exactly as upstream
ships them (client QPS 5 / burst 10, the pools and timeouts of each binary).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localcluster import versions
from localcluster.prometheus import METRICS_PORT_NAME, PART_OF, PART_OF_LABEL
from localcluster.simulator.runtime import HOST_PROCESS_ANNOTATION

NAMESPACE = "kube-system"
RAISED_CLIENT_LIMITS: Mapping[str, str] = {"kube-api-qps": "500", "kube-api-burst": "1000"}
LOG_VERBOSITY = "2"


@dataclass(frozen=True)
class Sidecar:
    """One component: its binary in the build cache, where its RBAC comes from, whether it talks CSI."""

    name: str
    module: versions.SidecarModule
    rbac_manifest: str  # path inside the module
    service_account: str
    csi: bool
    # Flags the wiring needs besides --kubeconfig, --csi-address, --leader-election* and --v.
    wiring: tuple[str, ...] = ()

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{NAMESPACE}:{self.service_account}"

    @property
    def image(self) -> str:
        """The image upstream publishes for this binary, recorded on its mirror pod (nothing pulls it)."""
        return f"registry.k8s.io/sig-storage/{self.name}:{self.module.version}"


SIDECARS: tuple[Sidecar, ...] = (
    Sidecar("csi-provisioner", versions.PROVISIONER, "deploy/kubernetes/rbac.yaml", "csi-provisioner", True,
            ("--extra-create-metadata=true",)),
    Sidecar("csi-attacher", versions.ATTACHER, "deploy/kubernetes/rbac.yaml", "csi-attacher", True),
    Sidecar("csi-snapshotter", versions.SNAPSHOTTER, "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml",
            "csi-snapshotter", True, ("--extra-create-metadata=true",)),
    Sidecar("snapshot-controller", versions.SNAPSHOTTER,
            "deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml", "snapshot-controller", False),
    Sidecar("csi-resizer", versions.RESIZER, "deploy/kubernetes/rbac.yaml", "csi-resizer", True),
)
SIDECAR_NAMES = tuple(sidecar.name for sidecar in SIDECARS)


def command_args(sidecar: Sidecar, kubeconfig: Path, csi_socket: Path | None, flags: Mapping[str, str],
                 upstream_defaults: bool = False, http_endpoint: str | None = None,
                 leader_election: bool = True) -> list[str]:
    """The sidecar's arguments: wiring first (with ``--http-endpoint=host:port`` for its metrics, when given),
    then the raised client limits (unless upstream defaults are wanted), then the caller's flags; Go's flag
    package keeps the last value of a repeated flag (pure)."""
    election = [f"--leader-election={str(leader_election).lower()}"]
    if leader_election:
        election.append(f"--leader-election-namespace={NAMESPACE}")
    args = [f"--kubeconfig={kubeconfig}", *election, f"--v={LOG_VERBOSITY}"]
    if sidecar.csi:
        assert csi_socket is not None
        args.append(f"--csi-address={csi_socket}")
    if http_endpoint is not None:
        args.append(f"--http-endpoint={http_endpoint}")
    args += list(sidecar.wiring)
    chosen = {} if upstream_defaults else dict(RAISED_CLIENT_LIMITS)
    chosen.update(flags)
    args += [f"--{name.removeprefix('--')}={value}" for name, value in chosen.items()]
    return args


# The sidecars whose --timeout bounds each CSI call (csi-resizer's overrides its --resize-timeout when set), and
# what vendors deploy them with: Trident runs its provisioner with --timeout=600s, so an array slower than the
# upstream 10-15 s is waited out in one call instead of retried. ``--sidecar-timeout`` gives them all one value.
CALL_TIMEOUT_SIDECARS = ("csi-provisioner", "csi-attacher", "csi-snapshotter", "csi-resizer")
VENDOR_PROFILES: Mapping[str, str] = {"trident": "600s"}


def timeout_flags(timeout: str, flags: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, dict[str, str]]:
    """``flags`` with ``--timeout=<timeout>`` for every sidecar that makes CSI calls, unless ``flags`` already sets
    one for it (a ``--sidecar`` option is the more specific) (pure). ``timeout`` is a Go duration ("600s", "10m")
    or a vendor profile's name ("trident")."""
    value = VENDOR_PROFILES.get(timeout, timeout)
    if not re.fullmatch(r"(\d+(\.\d+)?(ms|s|m|h))+", value):
        raise ValueError(f"{timeout!r}: a Go duration such as 600s or 10m, or one of {', '.join(VENDOR_PROFILES)}")
    merged = {component: dict(values) for component, values in (flags or {}).items()}
    for component in CALL_TIMEOUT_SIDECARS:
        merged.setdefault(component, {}).setdefault("timeout", value)
    return merged


def parse_sidecar_option(text: str) -> tuple[str, dict[str, str]]:
    """``snapshot-controller:kube-api-qps=100,kube-api-burst=200`` -> (component, flags) (pure)."""
    component, _, rest = text.partition(":")
    if component not in SIDECAR_NAMES:
        raise ValueError(f"unknown component {component!r} (one of {', '.join(SIDECAR_NAMES)})")
    flags = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise ValueError(f"{text!r}: flags are name=value, e.g. {component}:worker-threads=20")
        flags[name.removeprefix("--")] = value
    if not flags:
        raise ValueError(f"{text!r}: no flags given, e.g. {component}:worker-threads=20")
    return component, flags


def rbac_objects(manifest_text: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The upstream RBAC manifest's objects with every namespace (objects and subjects) set to ``namespace``
    (the manifests say "replace with non-default namespace name") (pure)."""
    objects = []
    for document in yaml.safe_load_all(manifest_text):
        if not document:
            continue
        obj = copy.deepcopy(document)
        if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            obj["metadata"]["namespace"] = namespace
        for subject in obj.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = namespace
        objects.append(obj)
    return objects


def mirror_pod(sidecar: Sidecar, node: str, node_uid: str, executable: str, args: list[str],
               metrics_port: int | None = None) -> dict[str, Any]:
    """A mirror pod for a running sidecar process, as a kubelet writes one for a static pod (pure)."""
    return process_mirror_pod(sidecar.name, node, node_uid, image=sidecar.image, identity=sidecar.user,
                              executable=executable, args=args, metrics_port=metrics_port, restartable=True)


def process_mirror_pod(component: str, node: str, node_uid: str, *, image: str, identity: str, executable: str,
                       args: list[str], metrics_port: int | None = None, restartable: bool = False) -> dict[str, Any]:
    """A mirror pod ``<component>-<node>`` in kube-system for a process the launcher runs on the host: one
    container named after the component with the real command line, host-network (it listens on the node's
    address, as a control-plane static pod does) and, with ``metrics_port``, the container port ``http-metrics``
    that the local Prometheus scrapes (pure). ``restartable``: a supervisor restarts the process when the pod is
    deleted (``localcluster.staticpod``), so the pod is marked ``csibench.io/host-process`` instead of as a static
    pod's mirror, whose deletion restarts nothing (the simulator's own pod is one)."""
    container: dict[str, Any] = {"name": component, "image": image, "command": [executable], "args": args}
    if metrics_port is not None:
        container["ports"] = [{"name": METRICS_PORT_NAME, "containerPort": metrics_port, "protocol": "TCP"}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{component}-{node}", "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": component, PART_OF_LABEL: PART_OF},
            "annotations": {**({HOST_PROCESS_ANNOTATION: component} if restartable else {
                "kubernetes.io/config.mirror": component, "kubernetes.io/config.source": "file"}),
                "csibench.io/identity": identity},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid,
                                 "controller": True}],
        },
        "spec": {
            "nodeName": node, "priorityClassName": "system-cluster-critical", "hostNetwork": True,
            "containers": [container],
        },
    }

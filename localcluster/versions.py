"""The one place where the local cluster's pinned versions live.

Every Go module the build recipe touches is pinned here, so a version bump is a one-line change and the binary
cache (keyed by these versions) never mixes builds.
"""

from dataclasses import dataclass
from typing import Final

KUBERNETES_VERSION: Final = "v1.36.3"
# Staging modules (k8s.io/api, k8s.io/client-go, ...) are published as v0.<minor>.<patch>.
KUBERNETES_STAGING_VERSION: Final = "v0.36.3"
ETCD_VERSION: Final = "v3.6.16"
# k8s.io/kubernetes >= 1.36 declares go 1.26; the machine's Go builds it without a toolchain download.
GO_TOOLCHAIN: Final = "local"

# The CSI spec whose csi.proto the simulated driver's gRPC stubs are generated from.
CSI_SPEC_MODULE: Final = "github.com/container-storage-interface/spec"
CSI_SPEC_VERSION: Final = "v1.12.0"


@dataclass(frozen=True)
class SidecarModule:
    """One upstream Go module of CSI sidecars and the commands built from it (``<module>/cmd/<command>``)."""

    name: str
    module: str
    version: str
    commands: tuple[str, ...]
    version_variable: str = "version"  # the variable the build stamps with the version
    version_package: str = "main"  # the package that declares it


PROVISIONER: Final = SidecarModule(
    "external-provisioner", "github.com/kubernetes-csi/external-provisioner/v6", "v6.4.0", ("csi-provisioner",))
ATTACHER: Final = SidecarModule(
    "external-attacher", "github.com/kubernetes-csi/external-attacher/v4", "v4.13.0", ("csi-attacher",))
SNAPSHOTTER: Final = SidecarModule(
    "external-snapshotter", "github.com/kubernetes-csi/external-snapshotter/v8", "v8.7.0",
    ("csi-snapshotter", "snapshot-controller"))
# The newest release the Go module proxy served on 2026-12-02 (v2.3.0; its go.mod asks for go 1.26.0).
RESIZER: Final = SidecarModule(
    "external-resizer", "github.com/kubernetes-csi/external-resizer/v2", "v2.3.0", ("csi-resizer",))
SIDECAR_MODULES: Final = (PROVISIONER, ATTACHER, SNAPSHOTTER, RESIZER)
# The CSI community's conformance suite (csi-sanity), run against the simulated driver; built like a sidecar. The
# Go module proxy served v5.4.0 and v5.6.0 on 2026-12-04.
CSI_TEST = SidecarModule("csi-test", "github.com/kubernetes-csi/csi-test/v5", "v5.6.0", ("csi-sanity",), "VERSION")
# Helm, for the chart's tests (charts/csibench: lint, template against deploy/, install into the local cluster); built
# like a sidecar (its module has no replaces). The Go module proxy served v4.3.2 (and v3.21.4) on 2026-12-04.
HELM = SidecarModule("helm", "helm.sh/helm/v4", "v4.3.2", ("helm",), "version", "helm.sh/helm/v4/internal/version")
# external-snapshotter replaces its client module with ./client; the build pins the published one instead.
SNAPSHOTTER_CLIENT_MODULE: Final = "github.com/kubernetes-csi/external-snapshotter/client/v8"

# Prometheus, built like the rest: Debian's package has no Kubernetes service discovery (removed by its packagers).
# Prometheus 3.x is published to the module proxy as v0.3xx.y; the newest on 2026-12-03 was v0.316.0 (3.16.0).
PROMETHEUS_VERSION: Final = "v3.16.0"
PROMETHEUS_MODULE: Final = "github.com/prometheus/prometheus"
PROMETHEUS_MODULE_VERSION: Final = "v0.316.0"
# Upstream's plugin build tags: the Kubernetes service discovery only, not every cloud's SDK (and no web UI assets,
# the API serves everything the cluster needs).
PROMETHEUS_BUILD_TAGS: Final = ("remove_all_sd", "enable_kubernetes_sd")

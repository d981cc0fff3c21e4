"""The one place where the local cluster's pinned versions live.

Every Go module the build recipe touches is pinned here, so a version bump is a one-line change and the binary
cache (keyed by these versions) never mixes builds.
"""

from typing import Final

KUBERNETES_VERSION: Final = "v1.36.3"
# Staging modules (k8s.io/api, k8s.io/client-go, ...) are published as v0.<minor>.<patch>.
KUBERNETES_STAGING_VERSION: Final = "v0.36.3"
ETCD_VERSION: Final = "v3.6.16"
# k8s.io/kubernetes >= 1.36 declares go 1.26; the machine's Go builds it without a toolchain download.
GO_TOOLCHAIN: Final = "local"

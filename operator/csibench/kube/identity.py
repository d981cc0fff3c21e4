"""Where the operator itself runs: its namespace is off limits to benchmark objects.

In a pod, the namespace comes from the downward API (``CSIBENCH_OPERATOR_NAMESPACE``) or the mounted service
account; outside a cluster (development, tests) it is the namespace the deploy manifests use.
"""

from __future__ import annotations

import os
from pathlib import Path

from csibench.api.validation import DEFAULT_OPERATOR_NAMESPACE

NAMESPACE_ENV = "CSIBENCH_OPERATOR_NAMESPACE"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def operator_namespace() -> str:
    configured = os.environ.get(NAMESPACE_ENV, "").strip()
    if configured:
        return configured
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_OPERATOR_NAMESPACE
    except OSError:
        return DEFAULT_OPERATOR_NAMESPACE

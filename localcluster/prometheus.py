"""The local cluster's Prometheus: its configuration, its RBAC and its command line (pure).

Why a real Prometheus: the operator reads what the CSI machinery cost during a run (CPU-seconds, resident
memory) from a Prometheus, as it would on a real cluster, so the local cluster runs one that finds its targets
the way a real one does, through ``kubernetes_sd_configs`` against the API server, and not from a static list.

Two jobs:

- ``csi-machinery``: the local cluster's mirror pods in ``kube-system`` (the five sidecars and the simulated
  driver, labelled ``app.kubernetes.io/part-of=csibench-localcluster``), one target per container port named
  ``http-metrics``. Every series gets ``namespace``, ``pod``, ``container`` and ``node``: the label names
  cAdvisor's ``container_*`` series carry on a real cluster, so one query by (namespace, pod, container) reads
  either source.
- ``csibench-operator``: the endpoints of the Service ``csibench-operator-metrics`` on its port ``metrics`` in any
  namespace, labelled as the prometheus-operator labels a ServiceMonitor's targets (``namespace``, ``pod``,
  ``container``, ``service``, ``endpoint``; see deploy/components/servicemonitor).

And, with ``scrape_control_plane`` (``localcluster up --scrape-control-plane``; the scale benches), two more:
``apiserver`` and ``kube-controller-manager``, the job names kube-prometheus gives them, so a query written here
reads a real cluster's too. They answer how the control plane bears a population: the API server's list latency
per kind (``apiserver_request_duration_seconds``), its objects (``apiserver_storage_objects``) and memory, the PV
controller's claim queue (``workqueue_depth{name="claims"}``). Off by default: the API server's /metrics is 2.6 MB of
text, 0.15 s to render, so they are scraped every 5 s and only the families kept below are stored. The
controller-manager serves a certificate it made itself, which kube-prometheus also scrapes without verifying.

The binary is upstream's, built from its Go module with only the Kubernetes service discovery
(``localcluster.build``): Debian's package has no Kubernetes service discovery at all.

Scrapes every second (the operator computes per-step CPU-seconds from these counters, and steps of a few seconds
need that resolution), over plain HTTP; only the service discovery talks to the API server, with a token of its
own (the ``prometheus`` identity in ``pki``) and the cluster's CA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

JOB_MACHINERY = "csi-machinery"
JOB_OPERATOR = "csibench-operator"
MACHINERY_NAMESPACE = "kube-system"
PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF = "csibench-localcluster"
METRICS_PORT_NAME = "http-metrics"  # the container port of every mirror pod that serves /metrics
OPERATOR_SERVICE = "csibench-operator-metrics"  # deploy/base/service.yaml
OPERATOR_PORT_NAME = "metrics"
OPERATOR_POD_LABEL = "app.kubernetes.io/name=csibench-operator"  # the Service's selector
USER = "csibench-prometheus"
CLUSTER_ROLE = "csibench-local-prometheus"
INTERVAL = "1s"
JOB_API_SERVER = "apiserver"
JOB_CONTROLLER_MANAGER = "kube-controller-manager"
CONTROL_PLANE_INTERVAL = "5s"
# The families stored of the control plane's: list latency, stored objects, queues, the processes' CPU and memory.
CONTROL_PLANE_FAMILIES = ("apiserver_request_duration_seconds_(bucket|sum|count)|apiserver_storage_objects|"
                          "apiserver_current_inflight_requests|workqueue_depth|workqueue_adds_total|"
                          "workqueue_work_duration_seconds_(sum|count)|"
                          "process_resident_memory_bytes|process_cpu_seconds_total")
RETENTION = "1d"


def _meta_label(label: str) -> str:
    """The meta label Prometheus makes of a Kubernetes label: every character outside [a-zA-Z0-9_] becomes ``_``."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in label)


def _copy(source: str, target: str) -> dict[str, Any]:
    return {"source_labels": [source], "target_label": target}


def control_plane_job(job: str, address: str, token_file: Path, ca_file: Path | None) -> dict[str, Any]:
    """A scrape job of one control-plane process at ``address`` (host:port, https, Prometheus's token): every 5 s,
    only CONTROL_PLANE_FAMILIES kept; ``ca_file`` None: its certificate is its own, not verified (pure)."""
    tls: dict[str, Any] = {"ca_file": str(ca_file)} if ca_file is not None else {"insecure_skip_verify": True}
    return {
        "job_name": job, "scheme": "https", "metrics_path": "/metrics",
        "scrape_interval": CONTROL_PLANE_INTERVAL, "scrape_timeout": CONTROL_PLANE_INTERVAL,
        "tls_config": tls, "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
        "static_configs": [{"targets": [address]}],
        "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": CONTROL_PLANE_FAMILIES,
                                    "action": "keep"}],
    }


def build_prometheus_config(api_server: str, ca_file: Path, token_file: Path,
                            controller_manager: str | None = None) -> dict[str, Any]:
    """The whole prometheus.yml as a dict: 1 s global intervals, the two jobs described above, and with
    ``controller_manager`` (its host:port) the control plane's two (pure)."""

    def discovery(role: str, selectors: list[dict[str, str]], namespaces: list[str] | None = None) -> dict[str, Any]:
        sd: dict[str, Any] = {
            "role": role, "api_server": api_server,
            "tls_config": {"ca_file": str(ca_file)},
            "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
            "selectors": selectors,
        }
        if namespaces is not None:
            sd["namespaces"] = {"names": namespaces}
        return sd

    part_of = f"{PART_OF_LABEL}={PART_OF}"
    machinery = {
        "job_name": JOB_MACHINERY,
        "scheme": "http", "metrics_path": "/metrics",
        # The label selector spares Prometheus every other kube-system pod; the keep rule says the same in full.
        "kubernetes_sd_configs": [discovery("pod", [{"role": "pod", "label": part_of}], [MACHINERY_NAMESPACE])],
        "relabel_configs": [
            {"source_labels": [f"__meta_kubernetes_pod_label_{_meta_label(PART_OF_LABEL)}",
                               "__meta_kubernetes_pod_container_port_name"],
             "regex": f"{PART_OF};{METRICS_PORT_NAME}", "action": "keep"},
            # The pod's IP, as for any pod: host-network pods (these are) report their node's address there.
            {"source_labels": ["__meta_kubernetes_pod_ip", "__meta_kubernetes_pod_container_port_number"],
             "regex": "(.+);(.+)", "replacement": "$1:$2", "target_label": "__address__"},
            _copy("__meta_kubernetes_namespace", "namespace"),
            _copy("__meta_kubernetes_pod_name", "pod"),
            _copy("__meta_kubernetes_pod_container_name", "container"),
            _copy("__meta_kubernetes_pod_node_name", "node"),
        ],
    }
    operator = {
        "job_name": JOB_OPERATOR,
        "scheme": "http", "metrics_path": "/metrics",
        "kubernetes_sd_configs": [discovery("endpointslice", [
            {"role": "endpointslice", "label": f"kubernetes.io/service-name={OPERATOR_SERVICE}"},
            {"role": "service", "field": f"metadata.name={OPERATOR_SERVICE}"},
            {"role": "pod", "label": OPERATOR_POD_LABEL},
        ])],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_service_name", "__meta_kubernetes_endpointslice_port_name"],
             "regex": f"{OPERATOR_SERVICE};{OPERATOR_PORT_NAME}", "action": "keep"},
            _copy("__meta_kubernetes_namespace", "namespace"),
            _copy("__meta_kubernetes_pod_name", "pod"),
            _copy("__meta_kubernetes_pod_container_name", "container"),
            _copy("__meta_kubernetes_service_name", "service"),
            _copy("__meta_kubernetes_endpointslice_port_name", "endpoint"),
        ],
    }
    control_plane = [] if controller_manager is None else [
        control_plane_job(JOB_API_SERVER, api_server.removeprefix("https://"), token_file, ca_file),
        control_plane_job(JOB_CONTROLLER_MANAGER, controller_manager, token_file, None)]
    return {
        "global": {"scrape_interval": INTERVAL, "scrape_timeout": INTERVAL, "evaluation_interval": INTERVAL},
        "scrape_configs": [machinery, operator, *control_plane],
    }


def command_args(config_file: Path, data_dir: Path, port: int) -> list[str]:
    """Prometheus's flags: its files, 127.0.0.1 only, one day of data at most 1 GB (a cluster lives hours)."""
    return [f"--config.file={config_file}", f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address=127.0.0.1:{port}", f"--storage.tsdb.retention.time={RETENTION}",
            "--storage.tsdb.retention.size=1GB"]


def rbac_objects(user: str = USER) -> list[dict[str, Any]]:
    """A ClusterRole for what the service discovery reads (pod, endpointslice and service informers, nodes), the
    control plane's /metrics, and its binding to Prometheus's token user (pure)."""
    verbs = ["get", "list", "watch"]
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": CLUSTER_ROLE},
         "rules": [{"apiGroups": [""], "resources": ["pods", "services", "endpoints", "nodes"], "verbs": verbs},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": verbs},
                   {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": CLUSTER_ROLE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ]


def up_targets(answer: dict[str, Any]) -> int:
    """How many series of an instant ``up{...}`` query's answer are 1 (pure)."""
    result = (answer.get("data") or {}).get("result") or []
    return sum(1 for series in result if (series.get("value") or [None, "0"])[1] == "1")


def target_problems(answer: dict[str, Any], job: str) -> list[str]:
    """``pod scrapeUrl: health (lastError)`` for each of the job's active targets that is not up, from
    ``/api/v1/targets`` (pure): what a failed start-up reports."""
    problems = []
    for target in (answer.get("data") or {}).get("activeTargets") or []:
        labels = target.get("labels") or {}
        if labels.get("job") != job or target.get("health") == "up":
            continue
        problems.append(f"{labels.get('pod', '?')} {target.get('scrapeUrl', '?')}: {target.get('health')} "
                        f"({target.get('lastError') or 'not scraped yet'})")
    return problems

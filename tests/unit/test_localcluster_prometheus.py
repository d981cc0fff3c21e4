"""The local cluster's Prometheus and the metrics endpoints it scrapes (pure, no cluster): the configuration and
its relabelling applied to the targets the service discovery would produce, the ports, the sidecars' and the
simulator's command lines, the mirror pods Prometheus discovers, its RBAC and the start-up wait's reading."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster import pki, prometheus, sidecars
from localcluster.kube import wait_until
from localcluster.launcher import REPO_ROOT, ClusterConfig, ClusterError, ClusterState, LocalCluster, ProcessRecord
from localcluster.simulator.__main__ import _host_port

API_SERVER = "https://127.0.0.1:19443"
CA, TOKEN = Path("/s/pki/ca.crt"), Path("/s/prometheus.token")


def config() -> dict[str, Any]:
    return prometheus.build_prometheus_config(API_SERVER, CA, TOKEN)


def job(name: str) -> dict[str, Any]:
    return next(j for j in config()["scrape_configs"] if j["job_name"] == name)


def relabel(rules: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str] | None:
    """Prometheus's relabelling (replace and keep, the actions the config uses) applied to ``labels``: the
    target's labels without the ``__meta_`` ones, or None when a keep rule drops it."""
    labels = dict(labels)
    for rule in rules:
        value = rule.get("separator", ";").join(labels.get(name, "") for name in rule["source_labels"])
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        if rule.get("action", "replace") == "keep":
            if match is None:
                return None
        elif match is not None:
            replacement = re.sub(r"\$(\d+)", r"\\\1", rule.get("replacement", "$1"))  # $1 -> \1
            labels[rule["target_label"]] = match.expand(replacement)
    return {k: v for k, v in labels.items() if not k.startswith("__meta_")}


def pod_target(pod: str, container: str, port_name: str, port: int, part_of: str = prometheus.PART_OF,
               ip: str = "127.0.1.1") -> dict[str, str]:
    """The labels Prometheus's pod discovery gives one container port of a pod."""
    return {"__address__": f"{ip}:{port}", "__meta_kubernetes_namespace": "kube-system",
            "__meta_kubernetes_pod_name": pod, "__meta_kubernetes_pod_ip": ip,
            "__meta_kubernetes_pod_host_ip": "127.0.1.1", "__meta_kubernetes_pod_node_name": "sim-node-0",
            "__meta_kubernetes_pod_label_app_kubernetes_io_part_of": part_of,
            "__meta_kubernetes_pod_container_name": container,
            "__meta_kubernetes_pod_container_port_name": port_name,
            "__meta_kubernetes_pod_container_port_number": str(port)}


def test_everything_is_scraped_every_second() -> None:
    assert config()["global"] == {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    assert [j["job_name"] for j in config()["scrape_configs"]] == ["csi-machinery", "csibench-operator"]


def test_discovery_talks_to_the_api_server_with_the_ca_and_a_token_and_scrapes_are_plain_http() -> None:
    for scrape in config()["scrape_configs"]:
        (sd,) = scrape["kubernetes_sd_configs"]
        assert sd["api_server"] == API_SERVER and sd["tls_config"] == {"ca_file": str(CA)}
        assert sd["authorization"] == {"type": "Bearer", "credentials_file": str(TOKEN)}
        assert scrape["scheme"] == "http" and scrape["metrics_path"] == "/metrics"
        assert not {"authorization", "tls_config", "bearer_token_file", "basic_auth"} & set(scrape)
    machinery, operator = (job("csi-machinery")["kubernetes_sd_configs"][0],
                           job("csibench-operator")["kubernetes_sd_configs"][0])
    assert machinery["role"] == "pod" and machinery["namespaces"] == {"names": ["kube-system"]}
    assert operator["role"] == "endpointslice" and "namespaces" not in operator  # any namespace
    # The config is YAML Prometheus reads: plain data, nothing Python-only.
    assert yaml.safe_load(yaml.safe_dump(config())) == config()


def test_a_mirror_pods_metrics_port_becomes_a_target_labelled_like_cadvisor_series() -> None:
    rules = job("csi-machinery")["relabel_configs"]
    target = relabel(rules, pod_target("csi-attacher-sim-node-0", "csi-attacher", "http-metrics", 19451))
    assert target == {"__address__": "127.0.1.1:19451", "namespace": "kube-system",
                      "pod": "csi-attacher-sim-node-0", "container": "csi-attacher", "node": "sim-node-0"}
    # The pod's IP, not its host's: where the pod listens.
    moved = relabel(rules, pod_target("csi-sim-driver-sim-node-0", "csi-sim-driver", "http-metrics", 19455,
                                      ip="10.0.0.7"))
    assert moved is not None and moved["__address__"] == "10.0.0.7:19455"


@pytest.mark.parametrize("target", [
    pod_target("csi-attacher-sim-node-0", "csi-attacher", "grpc", 19451),  # another port
    pod_target("coredns-1", "coredns", "http-metrics", 9153, part_of="dns"),  # not the local cluster's
])
def test_other_pods_and_ports_are_not_scraped(target: dict[str, str]) -> None:
    assert relabel(job("csi-machinery")["relabel_configs"], target) is None


def test_the_operator_is_found_through_its_metrics_service_as_a_servicemonitor_would() -> None:
    rules = job("csibench-operator")["relabel_configs"]
    endpoint = {"__address__": "10.1.0.5:8080", "__meta_kubernetes_namespace": "csibench-system",
                "__meta_kubernetes_service_name": "csibench-operator-metrics",
                "__meta_kubernetes_endpointslice_port_name": "metrics",
                "__meta_kubernetes_pod_name": "csibench-operator-7d9f", "__meta_kubernetes_pod_container_name":
                "operator"}
    assert relabel(rules, endpoint) == {
        "__address__": "10.1.0.5:8080", "namespace": "csibench-system", "pod": "csibench-operator-7d9f",
        "container": "operator", "service": "csibench-operator-metrics", "endpoint": "metrics"}
    assert relabel(rules, {**endpoint, "__meta_kubernetes_service_name": "other"}) is None
    assert relabel(rules, {**endpoint, "__meta_kubernetes_endpointslice_port_name": "health"}) is None
    # deploy/: the Service and port the job keeps.
    services = [doc for path in sorted((REPO_ROOT / "deploy").rglob("*.yaml"))
                for doc in yaml.safe_load_all(path.read_text()) if doc and doc.get("kind") == "Service"]
    assert [(s["metadata"]["name"], [p["name"] for p in s["spec"]["ports"]]) for s in services] == [
        (prometheus.OPERATOR_SERVICE, [prometheus.OPERATOR_PORT_NAME])]


def test_prometheus_command_line_keeps_it_on_loopback_with_a_day_of_data() -> None:
    args = prometheus.command_args(Path("/s/prometheus.yml"), Path("/s/prometheus"), 19449)
    assert args[:4] == ["--config.file=/s/prometheus.yml", "--storage.tsdb.path=/s/prometheus",
                        "--web.listen-address=127.0.0.1:19449", "--storage.tsdb.retention.time=1d"]


def test_prometheus_reads_discovery_objects_only_under_its_own_identity() -> None:
    role, binding = prometheus.rbac_objects()
    rules = {(group, resource): rule["verbs"] for rule in role["rules"] for group in rule.get("apiGroups", [])
             for resource in rule["resources"]}
    assert rules == {(group, resource): ["get", "list", "watch"] for group, resource in [
        ("", "pods"), ("", "services"), ("", "endpoints"), ("", "nodes"), ("discovery.k8s.io", "endpointslices")]}
    # ... and the control plane's metrics, read only (nothing else without an API group)
    assert [rule for rule in role["rules"] if "apiGroups" not in rule] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": pki.identity("prometheus").user}]
    assert pki.identity("prometheus").groups == ()  # nothing beyond that role


def test_ports_follow_the_api_port_and_none_is_shared() -> None:
    c = ClusterConfig(api_port=19443)
    assert c.prometheus_port == 19449 and c.prometheus_url == "http://127.0.0.1:19449"
    assert [c.sidecar_metrics_port(name) for name in sidecars.SIDECAR_NAMES] == list(range(19450, 19455))
    assert sidecars.SIDECAR_NAMES == ("csi-provisioner", "csi-attacher", "csi-snapshotter", "snapshot-controller",
                                      "csi-resizer")
    assert c.simulator_metrics_port == 19455 and c.metrics_host == "127.0.1.1"
    assert sorted(c.ports()) == list(range(19443, 19456))


def test_sidecars_and_the_simulator_serve_metrics_on_the_first_nodes_address(tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=19443,
                                         sidecar_flags={"csi-attacher": {"worker-threads": "20"}}))
    for index, sidecar in enumerate(sidecars.SIDECARS):
        _, args = cluster.sidecar_command(sidecar)
        assert [a for a in args if a.startswith("--http-endpoint")] == [f"--http-endpoint=127.0.1.1:{19450 + index}"]
        assert not any(a.startswith("--metrics-address") for a in args)  # the binaries refuse both
    _, args = cluster.simulator_command()
    assert "--metrics-address=127.0.1.1:19455" in args
    assert _host_port("127.0.1.1:19455") == ("127.0.1.1", 19455)


def node() -> dict[str, Any]:
    return {"metadata": {"name": "sim-node-0", "uid": "uid-0"}}


def test_mirror_pods_are_host_network_with_their_metrics_port(tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=19443))
    pods = {pod["metadata"]["name"]: pod for pod in cluster.mirror_pods(node())}
    assert set(pods) == {f"{name}-sim-node-0" for name in (*sidecars.SIDECAR_NAMES, "csi-sim-driver")}
    for name, pod in pods.items():
        (container,) = pod["spec"]["containers"]
        assert pod["spec"]["hostNetwork"] is True and pod["spec"]["nodeName"] == "sim-node-0"
        assert pod["metadata"]["labels"]["app.kubernetes.io/part-of"] == "csibench-localcluster"
        assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == container["name"]
        assert name == f"{container['name']}-sim-node-0"
        (port,) = container["ports"]
        assert port["name"] == "http-metrics" and port["protocol"] == "TCP"
        # The port the process listens on, from its own command line.
        endpoint = f"127.0.1.1:{port['containerPort']}"
        assert f"--http-endpoint={endpoint}" in container["args"] or f"--metrics-address={endpoint}" in \
            container["args"]
    driver = pods["csi-sim-driver-sim-node-0"]["spec"]["containers"][0]
    executable, args = cluster.simulator_command()
    assert driver["command"] == [executable] and driver["args"] == args


def test_a_reconfigured_sidecars_new_mirror_pod_keeps_its_port_and_host_network(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=19443))
    cluster._processes = [ProcessRecord("csi-attacher", 1, "/bin/csi-attacher", "/dev/null")]
    spawned: list[list[str]] = []
    monkeypatch.setattr(cluster, "exit_of", lambda record: "not running")
    monkeypatch.setattr(cluster, "_spawn", lambda name, executable, args, env=None: spawned.append(args))
    waited: list[tuple[str, str | None]] = []
    monkeypatch.setattr(cluster, "_sidecar_pod_uid", lambda sidecar: "old-uid")
    monkeypatch.setattr(cluster, "_wait_sidecar_pod", lambda sidecar, old_uid: waited.append((sidecar.name, old_uid)))
    cluster.reconfigure_sidecar("csi-attacher", {"timeout": "30s"})
    assert waited == [("csi-attacher", "old-uid")]  # returns once a new pod runs, as callers expect
    (args,) = spawned
    # The new supervisor gets the pod to register and the new command line, the same in both.
    pod_file = Path(next(a for a in args if a.startswith("--pod=")).removeprefix("--pod="))
    pod = json.loads(pod_file.read_text())
    container = pod["spec"]["containers"][0]
    assert args[:2] == ["-m", "localcluster.staticpod"] and args[args.index("--") + 1:] == [
        *container["command"], *container["args"]]
    assert pod["spec"]["hostNetwork"] is True
    assert container["ports"] == [{"name": "http-metrics", "containerPort": 19451, "protocol": "TCP"}]
    assert "--http-endpoint=127.0.1.1:19451" in container["args"] and container["args"][-1] == "--timeout=30s"


def test_status_and_env_name_the_prometheus_of_a_cluster_that_runs_one(tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=19443))
    assert "CSIBENCH_PROMETHEUS_URL" not in cluster.env() and cluster.status()["prometheus"] is None
    ClusterState(19443, "k", [ProcessRecord("prometheus", 2**22 + 1, "/bin/prometheus", "/dev/null")]).save(tmp_path)
    assert cluster.env().splitlines() == [f"export KUBECONFIG={tmp_path / 'admin.kubeconfig'}",
                                          "export CSIBENCH_PROMETHEUS_URL=http://127.0.0.1:19449"]
    assert cluster.status()["prometheus"] == "http://127.0.0.1:19449" == cluster.prometheus_url


def test_start_up_counts_targets_up_and_names_those_down() -> None:
    answer = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"job": "csi-machinery", "pod": "a"}, "value": [1.0, "1"]},
        {"metric": {"job": "csi-machinery", "pod": "b"}, "value": [1.0, "0"]}]}}
    assert prometheus.up_targets(answer) == 1 and prometheus.up_targets({}) == 0
    targets = {"data": {"activeTargets": [
        {"labels": {"job": "csi-machinery", "pod": "a"}, "health": "up", "scrapeUrl": "http://127.0.1.1:1/metrics"},
        {"labels": {"job": "csi-machinery", "pod": "b"}, "health": "down", "scrapeUrl": "http://127.2.0.1:2/metrics",
         "lastError": "connection refused"},
        {"labels": {"job": "csibench-operator", "pod": "c"}, "health": "down"}]}}
    assert prometheus.target_problems(targets, "csi-machinery") == [
        "b http://127.2.0.1:2/metrics: down (connection refused)"]


def _state_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]


def test_a_paused_component_is_stopped_inside_the_block_and_running_after_it_whatever_it_raised(
        tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterConfig(state_dir=tmp_path, api_port=19443))
    child = subprocess.Popen(["sleep", "60"])
    try:
        cluster._children[child.pid] = child
        cluster._processes = [ProcessRecord("etcd", child.pid, "sleep", "/dev/null")]
        # Signals are delivered asynchronously: the state is read until it shows them (a few ms).
        with pytest.raises(RuntimeError, match="inside"), cluster.paused("etcd"):
            wait_until(lambda: _state_of(child.pid) == "T", 5, "the process stopped")
            raise RuntimeError("inside")
        wait_until(lambda: _state_of(child.pid) in "SR", 5, "the process running again")
        with pytest.raises(ClusterError, match="kube-apiserver is not running"), cluster.paused("kube-apiserver"):
            pass
    finally:
        child.kill()
        child.wait()


def test_the_control_plane_is_scraped_only_when_asked_every_5_s_keeping_only_the_families_it_needs() -> None:
    assert [j["job_name"] for j in config()["scrape_configs"]] == [prometheus.JOB_MACHINERY, prometheus.JOB_OPERATOR]
    jobs = prometheus.build_prometheus_config(API_SERVER, CA, TOKEN, "127.0.0.1:19446")["scrape_configs"]
    api, manager = jobs[2:]
    assert (api["job_name"], manager["job_name"]) == ("apiserver", "kube-controller-manager")  # kube-prometheus's
    assert api["static_configs"] == [{"targets": ["127.0.0.1:19443"]}] and api["tls_config"] == {"ca_file": str(CA)}
    assert manager["static_configs"] == [{"targets": ["127.0.0.1:19446"]}]
    assert manager["tls_config"] == {"insecure_skip_verify": True}  # a certificate it made itself
    for scraped in (api, manager):
        assert scraped["scheme"] == "https" and scraped["scrape_interval"] == "5s"
        assert scraped["authorization"] == {"type": "Bearer", "credentials_file": str(TOKEN)}
        (keep,) = scraped["metric_relabel_configs"]
        kept = [name for name in ("apiserver_request_duration_seconds_bucket", "apiserver_storage_objects",
                                  "workqueue_depth", "process_resident_memory_bytes",
                                  "apiserver_request_duration_seconds_count",
                                  "apiserver_watch_events_sizes_bucket", "etcd_request_duration_seconds_bucket",
                                  "workqueue_depth_total") if re.fullmatch(keep["regex"], name)]
        assert keep["action"] == "keep" and kept == [
            "apiserver_request_duration_seconds_bucket", "apiserver_storage_objects", "workqueue_depth",
            "process_resident_memory_bytes", "apiserver_request_duration_seconds_count"]

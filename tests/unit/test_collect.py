"""spec.collect: the API's refusals, queries filled safely, readings over a window, the Prometheus client's errors,
and the engine asking a Prometheus (a real HTTP server on loopback) after each step of a run on the fake API."""

from __future__ import annotations

import asyncio
import math
import socket
import time

import pytest
from pydantic import ValidationError

from csibench.api.collect import MAX_COLLECTED_VALUES, Aggregation, CollectSpec
from csibench.api.crd import render_crd
from csibench.observe.collector import StepCollector, fair_shares
from csibench.observe.prometheus import Prometheus, PrometheusError, Series
from csibench.observe.queries import build_queries, escape_label_value
from csibench.observe.window import highest, increase, readings
from csibench.report.cost import machinery_table, summary_lines
from csibench.report.render import render_table
from tests.support.fake_kube import FakeKube
from tests.support.fake_prometheus import CPU_RATES, MEMORY, FakePrometheus
from tests.support.fake_runs import REF, run, spec


# -- the API ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query, problem", [
    ('up{job="$job"}', "unknown placeholder $job"),
    ("rate(x[1m])\x00", "control characters"),
])
def test_a_query_with_an_unknown_placeholder_or_control_characters_is_refused(query: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem.replace("$", r"\$")):
        CollectSpec.model_validate({"queries": [{"name": "mine", "query": query}]})


@pytest.mark.parametrize("url, ok", [
    ("http://prometheus.monitoring:9090", True), ("https://10.0.0.1/prom/", True), ("http://127.0.0.1:17449", True),
    ("http://user:secret@prometheus:9090", False), ("http://prometheus:9090/?query=up", False),
    ("ftp://prometheus", False), ("http://prom etheus", False), ("http://prometheus/#x", False),
])
def test_the_prometheus_url_is_an_http_url_without_user_query_or_fragment(url: str, ok: bool) -> None:
    if ok:
        assert CollectSpec.model_validate({"prometheusUrl": url}).prometheusUrl == url
    else:
        with pytest.raises(ValidationError):
            CollectSpec.model_validate({"prometheusUrl": url})


def test_profile_names_duplicates_and_components_are_refused() -> None:
    with pytest.raises(ValidationError, match="CSIMachinery profile's"):
        CollectSpec.model_validate({"queries": [{"name": "cpuSeconds", "query": "up"}]})
    assert CollectSpec.model_validate({"profile": "None", "queries": [{"name": "cpuSeconds", "query": "up"}]})
    with pytest.raises(ValidationError, match="unique: a"):
        CollectSpec.model_validate({"queries": [{"name": "a", "query": "up"}, {"name": "a", "query": "up"}]})
    with pytest.raises(ValidationError, match=r"components\.0"):
        CollectSpec.model_validate({"components": ["Driver|.*"]})


def test_the_crd_refuses_unknown_placeholders_and_profile_names_at_admission() -> None:
    text = render_crd("BenchmarkRun")
    assert "findAll('[$][A-Za-z_][A-Za-z0-9_]*')" in text
    assert "!self.queries.exists(q, q.name in ['cpuSeconds', 'peakMemoryBytes'])" in text


# -- queries -----------------------------------------------------------------------------------------------------
def test_placeholders_are_filled_with_escaped_label_values_and_a_regex_of_container_names() -> None:
    assert escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    collect = CollectSpec.model_validate({"components": ["hostpath"], "queries": [
        {"name": "mine", "query": 'x{run="$run", ns="$namespace", sc="$storageClass", c=~"$machinery"}',
         "aggregation": "Instant", "unit": "requests"}]})
    queries = build_queries(collect, 'ns/"odd"', "bench-ns", "fast", ["csi-provisioner", "ebs-plugin"])
    assert [q.name for q in queries] == ["cpuSeconds", "peakMemoryBytes", "mine"]
    assert queries[0].aggregation == Aggregation.INCREASE and queries[1].aggregation == Aggregation.MAX
    mine = queries[2].promql
    assert 'run="ns/\\"odd\\""' in mine and 'ns="bench-ns"' in mine and 'sc="fast"' in mine
    regex = mine.split('c=~"')[1].split('"')[0].split("|")
    assert {"hostpath", "ebs-plugin", "csi-provisioner", "csi-attacher", "snapshot-controller"} <= set(regex)
    assert "$" not in queries[0].promql and 'container=~"' in queries[0].promql
    none = build_queries(CollectSpec.model_validate({"profile": "None"}), "r", "n", "s", [])
    assert none == []


# -- readings over a window ------------------------------------------------------------------------------------
def test_increase_subtracts_per_series_reads_a_reset_and_leaves_out_a_series_missing_at_the_start() -> None:
    a, b, c = {"container": "a"}, {"container": "b"}, {"container": "c"}
    start = [Series(a, [(1.0, 10.0)]), Series(b, [(1.0, 50.0)])]
    end = [Series(a, [(9.0, 12.5)]), Series(b, [(9.0, 3.0)]), Series(c, [(9.0, 4.0)])]
    found, missing = increase(start, end)
    assert sorted((labels["container"], value) for labels, value in found) == [("a", 2.5), ("b", 3.0)]
    assert missing == 1
    assert highest([Series(a, [(1.0, 5.0), (2.0, 9.0), (3.0, 7.0)])]) == [(a, 9.0)]
    rated, count, left_out = readings("q", None, Aggregation.RATE, [(a, 3.0)], seconds=2.0, limit=48)
    assert rated[0].value == 1.5 and rated[0].labels == a and (count, left_out) == (1, [])
    overflowing, count, left_out = readings("q", None, Aggregation.RATE, [(a, 1e308), (b, 4.0)], seconds=0.01,
                                            limit=48)
    assert [v.labels for v in overflowing] == [b] and count == 1 and left_out == [math.inf]


# -- the client --------------------------------------------------------------------------------------------------
def test_the_client_tells_a_refused_query_from_an_unreachable_prometheus() -> None:
    with FakePrometheus() as prometheus:
        client = Prometheus(prometheus.url)
        with pytest.raises(PrometheusError) as refused:
            client.instant("sum(rate(x[1m])", 0)
        assert not refused.value.unreachable and "parse error" in str(refused.value)
        prometheus.down_for_queries = True
        with pytest.raises(PrometheusError) as down:
            client.instant("up", 0)
        assert down.value.unreachable and "503" in str(down.value)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with pytest.raises(PrometheusError) as unreachable:
        Prometheus(f"http://127.0.0.1:{closed}", timeout=2).instant("up", 0)
    assert unreachable.value.unreachable and "unreachable" in str(unreachable.value)


def test_a_collector_reads_each_component_over_the_window_and_counts_findings_per_step() -> None:
    collect = CollectSpec.model_validate({"queries": [
        {"name": "missing", "query": "nonexistent_metric_total", "aggregation": "Instant"},
        {"name": "broken", "query": "sum(rate(x[1m])"}]})
    with FakePrometheus() as prometheus:
        collector = StepCollector(Prometheus(prometheus.url), build_queries(collect, "r", "n", "s", []), 5.0)
        start = time.time() - 20.0
        first = asyncio.run(collector.collect("createVolume", start, start + 4.0))
        asyncio.run(collector.collect("publish", start + 5.0, start + 6.0))
        read_at = time.time()
    cpu = {v.labels["container"]: v.value for v in first.values if v.query == "cpuSeconds"}
    # The window ends once Prometheus scraped past the step's stop: here at once, so "now" (after start + 4).
    assert first.start < first.end
    for container, rate in CPU_RATES.items():
        assert rate * 19.9 < cpu[container] < rate * (read_at - start + 0.1)
    peak = {v.labels["container"]: v.value for v in first.values if v.query == "peakMemoryBytes"}
    assert peak == {container: MEMORY[container] + 1024 for container in MEMORY}
    findings = {f.check: f for f in collector.findings.listed()}
    assert set(findings) == {"QueryEmpty", "QueryRefused"}
    assert findings["QueryEmpty"].facts == {"query": "missing", "firstStep": "createVolume", "steps": "2"}
    assert "parse error" in findings["QueryRefused"].message


# -- the engine ---------------------------------------------------------------------------------------------------
def test_a_run_collects_after_every_step_into_status_metrics_and_the_report() -> None:
    with FakePrometheus() as prometheus:
        status = run(FakeKube(), spec(collect={"prometheusUrl": prometheus.url}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert status.collection == []
    for step in status.steps:
        assert step.collection is not None, step.name
        cpu = {v.labels["container"]: v.value for v in step.collection.values if v.query == "cpuSeconds"}
        assert set(cpu) == set(CPU_RATES) and all(value > 0 for value in cpu.values())
        assert step.startTime is not None and step.collection.start[:19] == step.startTime[:19]
    document = {"metadata": {"namespace": REF.namespace, "name": REF.name},
                "spec": {"storageClassName": "sim"}, "status": status.model_dump(mode="json")}
    table = machinery_table(document)
    assert table is not None and table[1][0][:2] == ["createVolume", "csi-provisioner"]
    assert summary_lines(document)[0].startswith("machinery cost createVolume: csi-provisioner ")
    assert "CSI machinery cost per step (Prometheus)" in render_table(document)


def test_a_prometheus_that_is_down_is_a_finding_and_the_run_succeeds() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    status = run(FakeKube(), spec(collect={"prometheusUrl": f"http://127.0.0.1:{closed}"}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [f.check for f in status.collection] == ["PrometheusUnreachable"]
    assert status.collection[0].facts["steps"] == str(len(status.steps))
    assert all(step.collection is not None and step.collection.values == [] for step in status.steps)


def test_collect_without_any_prometheus_url_says_so_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CSIBENCH_PROMETHEUS_URL", raising=False)
    status = run(FakeKube(), spec(collect={}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [f.check for f in status.collection] == ["NoPrometheus"]
    assert all(step.collection is None for step in status.steps)


def test_a_finished_runs_collected_series_come_back_after_an_operator_restart() -> None:
    from prometheus_client import REGISTRY, generate_latest

    from csibench.engine.report_store import restore_run_metrics
    from csibench.metrics import METRICS

    status = {"steps": [{"name": "createVolume", "collection": {
        "start": "2026-12-03T18:00:00.000Z", "end": "2026-12-03T18:00:05.000Z",
        "values": [{"query": "cpuSeconds", "labels": {"container": "csi-provisioner"}, "value": 1.25,
                    "unit": "CPU-s"}]}}]}
    restore_run_metrics("ns/restored", "sim", status, None)
    text = generate_latest(REGISTRY).decode()
    assert ('csibench_step_collected{component="csi-provisioner",query="cpuSeconds",run="ns/restored",'
            'step="createVolume"} 1.25') in text
    METRICS.forget_run("ns/restored")
    assert 'run="ns/restored"' not in generate_latest(REGISTRY).decode()


def test_replicas_of_a_component_are_summed_in_the_metric_not_overwritten() -> None:
    from prometheus_client import REGISTRY, generate_latest

    from csibench.api.collect import CollectedValue, StepCollection
    from csibench.engine.collection import record_metrics
    from csibench.metrics import METRICS

    values = [CollectedValue(query="cpuSeconds", labels={"container": "csi-provisioner", "pod": pod}, value=value)
              for pod, value in (("leader", 12.0), ("standby", 0.5))]
    record_metrics("ns/ha", "createVolume", StepCollection(start="s", end="e", values=values))
    assert ('csibench_step_collected{component="csi-provisioner",query="cpuSeconds",run="ns/ha",'
            'step="createVolume"} 12.5') in generate_latest(REGISTRY).decode()
    METRICS.forget_run("ns/ha")


def test_a_redirect_is_refused_not_followed() -> None:
    import http.server
    import threading

    class Redirect(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(PrometheusError, match="HTTP 302"):
            Prometheus(f"http://127.0.0.1:{server.server_address[1]}").instant("up", 0)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("wanted", "shares"), [
    ([10, 10, 1, 1, 1, 4], [10, 10, 1, 1, 1, 4]),  # everything fits: each keeps all it read
    ([30, 30, 1, 1, 1, 4], [20, 21, 1, 1, 1, 4]),  # the small ones' room goes to the two large ones
    ([100, 0], [48, 0]),
    ([], []),
])
def test_the_values_room_goes_where_series_are_and_no_query_is_cut_below_an_equal_share(
        wanted: list[int], shares: list[int]) -> None:
    assert fair_shares(wanted, MAX_COLLECTED_VALUES) == shares
    assert sum(shares) <= MAX_COLLECTED_VALUES

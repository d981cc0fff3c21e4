"""spec.collect against a Prometheus URL that answers anything: every answer is a finding or a value, never an
exception out of a step; what it says is bounded before status holds it; a server that never finishes costs a step
a bounded time; metadata addresses are refused. Each run here goes through the real engine on the fake API."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import ValidationError

import csibench.observe.collector as collector_module
import csibench.observe.prometheus as prometheus_module
from csibench.api.collect import CollectSpec, forbidden_prometheus_host
from csibench.api.models import BenchmarkRunStatus
from csibench.cli import main
from csibench.observe.prometheus import ADDRESS_REFUSED, MALFORMED, Prometheus, PrometheusError, parse_answer
from tests.support.fake_kube import MAX_OBJECT_BYTES, FakeKube
from tests.support.fake_runs import run, spec
from tests.support.hostile_prometheus import HostilePrometheus, vector

TWO_STEPS = ["createVolume", "deleteVolume"]


def collect_run(prometheus: HostilePrometheus, **collect: object) -> BenchmarkRunStatus:
    status = run(FakeKube(), spec(steps=TWO_STEPS, collect={"prometheusUrl": prometheus.url, "profile": "None",
                                                            "queries": [{"name": "mine", "query": "x_total"}],
                                                            **collect}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    return status


@pytest.mark.parametrize(("body", "shape"), [
    (b"[]", "the answer is a list, not an object"),
    (b"null", "the answer is null, not an object"),
    (b'{"status": "success", "data": null}', "data is null"),
    (b'{"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "2"]}]}}',
     "data.result[0] has no 'metric'"),
    (b'{"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}', "not a list"),
    (b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "x"]}]}}',
     "data.result[0].value[1] is 'x', not a number"),
    (b'{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": [], "values": []}]}}',
     "data.result[0].metric is a list"),
    (b'{"status": "success", "data": {"resultType": "histogram"}}', "data.resultType is 'histogram'"),
    (b'{"status": "maybe"}', "status is 'maybe'"),
    (b"\xff\xfe not json", "not JSON"),
    (b"[" * 100000, "not JSON"),
    (b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, 1'
     + b"0" * 400 + b']}]}}', "data.result[0].value[1] is 1000"),
])
def test_an_answer_of_any_shape_is_a_finding_naming_the_shape_and_the_run_succeeds(body: bytes, shape: str) -> None:
    with pytest.raises(PrometheusError) as raised:
        parse_answer(body)
    assert raised.value.check == MALFORMED and shape in str(raised.value)
    with HostilePrometheus(body) as prometheus:
        status = collect_run(prometheus)
    finding = {f.check: f for f in status.collection}[MALFORMED]
    assert shape in finding.message and finding.facts["steps"] == "2"


def test_a_refusal_with_two_megabytes_of_text_is_a_short_finding() -> None:
    error = {"status": "error", "errorType": "bad_data", "error": "parse error: " + "x" * 2_000_000}
    with HostilePrometheus(json.dumps(error).encode(), code=422) as prometheus:
        status = collect_run(prometheus)
    refused = {f.check: f for f in status.collection}["QueryRefused"]
    assert refused.message.startswith("mine: bad_data: parse error:") and len(refused.message) <= 600
    assert len(status.model_dump_json()) < 64 * 1024


def test_series_with_huge_labels_are_kept_shortened_and_said() -> None:
    """48 series, each with 8 labels of 9 KB: 3.3 MB that status once tried to hold (the API server refuses a body
    over 3 MiB, etcd an object over 1.5 MiB), and every status write failed."""
    items = [{"metric": {f"label{n}": f"{series}-" + "v" * 9_000 for n in range(8)}, "value": [time.time(), "1"]}
             for series in range(48)]
    with HostilePrometheus(vector(*items)) as prometheus:
        status = collect_run(prometheus, queries=[{"name": "mine", "query": "x", "aggregation": "Instant"}])
    assert {f.check for f in status.collection} == {"LabelsCut"}
    values = status.steps[0].collection.values if status.steps[0].collection else []
    assert values and all(len(value) <= 256 for v in values for value in v.labels.values())
    assert len(status.model_dump_json()) < MAX_OBJECT_BYTES // 4


def test_an_infinite_or_nan_reading_is_a_finding_not_a_value() -> None:
    items = [{"metric": {"container": "a"}, "value": [time.time(), "+Inf"]},
             {"metric": {"container": "b"}, "value": [time.time(), "NaN"]},
             {"metric": {"container": "c"}, "value": [time.time(), "3"]}]
    with HostilePrometheus(vector(*items)) as prometheus:
        status = collect_run(prometheus, queries=[{"name": "mine", "query": "x", "aggregation": "Instant"}])
    finding = {f.check: f for f in status.collection}["NonFiniteValue"]
    assert "2 series read inf, nan" in finding.message
    values = status.steps[0].collection.values if status.steps[0].collection else []
    assert [(v.labels, v.value) for v in values] == [({"container": "c"}, 3.0)]


def test_a_prometheus_that_never_finishes_an_answer_costs_each_step_a_bounded_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A byte every half second: each read is quick, the answer never whole. Before the total deadline the run
    stayed in its first step for ever."""
    monkeypatch.setattr(prometheus_module, "QUERY_DEADLINE_SECONDS", 1.0)
    monkeypatch.setattr(collector_module, "QUERY_ALLOWANCE_SECONDS", 2.0)
    with HostilePrometheus(vector({"metric": {}, "value": [1, "1"]}) * 10, drip_seconds=0.5,
                           hostile_settle=True) as prometheus:
        status = collect_run(prometheus, settleTimeoutSeconds=1)
    finding = {f.check: f for f in status.collection}["PrometheusTooSlow"]
    assert "no whole answer within 1.0 s" in finding.message and finding.facts["steps"] == "2"


def test_the_step_budget_stops_asking_and_names_the_queries_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settle wait takes the whole budget (a Prometheus that never finishes its answer): nothing is asked."""
    monkeypatch.setattr(collector_module, "QUERY_ALLOWANCE_SECONDS", 0.0)
    with HostilePrometheus(vector({"metric": {}, "value": [1, "1"]}) * 10, drip_seconds=0.5,
                           hostile_settle=True) as prometheus:
        status = collect_run(prometheus, settleTimeoutSeconds=1,
                             queries=[{"name": "first", "query": "a"}, {"name": "second", "query": "b"}])
    over = {f.check: f for f in status.collection}["CollectionOverBudget"]
    assert "not asked: first, second" in over.message


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data", "http://2852039166/", "http://0xa9fea9fe/",
    "http://169.254.43518/", "http://metadata.google.internal/", "http://100.100.100.200/", "http://METADATA:80/",
])
def test_metadata_and_link_local_urls_are_refused_in_every_spelling(url: str) -> None:
    assert forbidden_prometheus_host(url) is not None
    with pytest.raises(ValidationError, match=r"link-local|metadata"):
        CollectSpec.model_validate({"prometheusUrl": url})


def test_ordinary_urls_are_not_taken_for_metadata_addresses() -> None:
    for url in ("http://prometheus.monitoring:9090", "http://10.0.0.100/", "http://127.0.0.1:17449",
                "https://prom01.example.com/prom"):
        assert forbidden_prometheus_host(url) is None, url


def test_the_client_refuses_a_link_local_address_unless_the_operator_allows_it() -> None:
    with pytest.raises(PrometheusError) as refused:
        Prometheus("http://169.254.169.254:9").instant("up", 0)
    assert refused.value.check == ADDRESS_REFUSED and "--allow-link-local-prometheus" in str(refused.value)
    with pytest.raises(PrometheusError) as tried:  # allowed: it connects (nothing listens there, so it fails)
        Prometheus("http://169.254.169.254:9", timeout=0.2, deadline=0.5, allow_link_local=True).instant("up", 0)
    assert tried.value.check != ADDRESS_REFUSED


def test_the_operator_flag_refuses_a_metadata_prometheus_without_its_allow_flag(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["operator", "--prometheus-url", "http://169.254.169.254/"]) == 2
    assert "--allow-link-local-prometheus" in capsys.readouterr().err


def test_an_answer_over_the_size_bound_is_a_finding_not_parsed() -> None:
    """Parsed JSON takes about 30 times its bytes: a 32 MiB answer once grew the operator by 0.9 GiB."""
    items = [{"metric": {"container": f"c{n}"}, "value": [1, "1"]} for n in range(160_000)]  # about 6 MiB
    with HostilePrometheus(vector(*items)) as prometheus:
        status = collect_run(prometheus, queries=[{"name": "mine", "query": "x", "aggregation": "Instant"}])
    finding = {f.check: f for f in status.collection}["AnswerTooLarge"]
    assert "larger than 4 MiB" in finding.message


def test_a_name_is_tried_at_each_of_its_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dual-stack name whose first address refuses (nothing on ::1) is asked at the next, as urllib did."""
    import socket

    with HostilePrometheus(vector({"metric": {"container": "a"}, "value": [1, "2"]})) as prometheus:
        port = int(prometheus.url.rsplit(":", 1)[1])
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
            closed = probe.getsockname()[1]
        answers = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", closed, 0, 0)),
                   (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: answers)
        series = Prometheus(f"http://prometheus.example:{port}").instant("x", 0)
    assert [s.labels for s in series] == [{"container": "a"}]


@pytest.mark.parametrize(("url", "refused"), [
    ("http://169.254.169.254/latest", True), ("http://METADATA.GOOGLE.INTERNAL/", True), ("http://metadata/", True),
    ("http://metadata.google.internal./", True), ("http://2852039166/", True), ("http://0xa9fea9fe/", True),
    ("http://0251.0376.0251.0376/", True), ("http://169.254.43518/", True), ("http://10.0.0.1./", True),
    ("http://metadata.monitoring:9090", False), ("http://instance-data.example.com/", False),
    ("http://0xcafe.example.com/", False), ("http://10.0.0.100:9090/prom", False), ("http://0.0.0.0:9090", False),
    ("http://prometheus-0.monitoring:9090", False), ("http://127.0.0.1:17449", False),
])
def test_the_crd_rules_refuse_metadata_and_numeric_spellings_but_not_names_that_start_alike(url: str,
                                                                                           refused: bool) -> None:
    """The CEL rules read with Python's re (RE2 agrees on these constructs; the integration test asks the API
    server for a few): a Service named metadata.monitoring is not the metadata service."""
    import re

    from csibench.api.collect import PROMETHEUS_URL_RULES

    def holds(rule: str) -> bool:  # the rules are !m(a) or !m(a) || m(b)
        found = re.findall(r"matches\('([^']*)'\)", rule)
        matched = {pattern: re.search(pattern, url) is not None for pattern in found}
        patterns = list(matched)
        if rule.startswith("!") and "||" in rule:
            return not matched[patterns[0]] or matched[patterns[1]]
        return not matched[patterns[0]]
    assert (not all(holds(rule) for rule, _ in PROMETHEUS_URL_RULES)) == refused


def test_a_port_out_of_range_is_refused_by_the_models() -> None:
    for url in ("http://prometheus:99999", "http://prometheus:0"):
        with pytest.raises(ValidationError, match="port"):
            CollectSpec.model_validate({"prometheusUrl": url})


@pytest.mark.parametrize("address", ["fd20:ce::254", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1", "::ffff:a9fe:a9fe",
                                     "fe80::1"])
def test_metadata_addresses_inside_ipv6_are_refused(address: str) -> None:
    from csibench.api.collect import forbidden_address

    assert forbidden_address(address)
    assert not forbidden_address("2001:db8::1") and not forbidden_address("64:ff9b::a00:1")

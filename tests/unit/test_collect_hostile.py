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
    """48 series, each with 8 labels of 60 KB: 23 MB that once made every status write fail with 413."""
    items = [{"metric": {f"label{n}": f"{series}-" + "v" * 60_000 for n in range(8)}, "value": [time.time(), "1"]}
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
    assert "no whole answer within 1 s" in finding.message and finding.facts["steps"] == "2"


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

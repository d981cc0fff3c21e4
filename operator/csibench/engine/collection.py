"""spec.collect in a run: which Prometheus, which queries, and the readings after each step into status and metrics.

The Prometheus URL is the run's (spec.collect.prometheusUrl) or the operator's (``--prometheus-url``, which sets
``CSIBENCH_PROMETHEUS_URL``); with neither, the run says so once in status.collection and collects nothing. The
machinery the profile costs includes the containers the preflight found serving the class.
"""

from __future__ import annotations

import os

from csibench.api.collect import PROMETHEUS_ALLOW_LINK_LOCAL_ENV, PROMETHEUS_URL_ENV, CollectedValue, StepCollection
from csibench.api.models import BenchmarkRunSpec, Environment, Finding, Severity
from csibench.metrics import METRICS
from csibench.observe.collector import StepCollector
from csibench.observe.prometheus import Prometheus
from csibench.observe.queries import build_queries


def prometheus_url(spec: BenchmarkRunSpec) -> str | None:
    if spec.collect is None:
        return None
    return spec.collect.prometheusUrl or os.environ.get(PROMETHEUS_URL_ENV) or None


def may_ask_link_local(spec: BenchmarkRunSpec) -> bool:
    """Only the operator's own URL, and only when its flag says so."""
    return (spec.collect is not None and not spec.collect.prometheusUrl
            and os.environ.get(PROMETHEUS_ALLOW_LINK_LOCAL_ENV) == "true")


def build_collector(spec: BenchmarkRunSpec, run: str, namespace: str, environment: Environment,
                    saved: list[Finding]) -> StepCollector | None:
    """The run's collector, or None when the run collects nothing; ``saved``: findings of an earlier process."""
    if spec.collect is None:
        return None
    url = prometheus_url(spec)
    machinery = environment.machinery
    found = [component.container for component in machinery.components] if machinery else []
    prometheus = Prometheus(url or "", allow_link_local=may_ask_link_local(spec))
    collector = StepCollector(prometheus, build_queries(spec.collect, run, namespace, spec.storageClassName, found),
                              float(spec.collect.settleTimeoutSeconds))
    collector.findings.merge_saved(saved)
    if url is None and not any(f.check == "NoPrometheus" for f in saved):
        collector.findings.add("NoPrometheus", Severity.WARNING, "*", "-",
                               "spec.collect is set but no Prometheus URL is known: set spec.collect.prometheusUrl "
                               "or the operator's --prometheus-url")
    if url is None:
        collector.enabled = False
    return collector


def component_of(value: CollectedValue) -> str:
    """How metrics name a series: its container label, else its labels as name=value pairs (pure)."""
    return value.labels.get("container") or ",".join(f"{k}={v}" for k, v in value.labels.items()) or "all"


def record_metrics(run: str, step: str, collection: StepCollection) -> None:
    """One series per step, query and component: replicas of a component (an HA provisioner, a DaemonSet's
    driver) are summed, not overwritten by the last one read."""
    summed: dict[tuple[str, str], float] = {}
    for value in collection.values:
        key = (value.query, component_of(value))
        summed[key] = summed.get(key, 0.0) + value.value
    METRICS.record_collection(run, step, [(query, component, value) for (query, component), value in summed.items()])

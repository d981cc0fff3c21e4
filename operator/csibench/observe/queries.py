"""The queries a run evaluates per step: the CSI machinery profile's and the run's own, placeholders filled (pure).

The profile costs containers of the CSI machinery by (namespace, pod, container): on a real cluster from cAdvisor's
``container_cpu_usage_seconds_total`` / ``container_memory_working_set_bytes``, and where the components are scraped
themselves (the local cluster) from their own ``process_cpu_seconds_total`` / ``process_resident_memory_bytes``
labelled the same way; ``or`` takes the first that has the series, so one profile serves both. Which containers:
the usual sidecar names, the ones the preflight found serving the class, and ``spec.collect.components``.

Placeholders are filled with escaped text: label values inside a PromQL string (backslash, quote and newline
escaped) and a regular expression of DNS labels (which need no escaping, and are checked to be labels anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from csibench.api import validation as v
from csibench.api.collect import (
    DEFAULT_MACHINERY,
    PLACEHOLDER,
    PROFILE_QUERY_NAMES,
    Aggregation,
    CollectProfile,
    CollectSpec,
)

CPU_QUERY = ('sum by (namespace, pod, container) (container_cpu_usage_seconds_total{container=~"$machinery"}) or '
             'sum by (namespace, pod, container) (process_cpu_seconds_total{container=~"$machinery"})')
MEMORY_QUERY = ('sum by (namespace, pod, container) (container_memory_working_set_bytes{container=~"$machinery"}) '
                'or sum by (namespace, pod, container) (process_resident_memory_bytes{container=~"$machinery"})')
CPU_NAME, MEMORY_NAME = PROFILE_QUERY_NAMES


@dataclass(frozen=True)
class Query:
    name: str
    promql: str
    aggregation: Aggregation
    unit: str | None


def escape_label_value(value: str) -> str:
    """Text safe inside a PromQL double-quoted string (pure)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def machinery_regex(containers: list[str]) -> str:
    names = sorted({name for name in containers if v.is_dns_label(name)})
    return "|".join(names) if names else "csibench-none"


def fill(promql: str, values: dict[str, str]) -> str:
    """Replace each known ``$name`` by its value (pure; the API refused unknown names before a run started)."""
    return PLACEHOLDER.sub(lambda match: values.get(match.group(1), match.group(0)), promql)


def build_queries(spec: CollectSpec, run: str, namespace: str, storage_class: str,
                  found_containers: list[str]) -> list[Query]:
    """The profile's queries then the run's own, with placeholders filled (pure)."""
    values = {"run": escape_label_value(run), "namespace": escape_label_value(namespace),
              "storageClass": escape_label_value(storage_class),
              "machinery": machinery_regex([*DEFAULT_MACHINERY, *found_containers, *spec.components])}
    queries = []
    if spec.profile == CollectProfile.CSI_MACHINERY:
        queries += [Query(CPU_NAME, fill(CPU_QUERY, values), Aggregation.INCREASE, "CPU-s"),
                    Query(MEMORY_NAME, fill(MEMORY_QUERY, values), Aggregation.MAX, "bytes")]
    queries += [Query(q.name, fill(q.query, values), q.aggregation, q.unit) for q in spec.queries]
    return queries

"""Prometheus samples read from the operator's /metrics text, for the integration tests."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str, metric: str, **labels: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of ``metric`` whose labels include ``labels``."""
    found = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == metric and all(sample.labels.get(k) == v for k, v in labels.items()):
                found.append((sample.labels, sample.value))
    return found

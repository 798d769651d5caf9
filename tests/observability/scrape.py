"""Reading ``/metrics`` as Prometheus does: parsed with ``prometheus_client.parser``."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Samples", "deltas", "parse", "scrape"]

Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, keyed by name and sorted labels."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def scrape(client: httpx.Client) -> Samples:
    """GET /metrics (must answer 200 in the text format) and parse it."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def deltas(before: Mapping[tuple[str, Labels], float], after: Samples) -> Samples:
    """The samples that changed, by how much (a sample absent before counts from 0)."""
    changed: Samples = {}
    for key, value in after.items():
        delta = value - before.get(key, 0.0)
        if delta:
            changed[key] = delta
    return changed

"""Scraping the trainer's metrics endpoint in tests: prometheus_client's own text parser reads it,
and the documented series are the table of trainer/README.md."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.support.paths import REPO_ROOT


def documented_series(readme=REPO_ROOT / "trainer" / "README.md") -> list[str]:
    """The series names of the table under the README's "Metrics endpoint" heading."""
    section = readme.read_text().split("## Metrics endpoint", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(jax_training_\w+)` \|", section, re.M)


def families(url: str, timeout: float = 10) -> dict:
    """The metric families an endpoint serves, by name."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def scrape(url: str, timeout: float = 10) -> dict[str, float]:
    """Every sample an endpoint serves, by name."""
    return {s.name: s.value for family in families(url, timeout).values() for s in family.samples}

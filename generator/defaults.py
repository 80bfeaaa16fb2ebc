"""The default of every variable: charts/jax-training/values.yaml, read as Helm reads it. Its own
module, importing no rule, so that an engine's rules may read a default (values.py imports the rules)."""

from __future__ import annotations

import copy
from functools import lru_cache

from . import yaml_text
from .paths import VALUES_FILE


@lru_cache(maxsize=1)
def _defaults() -> dict:
    return yaml_text.load(VALUES_FILE.read_text())


def defaults() -> dict:
    """The defaults of charts/jax-training/values.yaml (a fresh copy)."""
    return copy.deepcopy(_defaults())

"""The engines, one package per engine family, and the one place that picks one: the target row's
`engine` (generator/targets.py) names the package. Each package is an engines.base.Engine: what the
commands (render, check, run, status, list, logs) ask of it."""

from __future__ import annotations

from .. import targets
from . import kubernetes, slurm
from .base import Engine

ENGINES: dict[str, Engine] = {"kubernetes": kubernetes, "slurm": slurm}


def engine_of(values_or_name) -> Engine:
    """The engine of a target (a name, or variables naming one)."""
    return ENGINES[targets.target(values_or_name).engine]


def errors(values: dict) -> list[str]:
    """The rules of the target's engine, beyond the schema and generator/checks.py."""
    return engine_of(values).errors(values)


def warnings(values: dict) -> list[str]:
    """What the target's engine says valid values still lose."""
    return engine_of(values).warnings(values)

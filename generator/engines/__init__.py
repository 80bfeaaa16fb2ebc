"""The engines, one package per engine family, and the one place that picks one: the target row's
`engine` (generator/targets.py) names the package. Each package is an engines.base.Engine: what the
commands (render, check, run, status, list, logs) ask of it."""

from __future__ import annotations

import dataclasses

from .. import targets
from . import kubernetes, slurm
from .base import Engine

ENGINES: dict[str, Engine] = {"kubernetes": kubernetes, "slurm": slurm}


def engine_of(values_or_name) -> Engine:
    """The engine of a target (a name, or variables naming one)."""
    return ENGINES[targets.target(values_or_name).engine]


def selected(**flags: bool) -> Engine:
    """The engine a command's flag names (--slurm: slurm=True), else the target table's first (Kubernetes)."""
    named = [name for name, on in flags.items() if on]
    return ENGINES[named[0] if named else targets.ENGINES[0]]


def options(engine: Engine, **given):
    """The engine's own options object from a command's options: those it has, the rest left out."""
    return engine.Options(**{field.name: given[field.name] for field in dataclasses.fields(engine.Options)
                             if field.name in given})


def errors(values: dict) -> list[str]:
    """The rules of the target's engine, beyond the schema and generator/checks.py."""
    return engine_of(values).errors(values)


def warnings(values: dict) -> list[str]:
    """What the target's engine says valid values still lose."""
    return engine_of(values).warnings(values)

"""The renderers, one package per engine family, and the one place that picks one: the target row's
`engine` (generator/targets.py) names the package. Each package offers the same functions:
render_text(values), files(values, fmt), stream(values, fmt) and errors(values) (its own rules), and
in its jobs module what `jaxgen status|list|logs` ask of it (generator/job_commands.py): status(name),
jobs() and logs(name, rank, follow, echo), in generator/job_status.py's terms."""

from __future__ import annotations

from types import ModuleType

from .. import targets
from . import kubernetes, slurm

ENGINES = {"kubernetes": kubernetes, "slurm": slurm}


def engine_of(values_or_name) -> ModuleType:
    """The renderer of a target (a name, or variables naming one)."""
    return ENGINES[targets.target(values_or_name).engine]


def errors(values: dict) -> list[str]:
    """The rules of the target's engine, beyond the schema and generator/checks.py."""
    return engine_of(values).errors(values)

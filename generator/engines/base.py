"""What a command asks of an engine. Each package under engines/ is one Engine (its module offers these
functions) and the dispatcher (engines/__init__.py) picks it; the commands import nothing else of it
(tests/generator/test_import_graph.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from ..job_status import JobStatus


@runtime_checkable
class Jobs(Protocol):
    """An engine's jobs where they run (`jaxgen status|list|logs`). Raises errors.Unreachable when it
    cannot be asked, UserError for no such job."""

    def status(self, name: str) -> JobStatus: ...

    def jobs(self) -> list[JobStatus]: ...

    def logs(self, name: str, rank: int, follow: bool, echo: Callable[[str], None]) -> int: ...


@runtime_checkable
class Engine(Protocol):
    """One engine family: renders the variables of its targets, holds their rules, and reaches their jobs
    where its own options (its Options: a Kubernetes cluster's kubeconfig, context and namespace; none
    for SLURM) point."""

    Options: Callable[..., Any]  # a dataclass of this engine's options (engines.options builds one)

    def render_text(self, values: dict) -> str:
        """The render as one text (YAML documents, or the sbatch script)."""

    def files(self, values: dict, fmt: str) -> dict[str, str]:
        """The render as files (name: text) for `jaxgen render -o DIR`."""

    def stream(self, values: dict, fmt: str) -> str:
        """The render for stdout, in `fmt` (yaml or json)."""

    def errors(self, values: dict) -> list[str]:
        """This engine's rules beyond generator/checks.py's, each as "$.json.path: message"."""

    def warnings(self, values: dict) -> list[str]:
        """What valid values still lose on this engine (one line each)."""

    def release_files(self, values: dict) -> dict[str, str]:
        """What scripts/prepare.sh keeps beside the render, in release/ (`jaxgen render --release`)."""

    def check(self, values: dict, options) -> tuple[list[str], list[str], list[str], str]:
        """`jaxgen check`: (what is there, what is missing as one line each, what may go wrong as one
        line each, where it asked)."""

    def jobs_at(self, options) -> Jobs:
        """The jobs of this engine where the options point."""

    def run_local(self, values: dict, kept: Path | None, work_dir: str | None, keep: bool) -> int:
        """`jaxgen run`: the job on this machine; its exit code. kept: the outputs folder (None: keep nothing)."""

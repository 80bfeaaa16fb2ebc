"""The SLURM engine (an engines.base.Engine): an sbatch script (templates/slurm.sbatch.j2), the rules of
its values, and the jobs squeue and sacct know."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import UserError
from ...output import release_record as release_files
from .checks import slurm_errors as errors
from .render import files, render_sbatch as render_text, stream

__all__ = ["Options", "check", "errors", "files", "jobs_at", "release_files", "render_text", "run_local", "stream",
           "warnings"]


def warnings(values: dict) -> list[str]:
    return []


@dataclass(frozen=True)
class Options:
    """None: squeue and sacct ask the cluster this machine is a client of."""


def check(values: dict, options: Options) -> tuple[list[str], list[str], list[str], str]:
    raise UserError(f"target {values['target']}: jaxgen check asks a Kubernetes cluster; a SLURM script is "
                    "checked by sbatch --test-only")


def jobs_at(options: Options):
    from . import jobs

    return jobs


def run_local(values: dict, kept: Path | None, work_dir: str | None, keep: bool) -> int:
    raise UserError(f"target: {values['target']!r} cannot run locally")

"""`jaxgen results DIR`: the result of a finished run, from its outputs directory (trainer/outputs.py):
the summary lines, and curves.png drawn from its metrics. `jaxgen run` and scripts/run.sh end with it."""

from __future__ import annotations

from pathlib import Path

import click

from trainer import outputs

from .errors import UserError
from .plot import number_text, curves, draw, read_records

NOT_FINISHED = 1  # the directory holds no summary: the run did not finish (or is still running)


def find_run(path: Path) -> Path:
    """`path` itself when it is an outputs directory, else the one outputs directory inside it."""
    if not path.is_dir():
        raise UserError(f"{path}: no such directory")
    if (path / outputs.METRICS).exists() or (path / outputs.RUN_FILE).exists():
        return path
    inside = sorted(p.parent for p in path.glob(f"*/{outputs.RUN_FILE}"))
    if len(inside) == 1:
        return inside[0]
    what = "no" if not inside else f"{len(inside)}"
    raise UserError(f"{path}: {what} job outputs directories (with {outputs.RUN_FILE} or {outputs.METRICS}) in it"
                    + ("; name one of them" if inside else ""))


def draw_curves(directory: Path) -> Path | None:
    """curves.png from the run's metrics; None when there is nothing to draw (no metrics, or a run
    stopped before its first logged step), or why not on stderr when it cannot be drawn."""
    metrics = directory / outputs.METRICS
    if not metrics.exists():
        return None
    records = read_records(metrics)
    if not any(curves(records)):
        return None
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        click.echo("note: no curves.png: matplotlib is not installed (pip install 'jax-training[plot]')", err=True)
        return None
    target = directory / outputs.CURVES
    draw(records, target, directory.name)
    return target


def report(directory: Path, resume_hint: str | None = None) -> int:
    """Print the run's result and where everything is; the exit code is 0 for a finished run."""
    directory = find_run(directory)
    try:
        draw_curves(directory)
    except UserError as e:  # the result is still the result: the curves are an extra
        click.echo(f"note: no {outputs.CURVES}: {e}", err=True)
    summary = outputs.read_summary(directory)
    if summary is None:
        try:
            records = read_records(directory / outputs.METRICS) if (directory / outputs.METRICS).exists() else []
        except UserError:  # said above
            records = []
        steps = [r["step"] for r in records if r.get("event") in ("step", "end", "preempted")
                 and isinstance(r.get("step"), int) and not isinstance(r["step"], bool)]
        where = f"its last record is step {number_text(steps[-1])}" if steps else "it recorded no step"
        click.echo(f"{directory}: the run did not finish ({outputs.SUMMARY} is missing; {where})")
        return NOT_FINISHED
    for line in outputs.describe(summary, directory):
        click.echo(line)
    if resume_hint:
        click.echo(f"  resume:   {resume_hint}")
    return 0


@click.command("results")
@click.argument("directory", type=click.Path(path_type=Path))
def results_command(directory):
    """Print a finished run's result from its outputs DIRECTORY (<checkpoint.dir>/<name>, or a
    folder holding one) and draw its curves.png. Exit 1 if the run did not finish, 2 on bad input."""
    raise SystemExit(report(directory))

"""`jaxgen results DIR`: the result of a finished run, from its outputs directory (trainer/outputs.py):
the summary lines, and curves.png drawn from its metrics; for a job's folder of runs
(generator/runstore/runs.py), their history first. `jaxgen run` and scripts/run.sh end with it."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from trainer import outputs
from trainer.extras import missing

from . import bucket
from .errors import UserError, printable
from .options import Integer, NonEmptyPath
from .plot import number_text, curves, draw, read_metrics, read_records
from .runstore import runs

NOT_FINISHED = 1  # the directory holds no summary: the run did not finish (or is still running)


def _is_run(path: Path) -> bool:
    return (path / outputs.METRICS).exists() or (path / outputs.RUN_FILE).exists() or (path / runs.RECORD).exists()


def find_run(path: Path) -> Path:
    """`path` itself when it is a run's outputs directory or a job's folder of runs (generator/runstore/runs.py),
    else the one of them inside it."""
    if not path.is_dir():
        raise UserError(f"{path}: " + ("not a directory" if path.exists() else "no such directory"))
    if _is_run(path) or runs.is_job_folder(path):
        return path
    inside = sorted(p for p in path.iterdir() if p.is_dir() and (_is_run(p) or runs.is_job_folder(p)))
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
    if problem := missing("matplotlib", "plot", "curves.png"):
        click.echo(f"note: no curves.png: {problem}", err=True)
        return None
    target = directory / outputs.CURVES
    draw(records, target, directory.name)
    return target


def say(line: str, err: bool = False) -> None:
    """A line of a result: the folder's name and what the run wrote (a summary's fields) are the job's
    choice, so what is not printable is shown escaped (printable())."""
    click.echo(printable(line), err=err)


def report(directory: Path, resume_hint: str | None = None) -> int:
    """Print the run's result and where everything is; the exit code is 0 for a finished run. For a
    job's folder of runs: one line per run, then the result of the newest finished one."""
    directory = find_run(directory)
    if not _is_run(directory) and runs.is_job_folder(directory):
        for line in runs.history(directory):
            say(line)
        newest = runs.latest(directory)
        if newest is None:
            say(f"{directory}: no run of this job has finished")
            return NOT_FINISHED
        say(f"latest ({newest.name}):")
        directory = newest
    try:
        draw_curves(directory)
    except UserError as e:  # the result is still the result: the curves are an extra
        say(f"note: no {outputs.CURVES}: {e}", err=True)
    summary = outputs.read_summary(directory)
    if summary is None:
        record = runs.read_record(directory)
        if record.get("exit_code"):
            say(f"{directory}: the run {record.get('status', 'failed')} with exit code {record['exit_code']}")
            return NOT_FINISHED
        try:
            last = read_metrics(directory / outputs.METRICS)[1] if (directory / outputs.METRICS).exists() else None
        except UserError:  # said above
            last = None
        where = f"its last record is step {number_text(last)}" if last is not None else "it recorded no step"
        state = "is not a summary" if (directory / outputs.SUMMARY).exists() else "is missing"
        say(f"{directory}: the run did not finish ({outputs.SUMMARY} {state}; {where})")
        return NOT_FINISHED
    for line in outputs.describe(summary, directory):
        say(line)
    if resume_hint:
        say(f"  resume:   {resume_hint}")
    return 0


@click.command("results")
@click.argument("directory", type=NonEmptyPath())
@click.option("--endpoint", metavar="URL", help="with s3://…: the S3-compatible server (outputs.endpoint; default: "
                                                "AWS S3, or $AWS_ENDPOINT_URL)")
@click.option("--into", metavar="DIR", type=NonEmptyPath(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="with s3://…: where the fetched run is kept, as DIR/NAME/<run id>")
def results_command(directory, endpoint, into):
    """Print a finished run's result from its outputs DIRECTORY and draw its curves.png.

    DIRECTORY is a job's folder of runs (<outputs>/<name>: one line per run, id, status, test
    accuracy and wall time, then the newest finished run's result), one run of it
    (<outputs>/<name>/<run id>), a job's outputs directory (<checkpoint.dir>/<name>), or a folder
    holding one of these. Or a job's outputs in its bucket, s3://BUCKET/PREFIX/NAME (outputs.uri
    and the job's name): fetched without the checkpoints into a run of --into/NAME first.
    Exit 1 if the run did not finish, 2 on bad input."""
    if bucket.is_uri(directory):
        raise SystemExit(report(fetch_run(directory, into, endpoint)))
    raise SystemExit(report(Path(directory)))


def fetch_run(uri: str, into: Path, endpoint: str | None) -> Path:
    """A job's outputs in its bucket, fetched into a new run of the job folder into/NAME; returns the folder."""
    found = bucket.find(uri, endpoint)  # before anything is written here
    for warning in found.warnings():
        click.echo(f"warning: {warning}", err=True)
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    folder = into / name
    with runs.locked(folder, name):
        part = into / f".{name}.fetching"
        if part.is_symlink():  # rmtree refuses a link, and the fetch would write where it points
            part.unlink()
        shutil.rmtree(part, ignore_errors=True)
        try:
            count = bucket.fetch(found, part)
            click.echo(f"fetched {count} files of {printable(uri.rstrip('/'))} (without its checkpoints)")
            finished = outputs.read_summary(part) is not None
            runs.keep(part, folder, "finished" if finished else "unfinished", 0)
        finally:
            shutil.rmtree(part, ignore_errors=True)
    return folder


@click.command("keep-run", hidden=True)
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--exit-code", type=Integer(), default=0)
def keep_run_command(source, folder, exit_code):
    """Move SOURCE (a run's results, fetched by scripts/run.sh) into the job FOLDER as a run of its
    own, and print its result (or, when it failed, the job's history of runs)."""
    status = "finished" if exit_code == 0 else "failed"
    with runs.locked(folder, folder.name):
        run = runs.keep(source, folder, status, exit_code)
    if status == "finished":
        raise SystemExit(report(run))
    for line in runs.history(folder):  # never another run's result block
        say(line)
    say(f"{run}: the run failed with exit code {exit_code}: no result")
    raise SystemExit(NOT_FINISHED)

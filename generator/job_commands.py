"""`jaxgen status NAME`, `jaxgen logs NAME`, `jaxgen list`: the jobs of this project where they run.

The commands know no engine: they pick one by option (a Kubernetes cluster by default, `--slurm`,
`--local`) and ask it for JobStatus objects (generator/job_status.py) or a rank's log. Exit codes:
0 shown; 2 bad input (an invalid name or namespace, no such job); 3 the cluster or scheduler cannot be asked
(no kubectl or squeue, no context, the API server does not answer)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import click

from .engines.kubernetes.policy import DNS_LABEL_MAX
from .errors import Unreachable, UserError, printable
from .options import Integer, NonEmptyPath
from .runstore.runs import DEFAULT_OUTPUTS

EXIT_INVALID, EXIT_UNREACHABLE = 2, 3
DNS_LABEL = re.compile(rf"^[a-z0-9]([-a-z0-9]{{0,{DNS_LABEL_MAX - 2}}}[a-z0-9])?$")  # every job name, a namespace
DNS_LABEL_RULE = (f"lowercase letters, digits and '-', at most {DNS_LABEL_MAX} characters, starting and ending with "
                  "a letter or digit")


def _check_namespace(ctx, param, namespace: str | None) -> str | None:
    """Refused before any cluster is asked; '' is the context's namespace, as kubectl takes it."""
    if namespace and not DNS_LABEL.fullmatch(namespace):
        raise UserError(f"-n/--namespace: {namespace!r} is not a namespace ({DNS_LABEL_RULE})")
    return namespace


def _where(command):
    """--context, --namespace (Kubernetes, as kubectl takes them; KUBECONFIG is kubectl's), --slurm,
    --local and --outputs."""
    options = [
        click.option("--context", metavar="CONTEXT", help="The kubeconfig context (default: the current one)."),
        click.option("-n", "--namespace", metavar="NS", callback=_check_namespace,
                     help="The namespace (default: the context's)."),
        click.option("--slurm", is_flag=True, help="A SLURM job (squeue, sacct) instead of a Kubernetes one."),
        click.option("--local", is_flag=True, help="A run of `jaxgen run` on this machine, under --outputs."),
        click.option("--outputs", "outputs_dir", type=NonEmptyPath(file_okay=False, path_type=Path),
                     default=DEFAULT_OUTPUTS, show_default=True, help="With --local: the outputs folder of `jaxgen run`."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def jobs_where(context, namespace, slurm, local, outputs_dir):
    """The jobs the options name (engines.base.Jobs): a Kubernetes cluster by default, SLURM, or this
    machine's runs."""
    from . import engines

    if slurm and local:
        raise UserError("--slurm and --local: choose one")
    if local:
        from .runstore.local import LocalJobs

        return LocalJobs(outputs_dir)
    engine = engines.selected(slurm=slurm)
    return engine.jobs_at(engines.options(engine, context=context, namespace=namespace))


def _check_name(name: str) -> str:
    if not DNS_LABEL.fullmatch(name):  # fullmatch: `$` alone lets a trailing newline through
        raise UserError(f"NAME: {name!r} is not a job name ({DNS_LABEL_RULE})")
    return name


def _run(body) -> None:
    """One line on stderr and the documented exit code for a problem, never a traceback."""
    try:
        body()
    except Unreachable as error:
        click.echo(printable(f"error: {error}"), err=True)
        sys.exit(EXIT_UNREACHABLE)
    except UserError as error:
        click.echo(printable(f"error: {error}"), err=True)
        sys.exit(EXIT_INVALID)
    except KeyboardInterrupt:
        sys.exit(130)


def _show(render, watch: float | None) -> None:
    """render() once, or again every `watch` seconds (the screen cleared on a terminal) until ^C."""
    while True:
        text = render()
        if watch and sys.stdout.isatty():
            click.clear()
        click.echo(text)
        if not watch:
            return
        time.sleep(watch)


_output = click.option("-o", "--output", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
MAX_WATCH_SECONDS = 86400


def _watch_seconds(ctx, param, value):
    """A finite interval above 0 (time.sleep fails on NaN, infinity or a negative, and 0 would spin)."""
    if value is not None and not 0 < value <= MAX_WATCH_SECONDS:  # NaN fails here too
        raise click.BadParameter(f"{value:g} is not a number of seconds above 0 and at most {MAX_WATCH_SECONDS}")
    return value


_watch = click.option("-w", "--watch", type=float, is_flag=False, flag_value=5.0, default=None, metavar="[SECONDS]",
                      callback=_watch_seconds,
                      help="Show it again every SECONDS (5 when not given) until interrupted.")


@click.command("status")
@click.argument("name")
@_where
@_output
@_watch
def status_command(name, context, namespace, slurm, local, outputs_dir, fmt, watch):
    """Show job NAME: phase, step/total and epoch, ETA, last loss and accuracy, last checkpoint,
    restarts, queue state and where the results are.

    Reads what the target has: the job object's conditions and pods, Kueue's Workload, a TrainJob's
    trainerStatus and process 0's metrics endpoint through the API server's pod proxy; squeue and
    sacct with --slurm; the outputs folder with --local. Exit 2 for an invalid name or namespace or no
    such job, 3 when the cluster or scheduler cannot be asked."""
    from .job_status import strict_json

    def body():
        _check_name(name)
        engine = jobs_where(context, namespace, slurm, local, outputs_dir)

        def render():
            found = engine.status(name)
            return strict_json(found.as_json()) if fmt == "json" else "\n".join(found.lines())

        _show(render, watch)

    _run(body)


@click.command("list")
@_where
@_output
@_watch
def list_command(context, namespace, slurm, local, outputs_dir, fmt, watch):
    """List every job of this project in the namespace (of each kind of the target table), the SLURM
    queue (--slurm) or the outputs folder (--local), with phase and progress. Exit codes as status."""
    from .job_status import strict_json, table

    def body():
        engine = jobs_where(context, namespace, slurm, local, outputs_dir)

        def render():
            found = engine.jobs()
            if fmt == "json":
                return strict_json([j.as_json() for j in found])
            return "\n".join(table(found)) if found else "no jobs of this project"

        _show(render, watch)

    _run(body)


@click.command("logs")
@click.argument("name")
@click.option("--rank", type=Integer(min=0), default=0, show_default=True, help="The process whose log to show.")
@click.option("-f/--no-follow", "--follow", "follow", default=True, show_default=True,
              help="Follow the log until the job ends, through restarts (a replaced pod's successor).")
@_where
def logs_command(name, rank, follow, context, namespace, slurm, local, outputs_dir):
    """Print the log of rank 0 of job NAME (or --rank N), following it across restarts. Exit codes as status."""
    def body():
        _check_name(name)
        engine = jobs_where(context, namespace, slurm, local, outputs_dir)
        engine.logs(name, rank, follow, click.echo)

    _run(body)

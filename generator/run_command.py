"""`jaxgen run FILE`: the job on this machine, run by the target's engine (a Kubernetes target's pod
spec as local processes: generator/engines/kubernetes/local/)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from trainer.extras import missing

from .errors import UserError
from .options import NonEmptyPath, variables_files, variables_options
from .runstore.runs import DEFAULT_OUTPUTS
from .targets import LOCAL as LOCAL_TARGETS


@click.command("run")
@variables_options(LOCAL_TARGETS)
@click.option("--local", "local", is_flag=True, hidden=True, help="Run on this machine (the default and only mode).")
@click.option("--outputs", "outputs_dir", type=NonEmptyPath(file_okay=False, path_type=Path), default=DEFAULT_OUTPUTS,
              show_default=True, help="Where the job's results are kept (<outputs>/<name>/<run id>: model, metrics, "
                                      "summary, curves; <outputs>/<name>/latest: the newest finished run) and its "
                                      "claims live (<outputs>/claims/<claim>).")
@click.option("--discard", is_flag=True, help="Keep nothing: claims and results go with the scratch directory.")
@click.option("--work-dir", type=NonEmptyPath(file_okay=False),
              help="Scratch directory, kept; the processes' scratch folders in it (the render's emptyDir volumes) "
                   "are new with each run and go at its end (--keep keeps them).")
@click.option("--keep", is_flag=True, help="Keep the scratch directory (the processes' scratch folders).")
def run_command(file, extra_files, sets, set_strings, set_jsons, target, local, outputs_dir, discard, work_dir, keep):
    """Run FILE's job as hosts_count processes on this machine (`--local` is accepted and changes nothing).

    Each process gets the rendered container's command, args and env, with the coordinator at
    127.0.0.1 and local_device_count CPU devices. A failure restarts all processes up to
    backoff_limit times (jobset.max_restarts for jobset); a permanent error (exit 2, 3, 5, 6) fails
    at once, and a stop signal's 143 or a lost peer's 141 is not counted. Restarted processes get
    new emptyDir volumes, as new pods would; a persistentVolumeClaim (persistence.enabled) lives in
    OUTPUTS/claims and outlives the run.

    Every run keeps its results in a folder of its own, OUTPUTS/<name>/<run id>, and
    OUTPUTS/<name>/latest points at the newest one that finished: a rerun, or a rerun that fails,
    never replaces earlier results (`jaxgen results OUTPUTS/<name>` lists them). A second run of a
    job that is still running is refused at once with exit code 75; the processes die with jaxgen
    (a SIGKILL included) and hold the job's lock while they live. Otherwise the exit code is the
    job's.
    """
    del local  # accepted for scripts written for earlier versions; running here is the only mode
    from .engines import engine_of
    from .values import load_values

    values = load_values(variables_files(file, extra_files), sets, target, set_jsons=set_jsons, set_strings=set_strings)
    if values["target"] not in LOCAL_TARGETS:
        raise UserError(f"target: {values['target']!r} cannot run locally; use one of {', '.join(LOCAL_TARGETS)}")
    if not values["program"]["command"] and (problem := missing("jax", "trainer", "jaxgen run (the built-in trainer)")):
        raise UserError(problem)
    kept = None
    if not discard:
        try:
            kept = outputs_dir.resolve()
        except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop, before Python 3.13
            raise UserError(f"--outputs {outputs_dir}: cannot keep the job's results there: "
                            f"{getattr(error, 'strerror', None) or error}") from None
    sys.exit(engine_of(values).run_local(values, kept, work_dir, keep))

"""`jaxgen run`'s work on the Kubernetes engine: the job rendered as for the cluster, its pods run as
local processes (plan.py) under supervision (supervise.py), stop signals trapped (signals.py), and the
results kept in a run folder of their own (collect.py, through generator/runstore/)."""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from trainer import contract

from ....errors import UserError
from ....runstore import runs
from ....runstore.intake import RunRecord
from ....targets import restart_budget
from ..render import render_documents
from .collect import finish, outputs_of
from .plan import local_values, plan_job
from .signals import Stopped, trap_stop_signals
from .supervise import Runner


def run_local(values: dict, kept: Path | None, work_dir: str | None, keep: bool) -> int:
    """Run the job of `values` on this machine and return its exit code. kept: the outputs folder
    (None: keep nothing); work_dir: the scratch directory (default: a new temporary one)."""
    docs = render_documents(local_values(values))
    folder = kept / values["name"] if kept else None
    with runs.locked(folder, values["name"]) if folder else nullcontext() as lock:
        if folder:
            runs.remove_stale_staging(folder)
            runs.adopt_unversioned(folder)
        return _run(values, docs, kept, work_dir, keep, lock)


def _run(values: dict, docs: list[dict], kept: Path | None, work_dir: str | None, keep: bool,
         lock: int | None) -> int:
    started = time.time()
    record = RunRecord(kept / values["name"], runs.new_run_id(started), started) if kept else None
    try:
        run_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix=f"jaxgen-{values['name']}-"))
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file, a device, a folder that cannot be made or written
        where = f"--work-dir {work_dir}" if work_dir else f"the temporary folder {tempfile.gettempdir()}"
        raise UserError(f"{where}: cannot hold the scratch directory: {error.strerror or error}") from None
    job = runner = None
    try:  # from here on, whatever happens, the work dir goes (unless kept) and no process outlives us
        job = plan_job(values, docs, run_dir, kept / "claims" if kept else None)
        if record:
            runs.note_outputs(record.folder, outputs_of(job))  # `jaxgen status --local` follows it there
        deadline = values.get("active_deadline_seconds")
        # the processes hold the job's lock too: a killed jaxgen's processes still refuse a second run
        runner = Runner(job, restart_budget(values), time.monotonic() + deadline if deadline else None,
                        inherited=(lock,) if lock is not None else (), log_dir=record.log_dir if record else None)
        previous = trap_stop_signals(runner)
        try:
            runner.say(f"{values['target']} {values['name']}: {len(job.plans)} processes x "
                       f"{values['local_device_count']} CPU devices, scratch {run_dir}"
                       + (f", results in {record.path}" if record else ""))
            if job.metrics_port:
                runner.say(f"metrics of process 0: http://127.0.0.1:{job.metrics_port}{contract.METRICS_PATH}")
            code = runner.run()
        except Stopped as stop:
            runner.say(f"{stop}: stopping every process (again to kill them at once)")
            runner.stop_all()
            code = 128 + stop.signum
        finally:
            runner.stop_all()  # nothing left running after an error either (a no-op once all exited)
            # The end is decided and nothing is left to stop: a late stop signal must not kill jaxgen while
            # it keeps the results or exits (the interpreter's shutdown resets Python handlers, not an ignore).
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
        runner.logs.close()
        finish(job, values["name"], record, code, runner.say)
    finally:
        if keep:
            if runner:
                runner.say(f"kept the scratch directory {run_dir}")
        elif work_dir:  # the user's folder stays: what the run made in it goes, as the pods' volumes would
            removed = _remove_scratch(job, discard=kept is None)
            if runner and removed:
                runner.say(f"removed the processes' scratch folders{' and claims' if kept is None else ''} from {run_dir} "
                           "(--keep keeps them)")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    return code


def _remove_scratch(job, discard: bool) -> bool:
    """Remove from a --work-dir what the run made there: the emptyDir volumes (and the folder of each
    pod, once empty), with --discard the claims too; whether there was anything."""
    if job is None:
        return False
    made = list(job.pod_dirs) + ([job.claims_dir] if discard and job.claims_dir.parent == job.run_dir else [])
    for directory in made:
        shutil.rmtree(directory, ignore_errors=True)
    for pod in {directory.parent for directory in job.pod_dirs if directory.parent.parent == job.run_dir}:
        try:
            pod.rmdir()
        except OSError:  # not empty: something of the user's is there too
            pass
    return bool(made)

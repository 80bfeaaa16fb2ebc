"""`jaxgen run --local FILE`: run a rendered Kubernetes job as local processes.

The target's pod spec is rendered exactly as for the cluster; its container's command, args and
env are run as hosts_count processes on this machine: the coordinator becomes 127.0.0.1 and a
free port, the completion index / process id is filled in per process, volumes become local
directories, process 0 serves its metrics on a free port (the others none: they share this
machine), and a failure of any process restarts all of them, as the rendered failure policy
would (trainer/exit_codes.py): a permanent error fails the job at once, a stop signal's 143 and a
lost peer's 141 restart it without using the restart budget, other failures use it. The exit code
is the job's result.

Volumes live as long as on a cluster: an emptyDir is per pod and emptied when the pods restart (so
a restart with the default checkpoint volume starts over, as it would in a cluster); a
PersistentVolumeClaim is a directory under the outputs folder that outlives the run (a rerun
resumes from it). At the end, the job's outputs (model, metrics, summary) are collected from
process 0's checkpoint volume into <outputs>/<name>/, as scripts/run.sh fetches them from a
cluster, and their summary is printed (`jaxgen results`).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import click

from trainer import contract, exit_codes, outputs
from trainer.config import EPHEMERAL_OUTPUTS_ENV, FROM_VARIABLES_ENV, fields_named, flag
from trainer.contract import PROCESS_ENV
from trainer.extras import missing
from trainer.fencing import ATTEMPT_ENV

from . import confined
from .errors import UserError
from .options import variables_files, variables_options
from .names import hostname
from .runs import new_run_id
from .targets import LOCAL as LOCAL_TARGETS, Target, restart_budget, target as target_of, workload

# Variables of the surrounding shell that would change how the trainer resolves its ClusterSpec.
CLUSTER_VARIABLES = (*PROCESS_ENV, "JAX_PLATFORMS", "XLA_FLAGS")
CHECKPOINTS_VOLUME = "checkpoints"  # the volume at checkpoint.dir (engines/kubernetes's volume_mounts)
DEFAULT_OUTPUTS = "jax-training-outputs"
METRICS_FLAG = flag(*fields_named("metrics_port"))  # the built-in trainer's
CHECKPOINT_DIR_FLAG, RUN_NAME_FLAG = map(flag, fields_named("checkpoint_dir", "run_name"))
DEFAULT_GRACE_SECONDS = 30.0  # Kubernetes' default terminationGracePeriodSeconds
SETTLE_SECONDS = 2.0  # after a lost peer's exit, how long to look for the failure that caused it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pod_spec(docs: list[dict], target: str) -> dict:
    """The worker pod spec of the rendered manifests of `target`."""
    w = workload(target)
    node = next((d for d in docs if d.get("kind") == w.kind), None)
    if node is None:
        raise UserError(f"the {target} render holds no {w.kind}")
    for key in w.pod_spec_path:
        node = node[key]
    return node


@dataclass
class ProcessPlan:
    rank: int
    name: str
    argv: list[str]
    env: dict[str, str]


@dataclass
class LocalJob:
    """What to run: one plan per process, and the directories standing in for volumes."""

    plans: list[ProcessPlan]
    run_dir: Path
    target: Target | None = None  # its engine's variables are set again with each attempt's port
    volume_dirs: dict[str, dict[int, Path]] = field(default_factory=dict)
    # emptyDir volumes: emptied when the pods restart
    pod_dirs: list[Path] = field(default_factory=list)
    # SIGTERM, then SIGKILL after this long (the pod's terminationGracePeriodSeconds)
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    metrics_port: int = 0  # where process 0 serves its metrics on this machine (0: nowhere)


def _volume_dir(volume: dict, rank: int, run_dir: Path, claims: Path) -> Path:
    name = volume["name"]
    if "hostPath" in volume:
        return Path(volume["hostPath"]["path"])
    if "emptyDir" in volume:
        return run_dir / f"rank-{rank}" / name  # per pod, like an emptyDir
    if "persistentVolumeClaim" in volume:
        # shared by all pods; validation allows only object names, and the path is kept under `claims`
        path = claims / volume["persistentVolumeClaim"]["claimName"]
        if os.path.normpath(path).startswith(str(claims) + os.sep):
            return path
        raise UserError(f"volume {name!r}: claimName must be a PersistentVolumeClaim name, not a path")
    kind = next((k for k in volume if k != "name"), "?")
    raise UserError(f"volume {name!r}: a {kind} volume cannot be run locally (use hostPath, emptyDir or a PVC)")


def _map_path(text: str, mounts: list[tuple[str, Path]]) -> str | None:
    """The local path of a container path, by the mount that holds it most closely (a mount inside
    another's folder takes its own paths), or None outside every mount."""
    if text.startswith("/"):
        text = posixpath.normpath(text)  # /checkpoints/../etc is not in /checkpoints
    for mount_path, local in sorted(mounts, key=lambda m: len(m[0].rstrip("/")), reverse=True):
        if text == mount_path or text.startswith(mount_path.rstrip("/") + "/"):
            return str(local) + text[len(mount_path.rstrip("/")):]
    return None


def _map_paths(text: str, mounts: list[tuple[str, Path]]) -> str:
    """An argument or env value with its container path mapped: PATH itself, or --flag=PATH."""
    mapped = _map_path(text, mounts)
    if mapped is not None:
        return mapped
    option, equals, value = text.partition("=")
    if equals and option.startswith("--") and (mapped := _map_path(value, mounts)) is not None:
        return f"{option}={mapped}"
    return text


def local_values(values: dict) -> dict:
    """The variables as this machine runs them: its devices are forced CPU devices, so the built-in
    trainer is rendered for accelerator cpu (a program of your own keeps its arguments as written)."""
    return {**values, "accelerator": "cpu"}


def plan_job(values: dict, docs: list[dict], run_dir: Path, claims_dir: Path | None = None) -> LocalJob:
    """claims_dir: where PersistentVolumeClaims live (default: run_dir/pvc)."""
    t = target_of(values)
    spec = pod_spec(docs, t.name)
    container = next((c for c in spec["containers"] if c["name"] == t.workload.container), None)
    if container is None:
        raise UserError(f"the pod spec has no container named {t.workload.container!r}")
    count = values["hosts_count"]
    port = free_port()
    builtin = not values["program"]["command"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    claims = claims_dir or run_dir / "pvc"
    grace = float(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
    job = LocalJob([], run_dir, t, grace_seconds=grace)
    base_env = {k: v for k, v in os.environ.items() if k not in CLUSTER_VARIABLES}
    repo_root = str(Path(__file__).resolve().parents[1])  # so `-m trainer` works without installing
    base_env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, base_env.get("PYTHONPATH")) if p)
    base_env[FROM_VARIABLES_ENV] = "1"  # the trainer's messages name variables, not its flags
    for rank in range(count):
        mounts = []
        for mount in container.get("volumeMounts", []):
            if mount["mountPath"] == "/dev/shm":
                continue  # the host's /dev/shm serves local processes
            volume = volumes[mount["name"]]
            local = _volume_dir(volume, rank, run_dir, claims)
            try:
                local.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise UserError(f"volume {mount['name']!r} at {mount['mountPath']}: {local} cannot be its directory: "
                                f"{error.strerror or error}") from None
            if "emptyDir" in volume:
                job.pod_dirs.append(local)
            job.volume_dirs.setdefault(mount["name"], {})[rank] = local
            mounts.append((mount["mountPath"], local))
        command = [sys.executable if c == "python" else c for c in container.get("command", [])]
        args = [_map_paths(a, mounts) for a in container.get("args", [])]
        if builtin:
            if rank == 0:
                _check_trainer_args(args)
            args = _metrics_args(args, rank, job)
        env = dict(base_env)
        for item in container.get("env", []):
            env[item["name"]] = _env_value(item, rank, hostname(values, rank), mounts)
        env.update(engine_env(t, rank, count, port))
        if "emptyDir" in volumes.get(CHECKPOINTS_VOLUME, {}):
            env[EPHEMERAL_OUTPUTS_ENV] = "1"  # its log lines do not point into a scratch folder as if it stayed
        job.plans.append(ProcessPlan(rank, hostname(values, rank), command + args, env))
    return job


def _last_flag_value(args: list[str], flag: str) -> str | None:
    """The value of the last `flag VALUE` or `flag=VALUE` in args (argparse's spellings), or None."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1:]
    return value


def _check_trainer_args(args: list[str]) -> None:
    """Refuse, before anything starts, the built-in trainer's args that its parser refuses (program.args
    with an abbreviated or unknown flag), as the trainer would once started, in every process."""
    import contextlib
    import io

    from trainer.cli import build_parser

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            build_parser().parse_args(args)
    except SystemExit:
        reason = (said.getvalue().strip().splitlines() or [""])[-1].partition("error: ")[2][:500]
        raise UserError(f"$.program.args: the trainer refuses its arguments: {reason}") from None


def _metrics_args(args: list[str], rank: int, job: LocalJob) -> list[str]:
    """The built-in trainer's --metrics-port on one machine: process 0 serves on a free port (the
    rendered one may be taken here), the others, which share its host, serve nothing."""
    if _last_flag_value(args, METRICS_FLAG) in (None, "0"):
        return args  # off (the last flag wins in the trainer)
    if rank == 0:
        job.metrics_port = free_port()
    return args + [METRICS_FLAG, str(job.metrics_port if rank == 0 else 0)]


def engine_env(t: Target, rank: int, count: int, port: int) -> dict[str, str]:
    """What the engine sets in the pod of process `rank` (its launchers' variables and its own), and
    the variables the processes find their place from, with the coordinator on this machine."""
    env = dict(t.workload.engine_env)
    for launcher in (*t.engine_sets, t.launcher):
        env.update(launcher.env(rank, count, "127.0.0.1", port))
    return env


def _env_value(item: dict, rank: int, name: str, mounts) -> str:
    if "value" in item:
        return _map_paths(str(item["value"]), mounts)
    field_path = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if field_path == contract.COMPLETION_INDEX_FIELD:
        return str(rank)
    if item["name"] == ATTEMPT_ENV:
        return "0"  # a JobSet's restart attempt: each attempt sets its own (Runner._start_all)
    if field_path in ("metadata.name", "spec.nodeName"):
        return name if field_path == "metadata.name" else socket.gethostname()
    if field_path == "status.podIP":
        return "127.0.0.1"
    raise UserError(f"env {item['name']!r}: {item.get('valueFrom')} cannot be resolved locally")


def describe_exit(code: int) -> str:
    if code < 0:
        sig = signal.Signals(-code).name
        hint = " (a peer died or the coordinator failed)" if code == -signal.SIGABRT else ""
        return f"killed by {sig}{hint}"
    if code == 134:
        return "aborted (a peer died or the coordinator failed)"
    return f"exit code {code}"


class Runner:
    """Runs the processes of a LocalJob, restarting all of them on any failure."""

    def __init__(self, job: LocalJob, restarts: int, deadline: float | None, echo=click.echo):
        self.job, self.restarts, self.deadline, self.echo = job, restarts, deadline, echo
        self.children: list[subprocess.Popen] = []
        self.lock = threading.Lock()

    def say(self, message: str) -> None:
        with self.lock:
            self.echo(f"[jaxgen] {message}")

    def _pump(self, name: str, stream) -> None:
        for line in iter(stream.readline, b""):
            with self.lock:
                sys.stdout.write(f"[{name}] {line.decode(errors='replace')}")
                sys.stdout.flush()
        stream.close()

    def _start_all(self, attempt: int) -> list[threading.Thread]:
        port = free_port()  # a fresh port per attempt: the previous one may linger in TIME_WAIT
        self.children, threads = [], []
        for plan in self.job.plans:
            env = dict(plan.env)
            if self.job.target:
                env.update(engine_env(self.job.target, plan.rank, len(self.job.plans), port))
            env[ATTEMPT_ENV] = str(attempt)  # trainer/fencing.py: an older attempt's process cannot join
            try:
                child = subprocess.Popen(plan.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            except OSError as error:
                raise UserError(f"$.program.command: cannot start {plan.argv[0]!r}: {error.strerror}") from None
            self.children.append(child)
            self.say(f"attempt {attempt}: started {plan.name} (pid {child.pid})")
            thread = threading.Thread(target=self._pump, args=(plan.name, child.stdout), daemon=True)
            thread.start()
            threads.append(thread)
        return threads

    def stop_all(self) -> None:
        """SIGTERM every child's process group, then SIGKILL what is left after a grace period."""
        for child in self.children:
            if child.poll() is None:
                _signal_group(child, signal.SIGTERM)
        end = time.monotonic() + self.job.grace_seconds
        for child in self.children:
            try:
                child.wait(timeout=max(end - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                pass
        for child in self.children:
            _signal_group(child, signal.SIGKILL)  # also reaps grandchildren left in the group
            child.wait()

    def kill_all(self) -> None:
        """SIGKILL every process group now (a second stop signal: no more grace)."""
        for child in self.children:
            _signal_group(child, signal.SIGKILL)

    def _failures(self) -> list[tuple[int, str]]:
        return [(code, plan.name) for code, plan in zip((c.poll() for c in self.children), self.job.plans)
                if code not in (None, 0)]

    def _wait(self) -> tuple[int, str] | None:
        """None when every process succeeded, else (exit code, pod name) of the failure that decides."""
        while True:
            if self.deadline is not None and time.monotonic() > self.deadline:
                return 124, "deadline"
            failures = self._failures()
            if failures:
                if failures[0][0] == exit_codes.PEER_LOST:
                    # The peer that died is the cause: give its exit a moment to be seen.
                    end = time.monotonic() + SETTLE_SECONDS
                    while time.monotonic() < end and all(c == exit_codes.PEER_LOST for c, _ in failures):
                        time.sleep(0.1)
                        failures = self._failures()
                return next((f for f in failures if f[0] != exit_codes.PEER_LOST), failures[0])
            if all(c.poll() == 0 for c in self.children):
                return None
            time.sleep(0.1)

    def _new_pods(self) -> None:
        """Restarted pods get new, empty emptyDirs, as on a cluster."""
        checkpoints = self.job.volume_dirs.get(CHECKPOINTS_VOLUME, {}).get(0)
        if checkpoints in self.job.pod_dirs:
            self.say(f"the {CHECKPOINTS_VOLUME} volume is an emptyDir, new with each pod: the restarted processes "
                     "start over at step 0, as on a cluster (persistence.enabled=true keeps it)")
        for directory in self.job.pod_dirs:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True, exist_ok=True)

    def run(self) -> int:
        attempt = restarts = 0
        while True:
            if attempt:
                self._new_pods()
            threads = self._start_all(attempt)
            failure = self._wait()
            if failure is None:
                for thread in threads:
                    thread.join(timeout=5)
                self.say(f"all {len(self.job.plans)} processes completed")
                return 0
            code, name = failure
            if name == "deadline":
                self.say("the job's active deadline passed: stopping every process")
            else:
                self.say(f"{name} failed: {describe_exit(code)}; stopping every process")
            self.stop_all()
            for thread in threads:
                thread.join(timeout=5)
            if name == "deadline":
                return code
            action = exit_codes.action_of(code)
            if action == "fail":
                self.say(f"exit code {code} is a permanent error: the job failed without a restart")
                return code
            attempt += 1
            if action == "ignore":
                self.say(f"restarting all processes (exit code {code} does not count against the {self.restarts} "
                         "restarts); they resume from the last checkpoint")
                continue
            if restarts >= self.restarts:
                self.say(f"no restarts left ({self.restarts} allowed): the job failed")
                return code if code > 0 else 128 - code
            restarts += 1
            self.say(f"restarting all processes ({restarts}/{self.restarts}); they resume from the last checkpoint")


def _signal_group(child: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(child.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """A stop signal reached jaxgen: every process is stopped, then jaxgen exits 128 + signum."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _trap_stop_signals(runner: Runner) -> dict:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal) stop the job: the first one raises Stopped in
    the main thread, which stops every process with its grace period; any later one kills every
    process group at once and lets the cleanup finish. The processes run in sessions of their own,
    so nothing else would reach them. Set here, whatever disposition jaxgen inherited (a background
    shell hands SIGINT down ignored). Returns the previous handlers."""
    received: list[int] = []

    def handler(signum, _frame):
        if received:
            runner.kill_all()
            return
        received.append(signum)
        raise Stopped(signum)

    return {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}


def outputs_of(job: LocalJob) -> Path | None:
    """Process 0's outputs directory (--checkpoint-dir/--run-name of the built-in trainer), or None."""
    argv = job.plans[0].argv if job.plans else []
    # the trainer's last word, in either spelling (its parser takes no abbreviations)
    directory, name = _last_flag_value(argv, CHECKPOINT_DIR_FLAG), _last_flag_value(argv, RUN_NAME_FLAG)
    if not directory or not name:
        return None
    return Path(directory) / name


def _written_since(source: Path, since: float) -> bool:
    """Whether anything in the outputs directory (not its checkpoints) was written since `since`."""
    for path in source.rglob("*"):
        if outputs.CHECKPOINTS in path.relative_to(source).parts[:1]:
            continue
        try:
            if path.lstat().st_mtime >= since:
                return True
        except OSError:
            pass
    return False


def collect(source: Path | None, staging: Path, since: float) -> tuple[bool, list[str]]:
    """Copy what this run wrote into the new folder `staging` (not the checkpoints or the compilation
    cache, nor a summary an earlier run left in a persistent volume): regular files and folders only,
    a link is never followed (generator/confined.py). Returns whether this run's summary is there, and
    what was left out (links, devices…) by relative path."""
    if source is None or not source.is_dir() or not _written_since(source, since):
        staging.mkdir(parents=True)
        return False, []  # refused or stopped before it wrote anything: nothing here is this run's
    stale = [outputs.SUMMARY] if (source / outputs.SUMMARY).exists() and \
        (source / outputs.SUMMARY).stat().st_mtime < since else []
    dropped = confined.copy_tree(source, staging, skip=(outputs.CHECKPOINTS, outputs.XLA_CACHE, *stale))
    return (staging / outputs.SUMMARY).exists(), dropped


def status_of(code: int) -> str:
    return "finished" if code == 0 else "stopped" if code - 128 in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) \
        else "failed"


@dataclass
class RunRecord:
    """One run of a job kept in <outputs>/<name>/<run_id>/ (generator/runs.py)."""

    folder: Path  # <outputs>/<name>
    run_id: str
    started: float  # time.time()

    @property
    def path(self) -> Path:
        return self.folder / self.run_id


def _finish(job: LocalJob, name: str, record: RunRecord | None, code: int, say) -> None:
    """Keep this run's outputs in its own run folder, and print its result, or why there is none;
    the results of earlier runs are never touched."""
    from . import runs
    from .results import report

    if record is None:
        return
    source = outputs_of(job)
    persistent = source is not None and not any(source == d or d in source.parents for d in job.pod_dirs)
    staging = record.folder / f".{record.run_id}.collecting"
    try:
        summarised, dropped = collect(source, staging, record.started)
        finished = summarised and code == 0
        ended = time.time()
        runs.write_record(staging, {"run_id": record.run_id, "name": name, "status": status_of(code),
                                    "exit_code": code, "started": round(record.started, 3),
                                    "ended": round(ended, 3), "wall_seconds": round(ended - record.started, 1)})
        os.rename(staging, record.path)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"--outputs {record.folder.parent}: cannot keep the run's results: "
                        f"{error.strerror or error}") from None
    earlier = runs.latest(record.folder)
    if finished:
        runs.set_latest(record.folder, record.run_id)
        say(f"results of {name} kept in {record.path} (run {record.run_id}; {record.folder / runs.LATEST} "
            f"is the newest; `jaxgen results {record.folder}` lists every run)")
        if line := confined.dropped_line(dropped):
            say(line)
        hint = (f"rerun the same command: it resumes from {source / outputs.CHECKPOINTS}" if persistent else
                "none: the checkpoints were on an emptyDir, gone with the run; persistence.enabled=true keeps them")
        report(record.path, resume_hint=hint)
        return
    say(f"run {record.run_id} of {name} {status_of(code)} ({describe_exit(code)})"
        + (": no result" if code else ", leaving no summary") + f"; its record is in {record.path}")
    if status_of(code) == "stopped" and source is not None:
        say(f"a rerun of the same command resumes from {source / outputs.CHECKPOINTS}" if persistent else
            "the checkpoints were on an emptyDir, gone with the run: a rerun starts over "
            "(persistence.enabled=true keeps them)")
    if earlier is not None:
        say(f"the results of earlier runs are untouched: the newest finished one is {earlier}")


@click.command("run")
@variables_options(LOCAL_TARGETS)
@click.option("--local", "local", is_flag=True, hidden=True, help="Run on this machine (the default and only mode).")
@click.option("--outputs", "outputs_dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_OUTPUTS,
              show_default=True, help="Where the job's results are kept (<outputs>/<name>/<run id>: model, metrics, "
                                      "summary, curves; <outputs>/<name>/latest: the newest finished run) and its "
                                      "claims live (<outputs>/claims/<claim>).")
@click.option("--discard", is_flag=True, help="Keep nothing: claims and results go with the scratch directory.")
@click.option("--work-dir", type=click.Path(file_okay=False), help="Scratch directory (emptyDir volumes; kept).")
@click.option("--keep", is_flag=True, help="Keep the scratch directory (the pods' emptyDir volumes).")
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
    job that is still running is refused at once with exit code 75. Otherwise the exit code is the
    job's.
    """
    del local  # accepted for scripts written for earlier versions; running here is the only mode
    from . import runs
    from .engines.kubernetes import render_documents
    from .values import load_values

    values = load_values(variables_files(file, extra_files), sets, target, set_jsons=set_jsons, set_strings=set_strings)
    if values["target"] not in LOCAL_TARGETS:
        raise UserError(f"target: {values['target']!r} cannot run locally; use one of {', '.join(LOCAL_TARGETS)}")
    if not values["program"]["command"] and (problem := missing("jax", "trainer", "jaxgen run (the built-in trainer)")):
        raise UserError(problem)
    docs = render_documents(local_values(values))
    kept = None if discard else outputs_dir.resolve()
    folder = kept / values["name"] if kept else None
    with runs.locked(folder, values["name"]) if folder else nullcontext():
        if folder:
            runs.remove_stale_staging(folder)
            runs.adopt_unversioned(folder)
        code = _run(values, docs, kept, work_dir, keep)
    sys.exit(code)


def _run(values: dict, docs: list[dict], kept: Path | None, work_dir: str | None, keep: bool) -> int:
    started = time.time()
    record = RunRecord(kept / values["name"], new_run_id(started), started) if kept else None
    run_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix=f"jaxgen-{values['name']}-"))
    job = runner = None
    try:  # from here on, whatever happens, the work dir goes (unless kept) and no process outlives us
        run_dir.mkdir(parents=True, exist_ok=True)
        job = plan_job(values, docs, run_dir, kept / "claims" if kept else None)
        deadline = values.get("active_deadline_seconds")
        runner = Runner(job, restart_budget(values), time.monotonic() + deadline if deadline else None)
        previous = _trap_stop_signals(runner)
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
        _finish(job, values["name"], record, code, runner.say)
    finally:
        if work_dir or keep:
            if runner:
                runner.say(f"kept the scratch directory {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    return code

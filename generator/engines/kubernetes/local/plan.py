"""The plan of a local run: the target's pod spec, rendered exactly as for the cluster, becomes
hosts_count processes on this machine. Each gets the container's command, args and env with the
coordinator at 127.0.0.1 and a free port, the completion index / process id filled in, volumes as
local directories (an emptyDir per pod, a PersistentVolumeClaim shared under the claims folder), and
process 0 alone serving its metrics, on a free port (the others share this machine)."""

from __future__ import annotations

import os
import posixpath
import shutil
import socket
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import trainer
from trainer.cluster import JAX
from trainer.config import EPHEMERAL_OUTPUTS_ENV, FROM_VARIABLES_ENV, fields_named, flag
from trainer.contract import PROCESS_ENV
from trainer.fencing import ATTEMPT_ENV
from trainer.rejoin import POD_UID_ENV

from ....errors import TemplateBug, UserError
from ....runstore.location import Outputs
from ....targets import Target, target as target_of, workload
from ..hosts import hostname
from ..outputs import recorded
from ..policy import BUCKET_CREDENTIALS_ENV, CHECKPOINTS_VOLUME, COMPLETION_INDEX_FIELD

# Variables of the surrounding shell that would change how the trainer resolves its ClusterSpec.
CLUSTER_VARIABLES = (*PROCESS_ENV, "JAX_PLATFORMS", "XLA_FLAGS")
METRICS_FLAG = flag(*fields_named("metrics_port"))  # the built-in trainer's
DEFAULT_GRACE_SECONDS = 30.0  # Kubernetes' default terminationGracePeriodSeconds
REPO_ROOT = Path(trainer.__file__).resolve().parents[1]  # on PYTHONPATH, so `-m trainer` runs without installing


def _bound_socket() -> socket.socket:
    """A socket on a port of this machine's kernel's choosing (free_ports' source)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def free_ports(count: int, taken: Collection[int] = ()) -> list[int]:
    """`count` distinct free ports of this machine, none of them in `taken` (ports already given to
    the job): each is held until all are picked, as ports picked one by one, each let go at once,
    can be the same port (the coordinator's and the metrics' were, and the second could not listen)."""
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            if len(held) >= count + len(taken) + 64:  # the kernel handed out the same ports again and again
                raise UserError(f"cannot find {count} free ports on this machine")
            held.append(_bound_socket())
            port = held[-1].getsockname()[1]
            if port not in ports and port not in taken:
                ports.append(port)
    finally:
        for sock in held:
            sock.close()
    return ports


def job_object(docs: list[dict], target: str) -> dict:
    """The job object of the rendered manifests of `target`."""
    w = workload(target)
    found = next((d for d in docs if d.get("kind") == w.kind), None)
    if found is None:
        raise UserError(f"the {target} render holds no {w.kind}")
    return found


def pod_spec(docs: list[dict], target: str) -> dict:
    """The worker pod spec of the rendered manifests of `target`."""
    node = job_object(docs, target)
    for key in workload(target).pod_spec_path:
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
    claims_dir: Path | None = None  # where the PersistentVolumeClaims live
    # where process 0 writes its outputs here (the job object's record mapped onto its volumes; None:
    # on none of them), and their bucket's copy ("": none)
    outputs_dir: Path | None = None
    outputs_uri: str = ""


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
    trainer is rendered for accelerator cpu (a program of your own keeps its arguments as written),
    and it runs the checkout's trainer, whatever image a stock job names (nothing to unpack). A program
    folder is refused: nothing travels here, the processes start in the current folder."""
    if values["program"]["dir"]:
        raise UserError("$.program.dir: a folder sent with the job is for a cluster; jaxgen run starts the "
                        "processes in the current folder: leave program.dir empty and run it from your folder")
    return {**values, "accelerator": "cpu", "image": {**values["image"], "source": "built"}}


def plan_job(values: dict, docs: list[dict], run_dir: Path, claims_dir: Path | None = None) -> LocalJob:
    """claims_dir: where PersistentVolumeClaims live (default: run_dir/pvc)."""
    t = target_of(values)
    spec = pod_spec(docs, t.name)
    container = next((c for c in spec["containers"] if c["name"] == t.workload.container), None)
    if container is None:
        raise UserError(f"the pod spec has no container named {t.workload.container!r}")
    count = values["hosts_count"]
    port, metrics_port = free_ports(2)  # the coordinator's (new with each attempt: supervise.py) and process 0's metrics
    builtin = not values["program"]["command"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    claims = claims_dir or run_dir / "pvc"
    grace = float(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
    job = LocalJob([], run_dir, t, grace_seconds=grace, claims_dir=claims)
    base_env = {k: v for k, v in os.environ.items() if k not in CLUSTER_VARIABLES}
    base_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), base_env.get("PYTHONPATH")) if p)
    base_env[FROM_VARIABLES_ENV] = "1"  # the trainer's messages name variables, not its flags
    for rank in range(count):
        mounts = []
        for mount in container.get("volumeMounts", []):
            if mount["mountPath"] == "/dev/shm":
                continue  # the host's /dev/shm serves local processes
            volume = volumes[mount["name"]]
            local = _volume_dir(volume, rank, run_dir, claims)
            try:
                if "emptyDir" in volume and local.is_dir():  # a new pod's emptyDir is empty (a kept --work-dir)
                    shutil.rmtree(local)
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
            args = _metrics_args(args, rank, job, metrics_port)
        env = dict(base_env)
        for item in container.get("env", []):
            env[item["name"]] = _env_value(item, rank, hostname(values, rank), mounts)
        env.update(engine_env(t, rank, count, port))
        if "emptyDir" in volumes.get(CHECKPOINTS_VOLUME, {}):
            env[EPHEMERAL_OUTPUTS_ENV] = "1"  # its log lines do not point into a scratch folder as if it stayed
        job.plans.append(ProcessPlan(rank, hostname(values, rank), command + args, env))
        if rank == 0:
            _place_outputs(job, recorded(job_object(docs, t.name)), mounts)
    return job


def _place_outputs(job: LocalJob, outputs: Outputs | None, mounts: list[tuple[str, Path]]) -> None:
    """Where the job object records process 0's outputs, on this machine (the render always records it)."""
    if outputs is None:
        raise TemplateBug("the job object does not record where its outputs are")
    local = _map_path(outputs.directory, mounts)
    job.outputs_dir, job.outputs_uri = (Path(local) if local else None), outputs.uri


def last_flag_value(args: list[str], flag: str) -> str | None:
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


def _metrics_args(args: list[str], rank: int, job: LocalJob, port: int) -> list[str]:
    """The built-in trainer's --metrics-port on one machine: process 0 serves on the free `port` (the
    rendered one may be taken here), the others, which share its host, serve nothing."""
    if last_flag_value(args, METRICS_FLAG) in (None, "0"):
        return args  # off (the last flag wins in the trainer)
    if rank == 0:
        job.metrics_port = port
    return args + [METRICS_FLAG, str(job.metrics_port if rank == 0 else 0)]


def engine_env(t: Target, rank: int, count: int, port: int) -> dict[str, str]:
    """What the engine sets in the pod of process `rank` (its launchers' variables and its own), and
    the variables the processes find their place from, with the coordinator on this machine."""
    env = dict(t.workload.engine_env)
    for launcher in (*t.engine_sets, t.launcher):
        env.update(launcher.env(rank, count, "127.0.0.1", port))
    if t.workload.hosts.service:  # the render's address of its coordinator Service (read first)
        env[JAX.coordinator] = f"127.0.0.1:{port}"
    return env


def _env_value(item: dict, rank: int, name: str, mounts) -> str:
    if "value" in item:
        return _map_paths(str(item["value"]), mounts)
    field_path = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if field_path == COMPLETION_INDEX_FIELD:
        return str(rank)
    if item["name"] == ATTEMPT_ENV:
        return "0"  # a JobSet's restart attempt: each attempt sets its own (Runner._start_all)
    if item["name"] == POD_UID_ENV:
        return ""  # no pod: a local process is never restarted alone (trainer/rejoin.py)
    if field_path in ("metadata.name", "spec.nodeName"):
        return name if field_path == "metadata.name" else socket.gethostname()
    if field_path == "status.podIP":
        return "127.0.0.1"
    if item["name"] in BUCKET_CREDENTIALS_ENV and "secretKeyRef" in item.get("valueFrom", {}):
        # outputs.secret: a local run has no Secret to read; the credentials are this machine's
        if item["name"] not in os.environ:
            raise UserError(f"outputs.secret: a local run cannot read Secret "
                            f"{item['valueFrom']['secretKeyRef'].get('name')!r}: export "
                            f"{' and '.join(BUCKET_CREDENTIALS_ENV)} instead")
        return os.environ[item["name"]]
    raise UserError(f"env {item['name']!r}: {item.get('valueFrom')} cannot be resolved locally")


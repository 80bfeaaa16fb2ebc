"""Where this process sits in the job: ClusterSpec and its resolution from flags or environment.

Pure Python (no jax import) so it is cheap to test. Each field is taken from the first source that
provides it, in this order:

1. explicit flags (--coordinator-address, --num-processes, --process-id)
2. JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID (our Indexed Job and JobSet,
   Kubeflow Trainer v2, XPK)
3. Kubeflow JAXJob v1: COORDINATOR_ADDRESS + COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID
4. Kubernetes Indexed Job: JOB_COMPLETION_INDEX; without a coordinator address, pod 0 of the Job
   behind the same headless Service: this pod's FQDN with its first label's ``-<index>`` made ``-0``
   (``job-3.svc.ns.svc.cluster.local`` -> ``job-0.svc.ns.svc.cluster.local``; needs a subdomain)
5. SLURM step: SLURM_PROCID, SLURM_NTASKS, first host of SLURM_STEP_NODELIST and port
   SLURM_JOB_ID % 4096 + 61440 (unless a port is given)
6. a single process

The devices each process expects (checked once JAX is up) come from --local-device-count, else
JAX_LOCAL_DEVICE_COUNT, else whatever JAX finds.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field
from typing import Mapping

from trainer.errors import ConfigError

DEFAULT_PORT = 1234
# A SLURM step's coordinator port, unless one is given: SLURM_JOB_ID % len(SLURM_PORTS) + SLURM_PORTS.start.
SLURM_PORTS = range(61440, 65536)


@dataclass(frozen=True)
class Launcher:
    """The variables one way of starting the processes sets in each of them (resolve_cluster reads
    them; generator/targets.py says which one each target's processes find)."""

    name: str
    process_id: str
    num_processes: str = ""
    coordinator: str = ""  # HOST:PORT, or HOST alone where coordinator_port names the port's variable
    coordinator_port: str = ""

    def env(self, process_id: int, num_processes: int, host: str, port: int) -> dict[str, str]:
        """These variables as this launcher sets them for one process (the coordinator first)."""
        env = {}
        if self.coordinator:
            env[self.coordinator] = host if self.coordinator_port else f"{host}:{port}"
        if self.coordinator_port:
            env[self.coordinator_port] = str(port)
        if self.num_processes:
            env[self.num_processes] = str(num_processes)
        env[self.process_id] = str(process_id)
        return env


# In the order resolve_cluster() prefers them (see the module doc).
JAX = Launcher("jax", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES", "JAX_COORDINATOR_ADDRESS")
KUBEFLOW_V1 = Launcher("kubeflow-v1", "PROCESS_ID", "NUM_PROCESSES", "COORDINATOR_ADDRESS", "COORDINATOR_PORT")
INDEXED_JOB = Launcher("indexed-job", "JOB_COMPLETION_INDEX")  # the coordinator: from the pod's FQDN
SLURM = Launcher("slurm", "SLURM_PROCID", "SLURM_NTASKS")  # the coordinator: from SLURM_STEP_NODELIST
# Read on any launcher: the coordinator's port where an address has none, and the devices per process.
COORDINATOR_PORT_ENV = "JAX_COORDINATOR_PORT"
LOCAL_DEVICE_COUNT_ENV = "JAX_LOCAL_DEVICE_COUNT"


def launcher_env_names(*launchers: Launcher) -> tuple[str, ...]:
    """Every variable the launchers set, then the two read on any launcher."""
    names = [n for la in launchers for n in (la.coordinator, la.coordinator_port, la.num_processes, la.process_id) if n]
    return tuple(names) + (COORDINATOR_PORT_ENV, LOCAL_DEVICE_COUNT_ENV)


@dataclass(frozen=True)
class ClusterSpec:
    coordinator_address: str | None
    num_processes: int
    process_id: int
    local_device_count: int | None = None
    # field name -> human-readable source ("--process-id", "JAX_PROCESS_ID", ...)
    sources: dict = field(default_factory=dict, compare=False)

    @property
    def distributed(self) -> bool:
        return self.num_processes > 1

    def describe(self) -> str:
        return (
            f"process {self.process_id}/{self.num_processes}, coordinator "
            f"{self.coordinator_address or '-'} (from "
            + ", ".join(f"{k}: {v}" for k, v in sorted(self.sources.items()))
            + ")"
        )


def first_host(spec: str) -> str | None:
    """The first host of a SLURM host list, without expanding the rest (``n[0-99999999]`` is instant)."""
    for item in _split_top_level(spec.strip()):
        if item:
            # The first host of an item takes the first number of each bracket group's first range.
            parts = re.split(r"(\[[^\]]*\])", item)
            return "".join(_first_of_ranges(p[1:-1], item) if p.startswith("[") else p for p in parts)
    return None


def _split_top_level(spec: str) -> list[str]:
    items, depth, current = [], 0, []
    for ch in spec:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ConfigError(f"SLURM node list {spec!r}: unbalanced ']'")
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise ConfigError(f"SLURM node list {spec!r}: unbalanced '['")
    items.append("".join(current))
    return items


def _range_bounds(rng: str, item: str) -> tuple[str, str]:
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", rng.strip())
    if not m:
        raise ConfigError(f"SLURM node list item {item!r}: bad range {rng!r}")
    lo, hi = m.group(1), m.group(2) or m.group(1)
    if int(hi) < int(lo):
        raise ConfigError(f"SLURM node list item {item!r}: range {rng!r} is descending")
    return lo, hi


def _first_of_ranges(body: str, item: str) -> str:
    for rng in body.split(","):
        _range_bounds(rng, item)  # the whole group must be well formed, as for a full expansion
    return _range_bounds(body.split(",", 1)[0], item)[0]


INT32_MAX = 2**31 - 1  # JAX's coordination service keeps process ids and counts as int32


def _int(value: str, name: str, minimum: int, maximum: int = INT32_MAX) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not an integer") from None
    if number < minimum:
        raise ConfigError(f"{name}={number} must be >= {minimum}")
    if number > maximum:
        raise ConfigError(f"{name}={number} must be <= {maximum}")
    return number


def _port(value, name: str) -> int:
    port = _int(value, name, 1)
    if port > 65535:
        raise ConfigError(f"{name}={port} is not a TCP port (1-65535)")
    return port


def _check_address(address: str, name: str) -> str:
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{name}={address!r} must be HOST:PORT")
    _port(port, name)
    return address


def pod_fqdn() -> str:
    """This host's canonical name, as `hostname -f` finds it: in a pod with a subdomain the kubelet's
    /etc/hosts line ``<ip> <hostname>.<subdomain>.<namespace>.svc.<domain> <hostname>``."""
    name = socket.gethostname()
    try:
        return socket.getaddrinfo(name, None, flags=socket.AI_CANONNAME)[0][3] or name
    except OSError:
        return name


def indexed_job_coordinator(index: int, fqdn: str) -> str:
    """Pod 0's name under the headless Service (the pod's subdomain) of an Indexed Job, from this
    pod's FQDN: Kubernetes names the pods ``<job>-<index>`` (a JobSet's ``<jobset>-<job>-<j>-<index>``)."""
    label, dot, domain = fqdn.partition(".")
    suffix = f"-{index}"
    if not dot or not label.endswith(suffix):
        raise ConfigError(
            f"JOB_COMPLETION_INDEX={index} but this pod's name {fqdn!r} is not <job>-{index}.<headless service>: "
            "set JAX_COORDINATOR_ADDRESS (or give the pods a subdomain)"
        )
    return f"{label[: -len(suffix)]}-0.{domain}"


def resolve_cluster(
    env: Mapping[str, str],
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    local_device_count: int | None = None,
    coordinator_port: int | None = None,
    fqdn=pod_fqdn,
) -> ClusterSpec:
    """Resolve the ClusterSpec from flags (arguments) and environment `env` (see module doc).
    `fqdn` returns this host's fully qualified name (read only for an Indexed Job's coordinator)."""
    sources: dict[str, str] = {}
    # A port given here is checked under its own name, before any address built from it is.
    given_port = None if coordinator_port is None else _port(coordinator_port, "--coordinator-port")
    if given_port is None and env.get(COORDINATOR_PORT_ENV):
        given_port = _port(env[COORDINATOR_PORT_ENV], COORDINATOR_PORT_ENV)
    in_slurm_step = SLURM.process_id in env

    # -- process id
    pid = None
    if process_id is not None:
        pid, sources["process_id"] = _int(process_id, "--process-id", 0), "--process-id"
    else:
        for name in (JAX.process_id, KUBEFLOW_V1.process_id, INDEXED_JOB.process_id, SLURM.process_id):
            if env.get(name, "") != "":
                pid, sources["process_id"] = _int(env[name], name, 0), name
                break

    # -- number of processes
    nproc = None
    if num_processes is not None:
        nproc, sources["num_processes"] = _int(num_processes, "--num-processes", 1), "--num-processes"
    else:
        names = [JAX.num_processes, KUBEFLOW_V1.num_processes]
        names += [SLURM.num_processes, "SLURM_STEP_NUM_TASKS"] if in_slurm_step else []
        for name in names:
            if env.get(name, "") != "":
                nproc, sources["num_processes"] = _int(env[name], name, 1), name
                break

    # -- coordinator address
    coord = None
    if coordinator_address:
        coord, sources["coordinator_address"] = coordinator_address, "--coordinator-address"
    elif env.get(JAX.coordinator):
        coord, sources["coordinator_address"] = env[JAX.coordinator], JAX.coordinator
    elif env.get(KUBEFLOW_V1.coordinator):
        host = env[KUBEFLOW_V1.coordinator]
        if env.get(KUBEFLOW_V1.coordinator_port):
            port = _port(env[KUBEFLOW_V1.coordinator_port], KUBEFLOW_V1.coordinator_port)
        elif ":" in host:
            host, _, port_s = host.rpartition(":")
            port = _port(port_s, KUBEFLOW_V1.coordinator)
        else:
            port = given_port or DEFAULT_PORT
        coord = f"{host}:{port}"
        sources["coordinator_address"] = f"{KUBEFLOW_V1.coordinator}/{KUBEFLOW_V1.coordinator_port}"
    elif in_slurm_step:
        nodelist_name = next(
            (n for n in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if env.get(n)), None
        )
        if nodelist_name is None:
            raise ConfigError("SLURM_PROCID is set but SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) is not")
        host = first_host(env[nodelist_name])
        if host is None:
            raise ConfigError(f"{nodelist_name}={env[nodelist_name]!r} names no host")
        if given_port is not None:
            port = given_port
        elif env.get("SLURM_JOB_ID"):
            port = SLURM_PORTS[_int(env["SLURM_JOB_ID"], "SLURM_JOB_ID", 0) % len(SLURM_PORTS)]
        else:
            raise ConfigError("SLURM_JOB_ID is not set: pass --coordinator-port")
        coord, sources["coordinator_address"] = f"{host}:{port}", nodelist_name
    elif sources.get("process_id") == INDEXED_JOB.process_id and (nproc or 1) > 1:
        coord = indexed_job_coordinator(pid, fqdn())
        sources["coordinator_address"] = f"{INDEXED_JOB.process_id}/hostname"

    if coord is not None:
        name = sources["coordinator_address"].split("/")[0]
        if ":" not in coord.rsplit("]", 1)[-1]:  # host without port (IPv6 literals are bracketed)
            coord = f"{coord}:{given_port or DEFAULT_PORT}"
        _check_address(coord, name)

    if pid is not None and nproc is None:
        raise ConfigError(
            f"{sources['process_id']} is set but the number of processes is unknown: "
            "pass --num-processes or set JAX_NUM_PROCESSES"
        )
    if nproc is None:
        nproc, sources["num_processes"] = 1, "default"
    if pid is None:
        if nproc > 1:
            raise ConfigError(
                f"{sources['num_processes']}={nproc} but the process id is unknown: pass --process-id or set JAX_PROCESS_ID"
            )
        pid, sources["process_id"] = 0, "default"
    if pid >= nproc:
        raise ConfigError(f"{sources['process_id']}={pid} is out of range for {nproc} processes")
    if nproc > 1 and coord is None:
        raise ConfigError(
            f"{nproc} processes need a coordinator: pass --coordinator-address HOST:PORT or set JAX_COORDINATOR_ADDRESS"
        )
    if local_device_count is not None:
        local_device_count = _int(local_device_count, "--local-device-count", 1)
        sources["local_device_count"] = "--local-device-count"
    elif env.get(LOCAL_DEVICE_COUNT_ENV, "") != "":
        local_device_count = _int(env[LOCAL_DEVICE_COUNT_ENV], LOCAL_DEVICE_COUNT_ENV, 1)
        sources["local_device_count"] = LOCAL_DEVICE_COUNT_ENV
    return ClusterSpec(coord, nproc, pid, local_device_count, sources)


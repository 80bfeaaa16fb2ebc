"""Where this process sits in the job: ClusterSpec and its resolution from flags or environment.

Pure Python (no jax import) so it is cheap to test. Each field (process id, number of processes,
coordinator address) is taken from the first source that provides it, in this order:

1. explicit flags (--coordinator-address, --num-processes, --process-id)
2. the launchers of LAUNCHERS, each reading its own variables (as JAX's own jax/_src/clusters
   environments do):
   - jax: JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID (our Indexed Job and JobSet,
     Kubeflow Trainer v2, XPK)
   - kubeflow-v1 (Kubeflow JAXJob): COORDINATOR_ADDRESS + COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID
   - indexed-job (Kubernetes Indexed Job): JOB_COMPLETION_INDEX; when the process id came from it,
     the coordinator is pod 0 of the Job behind the same headless Service: this pod's FQDN with its
     first label's ``-<index>`` made ``-0`` (``job-3.svc.ns.svc.cluster.local`` ->
     ``job-0.svc.ns.svc.cluster.local``; needs a subdomain)
   - slurm (a SLURM step, SLURM_PROCID set): SLURM_PROCID, SLURM_NTASKS, first host of
     SLURM_STEP_NODELIST and port SLURM_JOB_ID % 4096 + 61440 (unless a port is given)
3. a single process

The devices each process expects (checked once JAX is up) come from --local-device-count, else
JAX_LOCAL_DEVICE_COUNT, else whatever JAX finds.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple

from trainer.errors import ConfigError
from trainer.integers import count_less, parse_int

DEFAULT_PORT = 1234
# A SLURM step's coordinator port, unless one is given: SLURM_JOB_ID % len(SLURM_PORTS) + SLURM_PORTS.start.
SLURM_PORTS = range(61440, 65536)
# Read on any launcher: the coordinator's port where an address has none, and the devices per process.
COORDINATOR_PORT_ENV = "JAX_COORDINATOR_PORT"
LOCAL_DEVICE_COUNT_ENV = "JAX_LOCAL_DEVICE_COUNT"


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
    m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", rng.strip())
    if not m:
        raise ConfigError(f"SLURM node list item {item!r}: bad range {rng!r}")
    lo, hi = m.group(1), m.group(2) or m.group(1)
    if count_less(hi, lo):  # not int(): a bound may have thousands of digits
        raise ConfigError(f"SLURM node list item {item!r}: range {rng!r} is descending")
    return lo, hi


def _first_of_ranges(body: str, item: str) -> str:
    for rng in body.split(","):
        _range_bounds(rng, item)  # the whole group must be well formed, as for a full expansion
    return _range_bounds(body.split(",", 1)[0], item)[0]


INT32_MAX = 2**31 - 1  # JAX's coordination service keeps process ids and counts as int32
# Far beyond any host's accelerators; XLA's CPU client dies of SIGSEGV when asked for 100,000 devices.
MAX_LOCAL_DEVICES = 1024


def _int(value: str, name: str, minimum: int, maximum: int = INT32_MAX) -> int:
    number = value if type(value) is int else parse_int(value)  # a flag's value is parsed already
    if number is None:
        raise ConfigError(f"{name}={value!r} is not an integer")
    if number < minimum:
        raise ConfigError(f"{name}={number} must be >= {minimum}")
    if number > maximum:
        raise ConfigError(f"{name}={number} must be <= {maximum}")
    return number


def _port(value, name: str) -> int:
    port = _int(value, name, 1, maximum=float("inf"))  # any number above 65535 is said as not a port
    if port > 65535:
        raise ConfigError(f"{name}={port} is not a TCP port (1-65535)")
    return port


def _check_address(address: str, name: str) -> str:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not re.fullmatch(r"[0-9]+", port):  # ":::" once said only its empty port
        raise ConfigError(f"{name}={address!r} must be HOST:PORT (a TCP port, 1-65535)")
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


class Found(NamedTuple):
    """A value of the ClusterSpec and where it came from (a flag or variable, as messages name it)."""

    value: object
    source: str


def _read_int(env: Mapping[str, str], name: str, minimum: int, maximum: int = INT32_MAX) -> Found | None:
    """The integer variable `name`, or None where it is unset or empty."""
    return Found(_int(env[name], name, minimum, maximum), name) if env.get(name, "") != "" else None


@dataclass(frozen=True)
class Known:
    """What a launcher's coordinator may depend on: the process id and count resolved (from any
    source), the port given (flag or JAX_COORDINATOR_PORT), and how to find this host's name."""

    process_id: Found | None
    num_processes: Found | None
    port: int | None
    fqdn: Callable[[], str]


@dataclass(frozen=True)
class Launcher:
    """One way of starting the processes: the variables it sets in each of them (generator/targets.py
    says which one each target's processes find), and how this process's place in the job is read
    back from them. Each read_* answers None where the launcher's variables say nothing."""

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

    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.coordinator, self.coordinator_port, self.num_processes, self.process_id) if n)

    def read_process_id(self, env: Mapping[str, str]) -> Found | None:
        return _read_int(env, self.process_id, 0)

    def read_num_processes(self, env: Mapping[str, str]) -> Found | None:
        return _read_int(env, self.num_processes, 1) if self.num_processes else None

    def read_coordinator(self, env: Mapping[str, str], known: Known) -> Found | None:
        """HOST:PORT, or HOST alone (resolve_cluster adds the given or default port)."""
        return Found(env[self.coordinator], self.coordinator) if self.coordinator and env.get(self.coordinator) else None


class KubeflowV1(Launcher):
    """Kubeflow's JAXJob: the coordinator's host and port in two variables."""

    def read_coordinator(self, env, known):
        host = env.get(self.coordinator)
        if not host:
            return None
        if env.get(self.coordinator_port):
            port = _port(env[self.coordinator_port], self.coordinator_port)
        elif ":" in host:
            host, _, given = host.rpartition(":")
            port = _port(given, self.coordinator)
        else:
            port = known.port or DEFAULT_PORT
        return Found(f"{host}:{port}", f"{self.coordinator}/{self.coordinator_port}")


class IndexedJob(Launcher):
    """Kubernetes' Indexed Job: only the process id; the coordinator is pod 0 under this pod's headless
    Service, when the process id is the completion index and there are peers."""

    def read_coordinator(self, env, known):
        pid, count = known.process_id, known.num_processes
        if pid is None or pid.source != self.process_id or count is None or count.value <= 1:
            return None
        return Found(indexed_job_coordinator(pid.value, known.fqdn()), f"{self.process_id}/hostname")


class Slurm(Launcher):
    """A SLURM step (SLURM_PROCID set; an sbatch script's own SLURM_NTASKS means nothing): the
    coordinator is the step's first host, on a port derived from the job id unless one is given."""

    STEP_NUM_PROCESSES = "SLURM_STEP_NUM_TASKS"
    NODELISTS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    JOB_ID = "SLURM_JOB_ID"

    def in_step(self, env) -> bool:
        return self.process_id in env

    def read_num_processes(self, env):
        if not self.in_step(env):
            return None
        return super().read_num_processes(env) or _read_int(env, self.STEP_NUM_PROCESSES, 1)

    def read_coordinator(self, env, known):
        if not self.in_step(env):
            return None
        nodelist = next((n for n in self.NODELISTS if env.get(n)), None)
        if nodelist is None:
            raise ConfigError(f"{self.process_id} is set but {self.NODELISTS[0]} (or {self.NODELISTS[1]}) is not")
        host = first_host(env[nodelist])
        if host is None:
            raise ConfigError(f"{nodelist}={env[nodelist]!r} names no host")
        if known.port is not None:
            port = known.port
        elif env.get(self.JOB_ID):
            port = SLURM_PORTS[_int(env[self.JOB_ID], self.JOB_ID, 0) % len(SLURM_PORTS)]
        else:
            raise ConfigError(f"{self.JOB_ID} is not set: pass --coordinator-port")
        return Found(f"{host}:{port}", nodelist)


JAX = Launcher("jax", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES", "JAX_COORDINATOR_ADDRESS")
KUBEFLOW_V1 = KubeflowV1("kubeflow-v1", "PROCESS_ID", "NUM_PROCESSES", "COORDINATOR_ADDRESS", "COORDINATOR_PORT")
INDEXED_JOB = IndexedJob("indexed-job", "JOB_COMPLETION_INDEX")
SLURM = Slurm("slurm", "SLURM_PROCID", "SLURM_NTASKS")
# Every launcher, in the order resolve_cluster() asks them (see the module doc).
LAUNCHERS = (JAX, KUBEFLOW_V1, INDEXED_JOB, SLURM)


def launcher_env_names(*launchers: Launcher) -> tuple[str, ...]:
    """Every variable the launchers set, then the two read on any launcher."""
    return tuple(n for la in launchers for n in la.names()) + (COORDINATOR_PORT_ENV, LOCAL_DEVICE_COUNT_ENV)


def _first(candidates) -> Found | None:
    return next((found for found in candidates if found is not None), None)


def _flag(value, name: str, minimum: int, maximum: int = INT32_MAX) -> Found | None:
    return None if value is None else Found(_int(value, name, minimum, maximum), name)


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
    # A port given here is checked under its own name, before any address built from it is.
    if coordinator_port is not None:
        port = _port(coordinator_port, "--coordinator-port")
    else:
        port = _port(env[COORDINATOR_PORT_ENV], COORDINATOR_PORT_ENV) if env.get(COORDINATOR_PORT_ENV) else None
    pid = _flag(process_id, "--process-id", 0) or _first(la.read_process_id(env) for la in LAUNCHERS)
    count = _flag(num_processes, "--num-processes", 1) or _first(la.read_num_processes(env) for la in LAUNCHERS)
    known = Known(pid, count, port, fqdn)
    coord = (Found(coordinator_address, "--coordinator-address") if coordinator_address else
             _first(la.read_coordinator(env, known) for la in LAUNCHERS))
    if coord is not None:
        address, name = coord.value, coord.source.split("/")[0]
        if ":" not in address.rsplit("]", 1)[-1]:  # host without port (IPv6 literals are bracketed)
            address = f"{address}:{port or DEFAULT_PORT}"
        coord = Found(_check_address(address, name), coord.source)
    pid, count = _complete(pid, count, coord)
    devices = (_flag(local_device_count, "--local-device-count", 1, MAX_LOCAL_DEVICES)
               or _read_int(env, LOCAL_DEVICE_COUNT_ENV, 1, MAX_LOCAL_DEVICES))
    sources = {key: found.source for key, found in (("process_id", pid), ("num_processes", count),
                                                    ("coordinator_address", coord), ("local_device_count", devices))
               if found is not None}
    return ClusterSpec(coord and coord.value, count.value, pid.value, devices and devices.value, sources)


def _complete(pid: Found | None, count: Found | None, coord: Found | None) -> tuple[Found, Found]:
    """The process id and count, a single process's where none is given; refuses a set that does not
    add up."""
    if pid is not None and count is None:
        raise ConfigError(f"{pid.source} is set but the number of processes is unknown: "
                          f"pass --num-processes or set {JAX.num_processes}")
    count = count or Found(1, "default")
    if pid is None:
        if count.value > 1:
            raise ConfigError(f"{count.source}={count.value} but the process id is unknown: "
                              f"pass --process-id or set {JAX.process_id}")
        pid = Found(0, "default")
    if pid.value >= count.value:
        raise ConfigError(f"{pid.source}={pid.value} is out of range for {count.value} processes")
    if count.value > 1 and coord is None:
        raise ConfigError(f"{count.value} processes need a coordinator: pass --coordinator-address HOST:PORT or set "
                          f"{JAX.coordinator}")
    return pid, count

"""Bring JAX up for a ClusterSpec: platform and local devices, coordinator probe, distributed init,
device-count check. jax is imported here, after the CPU device count has been decided."""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import socket
import threading
import time
from pathlib import Path

from trainer import fencing, rejoin
from trainer.cluster import ClusterSpec
from trainer.errors import ConfigError, CoordinatorError, DeviceCountError, first_line

# Seconds to wait for every peer to join, and before a silent peer counts as dead.
DEFAULT_INIT_TIMEOUT = 300
DEFAULT_HEARTBEAT_TIMEOUT = 100


def configure_platform(platform: str | None, local_device_count: int | None):
    """platform None: JAX picks (JAX_PLATFORMS, else the best it finds); a CPU backend still gets
    `local_device_count` devices when that is given."""
    import jax

    if platform is None:
        if local_device_count:
            jax.config.update("jax_num_cpu_devices", local_device_count)
    elif platform == "cpu":
        jax.config.update("jax_platforms", "cpu")
        # Must happen before the CPU backend is created: the manifests rely on N forced devices.
        jax.config.update("jax_num_cpu_devices", local_device_count or 1)
    elif platform == "gpu":
        jax.config.update("jax_platforms", "cuda")
    else:
        raise ConfigError(f"--platform {platform!r} must be cpu or gpu")
    return jax


def create_backend(jax, platform: str | None) -> None:
    """Create JAX's backend now (after jax.distributed.initialize, where there is one): a platform
    this machine cannot run is one line, not jax's traceback at the first use of a device."""
    try:
        jax.devices()
    except Exception as e:  # noqa: BLE001  e.g. --platform gpu with no GPU, driver or CUDA plugin (jax raises
        # RuntimeError, or AssertionError when no plugin registers the platform at all)
        raise DeviceCountError(f"--platform {platform}: no usable {str(platform).upper()} backend "
                               f"({first_line(e)})") from None


def wait_for_coordinator(address: str, timeout: float, log, retry_every: float = 0.5,
                         admitted=None, first_retry: float = 0.05) -> tuple[float, str]:
    """Block until a TCP connection to `address` succeeds (and `admitted(socket, deadline)` says yes,
    when given); return the seconds left of `timeout` and the address that answered, as IP:PORT.

    Followers call this before jax.distributed.initialize, whose own timeout ends in a C++ abort
    without a readable reason. DNS failures are retried too: a pod's record can appear late. Every
    address a name resolves to is tried (a replaced pod's old address can still be listed). Every
    attempt, the name lookup included (the resolver's own timeouts and retries can take many seconds),
    ends by the deadline. Attempts start `first_retry` apart, a gap that doubles up to `retry_every`:
    a coordinator that comes a moment later (a restart's peers start together) is found within
    that moment, one that comes late is not asked for many times a second, and the last moments do
    not spin against DNS.
    """
    host, port = _split(address)
    deadline = time.monotonic() + timeout
    last_error: object = None
    gap = max(min(first_retry, retry_every), 0.001)  # (never 0: a spin until the deadline)
    while True:
        started = time.monotonic()
        if started >= deadline:
            raise CoordinatorError(
                f"coordinator {address} did not come up within the init timeout of {timeout:g} s"
                f" (last error: {last_error})"
            )
        try:
            candidates = _lookup(host, port, deadline)
        except OSError as e:
            candidates, last_error = [], e
        for family, kind, proto, _, sockaddr in candidates:
            try:
                with socket.socket(family, kind, proto) as sock:
                    sock.settimeout(max(min(2.0, deadline - time.monotonic()), 0.001))
                    sock.connect(sockaddr)
                    if admitted is None or admitted(sock, deadline):
                        return max(deadline - time.monotonic(), 1.0), _join(sockaddr[0], port)
                    last_error = "it did not admit this process (another attempt's coordinator, or its gang has formed)"
            except OSError as e:
                last_error = e
        time.sleep(max(min(started + gap, deadline) - time.monotonic(), 0))
        gap = min(gap * 2, retry_every)


JAX_SERVICE_RETRY_SECONDS = 0.05  # the most between a follower's tries of JAX's service (an IP: no DNS)
OWN_LOOKUP_SECONDS = 10  # a resolver that hangs leaves the name to JAX, as before


def own_address(address: str) -> str:
    """The coordinator's own view of `address`: IP:PORT of the first address the name resolves to
    that belongs to this host; the loopback where it resolves only to others' (a Service's
    ClusterIP in front of this process: reaching itself through it is a hairpin, which a
    NetworkPolicy enforcer can drop, and JAX's service listens on every address anyway); `address`
    unchanged where it does not resolve."""
    host, port = _split(address)
    try:
        infos = _lookup(host, port, time.monotonic() + OWN_LOOKUP_SECONDS)
    except OSError:
        return address
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.bind((sockaddr[0], 0))  # only an address of this host can be bound
                return _join(sockaddr[0], port)
        except OSError:
            continue
    return _join("127.0.0.1", port) if infos else address


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _join(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _lookup(host: str, port: int, deadline: float) -> list:
    """getaddrinfo bounded by `deadline` (it takes no timeout itself): it runs in a daemon thread that
    is left behind if the deadline comes first."""
    result: list = []

    def resolve():
        try:
            result.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as e:
            result.append(e)

    thread = threading.Thread(target=resolve, daemon=True, name="coordinator-lookup")
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0))
    if not result:
        raise socket.timeout(f"looking up {host} did not finish by the deadline")
    if isinstance(result[0], OSError):
        raise result[0]
    return result[0]


def cpu_budget() -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup CPU quota (a Kubernetes
    CPU limit does not shrink the affinity mask)."""
    cpus = len(os.sched_getaffinity(0))
    quota = None
    try:  # cgroup v2: "max 100000" or "<quota> <period>"
        limit, period = open("/sys/fs/cgroup/cpu.max").read().split()
        quota = None if limit == "max" else int(limit) / int(period)
    except (OSError, ValueError):
        try:  # cgroup v1
            limit = int(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read())
            quota = limit / int(open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read()) if limit > 0 else None
        except (OSError, ValueError):
            pass
    return max(1, min(cpus, math.ceil(quota))) if quota else cpus


def local_sharers(spec: ClusterSpec, timeout: float) -> int:
    """How many processes of this job (this one included) run on this host on overlapping CPUs,
    learnt through the coordinator's key-value store before the CPU backend exists."""
    if not spec.distributed:
        return 1
    from jax._src import distributed  # the key-value store has no public API in jax 0.10

    client = distributed.global_state.client
    cpus = os.sched_getaffinity(0)
    client.key_value_set(f"jax_training/cpus/{spec.process_id}",
                         f"{socket.gethostname()} {','.join(map(str, sorted(cpus)))}")
    client.wait_at_barrier("jax_training/cpus", int(timeout * 1000))
    sharers = 0
    for _, value in client.key_value_dir_get("jax_training/cpus/"):
        host, _, theirs = value.partition(" ")
        sharers += host == socket.gethostname() and bool(cpus & {int(c) for c in theirs.split(",")})
    return max(sharers, 1)


def size_cpu_threads(spec: ClusterSpec, requested: int, timeout: float, log) -> None:
    """Size XLA's CPU thread pools (PJRT_NPROC, read when the CPU backend is created): `requested`,
    or this process's share of the CPUs it shares with other processes of the job. Processes
    that each spawn a thread per core on a shared machine slow each other down."""
    sharers = local_sharers(spec, timeout)  # every process takes part, whatever its settings
    if requested:
        os.environ["PJRT_NPROC"] = str(requested)
    elif "PJRT_NPROC" not in os.environ and "NPROC" not in os.environ:  # else set by the user or launcher
        budget = cpu_budget()
        # Several local devices each need a thread to meet in their collectives.
        threads = max(budget // sharers, spec.local_device_count or 1, 1)
        if sharers > 1:
            log(f"{sharers} processes share this host's {budget} CPUs: {threads} XLA CPU threads each")
        os.environ["PJRT_NPROC"] = str(threads)


def enable_compilation_cache(jax, directory: str, platform: str | None, log) -> str:
    """Keep compiled programs in their folder of `directory` (compilation_cache_key; written by
    process 0, read by all): a restarted or repeated run skips XLA compilation. Every program is
    kept, however fast it compiled. On the CPU, the cache may move (a copy, another mount point): no
    GPU cache's path is part of the programs' keys there. Returns the folder."""
    folder = os.path.join(directory, compilation_cache_key(platform))
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if platform == "cpu":  # XLA's GPU caches: their path enters every program's key, so a cache copied or
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")  # mounted elsewhere read nothing
        share_cpu_entries()
    if not CACHE_USE:
        CACHE_USE.update(requests=0, read=0, written=0)
        jax.monitoring.register_event_listener(_count_cache_use)
    log(f"compilation cache: {folder}")
    return folder


def share_cpu_entries() -> bool:
    """Give every process of a CPU job the cache keys process 0 writes. JAX writes entries from process
    0 only, and its key hashes the CPU topology's fingerprint, which differs per process (it marks the
    devices that are local): every other process missed, and compiled the step again on every restart
    (2 s here, on the path to the first step). The devices' kind, id and process instead: the same on
    every process, still another key for another layout (the device assignment, the program, the
    versions and flags stay in it). The host's CPU features stay in it too, as in JAX's fingerprint: a
    cache shared by hosts of other CPUs must miss, never load machine code this CPU cannot run.
    False where this jax has no such function (its own key is kept)."""
    from jax._src import cache_key  # no public API sets the key's parts (jax 0.10-0.12)

    if not callable(getattr(cache_key, "_hash_accelerator_config", None)):
        return False
    features = cpu_features().encode()

    def devices_alike_everywhere(hash_obj, devices, *_):
        hash_obj.update(features)
        for device in devices.flat:
            hash_obj.update(f"{device.device_kind}/{device.id}/{device.process_index};".encode())

    cache_key._hash_accelerator_config = devices_alike_everywhere
    return True


def cpu_features() -> str:
    """This host's architecture and CPU feature flags (what compiled CPU code may use)."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            flags = next((line.split(":", 1)[1].strip() for line in cpuinfo
                          if line.split(":", 1)[0].strip() in ("flags", "Features")), "")
    except OSError:  # no /proc (not Linux): the architecture and processor name still tell hosts apart
        flags = platform.processor()
    return f"{platform.machine()}:{flags}"


# Programs this process looked up in the persistent compilation cache, read from it and wrote to it
# (process 0 only), once it is enabled.
CACHE_USE: dict[str, int] = {}
_CACHE_EVENTS = {"/jax/compilation_cache/compile_requests_use_cache": "requests",
                 "/jax/compilation_cache/cache_hits": "read", "/jax/compilation_cache/cache_misses": "written"}


def describe_cache_use() -> str:
    """How many programs this process read from the cache, compiled (not in it) and wrote to it."""
    compiled = max(CACHE_USE["requests"] - CACHE_USE["read"], 0)
    return f"{CACHE_USE['read']} programs read, {compiled} compiled, {CACHE_USE['written']} written"


def _count_cache_use(event: str, **_) -> None:
    if event in _CACHE_EVENTS:
        CACHE_USE[_CACHE_EVENTS[event]] += 1


# The distributions whose version changes what XLA compiles, besides jax and jaxlib: the accelerators'
# plugins (read only off the CPU: a look-up costs a tenth of a second).
PLUGIN_DISTRIBUTIONS = ("jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt", "libtpu")


def compilation_cache_key(platform: str | None, versions: dict | None = None, source: str | None = None) -> str:
    """The cache folder of this trainer's programs on this JAX: a digest of the jax, jaxlib (and, off
    the CPU, plugin) versions, the platform asked for and the trainer's own source, so that an
    upgraded JAX, another backend or a changed trainer never reads an entry compiled by another
    (an old folder is left as it is). The jax version and the platform lead, for a reader."""
    platform = platform or os.environ.get("JAX_PLATFORMS", "") or "auto"
    versions = jax_versions(platform) if versions is None else versions
    source = source_digest() if source is None else source
    facts = json.dumps({"versions": versions, "platform": platform, "source": source}, sort_keys=True)
    readable = re.sub(r"[^A-Za-z0-9.+_-]+", "_", f"jax{versions.get('jax', '')}-{platform}")[:64]
    return f"{readable}-{hashlib.sha256(facts.encode()).hexdigest()[:16]}"


def jax_versions(platform: str) -> dict:
    import jax
    import jaxlib

    versions = {"jax": jax.__version__, "jaxlib": jaxlib.__version__}
    if platform != "cpu":
        from importlib import metadata

        for name in PLUGIN_DISTRIBUTIONS:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                pass
    return versions


def source_digest(root: Path | None = None) -> str:
    """SHA-256 of the trainer's Python source (`root`, by default the trainer package): every file's
    path within it and its bytes."""
    root = Path(__file__).parent if root is None else root
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# JAX's own init timeout ends in a C++ abort; ours fires this much earlier with a readable line.
ABORT_MARGIN_SECONDS = 30


def _join_deadline(spec: ClusterSpec, timeout: float, log) -> threading.Timer:
    """A timer that ends the process with the coordinator code if the peers have not all joined
    within `timeout` (os._exit: the main thread is blocked in C++)."""
    from trainer.exit_codes import COORDINATOR
    from trainer.preemption import flush_and_exit

    def expire():
        who = "its peers" if spec.process_id == 0 else "every peer"
        log(f"error: the {spec.num_processes} processes did not all join the coordinator "
            f"{spec.coordinator_address} within the init timeout of {timeout:g} s (process {spec.process_id} "
            f"waited for {who}); exiting with {COORDINATOR}")
        flush_and_exit(COORDINATOR)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    return timer


def _meet(spec: ClusterSpec, attempt: str, timeout: float, log, retry_every: float = 0.5) -> tuple[float, str]:
    """Attempt fencing (trainer/fencing.py): process 0 admits its gang on the coordinator's port, each
    other process is admitted there. Returns the seconds left of `timeout` and the coordinator's
    address as IP:PORT."""
    if spec.process_id != 0:
        def admitted(sock, deadline):
            return fencing.hello(sock, spec.process_id, attempt, deadline)

        return wait_for_coordinator(spec.coordinator_address, timeout, log, retry_every=retry_every,
                                    admitted=admitted)
    left = fencing.gather(spec.coordinator_address, spec.num_processes, attempt, timeout, log)
    return left, own_address(spec.coordinator_address)


def _meet_again(spec: ClusterSpec, attempt: str, init_timeout: float, log) -> tuple[float, str]:
    """_meet for a process restarted in place after its gang had met (trainer/rejoin.py): rounds of
    init_timeout each until rejoin.REJOIN_WAIT_SECONDS have passed, a line after each round that
    ended short. Each round dials (or listens) afresh, so a peer that went away mid-round, its
    connection never closed, holds no one up; after the first, followers try every
    rejoin.SLOW_RETRY_SECONDS (the cluster DNS is asked that often by every one of them)."""
    log(f"restarted in place after its gang had met: waiting for every peer without the init timeout of "
        f"{init_timeout:g} s (a lost peer's pod may wait for its node's repair or a person's action)")
    give_up = time.monotonic() + rejoin.REJOIN_WAIT_SECONDS
    retry_every = 0.5
    while True:
        try:
            return _meet(spec, attempt, init_timeout, log, retry_every)
        except CoordinatorError as error:
            if time.monotonic() >= give_up:
                raise
            log(f"still waiting for every peer: {first_line(error)}")
            retry_every = rejoin.SLOW_RETRY_SECONDS


def initialize(spec: ClusterSpec, platform: str | None, init_timeout: float, heartbeat_timeout: int, log,
               cpu_threads: int = 0, compilation_cache: str | None = None):
    """Configure and initialise JAX for `spec`; return the jax module."""
    jax = configure_platform(platform, spec.local_device_count)
    # SIGTERM/SIGUSR1 are the trainer's (see trainer/preemption.py for why not JAX's service).
    jax.config.update("jax_enable_preemption_service", False)
    if compilation_cache:
        enable_compilation_cache(jax, compilation_cache, platform, log)
    if spec.distributed:
        # JAX's client gets the coordinator's IP, not its name: gRPC resolves a name once and, when
        # that answer is stale (a replaced pod's old record), resolves again only 30 s later.
        # Attempt fencing first (trainer/fencing.py): process 0 admits its gang on the port, then JAX takes it.
        attempt = fencing.attempt_of()
        met = rejoin.mark()
        if rejoin.has_met(met):
            timeout, address = _meet_again(spec, attempt, init_timeout, log)
        else:
            timeout, address = _meet(spec, attempt, init_timeout, log)
        if spec.process_id != 0:
            # JAX's service: process 0 starts it on the port once every follower has closed its
            # admitted connection (and it has looked up its own address), so the first tries here
            # usually come a few ms too soon.
            timeout, address = wait_for_coordinator(address, timeout, log, retry_every=JAX_SERVICE_RETRY_SECONDS,
                                                    first_retry=0.005)
        local_ids = None
        if platform == "gpu" and spec.local_device_count:
            local_ids = list(range(spec.local_device_count))
        deadline = _join_deadline(spec, timeout, log)
        deadline.start()
        jax.distributed.initialize(
            coordinator_address=address,
            num_processes=spec.num_processes,
            process_id=spec.process_id,
            local_device_ids=local_ids,
            cluster_detection_method="deactivate",
            initialization_timeout=max(int(timeout), 1) + ABORT_MARGIN_SECONDS,
            heartbeat_timeout_seconds=int(heartbeat_timeout),
        )
        deadline.cancel()
        rejoin.record_met(met, log)
    if platform == "cpu":  # (platform None leaves XLA's threads to JAX and the user)
        size_cpu_threads(spec, cpu_threads, init_timeout, log)
    create_backend(jax, platform)
    check_local_devices(jax, spec)  # this process's own: the others do not see it
    try:
        check_global_devices(jax, spec)
    except DeviceCountError:
        _leave_together(spec, init_timeout)
        raise
    return jax


LEAVE_WAIT_SECONDS = 10


def _leave_together(spec: ClusterSpec, init_timeout: float) -> None:
    """A layout error that every process sees: wait until all have seen it, then disconnect all
    together before exiting, so that none loses the coordinator first and aborts (XLA ends a process
    whose coordination service vanished) instead of printing the error. A slow peer is still
    creating its backend (a part of its start-up): it gets the init timeout to arrive."""
    if not spec.distributed:
        return
    try:
        from jax._src import distributed  # the barrier has no public API in jax 0.10

        wait_ms = int(max(LEAVE_WAIT_SECONDS, init_timeout) * 1000)
        distributed.global_state.client.wait_at_barrier("jax_training/device-check", wait_ms)
    except Exception:  # noqa: BLE001  a peer that never comes: leave anyway
        return
    try:
        # Every process's client leaves (the service's shutdown barrier) before process 0 stops
        # the service: the barrier alone let process 0 exit while a peer was still connected.
        distributed.global_state.shutdown()
    except Exception:  # noqa: BLE001  leaving anyway is all that is left
        pass


def check_devices(jax, spec: ClusterSpec) -> None:
    check_local_devices(jax, spec)
    check_global_devices(jax, spec)


def check_local_devices(jax, spec: ClusterSpec) -> None:
    local = jax.local_device_count()
    if spec.local_device_count and local != spec.local_device_count:
        source = spec.sources.get("local_device_count", "--local-device-count")
        raise DeviceCountError(f"{local} local devices, {source} asks for {spec.local_device_count}")


def check_global_devices(jax, spec: ClusterSpec) -> None:
    """The layout every process sees alike (the global device count, JAX's process numbering)."""
    local = jax.local_device_count()
    expected = spec.num_processes * local
    if jax.device_count() != expected:
        raise DeviceCountError(
            f"{jax.device_count()} global devices, expected {spec.num_processes} processes x {local} local = {expected}"
        )
    if jax.process_count() != spec.num_processes or jax.process_index() != spec.process_id:
        raise DeviceCountError(
            f"JAX reports process {jax.process_index()}/{jax.process_count()}, expected {spec.process_id}/{spec.num_processes}"
        )

"""Bring JAX up for a ClusterSpec: platform and local devices, coordinator probe, distributed init,
device-count check. jax is imported here, after the CPU device count has been decided."""

from __future__ import annotations

import socket
import time

from trainer.cluster import ClusterSpec
from trainer.errors import ConfigError, CoordinatorError, DeviceCountError


def configure_platform(platform: str, local_device_count: int | None):
    import jax

    if platform == "cpu":
        jax.config.update("jax_platforms", "cpu")
        # Must happen before the CPU backend is created: the manifests rely on N forced devices.
        jax.config.update("jax_num_cpu_devices", local_device_count or 1)
    elif platform == "gpu":
        jax.config.update("jax_platforms", "cuda")
    else:
        raise ConfigError(f"--platform {platform!r} must be cpu or gpu")
    return jax


def wait_for_coordinator(address: str, timeout: float, log) -> float:
    """Block until a TCP connection to `address` succeeds; return the seconds left of `timeout`.

    Followers call this before jax.distributed.initialize, whose own timeout ends in a C++ abort
    without a readable reason. DNS failures are retried too: a pod's record can appear late.
    """
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CoordinatorError(
                f"coordinator {address} did not come up within the init timeout of {timeout:g} s"
                f" (last error: {last_error})"
            )
        try:
            with socket.create_connection((host, int(port)), timeout=min(2.0, remaining)):
                return max(deadline - time.monotonic(), 1.0)
        except OSError as e:
            last_error = e
            time.sleep(min(0.5, max(remaining - 0.01, 0)))


def initialize(spec: ClusterSpec, platform: str, init_timeout: float, heartbeat_timeout: int, log):
    """Configure and initialise JAX for `spec`; return the jax module."""
    jax = configure_platform(platform, spec.local_device_count)
    if spec.distributed:
        timeout = init_timeout
        if spec.process_id != 0:
            timeout = wait_for_coordinator(spec.coordinator_address, init_timeout, log)
        local_ids = None
        if platform == "gpu" and spec.local_device_count:
            local_ids = list(range(spec.local_device_count))
        jax.distributed.initialize(
            coordinator_address=spec.coordinator_address,
            num_processes=spec.num_processes,
            process_id=spec.process_id,
            local_device_ids=local_ids,
            cluster_detection_method="deactivate",
            initialization_timeout=max(int(timeout), 1),
            heartbeat_timeout_seconds=int(heartbeat_timeout),
        )
    check_devices(jax, spec)
    return jax


def check_devices(jax, spec: ClusterSpec) -> None:
    local = jax.local_device_count()
    if spec.local_device_count and local != spec.local_device_count:
        raise DeviceCountError(f"{local} local devices, --local-device-count asks for {spec.local_device_count}")
    expected = spec.num_processes * local
    if jax.device_count() != expected:
        raise DeviceCountError(
            f"{jax.device_count()} global devices, expected {spec.num_processes} processes x {local} local = {expected}"
        )
    if jax.process_count() != spec.num_processes or jax.process_index() != spec.process_id:
        raise DeviceCountError(
            f"JAX reports process {jax.process_index()}/{jax.process_count()}, expected {spec.process_id}/{spec.num_processes}"
        )

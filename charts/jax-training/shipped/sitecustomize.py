"""On the PYTHONPATH of a job that ships a program folder (program.dir): a program may call
jax.distributed.initialize() with no arguments, as on SLURM. JAX reads only JAX_COORDINATOR_ADDRESS
from the environment; once JAX imports its cluster detection, a cluster environment that reads the
pod's variables joins it: ours (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID), else the
training-operator's of a JAXJob (COORDINATOR_ADDRESS and _PORT, NUM_PROCESSES, PROCESS_ID). JAX
itself is not imported here (a program may set JAX's variables before it imports JAX). JAX's CPU
backend creates JAX_LOCAL_DEVICE_COUNT devices."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_CLUSTERS = "jax._src.clusters"


def _found() -> tuple[str, str, str] | None:
    """(coordinator host:port, process count, process id) from the pod's variables."""
    env = os.environ.get
    if env("JAX_COORDINATOR_ADDRESS") and env("JAX_NUM_PROCESSES") and env("JAX_PROCESS_ID"):
        return env("JAX_COORDINATOR_ADDRESS"), env("JAX_NUM_PROCESSES"), env("JAX_PROCESS_ID")
    if env("COORDINATOR_ADDRESS") and env("COORDINATOR_PORT") and env("NUM_PROCESSES") and env("PROCESS_ID"):
        return f"{env('COORDINATOR_ADDRESS')}:{env('COORDINATOR_PORT')}", env("NUM_PROCESSES"), env("PROCESS_ID")
    return None


def _register(clusters) -> None:
    class JaxTrainingPod(clusters.ClusterEnv):
        name = "jaxtrainingpod"

        @classmethod
        def is_env_present(cls) -> bool:
            return _found() is not None

        @classmethod
        def get_coordinator_address(cls, timeout_secs=None, override_coordinator_port=None) -> str:
            return _found()[0]

        @classmethod
        def get_process_count(cls) -> int:
            return int(_found()[1])

        @classmethod
        def get_process_id(cls) -> int:
            return int(_found()[2])

        @classmethod
        def get_local_process_id(cls):
            return None


class _AfterClusters(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != _CLUSTERS:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            _register(module)
        spec.loader.exec_module = exec_and_register
        return spec


if _found():
    sys.meta_path.insert(0, _AfterClusters())
    if os.environ.get("JAX_LOCAL_DEVICE_COUNT"):  # JAX's CPU backend alone reads it
        os.environ.setdefault("JAX_NUM_CPU_DEVICES", os.environ["JAX_LOCAL_DEVICE_COUNT"])

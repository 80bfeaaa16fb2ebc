"""On the PYTHONPATH of a job that ships a program folder (program.dir): a program may call
jax.distributed.initialize() with no arguments, as on SLURM. JAX reads only JAX_COORDINATOR_ADDRESS
from the environment; once JAX imports its cluster detection, a cluster environment that reads the
pod's JAX_NUM_PROCESSES and JAX_PROCESS_ID joins it. JAX itself is not imported here (a program may
set JAX's variables before it imports JAX). JAX's CPU backend creates JAX_LOCAL_DEVICE_COUNT devices."""

import importlib.abc
import importlib.util
import os
import sys

_CLUSTERS = "jax._src.clusters"
_VARIABLES = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def _register(clusters) -> None:
    class JaxTrainingPod(clusters.ClusterEnv):
        name = "jaxtrainingpod"

        @classmethod
        def is_env_present(cls) -> bool:
            return all(os.environ.get(name) for name in _VARIABLES)

        @classmethod
        def get_coordinator_address(cls, timeout_secs=None, override_coordinator_port=None) -> str:
            return os.environ["JAX_COORDINATOR_ADDRESS"]

        @classmethod
        def get_process_count(cls) -> int:
            return int(os.environ["JAX_NUM_PROCESSES"])

        @classmethod
        def get_process_id(cls) -> int:
            return int(os.environ["JAX_PROCESS_ID"])

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


if all(os.environ.get(name) for name in _VARIABLES):
    sys.meta_path.insert(0, _AfterClusters())
    if os.environ.get("JAX_LOCAL_DEVICE_COUNT"):  # JAX's CPU backend alone reads it
        os.environ.setdefault("JAX_NUM_CPU_DEVICES", os.environ["JAX_LOCAL_DEVICE_COUNT"])

"""Data-parallel training steps: `pmap` (pmap + pmean of gradients) and `sharded` (jit over a Mesh).

Both average gradients over the global batch (never sum them), so the result does not depend on
how the batch is split over processes and devices. State is moved in and out as host NumPy trees
(params, opt_state), which is what checkpoints store.
"""

from __future__ import annotations

import jax
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from trainer.model import loss_and_correct, num_layers

AXIS = "batch"


def _host(x) -> np.ndarray:
    """This process's first shard of `x` as NumPy (all of it when replicated)."""
    return np.asarray(x.addressable_data(0))


def _replica(x) -> np.ndarray:
    """One replica of a pmap output (leading axis = local devices)."""
    return np.asarray(x.addressable_data(0))[0]


class PmapStrategy:
    name = "pmap"

    def __init__(self, optimizer: optax.GradientTransformation, local_devices: int):
        self.local_devices = local_devices

        def step(state, x, y):
            params, opt_state = state
            (loss, correct), grads = jax.value_and_grad(loss_and_correct, has_aux=True)(params, x, y)
            grads = jax.lax.pmean(grads, AXIS)  # average: equal shards -> the global-batch gradient
            loss = jax.lax.pmean(loss, AXIS)
            correct = jax.lax.psum(correct, AXIS)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), loss, correct

        self._step = jax.pmap(step, axis_name=AXIS, donate_argnums=0)
        self._replicate = jax.pmap(lambda t: t)

    def put_state(self, host_state):
        stacked = jax.tree.map(lambda x: np.broadcast_to(x, (self.local_devices, *np.shape(x))), host_state)
        return self._replicate(stacked)

    def get_state(self, state):
        return jax.tree.map(_replica, state)

    def step(self, state, x, y):
        n = self.local_devices
        x = x.reshape(n, x.shape[0] // n, *x.shape[1:])
        y = y.reshape(n, y.shape[0] // n)
        return self._step(state, x, y)

    @staticmethod
    def scalar(value) -> float:
        return float(_replica(value))


class ShardedStrategy:
    """jit over a (data, model) Mesh; a model axis > 1 shards the hidden layers' features."""

    name = "sharded"

    def __init__(self, optimizer: optax.GradientTransformation, model_parallelism: int, num_layers_: int):
        devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
        mp = model_parallelism
        self.mesh = Mesh(np.array(devices).reshape(len(devices) // mp, mp), ("data", "model"))
        self.batch_sharding = NamedSharding(self.mesh, P("data"))
        self.replicated = NamedSharding(self.mesh, P())
        self.param_specs = {}
        for i in range(num_layers_):
            last = i == num_layers_ - 1
            # Hidden features are split over `model`: column-parallel hidden layers, row-parallel output.
            self.param_specs[f"w{i}"] = P("model", None) if last else P(None, "model")
            self.param_specs[f"b{i}"] = P() if last else P("model")
        self.optimizer = optimizer
        self._jit_step = None

    def _sharding_for(self, path) -> NamedSharding:
        # Optimizer state mirrors the params tree (momentum, mu, nu): reuse the param's spec.
        for entry in reversed(path):
            key = getattr(entry, "key", None)
            if isinstance(key, str) and key in self.param_specs:
                return NamedSharding(self.mesh, self.param_specs[key])
        return self.replicated

    def put_state(self, host_state):
        self.state_shardings = jax.tree_util.tree_map_with_path(lambda p, _: self._sharding_for(p), host_state)
        state = jax.tree.map(
            lambda x, s: jax.make_array_from_callback(np.shape(x), s, lambda idx: np.asarray(x)[idx]),
            host_state, self.state_shardings,
        )
        if self._jit_step is None:
            optimizer = self.optimizer

            def step(state, x, y):
                params, opt_state = state
                (loss, correct), grads = jax.value_and_grad(loss_and_correct, has_aux=True)(params, x, y)
                updates, opt_state = optimizer.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), loss, correct

            self._jit_step = jax.jit(
                step,
                out_shardings=(self.state_shardings, self.replicated, self.replicated),
                donate_argnums=0,
            )
        return state

    def get_state(self, state):
        leaves, treedef = jax.tree.flatten(state)
        out = []
        for leaf in leaves:
            if leaf.is_fully_replicated or leaf.is_fully_addressable:
                out.append(np.asarray(leaf) if leaf.is_fully_addressable else _host(leaf))
            else:  # collective: every process calls get_state at the same point
                out.append(np.asarray(multihost_utils.process_allgather(leaf, tiled=True)))
        return jax.tree.unflatten(treedef, out)

    def step(self, state, x, y):
        gx = jax.make_array_from_process_local_data(self.batch_sharding, x)
        gy = jax.make_array_from_process_local_data(self.batch_sharding, y)
        return self._jit_step(state, gx, gy)

    @staticmethod
    def scalar(value) -> float:
        return float(_host(value))


def make_strategy(name: str, optimizer, local_devices: int, model_parallelism: int, params_template):
    if name == "pmap":
        return PmapStrategy(optimizer, local_devices)
    if name == "sharded":
        return ShardedStrategy(optimizer, model_parallelism, num_layers(params_template))
    raise ValueError(f"unknown strategy {name!r}")


@jax.jit
def _eval_correct(params, x, y):
    return loss_and_correct(params, x, y)[1]


def count_correct(params, images: np.ndarray, labels: np.ndarray, batch: int = 2000) -> int:
    """Correct predictions of host params on host data, computed on this process's first device."""
    device = jax.local_devices()[0]
    params = jax.device_put(params, device)
    total = 0
    for start in range(0, len(images), batch):
        x = jax.device_put(images[start:start + batch].astype(np.float32) / np.float32(255.0), device)
        y = jax.device_put(labels[start:start + batch], device)
        total += int(_eval_correct(params, x, y))
    return total

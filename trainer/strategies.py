"""Data-parallel training steps: `pmap` (pmap + pmean of gradients) and `sharded` (jit over a Mesh).

Both average gradients over the global batch (never sum them), so the result does not depend on
how the batch is split over processes and devices. State is moved in and out as host NumPy trees
(params, opt_state), which is what checkpoints store.

Training runs in chunks (`run`): the training set stays on the device as uint8, and one dispatch
runs up to `chunk` steps in a device loop whose trip count is an argument, so chunks of any length
share one compiled program (and give the same bits however a run is cut into chunks). Per step the
loop gathers its batch from the (chunk, batch) int32 indices sent with the dispatch; the state's
buffers are donated to the dispatch that replaces them.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from trainer import models
from trainer.optimization import loss_and_correct

AXIS = "batch"


def _host(x) -> np.ndarray:
    """This process's first shard of `x` as NumPy (all of it when replicated)."""
    return np.asarray(x.addressable_data(0))


def _replica(x) -> np.ndarray:
    """One replica of a pmap output (leading axis = local devices)."""
    return np.asarray(x.addressable_data(0))[0]


def _update(optimizer, params, opt_state, grads):
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def _one_buffer(grads):
    """The gradients as one flat buffer, and the function that splits it back into their tree.

    XLA's CPU runtime runs an all-reduce of several arrays as one collective call per array, and
    between processes each gloo call pays its own round trips over TCP: one buffer makes the step's
    gradient all-reduce one call (benchmarks/README.md, "2 × 1 epoch ÷ 1 × 1"). The sums are the
    same bits; the optimizer update that reads them through the split may be emitted with fused
    multiply-adds, so parameters can differ from an all-reduce per array in the last bit. Leaves of
    different dtypes keep one call each."""
    leaves, treedef = jax.tree.flatten(grads)
    if len({leaf.dtype for leaf in leaves}) != 1:
        return grads, lambda tree: tree
    starts = np.cumsum([0] + [leaf.size for leaf in leaves]).tolist()
    # Written in place slice by slice: XLA's CPU concatenate of these sizes on more than one
    # thread took 50-70 ms here, the in-place writes under 1 ms.
    flat = jnp.zeros((starts[-1],), leaves[0].dtype)
    for leaf, start in zip(leaves, starts):
        flat = jax.lax.dynamic_update_slice(flat, leaf.ravel(), (start,))

    def unflatten(buffer):
        return jax.tree.unflatten(treedef, [buffer[start:end].reshape(leaf.shape)
                                            for leaf, start, end in zip(leaves, starts, starts[1:])])

    return flat, unflatten


def _batch(images, labels, idx):
    """Gather a batch from the device-resident uint8 data set, scaled as data.local_batch does."""
    x = jnp.take(images, idx, axis=0, mode="clip").astype(jnp.float32) / jnp.float32(255.0)
    return x, jnp.take(labels, idx, axis=0, mode="clip")


def _chunk_loop(step, state, images, labels, idx, count, constrain=lambda x: x):
    """Run `step` on the batches idx[0], ..., idx[count - 1]; per-step losses and correct counts
    come back in (chunk,) arrays (entries from `count` on are zero)."""
    chunk = idx.shape[0]

    def body(i, carry):
        state, losses, corrects = carry
        x, y = _batch(images, labels, idx[i])
        state, loss, correct = step(state, constrain(x), constrain(y))
        return state, losses.at[i].set(loss), corrects.at[i].set(correct)

    init = (state, jnp.zeros((chunk,), jnp.float32), jnp.zeros((chunk,), jnp.int32))
    return jax.lax.fori_loop(0, count, body, init)


class PmapStrategy:
    name = "pmap"

    def __init__(self, optimizer: optax.GradientTransformation, local_devices: int,
                 allreduce_dtype: str = "float32", precision: str = "float32", model: str = models.DEFAULT):
        self.local_devices = local_devices
        loss_fn = partial(loss_and_correct, precision=precision, model=model)
        reduced = jnp.dtype(allreduce_dtype)

        def mean_grads(grads):
            if jax.device_count() == 1:
                return grads  # an all-reduce over one device would only copy them
            flat, unflatten = _one_buffer(grads)
            if reduced == jnp.float32:
                return unflatten(jax.lax.pmean(flat, AXIS))  # average: equal shards -> the global-batch gradient
            # Divide in float32, send `reduced` (half the bytes for bfloat16), sum, widen again.
            n = jax.lax.psum(1, AXIS)
            return unflatten(jax.tree.map(lambda g: jax.lax.psum((g / n).astype(reduced), AXIS).astype(g.dtype), flat))

        def local_step(state, x, y):  # this device's loss and correct count
            params, opt_state = state
            (loss, correct), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x, y)
            return _update(optimizer, params, opt_state, mean_grads(grads)), loss, correct

        def global_metrics(state, loss, correct):
            return state, jax.lax.pmean(loss, AXIS), jax.lax.psum(correct, AXIS)

        def run(*args):
            # Losses and counts are reduced once per chunk, not in every step's all-reduce.
            return global_metrics(*_chunk_loop(local_step, *args))

        self._step = jax.pmap(lambda *a: global_metrics(*local_step(*a)), axis_name=AXIS, donate_argnums=0)
        self._run = jax.pmap(run, axis_name=AXIS, in_axes=(0, 0, 0, 0, None), donate_argnums=0)
        # Same axis name as the steps: their outputs then match the inputs, and nothing is compiled twice.
        self._replicate = jax.pmap(lambda t: t, axis_name=AXIS)

    def _put_replicated(self, tree):
        return self._replicate(jax.tree.map(lambda x: np.broadcast_to(x, (self.local_devices, *np.shape(x))), tree))

    def put_state(self, host_state):
        return self._put_replicated(host_state)

    def get_state(self, state):
        return jax.tree.map(_replica, state)

    def put_data(self, images: np.ndarray, labels: np.ndarray):
        """The training set on every local device (each process holds all of it)."""
        return self._put_replicated((images, labels))

    def run(self, state, data, idx: np.ndarray, count: int):
        """Steps on this process's batches idx[:count] (idx: (chunk, local batch) int32); returns
        (state, losses, corrects) with host (count,) arrays of the global loss and correct count."""
        n, (chunk, local_batch) = self.local_devices, idx.shape
        # Device d takes the d-th contiguous part of each local batch, as `step` does.
        per_device = idx.reshape(chunk, n, local_batch // n).transpose(1, 0, 2)
        state, losses, corrects = self._run(state, *data, per_device, np.int32(count))
        return state, _replica(losses)[:count], _replica(corrects)[:count]

    def step(self, state, x, y):
        """One step on a host batch (x: (local batch, 784) float32)."""
        n = self.local_devices
        x = x.reshape(n, x.shape[0] // n, *x.shape[1:])
        y = y.reshape(n, y.shape[0] // n)
        return self._step(state, x, y)

    @staticmethod
    def scalar(value) -> float:
        return float(_replica(value))


class ShardedStrategy:
    """jit over a (data, model) Mesh; a model axis > 1 shards parameters as the model's sharding rules
    say (trainer/models: param_specs)."""

    name = "sharded"

    def __init__(self, optimizer: optax.GradientTransformation, model_parallelism: int, param_specs: dict,
                 precision: str = "float32", model: str = models.DEFAULT):
        devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
        mp = model_parallelism
        self.mesh = Mesh(np.array(devices).reshape(len(devices) // mp, mp), ("data", "model"))
        self.batch_sharding = NamedSharding(self.mesh, P("data"))
        self.chunk_sharding = NamedSharding(self.mesh, P(None, "data"))  # (chunk, global batch) indices
        self.replicated = NamedSharding(self.mesh, P())
        self.param_specs = {name: P(*axes) for name, axes in param_specs.items()}  # the model's sharding rules
        self.optimizer = optimizer
        self.loss_fn = partial(loss_and_correct, precision=precision, model=model)
        self._jit_step = self._jit_run = None

    def _sharding_for(self, path) -> NamedSharding:
        # Optimizer state mirrors the params tree (momentum, mu, nu): reuse the param's spec.
        for entry in reversed(path):
            key = getattr(entry, "key", None)
            if isinstance(key, str) and key in self.param_specs:
                return NamedSharding(self.mesh, self.param_specs[key])
        return self.replicated

    def _train_step(self, state, x, y):
        params, opt_state = state
        (loss, correct), grads = jax.value_and_grad(self.loss_fn, has_aux=True)(params, x, y)
        return _update(self.optimizer, params, opt_state, grads), loss, correct

    def put_state(self, host_state):
        self.state_shardings = jax.tree_util.tree_map_with_path(lambda p, _: self._sharding_for(p), host_state)
        state = jax.tree.map(
            lambda x, s: jax.make_array_from_callback(np.shape(x), s, lambda idx: np.asarray(x)[idx]),
            host_state, self.state_shardings,
        )
        if self._jit_step is None:
            out = (self.state_shardings, self.replicated, self.replicated)
            self._jit_step = jax.jit(self._train_step, out_shardings=out, donate_argnums=0)
            constrain = partial(jax.lax.with_sharding_constraint, shardings=self.batch_sharding)
            self._jit_run = jax.jit(partial(_chunk_loop, self._train_step, constrain=constrain),
                                    out_shardings=out, donate_argnums=0)
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

    def put_data(self, images: np.ndarray, labels: np.ndarray):
        """The training set replicated over the mesh (each process holds all of it)."""
        return tuple(jax.make_array_from_callback(a.shape, self.replicated, lambda idx, a=a: a[idx])
                     for a in (images, labels))

    def run(self, state, data, idx: np.ndarray, count: int):
        """As PmapStrategy.run; idx holds this process's part of each global batch."""
        gidx = jax.make_array_from_process_local_data(self.chunk_sharding, idx)
        state, losses, corrects = self._jit_run(state, *data, gidx, np.int32(count))
        return state, _host(losses)[:count], _host(corrects)[:count]

    def step(self, state, x, y):
        gx = jax.make_array_from_process_local_data(self.batch_sharding, x)
        gy = jax.make_array_from_process_local_data(self.batch_sharding, y)
        return self._jit_step(state, gx, gy)

    @staticmethod
    def scalar(value) -> float:
        return float(_host(value))


def make_strategy(name: str, optimizer, local_devices: int, model_parallelism: int = 1,
                  allreduce_dtype: str = "float32", precision: str = "float32", model: str = models.DEFAULT,
                  settings: dict | None = None):
    if name == "pmap":
        return PmapStrategy(optimizer, local_devices, allreduce_dtype, precision, model)
    if name == "sharded":
        if allreduce_dtype != "float32":
            raise ValueError("a reduced-precision gradient all-reduce needs --strategy pmap")
        return ShardedStrategy(optimizer, model_parallelism, models.get(model).param_specs(settings), precision, model)
    raise ValueError(f"unknown strategy {name!r}")


@partial(jax.jit, static_argnames=("precision", "model"))
def _eval_correct(params, x, y, precision, model):
    return loss_and_correct(params, x, y, precision, model)[1]


def count_correct(params, images: np.ndarray, labels: np.ndarray, batch: int = 2000,
                  precision: str = "float32", model: str = models.DEFAULT) -> int:
    """Correct predictions of host params on host data, computed on this process's first device in
    the training precision (the model as it was trained)."""
    device = jax.local_devices()[0]
    params = jax.device_put(params, device)
    total = 0
    for start in range(0, len(images), batch):
        x = jax.device_put(images[start:start + batch].astype(np.float32) / np.float32(255.0), device)
        y = jax.device_put(labels[start:start + batch], device)
        total += int(_eval_correct(params, x, y, precision, model))
    return total

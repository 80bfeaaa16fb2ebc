"""The MLP (784-1024-1024-10 by default), its loss and the optax optimizer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

DEFAULT_HIDDEN = (1024, 1024)
INPUTS, CLASSES = 784, 10


def layer_sizes(hidden: tuple[int, ...]) -> list[int]:
    return [INPUTS, *hidden, CLASSES]


def init_params(seed: int, hidden: tuple[int, ...] = DEFAULT_HIDDEN) -> dict[str, np.ndarray]:
    """He-normal weights, zero biases, as host float32 arrays (identical on every process).

    Drawn with NumPy: no XLA program has to be compiled before training starts.
    """
    sizes = layer_sizes(hidden)
    rng = np.random.default_rng([seed, 0x6D6C70])
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = rng.standard_normal((n_in, n_out), np.float32) * np.float32(np.sqrt(2.0 / n_in))
        params[f"b{i}"] = np.zeros((n_out,), np.float32)
    return params


def init_opt_state(optimizer: optax.GradientTransformation, params):
    """optimizer.init(params) as host arrays, without compiling an XLA program: the shapes come
    from tracing, the values are zeros (sgd, adam and adamw start from zeros; a test checks it)."""
    return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), jax.eval_shape(optimizer.init, params))


def num_layers(params) -> int:
    return sum(1 for k in params if k.startswith("w"))


def apply(params, x):
    n = num_layers(params)
    for i in range(n - 1):
        x = jax.nn.relu(x @ params[f"w{i}"] + params[f"b{i}"])
    return x @ params[f"w{n - 1}"] + params[f"b{n - 1}"]


def loss_and_correct(params, x, y):
    """Mean cross-entropy over the batch and the number of correct predictions."""
    logits = apply(params, x)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    correct = jnp.sum(jnp.argmax(logits, -1) == y)
    return loss, correct


def make_optimizer(name: str, learning_rate: float, momentum: float, total_steps: int = 0,
                   schedule: str = "constant") -> optax.GradientTransformation:
    """optax optimizer; schedule "cosine" decays learning_rate to 0 over total_steps."""
    if schedule == "cosine":
        rate = optax.cosine_decay_schedule(learning_rate, max(total_steps, 1))
    elif schedule == "constant":
        rate = learning_rate
    else:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}")
    if name == "sgd":
        return optax.sgd(rate, momentum=momentum or None)
    if name == "adam":
        return optax.adam(rate)
    if name == "adamw":
        return optax.adamw(rate)
    raise ValueError(f"unknown optimizer {name!r}")

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
    """He-normal weights, zero biases, as host float32 arrays (identical on every process)."""
    sizes = layer_sizes(hidden)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(sizes) - 1)
    params = {}
    for i, (key, n_in, n_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
        w = jax.random.normal(key, (n_in, n_out), jnp.float32) * np.float32(np.sqrt(2.0 / n_in))
        params[f"w{i}"] = np.asarray(w)
        params[f"b{i}"] = np.zeros((n_out,), np.float32)
    return params


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

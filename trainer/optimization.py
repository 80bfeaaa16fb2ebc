"""What training minimises (softmax cross-entropy of a registered model's logits) and the optax
optimizer that does it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from trainer import models


def init_opt_state(optimizer: optax.GradientTransformation, params):
    """optimizer.init(params) as host arrays, without compiling an XLA program: the shapes come
    from tracing, the values are zeros (sgd, adam and adamw start from zeros; a test checks it)."""
    return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), jax.eval_shape(optimizer.init, params))


def loss_and_correct(params, x, y, precision: str = "float32", model: str = models.DEFAULT):
    """Mean cross-entropy over the batch (float32) and the number of correct predictions."""
    logits = models.get(model).network().apply(params, x, precision)
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

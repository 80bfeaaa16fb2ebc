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


@jax.custom_vjp
def _bf16_matmul(x, w):
    """x (bfloat16) @ w (float32, multiplied as bfloat16), accumulated in float32."""
    return jnp.dot(x, w.astype(jnp.bfloat16), preferred_element_type=jnp.float32)


def _bf16_matmul_fwd(x, w):
    return _bf16_matmul(x, w), (x, w.astype(jnp.bfloat16))


def _bf16_matmul_bwd(saved, g):
    # Without this rule the float32 cotangent would turn both backward matmuls into float32 ones.
    x, w = saved
    g = g.astype(jnp.bfloat16)
    dx = jnp.dot(g, w.T, preferred_element_type=jnp.float32).astype(jnp.bfloat16)
    dw = jnp.dot(x.T, g, preferred_element_type=jnp.float32)  # float32, as the master weights
    return dx, dw


_bf16_matmul.defvjp(_bf16_matmul_fwd, _bf16_matmul_bwd)


def apply(params, x, precision: str = "float32"):
    """Logits (float32). In bfloat16 every matmul, forward and backward, multiplies bfloat16
    operands and accumulates in float32; activations between layers are bfloat16, bias adds and
    the weight gradients float32."""
    n = num_layers(params)
    if precision == "float32":
        for i in range(n - 1):
            x = jax.nn.relu(x @ params[f"w{i}"] + params[f"b{i}"])
        return x @ params[f"w{n - 1}"] + params[f"b{n - 1}"]
    x = x.astype(jnp.bfloat16)
    for i in range(n - 1):
        x = jax.nn.relu(_bf16_matmul(x, params[f"w{i}"]) + params[f"b{i}"]).astype(jnp.bfloat16)
    return _bf16_matmul(x, params[f"w{n - 1}"]) + params[f"b{n - 1}"]


def loss_and_correct(params, x, y, precision: str = "float32"):
    """Mean cross-entropy over the batch (float32) and the number of correct predictions."""
    logits = apply(params, x, precision)
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

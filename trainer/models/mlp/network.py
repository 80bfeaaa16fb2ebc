"""The MLP's parameters and forward pass (jax)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from trainer.models.mlp import DEFAULT_HIDDEN, MLP


def init_params(seed: int, hidden: tuple[int, ...] = DEFAULT_HIDDEN) -> dict[str, np.ndarray]:
    """He-normal weights, zero biases, as host float32 arrays (identical on every process).

    Drawn with NumPy: no XLA program has to be compiled before training starts.
    """
    rng = np.random.default_rng([seed, 0x6D6C70])
    params = {}
    for i, (n_in, n_out) in enumerate(MLP().matmul_shapes(hidden)):
        params[f"w{i}"] = rng.standard_normal((n_in, n_out), np.float32) * np.float32(np.sqrt(2.0 / n_in))
        params[f"b{i}"] = np.zeros((n_out,), np.float32)
    return params


def _num_layers(params) -> int:
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
    n = _num_layers(params)
    if precision == "float32":
        for i in range(n - 1):
            x = jax.nn.relu(x @ params[f"w{i}"] + params[f"b{i}"])
        return x @ params[f"w{n - 1}"] + params[f"b{n - 1}"]
    x = x.astype(jnp.bfloat16)
    for i in range(n - 1):
        x = jax.nn.relu(_bf16_matmul(x, params[f"w{i}"]) + params[f"b{i}"]).astype(jnp.bfloat16)
    return _bf16_matmul(x, params[f"w{n - 1}"]) + params[f"b{n - 1}"]

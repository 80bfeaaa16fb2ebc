"""jax building blocks the models share."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def he_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    """He-normal weights as a host float32 array: drawn with NumPy, so no XLA program has to be
    compiled before training starts, and identical on every process."""
    return rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / fan_in))


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


def dense(x, w, b, precision: str):
    """x @ w + b. In bfloat16 the matmul, forward and backward, multiplies bfloat16 operands and
    accumulates in float32 (x must be bfloat16 already); the bias add and the weight gradient are
    float32."""
    if precision == "float32":
        return x @ w + b
    return _bf16_matmul(x, w) + b


def activation_dtype(precision: str):
    """What activations between layers are kept in."""
    return jnp.float32 if precision == "float32" else jnp.bfloat16

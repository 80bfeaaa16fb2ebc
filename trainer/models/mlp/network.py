"""The MLP's parameters and forward pass (jax)."""

from __future__ import annotations

import jax
import numpy as np

from trainer.models.layers import activation_dtype, dense, he_normal
from trainer.models.mlp import MLP


def init_params(seed: int, settings: dict | None = None) -> dict[str, np.ndarray]:
    """He-normal weights, zero biases, as host float32 arrays."""
    rng = np.random.default_rng([seed, 0x6D6C70])
    params = {}
    for i, (n_in, n_out) in enumerate(MLP().matmul_shapes(settings)):
        params[f"w{i}"] = he_normal(rng, (n_in, n_out), n_in)
        params[f"b{i}"] = np.zeros((n_out,), np.float32)
    return params


def apply(params, x, precision: str = "float32"):
    """Logits (float32) of flattened images x. In bfloat16 every matmul, forward and backward,
    multiplies bfloat16 operands and accumulates in float32; activations between layers are
    bfloat16, bias adds and the weight gradients float32."""
    n = sum(1 for k in params if k.startswith("w"))
    x = x.astype(activation_dtype(precision))
    for i in range(n - 1):
        x = jax.nn.relu(dense(x, params[f"w{i}"], params[f"b{i}"], precision)).astype(activation_dtype(precision))
    return dense(x, params[f"w{n - 1}"], params[f"b{n - 1}"], precision)

"""The CNN's parameters and forward pass (jax; NHWC images, HWIO kernels)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from trainer.models.base import SIDE
from trainer.models.cnn import CNN, KERNEL, POOL
from trainer.models.layers import activation_dtype, dense, he_normal


def init_params(seed: int, settings: dict | None = None) -> dict[str, np.ndarray]:
    """He-normal kernels, zero biases, as host float32 arrays."""
    rng = np.random.default_rng([seed, 0x636E6E])
    model, params = CNN(), {}
    for i, (_, cin, cout) in enumerate(model.convolutions(settings)):
        params[f"conv{i}.w"] = he_normal(rng, (KERNEL, KERNEL, cin, cout), KERNEL * KERNEL * cin)
        params[f"conv{i}.b"] = np.zeros((cout,), np.float32)
    for i, (n_in, n_out) in enumerate(model.matmul_shapes(settings)):
        params[f"dense{i}.w"] = he_normal(rng, (n_in, n_out), n_in)
        params[f"dense{i}.b"] = np.zeros((n_out,), np.float32)
    return params


def _conv(x, w, b, precision: str):
    """A 5x5 convolution without padding of NHWC x with an HWIO kernel, as a matmul of each output
    pixel's window (im2col from 25 slices): XLA's CPU convolutions run an order of magnitude slower
    inside the training loop's while loop than matmuls do, and the shared bfloat16 matmul keeps
    every product, forward and backward, in bfloat16 with float32 accumulation."""
    n, height, width, cin = x.shape
    out_h, out_w = height - KERNEL + 1, width - KERNEL + 1
    windows = jnp.concatenate([x[:, i:i + out_h, j:j + out_w, :] for i in range(KERNEL) for j in range(KERNEL)],
                              axis=-1)  # (n, out_h, out_w, 25 * cin), in the kernel's (row, column, channel) order
    out = dense(windows.reshape(n * out_h * out_w, KERNEL * KERNEL * cin), w.reshape(-1, w.shape[-1]), b, precision)
    return out.reshape(n, out_h, out_w, -1)


def _pool(x):
    n, height, width, c = x.shape
    return x.reshape(n, height // POOL, POOL, width // POOL, POOL, c).max(axis=(2, 4))


def apply(params, x, precision: str = "float32"):
    """Logits (float32) of flattened images x. In bfloat16 every matmul (the convolutions' too),
    forward and backward, multiplies bfloat16 operands and accumulates in float32; activations
    between layers are bfloat16, bias adds and the weight gradients float32."""
    act = activation_dtype(precision)
    x = x.reshape(-1, SIDE, SIDE, 1).astype(act)
    convs = sum(1 for k in params if k.startswith("conv") and k.endswith(".w"))
    for i in range(convs):
        x = _pool(jax.nn.relu(_conv(x, params[f"conv{i}.w"], params[f"conv{i}.b"], precision)).astype(act))
    x = x.reshape(x.shape[0], -1)
    last = sum(1 for k in params if k.startswith("dense") and k.endswith(".w")) - 1
    for i in range(last):
        x = jax.nn.relu(dense(x, params[f"dense{i}.w"], params[f"dense{i}.b"], precision)).astype(act)
    return dense(x, params[f"dense{last}.w"], params[f"dense{last}.b"], precision)

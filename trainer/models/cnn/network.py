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


_DIMENSIONS = ("NHWC", "HWIO", "NHWC")


def _conv_as(x, w, out_dtype=None):
    """A 5x5 convolution without padding (XLA's), its products accumulated into out_dtype."""
    return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=_DIMENSIONS,
                                        preferred_element_type=out_dtype)


@jax.custom_vjp
def _bf16_conv(x, w):
    """x (bfloat16) convolved with w (float32, multiplied as bfloat16), accumulated in float32."""
    return _conv_as(x, w.astype(jnp.bfloat16), jnp.float32)


def _bf16_conv_fwd(x, w):
    return _bf16_conv(x, w), (x, w.astype(jnp.bfloat16))


def _bf16_conv_bwd(saved, g):
    # jax's own transpose would widen both backward convolutions to float32 operands: they are
    # written out here, on bfloat16 operands, accumulated in float32.
    x, w = saved
    g = g.astype(jnp.bfloat16)
    pad = KERNEL - 1
    # dx: the full convolution of g with the spatially flipped kernel, its in and out channels swapped
    dx = jax.lax.conv_general_dilated(g, w[::-1, ::-1], (1, 1), ((pad, pad), (pad, pad)),
                                      dimension_numbers=("NHWC", "HWOI", "NHWC"),
                                      preferred_element_type=jnp.float32).astype(jnp.bfloat16)
    # dw[i, j, c, o] = sum over n, h, w of x[n, h + i, w + j, c] g[n, h, w, o]: x's channels as the
    # batch, its examples as the summed features, g as the kernel (float32, as the master weights)
    dw = jax.lax.conv_general_dilated(x, g, (1, 1), "VALID", dimension_numbers=("CHWN", "IHWO", "HWNC"),
                                      preferred_element_type=jnp.float32)
    return dx, dw


_bf16_conv.defvjp(_bf16_conv_fwd, _bf16_conv_bwd)


def _conv(x, w, b, precision: str):
    if precision == "float32":
        return _conv_as(x, w) + b
    return _bf16_conv(x, w) + b


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

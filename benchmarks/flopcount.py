"""Analytic FLOP count of one training step, from the model registry (trainer/models; no jax).

Only the matrix multiplications and convolutions are counted, one multiply-add = 2 FLOPs; each
model states its own count (forward_flops, backward_flops). For the MLP:
  forward   2·B·Σ n_in·n_out                  (x @ W for every layer)
  backward  2·B·Σ n_in·n_out                  (dW = xᵀ @ dy for every layer)
          + 2·B·Σ_{layers after the first} n_in·n_out   (dx = dy @ Wᵀ; the input needs no gradient)
Bias adds, ReLU, softmax cross-entropy and the optimizer update are O(B·Σn + params), under 1 %
of the total for the default model, and are left out (XLA's own count is reported next to it).
"""

from __future__ import annotations

from trainer import models


def step_flops(batch: int, model: str = models.DEFAULT, settings: dict | None = None) -> int:
    return models.get(model).step_flops(batch, settings)


def param_count(model: str = models.DEFAULT, settings: dict | None = None) -> int:
    return models.get(model).param_count(settings)


def describe(batch: int, model: str = models.DEFAULT, settings: dict | None = None) -> dict:
    m = models.get(model)
    fwd, bwd = m.forward_flops(batch, settings), m.backward_flops(batch, settings)
    return {
        "model": m.layers(settings),
        "batch_size": batch,
        "forward_flops": fwd,
        "backward_flops": bwd,
        "step_flops": fwd + bwd,
        "flops_per_image": (fwd + bwd) / batch,
        "params": m.param_count(settings),
        "gradient_bytes_fp32": 4 * m.param_count(settings),
        "counting": "matmuls and convolutions only, 1 multiply-add = 2 FLOPs; backward = weight gradients of "
                    "every layer + input gradients of every layer but the first",
    }

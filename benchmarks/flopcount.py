"""Analytic FLOP count of one training step, from the model registry (trainer/models; no jax).

Only the matrix multiplications are counted, one multiply-add = 2 FLOPs; for the MLP:
  forward   2·B·Σ n_in·n_out                  (x @ W for every layer)
  backward  2·B·Σ n_in·n_out                  (dW = xᵀ @ dy for every layer)
          + 2·B·Σ_{layers after the first} n_in·n_out   (dx = dy @ Wᵀ; the input needs no gradient)
Bias adds, ReLU, softmax cross-entropy and the optimizer update are O(B·Σn + params), under 1 %
of the total for the default model, and are left out (XLA's own count is reported next to it).
"""

from __future__ import annotations

from trainer import models
from trainer.models.mlp import DEFAULT_HIDDEN


def step_flops(batch: int, hidden=DEFAULT_HIDDEN, model: str = models.DEFAULT) -> int:
    return models.get(model).step_flops(batch, tuple(hidden))


def param_count(hidden=DEFAULT_HIDDEN, model: str = models.DEFAULT) -> int:
    return models.get(model).param_count(tuple(hidden))


def describe(batch: int, hidden=DEFAULT_HIDDEN, model: str = models.DEFAULT) -> dict:
    m, hidden = models.get(model), tuple(hidden)
    fwd, bwd = m.forward_flops(batch, hidden), m.backward_flops(batch, hidden)
    return {
        "model": "-".join(map(str, m.layer_sizes(hidden))),
        "batch_size": batch,
        "forward_flops": fwd,
        "backward_flops": bwd,
        "step_flops": fwd + bwd,
        "flops_per_image": (fwd + bwd) / batch,
        "params": m.param_count(hidden),
        "gradient_bytes_fp32": 4 * m.param_count(hidden),
        "counting": "matmuls only, 1 multiply-add = 2 FLOPs; backward = weight gradients of every layer "
                    "+ input gradients of every layer but the first",
    }

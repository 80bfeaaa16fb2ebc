"""Analytic FLOP count of one training step of the MLP (pure Python, no jax).

Only the matrix multiplications are counted, one multiply-add = 2 FLOPs:
  forward   2·B·Σ n_in·n_out                  (x @ W for every layer)
  backward  2·B·Σ n_in·n_out                  (dW = xᵀ @ dy for every layer)
          + 2·B·Σ_{layers after the first} n_in·n_out   (dx = dy @ Wᵀ; the input needs no gradient)
Bias adds, ReLU, softmax cross-entropy and the optimizer update are O(B·Σn + params), under 1 %
of the total for the default model, and are left out (XLA's own count is reported next to it).
"""

from __future__ import annotations

INPUTS, CLASSES = 784, 10


def layer_sizes(hidden: tuple[int, ...]) -> list[int]:
    return [INPUTS, *hidden, CLASSES]


def _products(hidden) -> list[int]:
    sizes = layer_sizes(tuple(hidden))
    return [a * b for a, b in zip(sizes[:-1], sizes[1:])]


def forward_flops(batch: int, hidden=(1024, 1024)) -> int:
    return 2 * batch * sum(_products(hidden))


def backward_flops(batch: int, hidden=(1024, 1024)) -> int:
    products = _products(hidden)
    return 2 * batch * sum(products) + 2 * batch * sum(products[1:])


def step_flops(batch: int, hidden=(1024, 1024)) -> int:
    return forward_flops(batch, hidden) + backward_flops(batch, hidden)


def param_count(hidden=(1024, 1024)) -> int:
    sizes = layer_sizes(tuple(hidden))
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))


def describe(batch: int, hidden=(1024, 1024)) -> dict:
    fwd, bwd = forward_flops(batch, hidden), backward_flops(batch, hidden)
    return {
        "model": "-".join(map(str, layer_sizes(tuple(hidden)))),
        "batch_size": batch,
        "forward_flops": fwd,
        "backward_flops": bwd,
        "step_flops": fwd + bwd,
        "flops_per_image": (fwd + bwd) / batch,
        "params": param_count(hidden),
        "gradient_bytes_fp32": 4 * param_count(hidden),
        "counting": "matmuls only, 1 multiply-add = 2 FLOPs; backward = weight gradients of every layer "
                    "+ input gradients of every layer but the first",
    }

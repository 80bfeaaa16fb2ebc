"""The MLP: 784 inputs, hidden ReLU layers (1024-1024 by default), 10 logits. Facts only; the
network is in network.py."""

from __future__ import annotations

import importlib

INPUTS, CLASSES = 784, 10
DEFAULT_HIDDEN = (1024, 1024)


class MLP:
    name = "mlp"
    inputs, classes = INPUTS, CLASSES
    # The training setting (a TrainConfig field and a training.* variable) whose sizes a model axis
    # (strategy sharded) must divide: every hidden size, as their features are split.
    model_axis_rule = "hidden_sizes"

    @staticmethod
    def layer_sizes(hidden=DEFAULT_HIDDEN) -> list[int]:
        return [INPUTS, *hidden, CLASSES]

    def matmul_shapes(self, hidden=DEFAULT_HIDDEN) -> list[tuple[int, int]]:
        sizes = self.layer_sizes(tuple(hidden))
        return list(zip(sizes[:-1], sizes[1:]))

    def param_specs(self, hidden=DEFAULT_HIDDEN) -> dict[str, tuple]:
        """Mesh axis per parameter dimension: hidden features are split over "model"
        (column-parallel hidden layers, a row-parallel output layer)."""
        specs = {}
        last = len(hidden)
        for i in range(last + 1):
            specs[f"w{i}"] = ("model", None) if i == last else (None, "model")
            specs[f"b{i}"] = () if i == last else ("model",)
        return specs

    def forward_flops(self, batch: int, hidden=DEFAULT_HIDDEN) -> int:
        """Matmul FLOPs (a multiply-add = 2) of the forward pass."""
        return 2 * batch * sum(a * b for a, b in self.matmul_shapes(hidden))

    def backward_flops(self, batch: int, hidden=DEFAULT_HIDDEN) -> int:
        """Weight gradients of every layer and input gradients of every layer but the first (the
        images need none)."""
        products = [a * b for a, b in self.matmul_shapes(hidden)]
        return 2 * batch * (sum(products) + sum(products[1:]))

    def step_flops(self, batch: int, hidden=DEFAULT_HIDDEN) -> int:
        return self.forward_flops(batch, hidden) + self.backward_flops(batch, hidden)

    def param_count(self, hidden=DEFAULT_HIDDEN) -> int:
        return sum(a * b + b for a, b in self.matmul_shapes(hidden))

    @staticmethod
    def network():
        """The jax implementation: init_params(seed, hidden) and apply(params, x, precision)."""
        return importlib.import_module("trainer.models.mlp.network")

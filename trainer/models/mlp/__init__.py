"""The MLP: 784 inputs, ReLU hidden layers (1024-1024 by default), 10 logits. Facts only; the
network is in network.py."""

from __future__ import annotations

from trainer.models.base import Model, Setting, dense_specs


class MLP(Model):
    name = "mlp"
    description = "mlp, a multilayer perceptron with ReLU hidden layers"
    settings = (
        Setting("hidden_sizes", (1024, 1024), "sizes of the ReLU hidden layers between the 784 inputs and the "
                                              "10 logits; with strategy sharded, model_parallelism divides each"),
    )
    model_axis = "hidden_sizes"
    export_format = "jax-training/mlp-v1"
    parameters = {"w<i>": "kernel of layer i, shape (inputs, outputs), float32",
                  "b<i>": "bias of layer i, shape (outputs,), float32"}
    forward = "x = relu(x @ w<i> + b<i>) for every layer but the last; logits = x @ w<last> + b<last>"
    load_snippet = """\
import numpy as np
from safetensors.numpy import load_file

params = load_file("model/model.safetensors")  # w0, b0, w1, b1, ...: float32, layer by layer

def predict(images):  # uint8 MNIST images, shape (n, 28, 28)
    x = images.reshape(len(images), -1).astype(np.float32) / 255
    layers = len(params) // 2
    for i in range(layers):
        x = x @ params[f"w{i}"] + params[f"b{i}"]
        if i < layers - 1:
            x = np.maximum(x, 0)  # ReLU
    return x.argmax(-1)  # the digits
"""

    def matmul_shapes(self, settings: dict | None = None) -> list[tuple[int, int]]:
        sizes = [self.inputs, *self.resolve(settings)["hidden_sizes"], self.classes]
        return list(zip(sizes[:-1], sizes[1:]))

    def param_specs(self, settings: dict | None = None) -> dict[str, tuple]:
        return dense_specs([(f"w{i}", f"b{i}") for i in range(len(self.matmul_shapes(settings)))])

    def forward_flops(self, batch: int, settings: dict | None = None) -> int:
        return 2 * batch * sum(a * b for a, b in self.matmul_shapes(settings))

    def backward_flops(self, batch: int, settings: dict | None = None) -> int:
        """Weight gradients of every layer and input gradients of every layer but the first (the
        images need none)."""
        products = [a * b for a, b in self.matmul_shapes(settings)]
        return 2 * batch * (sum(products) + sum(products[1:]))

    def param_count(self, settings: dict | None = None) -> int:
        return sum(a * b + b for a, b in self.matmul_shapes(settings))

    def layers(self, settings: dict | None = None) -> str:
        return "-".join(str(n) for n in (self.inputs, *self.resolve(settings)["hidden_sizes"], self.classes))

    def card(self, settings: dict | None = None) -> str:
        return f"A multilayer perceptron ({self.layers(settings).replace('-', ' → ')}, ReLU)"


MODEL = MLP()

"""The CNN: a LeNet-like convolutional network. The 784 inputs are a 28x28x1 image (NHWC); each
entry of `channels` is a 5x5 convolution (no padding) with ReLU and 2x2 max pooling (28 → 12 → 4
pixels a side), then ReLU dense layers (`dense_sizes`) and 10 logits. Facts only; the network is in
network.py."""

from __future__ import annotations

from trainer.models.base import SIDE, Model, Setting, dense_specs

KERNEL, POOL = 5, 2


class CNN(Model):
    name = "cnn"
    description = ("cnn, a LeNet-like convolutional network (5x5 convolutions with ReLU and 2x2 max pooling, "
                   "then ReLU dense layers)")
    settings = (
        Setting("channels", (20, 50), "output channels of the 5x5 convolutions, each followed by ReLU and 2x2 "
                                      "max pooling (28, 12 then 4 pixels a side)", maximum=1024, max_items=2),
        Setting("dense_sizes", (500,), "sizes of the ReLU dense layers between the last pooling and the 10 "
                                       "logits; with strategy sharded, model_parallelism divides each",
                max_items=8),
    )
    model_axis = "dense_sizes"
    export_format = "jax-training/cnn-v1"
    parameters = {"conv<i>.w": "kernel of convolution i, shape (5, 5, in channels, out channels) (HWIO), float32",
                  "conv<i>.b": "bias of convolution i, shape (out channels,), float32",
                  "dense<i>.w": "kernel of dense layer i (the last gives the logits), shape (inputs, outputs), "
                                "float32",
                  "dense<i>.b": "bias of dense layer i, shape (outputs,), float32"}
    forward = ("x = the image as (28, 28, 1); for every convolution: x = maxpool2x2(relu(conv5x5_valid(x, conv<i>.w) "
               "+ conv<i>.b)); x = flatten(x) (row-major, channels last); x = relu(x @ dense<i>.w + dense<i>.b) "
               "for every dense layer but the last; logits = x @ dense<last>.w + dense<last>.b")
    load_snippet = """\
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from safetensors.numpy import load_file

params = load_file("model/model.safetensors")  # conv0.w, conv0.b, ..., dense0.w, dense0.b, ...: float32
convs = sum(1 for k in params if k.startswith("conv") and k.endswith(".w"))
denses = sum(1 for k in params if k.startswith("dense") and k.endswith(".w"))

def logits(images):  # uint8 MNIST images, shape (n, 28, 28)
    x = images.reshape(len(images), 28, 28, 1).astype(np.float32) / 255
    for i in range(convs):
        kernel = params[f"conv{i}.w"]  # (5, 5, in, out)
        windows = sliding_window_view(x, kernel.shape[:2], axis=(1, 2))  # (n, h, w, in, 5, 5)
        x = np.maximum(np.einsum("nhwcij,ijco->nhwo", windows, kernel, optimize=True) + params[f"conv{i}.b"], 0)
        n, h, w, c = x.shape
        x = x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))  # 2x2 max pooling
    x = x.reshape(len(x), -1)
    for i in range(denses):
        x = x @ params[f"dense{i}.w"] + params[f"dense{i}.b"]
        if i < denses - 1:
            x = np.maximum(x, 0)  # ReLU
    return x

def predict(images):  # the digits, 1000 images at a time
    return np.concatenate([logits(images[i:i + 1000]).argmax(-1) for i in range(0, len(images), 1000)])
"""

    def convolutions(self, settings: dict | None = None) -> list[tuple[int, int, int]]:
        """(output side, in channels, out channels) of each convolution."""
        out, side, cin = [], SIDE, 1
        for cout in self.resolve(settings)["channels"]:
            side -= KERNEL - 1
            out.append((side, cin, cout))
            side, cin = side // POOL, cout
        return out

    def matmul_shapes(self, settings: dict | None = None) -> list[tuple[int, int]]:
        """(inputs, outputs) of the dense layers, the logits' last."""
        side, _, channels = self.convolutions(settings)[-1]
        sizes = [(side // POOL) ** 2 * channels, *self.resolve(settings)["dense_sizes"], self.classes]
        return list(zip(sizes[:-1], sizes[1:]))

    def _products(self, settings) -> list[int]:
        """Multiply-adds per image of each layer, in order."""
        convs = [side * side * KERNEL * KERNEL * cin * cout for side, cin, cout in self.convolutions(settings)]
        return convs + [a * b for a, b in self.matmul_shapes(settings)]

    def forward_flops(self, batch: int, settings: dict | None = None) -> int:
        return 2 * batch * sum(self._products(settings))

    def backward_flops(self, batch: int, settings: dict | None = None) -> int:
        """Weight gradients of every layer and input gradients of every layer but the first."""
        products = self._products(settings)
        return 2 * batch * (sum(products) + sum(products[1:]))

    def param_count(self, settings: dict | None = None) -> int:
        convs = sum(KERNEL * KERNEL * cin * cout + cout for _, cin, cout in self.convolutions(settings))
        return convs + sum(a * b + b for a, b in self.matmul_shapes(settings))

    def param_specs(self, settings: dict | None = None) -> dict[str, tuple]:
        """Convolutions replicated; the dense layers split as the MLP's."""
        specs = {}
        for i in range(len(self.resolve(settings)["channels"])):
            specs[f"conv{i}.w"], specs[f"conv{i}.b"] = (), ()
        dense = [(f"dense{i}.w", f"dense{i}.b") for i in range(len(self.matmul_shapes(settings)))]
        return {**specs, **dense_specs(dense)}

    def layers(self, settings: dict | None = None) -> str:
        values = self.resolve(settings)
        return "-".join([*(f"conv{c}-pool" for c in values["channels"]), *map(str, values["dense_sizes"]),
                         str(self.classes)])

    def card(self, settings: dict | None = None) -> str:
        values = self.resolve(settings)
        convs = " → ".join(f"conv 5x5 ({c}) → max pool 2x2" for c in values["channels"])
        dense = " → ".join(map(str, (*values["dense_sizes"], self.classes)))
        return f"A LeNet-like convolutional network (28x28x1 → {convs} → {dense}, ReLU)"


MODEL = CNN()

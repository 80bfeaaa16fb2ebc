"""What a model declares (standard library only: jaxgen, the chart's generated files and the
benchmarks read it): its settings, its parameter and FLOP facts, its sharding rules and how its
exported parameters are read. The jax implementation lives in the model's network.py.

Every model sees the same input: an MNIST image flattened to 784 float32 values in [0, 1] (a
convolutional network reshapes it itself), and gives 10 logits.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass

from trainer.integers import parse_int, shown

INPUTS, CLASSES = 784, 10  # 28 x 28 images; the digits 0-9
SIDE = 28


@dataclass(frozen=True)
class Setting:
    """One setting of a model: the trainer flag --<model>-<name>, the variable
    training.<model>.<name>. An integer, or a list of integers when the default is a tuple."""

    name: str
    default: int | tuple[int, ...]
    help: str  # a phrase, as a flag's help; the schema's description is it as a sentence
    minimum: int = 1
    maximum: int = 65536
    max_items: int = 16  # a list's length
    choices: tuple[int, ...] | None = None

    @property
    def is_list(self) -> bool:
        return isinstance(self.default, tuple)

    def parse(self, text: str):
        """The flag's value (argparse's type): an integer or comma-separated integers in bounds."""
        values = tuple(parse_int(x) for x in text.split(","))
        if None in values:
            kind = "a comma-separated list of integers" if self.is_list else "an integer"
            raise argparse.ArgumentTypeError(f"{shown(text)} is not {kind}")
        if not self.is_list and len(values) != 1:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
        if not 1 <= len(values) <= self.max_items:
            raise argparse.ArgumentTypeError(f"{text!r}: between 1 and {self.max_items} sizes")
        for value in values:
            if not self.minimum <= value <= self.maximum or (self.choices and value not in self.choices):
                allowed = (f"one of {', '.join(map(str, self.choices))}" if self.choices
                           else f"in [{self.minimum}, {self.maximum}]")
                raise argparse.ArgumentTypeError(f"{text!r}: {value} is not {allowed}")
        return values if self.is_list else values[0]

    def schema(self) -> dict:
        """This setting's JSON schema (in variables/schema.json, written by make generate)."""
        number = {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}
        if self.choices:
            number = {"type": "integer", "enum": list(self.choices)}
        described = {"description": self.help[0].upper() + self.help[1:] + "."}
        if not self.is_list:
            return {**number, **described, "default": self.default}
        return {"type": "array", **described, "minItems": 1, "maxItems": self.max_items, "items": number,
                "default": list(self.default)}


def dense_specs(layers: list[tuple[str, str]]) -> dict[str, tuple]:
    """The sharding rule of a stack of dense layers, (kernel, bias) names in order: the hidden
    features are split over "model" (column-parallel hidden layers, a row-parallel output layer,
    whose bias is replicated)."""
    specs = {}
    for i, (kernel, bias) in enumerate(layers):
        last = i == len(layers) - 1
        specs[kernel], specs[bias] = (("model", None), ()) if last else ((None, "model"), ("model",))
    return specs


class Model:
    """A registered model. Subclasses set the class attributes and the facts below; `settings`
    arguments are {setting name: value} dicts (missing names take the defaults)."""

    name: str
    description: str  # one sentence: the schema's training.model and the chart README say it
    settings: tuple[Setting, ...]
    # The list setting whose every size a model axis (strategy sharded) must divide, as those
    # features are split over it. Every model names one (the trainer and both renderers' checks read it).
    model_axis: str
    inputs, classes = INPUTS, CLASSES
    # What config.json's "format" names, how the parameters are laid out and a NumPy reader of them
    # that needs only numpy and safetensors (in the model card and tested without this project).
    export_format: str
    parameters: dict[str, str]
    forward: str
    load_snippet: str

    def resolve(self, settings: dict | None = None) -> dict:
        """Every setting's value: the defaults, overridden by `settings`."""
        values = {s.name: s.default for s in self.settings}
        values.update(settings or {})
        return values

    def network(self):
        """The jax implementation: init_params(seed, settings) and apply(params, x, precision)."""
        return importlib.import_module(f"{type(self).__module__}.network")

    def step_flops(self, batch: int, settings: dict | None = None) -> int:
        return self.forward_flops(batch, settings) + self.backward_flops(batch, settings)

    # Facts each model states (FLOPs count matmuls and convolutions only, a multiply-add = 2):
    def forward_flops(self, batch: int, settings: dict | None = None) -> int:
        raise NotImplementedError

    def backward_flops(self, batch: int, settings: dict | None = None) -> int:
        raise NotImplementedError

    def param_count(self, settings: dict | None = None) -> int:
        raise NotImplementedError

    def param_specs(self, settings: dict | None = None) -> dict[str, tuple]:
        """Mesh axis ("model" or None) per dimension of each parameter; () = replicated."""
        raise NotImplementedError

    def layers(self, settings: dict | None = None) -> str:
        """The architecture in a few words, e.g. 784-1024-1024-10."""
        raise NotImplementedError

    def card(self, settings: dict | None = None) -> str:
        """The model card's one-line description of the network."""
        raise NotImplementedError

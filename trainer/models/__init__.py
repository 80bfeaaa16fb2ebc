"""The model registry: `training.model` names an entry.

An entry's facts (input size, classes, FLOPs per step, parameter count, the sizes a model axis
splits and how each parameter is sharded) need nothing beyond the standard library, so jaxgen and
the benchmarks read them too; `network()` imports the jax implementation, only to train.
Adding a model: a folder like mlp/ (facts in __init__.py, the network in network.py), one line in
MODELS below and the name in variables/schema.json's training.model enum.
"""

from __future__ import annotations

from trainer.models.mlp import MLP

MODELS = {model.name: model for model in (MLP(),)}
NAMES = tuple(MODELS)
DEFAULT = "mlp"


def get(name: str):
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r} (one of {', '.join(NAMES)})") from None


def facts_json() -> str:
    """What the Helm chart's checks read (charts/jax-training/files/models.json, make sync-schema):
    per model, the training key whose sizes a model axis must divide."""
    import json

    return json.dumps({name: {"model_axis": m.model_axis_rule} for name, m in MODELS.items()}, indent=1) + "\n"


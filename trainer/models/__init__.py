"""The model registry: `training.model` names an entry.

A model is a folder (mlp/ for instance): its __init__.py declares, with the standard library only,
its settings, parameter and FLOP facts and sharding rules (a trainer.models.base.Model; jaxgen, the
chart's generated files and the benchmarks read them), its network.py the jax implementation.
Adding one: its folder and one line in MODELS below (the folder's name is the model's); `make generate`
then writes its variables into the complete schema (the chart's values.schema.json) and the chart's files.
"""

from __future__ import annotations

import importlib

from trainer.models.base import Model, Setting

# One line per model: its folder, whose __init__.py names its Model instance MODEL.
MODELS: dict[str, Model] = {name: importlib.import_module(f"trainer.models.{name}").MODEL for name in (
    "mlp",
    "cnn",
)}
NAMES = tuple(MODELS)
DEFAULT = "mlp"


def get(name: str) -> Model:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r} (one of {', '.join(NAMES)})") from None


def variables():
    """(variable, model, setting) for every model's every setting, e.g. ("training.mlp.hidden_sizes",
    MLP, its hidden_sizes Setting): the trainer's flags, the schema and the defaults come from these."""
    for model in MODELS.values():
        for setting in model.settings:
            yield f"training.{model.name}.{setting.name}", model, setting


def schema_fragment() -> dict:
    """The schema of training.model and of each model's settings object training.<model>, as
    the complete schema holds them under training's properties (`make generate` adds them to the
    hand-written variables/schema.json)."""
    fragment = {"model": {
        "type": "string",
        "description": "The network, from the trainer's model registry (trainer/models): "
                       + "; ".join(m.description for m in MODELS.values()) + ".",
        "enum": list(NAMES),
        "default": DEFAULT,
    }}
    for model in MODELS.values():
        fragment[model.name] = {
            "type": "object",
            "description": f"Settings of the {model.name} model (used when training.model is {model.name}).",
            "additionalProperties": False,
            "required": [s.name for s in model.settings],
            "properties": {s.name: s.schema() for s in model.settings},
        }
    return fragment


def facts_json() -> str:
    """What the Helm chart's checks read (charts/jax-training/files/models.json, make generate):
    per model, the setting of training.<model> whose sizes a model axis must divide (null: none)."""
    import json

    return json.dumps({name: {"model_axis": m.model_axis} for name, m in MODELS.items()}, indent=1) + "\n"


__all__ = ["MODELS", "NAMES", "DEFAULT", "Model", "Setting", "get", "variables", "schema_fragment", "facts_json"]

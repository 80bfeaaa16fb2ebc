"""The trainer's settings: one dataclass holds every default, help text and choice list.

`python -m trainer train` builds its flags from these fields, and the renderers (jaxgen's
generator/program.py, the Helm chart through files/trainer-flags.json, written from
flags_json() by `make generate`) turn the variables named by each field's `variable` into flags.
Standard library only: jaxgen reads this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field

from trainer import models
from trainer.errors import ConfigError
from trainer.integers import ascii_int
from trainer.runtime import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_INIT_TIMEOUT

DEFAULT_DATA_DIR = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                "jax-training", "mnist")
DEFAULT_MIRROR = "https://storage.googleapis.com/cvdf-datasets/mnist/"
# Precisions of the matmuls and activations; parameters (the master copy the optimizer updates),
# logits, loss and optimizer state stay float32 in both.
PRECISIONS = ("float32", "bfloat16")
# Fields every command takes (query and allreduce too), not only train.
RUNTIME = "runtime"


def setting(default, help: str, *, choices=None, variable: str | None = None, render: str | None = None,
            parse=None, metavar: str | None = None, group: str = "train", internal: str | None = None,
            model: str | None = None):
    """A TrainConfig field. variable: the variables key (dotted) the renderers pass as this flag;
    internal: why a setting that is not a variable has none;
    render: how they spell it where the field's type would not say (int for integer seconds; optional:
    a string passed only when it is not empty);
    parse: argparse type for values that are not a plain int/float/str; model: the model whose
    setting it is (used, and rendered, only when that model is selected)."""
    meta = {"help": help, "choices": choices, "variable": variable, "render": render, "parse": parse,
            "metavar": metavar, "group": group, "internal": internal, "model": model}
    if isinstance(default, (list, tuple)):
        return field(default_factory=lambda: tuple(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class _TrainConfig:
    """The settings every model shares; TrainConfig adds each model's own (see below)."""

    epochs: int = setting(5, "passes over the training set", variable="training.epochs")
    batch_size: int = setting(128, "global batch size", variable="training.batch_size")
    optimizer: str = setting("sgd", "optax optimizer", choices=("sgd", "adam", "adamw"), variable="training.optimizer")
    learning_rate: float = setting(0.1, "peak learning rate", variable="training.learning_rate")
    momentum: float = setting(0.9, "SGD momentum (0 = none)", variable="training.momentum")
    lr_schedule: str = setting("cosine", "cosine decays the learning rate to 0 over the run",
                               choices=("cosine", "constant"), variable="training.lr_schedule")
    seed: int = setting(0, "seed of the initial parameters and the batch order", variable="training.seed")
    strategy: str = setting("pmap", "pmap (pmean of gradients) or sharded (jit over a data x model mesh)",
                            choices=("pmap", "sharded"), variable="training.strategy")
    model_parallelism: int = setting(1, "model axis size (strategy sharded)", variable="training.model_parallelism")
    precision: str = setting("float32", "matmuls and activations; parameters, loss and optimizer state stay float32",
                             choices=PRECISIONS, variable="training.precision")
    model: str = setting(models.DEFAULT, "the network (trainer/models); its settings are the --<model>-* flags",
                         choices=models.NAMES, variable="training.model")
    platform: str = setting("cpu", "JAX platform", choices=("cpu", "gpu"), variable="accelerator", group=RUNTIME)
    data_dir: str = setting(DEFAULT_DATA_DIR, "MNIST files (downloaded there if missing)", variable="data.dir")
    download: bool = setting(True, "download MNIST when it is missing", variable="data.download")
    mirror: str = setting(DEFAULT_MIRROR, "where MNIST is downloaded from", variable="data.mirror")
    checkpoint_dir: str | None = setting(None, "checkpoints and metrics.jsonl (none = no checkpoints)",
                                         variable="checkpoint.dir")
    run_name: str = setting("jax-training", "the job's name: its outputs (checkpoints, metrics, model, summary) go to "
                                            "<checkpoint-dir>/<run-name>", variable="name", metavar="NAME")
    checkpoint_every: int = setting(200, "steps between checkpoints (0 = only at the end)",
                                    variable="checkpoint.every_steps")
    outputs_uri: str = setting("", "also keep the outputs (checkpoints, metrics, model, summary) in an S3-compatible "
                                   "bucket, s3://BUCKET[/PREFIX]/<run-name>, and resume from it ('' = local only)",
                               variable="outputs.uri", render="optional", metavar="URI")
    outputs_endpoint: str = setting("", "URL of the S3-compatible server of --outputs-uri ('' = AWS, or "
                                        "$AWS_ENDPOINT_URL)", variable="outputs.endpoint", render="optional",
                                    metavar="URL")
    init_timeout: float = setting(DEFAULT_INIT_TIMEOUT, "seconds to wait for every peer",
                                  variable="init_timeout_seconds", render="int", group=RUNTIME)
    heartbeat_timeout: int = setting(DEFAULT_HEARTBEAT_TIMEOUT, "seconds before a silent peer is dead",
                                     variable="heartbeat_timeout_seconds", group=RUNTIME)
    hang_timeout: float = setting(600, "seconds without a completed training step (compilation not counted) before "
                                       "the process dumps its threads' stacks and exits with the hang code (0 = off)",
                                  variable="hang_timeout_seconds", render="int")
    metrics_port: int = setting(8000, "port of this process's Prometheus endpoint, http://0.0.0.0:PORT/metrics (0 = off)",
                                variable="metrics.port", metavar="PORT")
    metrics_file: str | None = setting(None, "default: <checkpoint-dir>/metrics.jsonl",
                                       internal="the job's outputs directory owns the metrics' place")
    log_every: int = setting(100, "steps between progress log lines", variable="training.log_every")
    train_examples: int = setting(0, "use the first N training examples (0 = all)", variable="training.train_examples")
    steps_per_dispatch: int = setting(50, "training steps run by one device dispatch (a device-side loop)",
                                      variable="training.steps_per_dispatch")
    allreduce_dtype: str = setting("float32", "precision of the gradient all-reduce (strategy pmap); bfloat16 "
                                              "sends half the bytes", choices=PRECISIONS,
                                   variable="training.allreduce_dtype")
    cpu_threads: int = setting(0, "XLA CPU threads (0 = this process's share of the CPUs it shares with peers "
                                  "on this host)", internal="derived from the processes sharing a host's CPUs")
    compilation_cache: str | None = setting(None, "persistent XLA compilation cache ('' = off; default: "
                                                  "$JAX_COMPILATION_CACHE_DIR, else <checkpoint-dir>/xla-cache)",
                                            metavar="DIR", internal="kept in the job's outputs directory; "
                                                                    "JAX_COMPILATION_CACHE_DIR in env moves it")

    def model_settings(self) -> dict:
        """The selected model's settings, {name: value} (lists as tuples)."""
        return {s.name: getattr(self, model_field(self.model, s.name)) for s in models.get(self.model).settings}

    def fingerprint(self) -> dict:
        """What a checkpoint's state depends on; resuming under other values would be wrong."""
        return {
            "model": self.model,
            "model_settings": {k: list(v) if isinstance(v, tuple) else v for k, v in self.model_settings().items()},
            "optimizer": self.optimizer, "learning_rate": self.learning_rate,
            "momentum": self.momentum, "batch_size": self.batch_size, "seed": self.seed,
            "train_examples": self.train_examples, "lr_schedule": self.lr_schedule,
            # the cosine schedule's length depends on the number of epochs
            "epochs": self.epochs if self.lr_schedule == "cosine" else None,
            # how the weights were computed: the model card and the summary say it, so a resume may not
            # change it under them
            "precision": self.precision, "allreduce_dtype": self.allreduce_dtype, "strategy": self.strategy,
        }

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "TrainConfig":
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def check_runtime(init_timeout: float, heartbeat_timeout: int) -> None:
    """The settings every distributed command (train, query, allreduce) waits by."""
    if not init_timeout > 0:
        raise ConfigError(f"--init-timeout {init_timeout} must be > 0")
    if not heartbeat_timeout >= 1:
        raise ConfigError(f"--heartbeat-timeout {heartbeat_timeout} must be >= 1")


def model_field(model: str, name: str) -> str:
    """The TrainConfig field (and, dashed, the flag) of a model's setting: mlp_hidden_sizes."""
    return f"{model}_{name}"


# Every registered model's settings are fields too (flag --mlp-hidden-sizes, variable
# training.mlp.hidden_sizes): the flags, renderers and chart take them like the others.
TrainConfig = dataclasses.make_dataclass("TrainConfig", [
    (model_field(model.name, s.name), tuple[int, ...] if s.is_list else int,
     setting(s.default, s.help, variable=variable, parse=s.parse, metavar="SIZES" if s.is_list else "N",
             model=model.name))
    for variable, model, s in models.variables()], bases=(_TrainConfig,))
TrainConfig.__module__ = __name__
TrainConfig.__doc__ = "Every trainer setting: the shared ones (_TrainConfig) and each model's own."


def flag(f: dataclasses.Field) -> str:
    return "--" + f.name.replace("_", "-")


# Set by `jaxgen run` in every process it starts: the person running it set the variables, not flags.
FROM_VARIABLES_ENV = "JAXT_SETTINGS_FROM_VARIABLES"


# Set by `jaxgen run` when checkpoint.dir is an emptyDir: its scratch folder goes when the run ends.
EPHEMERAL_OUTPUTS_ENV = "JAXT_OUTPUTS_EPHEMERAL"


def from_variables() -> bool:
    return os.environ.get(FROM_VARIABLES_ENV) == "1"


def ephemeral_outputs() -> bool:
    return os.environ.get(EPHEMERAL_OUTPUTS_ENV) == "1"


def named(name: str) -> str:
    """How the person running the trainer sets the field `name`: its variables key (checkpoint.dir)
    under `jaxgen run`, else its flag (--checkpoint-dir). Messages that name a fix use it."""
    [f] = fields_named(name)
    return f.metadata["variable"] if from_variables() and f.metadata["variable"] else flag(f)


def add_arguments(parser: argparse.ArgumentParser, group: str | None = None) -> None:
    """Add the flags of every TrainConfig field (of one group, when given) to parser."""
    for f in dataclasses.fields(TrainConfig):
        if not group or f.metadata["group"] == group:
            add_field_argument(parser, f)


def fields_named(*names: str) -> list[dataclasses.Field]:
    """TrainConfig's fields of these names (for commands that take a few of the settings)."""
    by_name = {f.name: f for f in dataclasses.fields(TrainConfig)}
    return [by_name[name] for name in names]


def _shown(default) -> str:
    """A default as its flag would spell it."""
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, tuple):
        return ",".join(str(x) for x in default)
    return "none" if default is None else str(default)


def add_field_argument(parser, f: dataclasses.Field) -> None:
    """The flag of one TrainConfig field: its default, help, choices and parser."""
    meta = f.metadata
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    help_ = f"{meta['help']} (default: {_shown(default)})"
    if isinstance(default, bool):
        parser.add_argument(flag(f), dest=f.name, action=argparse.BooleanOptionalAction, default=default,
                            help=help_)
        return
    kind = meta["parse"] or (ascii_int if type(default) is int else type(default) if default is not None else str)
    parser.add_argument(flag(f), dest=f.name, type=kind, default=default, choices=meta["choices"],
                        metavar=meta["metavar"], help=help_)


@dataclass(frozen=True)
class VariableSetting:
    """A trainer setting as a variables file sets it: its dotted key, default, help and choices."""
    variable: str
    default: object  # as JSON holds it (a list, not a tuple)
    help: str
    choices: tuple | None


def variable_settings() -> list[VariableSetting]:
    """Every trainer setting that is a variable. Its default here is the one home of the variable's
    default: `make generate` writes it into the chart's values.yaml and values.schema.json, where
    variables/schema.json gives the key no default of its own (a deployment default such as data.dir,
    a container path, does)."""
    settings = []
    for f in dataclasses.fields(TrainConfig):
        if f.metadata["variable"]:
            default = f.default if f.default is not dataclasses.MISSING else list(f.default_factory())
            settings.append(VariableSetting(f.metadata["variable"], default, f.metadata["help"], f.metadata["choices"]))
    return settings


# Flags the renderers add that are not TrainConfig fields (ClusterSpec overrides, trainer/cluster.py).
CLUSTER_FLAGS = (("--local-device-count", "local_device_count", "int"),)


def rendered_flags() -> list[dict]:
    """[{flag, variable, kind[, model]}] in the order the renderers write them; kind is int, float,
    str, optional (a str left out when empty), bool (--x / --no-x) or list (comma-joined integers). A row with `model` is written only
    when training.model names that model; the models' rows follow --model's."""
    rows, model_rows = [], []
    for f in dataclasses.fields(TrainConfig):
        if not f.metadata["variable"]:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        kind = f.metadata["render"] or {bool: "bool", int: "int", float: "float", tuple: "list"}.get(type(default), "str")
        row = {"flag": flag(f), "variable": f.metadata["variable"], "kind": kind}
        if f.metadata["model"]:
            model_rows.append({**row, "model": f.metadata["model"]})
        else:
            rows.append(row)
    at = next(i for i, row in enumerate(rows) if row["variable"] == "training.model") + 1
    rows[at:at] = model_rows
    rows += [{"flag": a, "variable": v, "kind": k} for a, v, k in CLUSTER_FLAGS]
    return rows


def flags_json() -> str:
    """rendered_flags() as charts/jax-training/files/trainer-flags.json holds it (make generate)."""
    import json

    return json.dumps(rendered_flags(), indent=1) + "\n"


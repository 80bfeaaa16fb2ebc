"""What every engine's process runs: the built-in trainer's flags from the variables, or the user's
program and its arguments, and the device count every target sets. Shared by the Kubernetes renders
(generator/engines/kubernetes/) and the sbatch script (generator/engines/slurm/)."""

from __future__ import annotations

from trainer.cluster import LOCAL_DEVICE_COUNT_ENV
from trainer.config import rendered_flags

# %s: the target's own_program_init (the chart fills it in with printf).
OWN_PROGRAM_WARNING = ("program.command: jax.distributed.initialize() with no arguments cannot find its peers in "
                       "these pods (JAX reads only JAX_COORDINATOR_ADDRESS from the environment); a program of your "
                       "own must call %s, or trainer.distributed.initialize()")


def trainer_flags(values: dict) -> list[str]:
    """The trainer's flags for these variables. Numbers are spelled as the Helm chart spells them:
    Helm reads every number as a float64, so 2 and 2.0 are one value there; integers print without
    a fraction, floats as Python's repr (the chart's jax-training.float)."""
    flags = []
    for row in rendered_flags():
        if row.get("model", values["training"]["model"]) != values["training"]["model"]:
            continue  # another model's setting
        value = values
        for key in row["variable"].split("."):
            value = value[key]
        kind, flag = row["kind"], row["flag"]
        if kind == "bool":
            flags.append(flag if value else "--no-" + flag[2:])
        elif kind == "optional":
            flags += [flag, str(value)] if value else []
        elif kind == "list":
            flags += [flag, ",".join(str(int(x)) for x in value)]
        else:
            flags += [flag, str({"int": int, "float": float, "str": str}[kind](value))]
    return flags


def device_env(values: dict) -> tuple[str, str]:
    """JAX_LOCAL_DEVICE_COUNT, set on every target: the devices each process expects (and creates on
    CPU), which trainer.distributed reads for a program of your own as for ours."""
    return LOCAL_DEVICE_COUNT_ENV, str(int(values["local_device_count"]))


def program_args(values: dict) -> list[str]:
    """The container's (or SLURM task's) args: program.args of the user's program.command, or
    `train`, the flags of the variables, then program.args (a later flag wins in the trainer)."""
    if values["program"]["command"]:
        return list(values["program"]["args"])
    return ["train"] + trainer_flags(values) + list(values["program"]["args"])

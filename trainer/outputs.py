"""A job's outputs directory, `<checkpoint-dir>/<run-name>/`, the one home of what a run produces:

    run.json            which job owns the directory (its name and configuration fingerprint)
    checkpoints/        ckpt-<step>.npz, the newest two (trainer/checkpoint.py)
    metrics.jsonl       one JSON record per log step, epoch, start and end
    model/              the exported model: model.safetensors, config.json, README.md (its card)
    summary.json        the final result: accuracies, steps, times, configuration, versions
    curves.png          loss and accuracy curves (drawn where the results are collected: `jaxgen results`)
    xla-cache/          compiled programs, so a restart skips compilation
    decoded-data/       the data set's files decoded, memory-mapped by a restart (trainer/data.py)

Process 0 writes it; on resume it reads it and broadcasts. Standard library only: jaxgen reads the
layout and the summary too.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from trainer.extras import runnable
from trainer.goodput import line as goodput_line

RUN_FILE = "run.json"
CHECKPOINTS = "checkpoints"
METRICS = "metrics.jsonl"
MODEL = "model"
MODEL_FILE = "model.safetensors"
MODEL_CONFIG = "config.json"
MODEL_CARD = "README.md"
SUMMARY = "summary.json"
CURVES = "curves.png"
XLA_CACHE = "xla-cache"
DECODED_DATA = "decoded-data"
# What only a restart reads: never among the results copied out of a job's claim or bucket.
RESTART_STATE = (CHECKPOINTS, XLA_CACHE, DECODED_DATA)
# in CHECKPOINTS; the group: its step (ASCII digits: \d would take any Unicode digit, and int() reads them)
CHECKPOINT_FILE = re.compile(r"^ckpt-([0-9]{10})\.npz$")
MAX_SUMMARY_BYTES = 1 << 20  # the most of a summary.json read


NAME_MAX = 255  # bytes of one file name, as Linux file systems take it


def file_parts(relative: str) -> tuple[str, ...] | None:
    """The names of a file's path below an outputs directory, from text that claims to be one (a bucket
    object's key after its job's prefix, a member of a results archive), or None when it is no such
    path: absolute, with an empty, `.` or `..` name (`a//b`, `a/../b`), a NUL, or a name longer than
    a file system takes. What is refused never reaches a path outside the directory."""
    parts = tuple(relative.split("/"))
    if any(part in ("", ".", "..") or "\0" in part or len(part.encode("utf-8", "surrogateescape")) > NAME_MAX
           for part in parts):
        return None
    return parts


def run_dir(checkpoint_dir: str | os.PathLike, run_name: str) -> Path:
    return Path(checkpoint_dir) / run_name


def evaluate_command(model: str | os.PathLike, trainer: str = "jax-trainer") -> str:
    """The one command that re-scores a model, as printed everywhere (the end of a run, its card);
    trainer: how the trainer's command is run there."""
    return f"{trainer} evaluate --model {model}"


def predict_command(model: str | os.PathLike) -> str:
    return f"jax-trainer predict --model {model} IMAGES…"


def read_object(path: str | os.PathLike) -> dict | None:
    """The JSON object of a small record file (a summary, a run record), or None when it is missing,
    unreadable or not an object. Read bounded: one is a few KB, and /dev/zero has no end."""
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_SUMMARY_BYTES + 1)
        found = json.loads(text) if len(text) <= MAX_SUMMARY_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for every thread a moment)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 0o022


def read_summary(directory: str | os.PathLike) -> dict | None:
    """The summary.json of an outputs directory, or None when the run has not finished."""
    return read_object(Path(directory) / SUMMARY)


def again(name: str, epochs: str, lr_schedule: str, step: int | None = None) -> str:
    """How to train a finished job again, its settings named as the person running it sets them: another
    name starts from step 0; more epochs continue from its checkpoint unless the cosine schedule, whose
    length is the run's, makes them another configuration."""
    if lr_schedule == "cosine":
        return (f"To train it again, give it another name ({name}), which starts from step 0; more epochs "
                f"({epochs}) need another name too, as the cosine learning rate schedule spans the run's epochs")
    where = f"step {step}" if step is not None else "its last checkpoint"
    return (f"To train it again, give it another name ({name}), which starts from step 0, or more epochs "
            f"({epochs}), which continue from {where}")


def shown(summary: dict, key: str, spec: str) -> str | None:
    """summary[key] formatted by `spec`, or None when it is not a number (missing, null, a string) or
    not one that fits the format (an integer beyond a float's range for '.4f')."""
    value = summary.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return format(value, spec)
    except (OverflowError, ValueError):
        return None


def diverged(summary: dict) -> bool:
    """Whether the run's loss ended as NaN or infinite (the JSON tokens NaN, Infinity)."""
    loss = summary.get("loss")
    return isinstance(loss, float) and not math.isfinite(loss)


# A finished run's termination message (a pod's, read by `jaxgen status`): the result line, then
# where the outputs are.
RESULT_PREFIX = "result: "
OUTPUTS_MARK = "; outputs "


def termination_message(result: str, outputs) -> str:
    return f"{RESULT_PREFIX}{result}" + (f"{OUTPUTS_MARK}{outputs}" if outputs else "")


def result_of_message(line: str) -> str:
    """The result line in a line of termination_message()."""
    return line.removeprefix(RESULT_PREFIX).partition(OUTPUTS_MARK)[0]


def result_line(summary: dict) -> str:
    """One line: what a Kubernetes termination message and the end of the log say. Whatever a
    summary holds, or lacks, it says what is known: n/a for an accuracy or count that is not a
    number, no time or speed when none was measured (no metrics file), and "diverged" for a loss
    that is not finite."""
    epochs = summary.get("epochs")
    text = (f"test accuracy {shown(summary, 'test_accuracy', '.4f') or 'n/a'}, "
            f"train accuracy {shown(summary, 'train_accuracy', '.4f') or 'n/a'} "
            f"after {shown(summary, 'epochs', '') or 'n/a'} epoch{'' if epochs == 1 else 's'} "
            f"({shown(summary, 'steps', '') or 'n/a'} steps)")
    seconds, speed = shown(summary, "wall_seconds", ".1f"), shown(summary, "examples_per_second", ".0f")
    if seconds is not None and summary["wall_seconds"] > 0:
        text += f" in {seconds} s"
    if speed is not None and math.isfinite(summary["examples_per_second"]):
        text += f", {speed} examples/s"
    if diverged(summary):
        text += f"; diverged: the loss is {summary['loss']}"
    return text


def describe(summary: dict, directory: str | os.PathLike) -> list[str]:
    """The lines that tell a person where a finished run's results are and what to do with them."""
    d = Path(directory)
    lines = [f"{RESULT_PREFIX}{result_line(summary)}"]
    resumed = summary.get("resumed_from")
    if summary.get("restarts") and isinstance(resumed, list):
        lines.append(f"  restarts: {str(summary['restarts'])[:20]} (resumed from step "
                     f"{', '.join(str(s)[:20] for s in resumed[:20])})")
    if goodput := goodput_line(summary.get("goodput")):
        lines.append(f"  goodput:  {goodput}")
    rows = [("model", d / MODEL / MODEL_FILE), ("card", d / MODEL / MODEL_CARD), ("metrics", d / METRICS),
            ("curves", d / CURVES), ("summary", d / SUMMARY)]
    lines += [f"  {label + ':':10}{path}" for label, path in rows if path.exists()]
    lines.append(f"  {'evaluate:':10}{evaluate_command(d / MODEL, runnable('jax-trainer'))}")  # in this shell
    return lines


def newest_checkpoint(directory: str | os.PathLike) -> tuple[int, float] | None:
    """(step, modification time) of the newest checkpoint in an outputs directory, or None."""
    found = []
    try:
        with os.scandir(Path(directory) / CHECKPOINTS) as entries:
            for entry in entries:
                if m := CHECKPOINT_FILE.match(entry.name):
                    found.append((int(m.group(1)), entry.stat().st_mtime))
    except OSError:
        return None
    return max(found, default=None)

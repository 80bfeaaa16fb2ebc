"""A job's outputs directory, `<checkpoint-dir>/<run-name>/`, the one home of what a run produces:

    run.json            which job owns the directory (its name and configuration fingerprint)
    checkpoints/        ckpt-<step>.npz, the newest two (trainer/checkpoint.py)
    metrics.jsonl       one JSON record per log step, epoch, start and end
    model/              the exported model: model.safetensors, config.json, README.md (its card)
    summary.json        the final result: accuracies, steps, times, configuration, versions
    curves.png          loss and accuracy curves (drawn where the results are collected: `jaxgen results`)
    xla-cache/          compiled programs, so a restart skips compilation

Process 0 writes it; on resume it reads it and broadcasts. Standard library only: jaxgen reads the
layout and the summary too.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

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
CHECKPOINT_FILE = re.compile(r"^ckpt-(\d{10})\.npz$")  # in CHECKPOINTS; the group: its step


def run_dir(checkpoint_dir: str | os.PathLike, run_name: str) -> Path:
    return Path(checkpoint_dir) / run_name


def evaluate_command(model: str | os.PathLike) -> str:
    """The one command that re-scores a model, as printed everywhere (the end of a run, its card)."""
    return f"jax-trainer evaluate --model {model}"


def predict_command(model: str | os.PathLike) -> str:
    return f"jax-trainer predict --model {model} IMAGES…"


def read_summary(directory: str | os.PathLike) -> dict | None:
    """The summary.json of an outputs directory, or None when the run has not finished."""
    try:
        return json.loads((Path(directory) / SUMMARY).read_text())
    except (OSError, ValueError):
        return None


def result_line(summary: dict) -> str:
    """One line: what a Kubernetes termination message and the end of the log say."""
    epochs = summary["epochs"]
    return (f"test accuracy {summary['test_accuracy']:.4f}, train accuracy {summary['train_accuracy']:.4f} "
            f"after {epochs} epoch{'s' if epochs != 1 else ''} ({summary['steps']} steps) in "
            f"{summary['wall_seconds']:.1f} s, "
            f"{summary['examples_per_second']:.0f} examples/s")


def describe(summary: dict, directory: str | os.PathLike) -> list[str]:
    """The lines that tell a person where a finished run's results are and what to do with them."""
    d = Path(directory)
    lines = [f"result: {result_line(summary)}"]
    if summary.get("restarts"):
        lines.append(f"  restarts: {summary['restarts']} (resumed from step "
                     f"{', '.join(str(s) for s in summary.get('resumed_from', []))})")
    if summary.get("goodput"):
        lines.append(f"  goodput:  {goodput_line(summary['goodput'])}")
    rows = [("model", d / MODEL / MODEL_FILE), ("card", d / MODEL / MODEL_CARD), ("metrics", d / METRICS),
            ("curves", d / CURVES), ("summary", d / SUMMARY)]
    lines += [f"  {label + ':':10}{path}" for label, path in rows if path.exists()]
    lines.append(f"  {'evaluate:':10}{evaluate_command(d / MODEL)}")
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

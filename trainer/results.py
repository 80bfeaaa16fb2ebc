"""The end of a run, written by process 0: summary.json, the exported model, the result line in the
log and in the pod's termination message (what `kubectl get pod` and `kubectl describe` show)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Iterable, Iterator

from trainer import __version__, goodput
from trainer.errors import CheckpointError
from trainer.outputs import MODEL, MODEL_FILE, SUMMARY, result_line


# The fields of a metrics record that its readers compute with (the summary, the goodput account, the
# Prometheus endpoint, jaxgen status), and what each must be.
_COUNTS = ("step", "epoch", "batches", "total_steps")
_SECONDS = ("time", "launched", "seconds", "blocked_seconds", "save_seconds", "eta_seconds")
_FIGURES = ("loss", "train_accuracy", "test_accuracy")  # any number: a diverged run's loss is NaN


def _well_formed(record) -> bool:
    """A record as MetricsFile writes it, in the fields that are computed with; one that is not (a
    foreign or edited line) is left out rather than failing the run that reads it."""
    def count(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    def seconds(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    def figure(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    if not isinstance(record, dict):
        return False
    phases = record.get("phases", {})
    return (all(count(record[k]) for k in _COUNTS if k in record)
            and all(seconds(record[k]) for k in _SECONDS if k in record)
            and all(figure(record[k]) for k in _FIGURES if k in record)
            and isinstance(phases, dict) and all(seconds(v) for v in phases.values()))


MAX_RECORD = 1 << 20  # characters of one metrics line: a record is a few hundred


def _lines(path: str | os.PathLike):
    """The file's lines, read one at a time; a line longer than MAX_RECORD (no record) is skipped
    in bounded pieces, never held whole."""
    with open(path, encoding="utf-8", errors="replace") as f:
        while line := f.readline(MAX_RECORD + 1):
            if len(line) <= MAX_RECORD:
                yield line
                continue
            while line and not line.endswith("\n"):
                line = f.readline(MAX_RECORD + 1)


def iter_records(path: str | os.PathLike | None) -> Iterator[dict]:
    """The well-formed records of a metrics.jsonl, every attempt's (a restart appends), one at a
    time as the file is read: a line at a time, each with a bound, never the whole file. None without
    one, or when it is no file (--metrics-file /dev/null, or /dev/zero, which has no end). A line
    without an event (`{}`) is no record any reader uses: it is passed over unparsed."""
    try:
        if not path or not Path(path).is_file():
            return
        for line in _lines(path):
            if '"event"' not in line:
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if _well_formed(record):
                yield record
    except OSError:  # is_file() too: a name too long raises
        return


class Records:
    """The records of a metrics.jsonl, read from the file anew each time they are iterated
    (iter_records): what goodput.account and summarize() read more than once, never held."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = path

    def __iter__(self) -> Iterator[dict]:
        return iter_records(self.path)


def read_records(path: str | os.PathLike | None) -> list[dict]:
    """iter_records(path), as a list (a test's look at a small run's records)."""
    return list(iter_records(path))


def summarize(cfg, spec, local_devices: int, records: Iterable[dict], final: dict, steps: int) -> dict:
    """The run's summary, across restarts: `records` is the metrics file's (Records: read again for
    each figure, a record at a time), `final` the last epoch's."""
    resumed, restarts, trained, batches, recorded = [], -1, 0.0, 0, False
    for r in records:
        recorded = True
        if r.get("event") == "start":
            restarts += 1
            resumed += [r["step"]] if r.get("step") else []
        elif r.get("event") == "epoch":
            trained, batches = trained + r.get("seconds", 0), batches + r.get("batches", 0)
    examples = batches * cfg.batch_size
    import jax

    settings = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
                if f.metadata["model"] in (None, cfg.model)}  # the selected model's
    return {
        "name": cfg.run_name, "status": "completed",
        "test_accuracy": final.get("test_accuracy"), "train_accuracy": final.get("train_accuracy"),
        "loss": final.get("loss"), "epochs": cfg.epochs, "steps": steps,
        # unknown (None) without a metrics file: the attempts' times are in it
        "wall_seconds": round(_running_seconds(records), 3) if recorded else None,
        "training_seconds": round(trained, 3),
        "examples_per_second": round(examples / trained, 1) if trained else None,
        "restarts": max(restarts, 0),
        "goodput": goodput.account(records),
        "resumed_from": resumed,
        "processes": spec.num_processes, "local_devices": local_devices,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
        "model": f"{MODEL}/{MODEL_FILE}", "version": __version__, "jax_version": jax.__version__,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _running_seconds(records: Iterable[dict]) -> float:
    """Seconds the job ran, summed over its attempts (each from its start record to its last record,
    the current one to now): the time between a stop and a restart is not the run's. An attempt over
    which the wall clock stepped back counts 0, never less."""
    total, begun, last = 0.0, None, None
    for record in records:
        at = record.get("time")
        if not isinstance(at, (int, float)):
            continue
        if record.get("event") == "start":
            total += max(last - begun, 0.0) if begun is not None else 0.0
            begun = at
        last = at
    return total + (max(time.time() - begun, 0.0) if begun is not None else 0.0)


def write(run_dir: Path, params: dict, cfg, summary: dict) -> None:
    """The model, then summary.json (its presence says the run finished and everything is there)."""
    from trainer import export

    export.save(run_dir / MODEL, params, cfg, summary)
    tmp = run_dir / f".{SUMMARY}.tmp"
    try:
        tmp.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, run_dir / SUMMARY)
    except OSError as e:
        raise CheckpointError(f"cannot write {run_dir / SUMMARY}: {e.strerror or e}") from None


def line(summary: dict) -> str:
    return result_line(summary)


"""`jaxgen plot metrics.jsonl -o curves.png`: training loss per step and accuracy per epoch."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import click

from trainer.extras import missing

from . import yaml_text
from .errors import UserError, excerpt, printable
from .options import NonEmptyPath
from .runstore import confined


# The fields each plotted record must carry as numbers (the trainer's metrics.jsonl writes them).
NUMBER_FIELDS = {"step": ("step", "loss"), "epoch": ("epoch", "step", "loss", "train_accuracy", "test_accuracy")}
# What each field can hold: (lowest, highest, whole numbers only). Far beyond any real run, but
# inside what a plot's axis arithmetic survives.
RANGES = {"step": (0, 2**53, True), "epoch": (0, 2**53, True), "loss": (-1e300, 1e300, False),
          "train_accuracy": (0, 1, False), "test_accuracy": (0, 1, False)}


MAX_LINE = 1 << 20  # characters in one metrics record


def number_text(x: float) -> str:
    if abs(x) < 1e16:
        return str(int(x))
    try:
        return f"{x:g}"
    except OverflowError:  # an integer beyond a float's range
        return "a number beyond 1e308"


def _check(field: str, value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "needs a number"
    if field == "loss" and not math.isfinite(value):
        return None  # a diverged run's NaN or Infinity: drawn as a gap, and said (diverged_at)
    low, high, whole = RANGES[field]
    if not (low <= value <= high):  # NaN fails here too
        return f"needs a number from {number_text(low)} to {number_text(high)}"
    if whole and value != int(value):
        return "needs a whole number"
    return None


def _lines(path: Path):
    """The file's lines, one at a time, each read with a bound (a record is a few hundred bytes;
    /dev/zero has no end)."""
    with open(path, encoding="utf-8") as f:
        number = 0
        while line := f.readline(MAX_LINE + 1):
            number += 1
            if len(line) > MAX_LINE:
                raise UserError(f"{path}:{number}: a line of more than {MAX_LINE} characters: not a metrics record")
            yield line


def _record(path: Path, number: int, line: str) -> dict | None:
    """The metrics record of one line, checked for what draw() reads; None for a blank line or one
    without an event; any other line is one clear error."""
    if line in ("{}\n", "{}") or not line.strip():  # no record (a file of them is read without parsing each)
        return None
    try:
        record = json.loads(line, parse_int=yaml_text.json_int)
    except (ValueError, RecursionError) as e:  # ValueError: JSONDecodeError, or an integer of too many digits
        reason = getattr(e, "msg", None) or ("nested too deeply" if isinstance(e, RecursionError) else
                                             str(e).split(":")[0])
        raise UserError(f"{path}:{number}: not a JSON line ({reason})") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}:{number}: not a metrics record (a JSON object)")
    event = record.get("event")
    if "event" in record and not isinstance(event, str):
        raise UserError(f"{path}:{number}: not a metrics record ('event' must be a string)")
    for field in NUMBER_FIELDS.get(event, ()):
        problem = _check(field, record.get(field))
        if problem:
            raise UserError(f"{path}:{number}: {excerpt(event)} record {problem} in {field!r}")
    return record if "event" in record else None


# What is kept of a record that is drawn: the fields draw() and diverged_at() read.
DRAWN = {"step": ("event", "step", "loss"),
         "epoch": ("event", "epoch", "step", "loss", "train_accuracy", "test_accuracy")}


def read_metrics(path: Path) -> tuple[list[dict], int | None]:
    """The records draw() reads and the step of the last record that has one (a step, end or
    preempted record), from the file read a line at a time. What is kept is bounded by the steps and
    epochs drawn, not by the file: a step or epoch given again (a resumed run's) replaces the earlier
    one, and of every other record nothing is kept."""
    kept: dict[tuple[str, int], dict] = {}
    last = None
    try:
        for number, line in enumerate(_lines(path), 1):
            record = _record(path, number, line)
            if record is None:
                continue
            event = record["event"]
            if event in DRAWN:
                kept[event, record[event]] = {k: record[k] for k in DRAWN[event] if k in record}
            step = record.get("step")
            if event in ("step", "end", "preempted") and isinstance(step, int) and not isinstance(step, bool):
                last = step
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: cannot read: not UTF-8 text (a metrics.jsonl is)") from None
    return list(kept.values()), last


def read_records(path: Path) -> list[dict]:
    """The metrics records draw() reads (read_metrics), each checked; any other line is one clear error."""
    return read_metrics(path)[0]


def curves(records: list[dict]) -> tuple[dict[int, float], dict[int, dict]]:
    """Loss by step and epoch records by epoch; a resumed run's repeated steps keep the last value."""
    steps = {r["step"]: r["loss"] for r in records if r.get("event") == "step"}
    epochs = {r["epoch"]: r for r in records if r.get("event") == "epoch"}
    return dict(sorted(steps.items())), dict(sorted(epochs.items()))


def diverged_at(records: list[dict]) -> int | None:
    """The first step whose loss is not finite (the run diverged there), or None."""
    return next((r["step"] for r in records if r.get("event") in NUMBER_FIELDS and not math.isfinite(r["loss"])),
                None)


def draw(records: list[dict], output: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, epochs = curves(records)
    if not steps and not epochs:
        raise UserError("no step or epoch records to plot (is this a trainer metrics.jsonl?)")
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4))
    loss_ax.plot(list(steps), list(steps.values()), label="batch loss", linewidth=1)
    if epochs:
        loss_ax.plot([e["step"] for e in epochs.values()], [e["loss"] for e in epochs.values()], "o-",
                     label="epoch average")
    loss_ax.set(xlabel="step", ylabel="cross-entropy loss", yscale="log", title="loss")
    loss_ax.legend()
    for key, label in (("train_accuracy", "train"), ("test_accuracy", "test")):
        acc_ax.plot(list(epochs), [e[key] for e in epochs.values()], "o-", label=label)
    acc_ax.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    acc_ax.grid(True, alpha=0.3)
    acc_ax.legend()
    fig.suptitle(printable(title))  # a folder's name may hold bytes that are not UTF-8
    fig.tight_layout()
    try:
        image = io.BytesIO()
        fig.savefig(image, format=output.suffix[1:] or None, dpi=100)
        output.parent.mkdir(parents=True, exist_ok=True)
        confined.write_file(output, image.getvalue())  # replaces a link at `output`, never writes through it
    except (OSError, ValueError) as e:  # unwritable path, or a suffix matplotlib has no writer for
        raise UserError(f"{output}: cannot write: {e}") from None
    finally:
        plt.close(fig)


@click.command("plot")
@click.argument("metrics", type=NonEmptyPath(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=NonEmptyPath(dir_okay=False, path_type=Path), default=Path("curves.png"),
              show_default=True, help="Image to write (format from the suffix: png, svg, pdf).")
def plot_command(metrics, output):
    """Draw loss and accuracy curves from a trainer's metrics.jsonl."""
    if problem := missing("matplotlib", "plot", "jaxgen plot"):
        raise UserError(problem)
    records = read_records(metrics)
    draw(records, output, str(metrics))
    click.echo(f"wrote {output}")
    step = diverged_at(records)
    if step is not None:
        click.echo(f"note: the run diverged: its loss is not finite from step {number_text(step)} on (not drawn)")

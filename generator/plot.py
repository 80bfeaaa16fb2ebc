"""`jaxgen plot metrics.jsonl -o curves.png`: training loss per step and accuracy per epoch."""

from __future__ import annotations

import io
import json
from pathlib import Path

import click

from trainer.extras import missing

from . import confined, yaml_text
from .errors import UserError, excerpt, printable


# The fields each plotted record must carry as numbers (the trainer's metrics.jsonl writes them).
NUMBER_FIELDS = {"step": ("step", "loss"), "epoch": ("epoch", "step", "loss", "train_accuracy", "test_accuracy")}
# What each field can hold: (lowest, highest, whole numbers only). Far beyond any real run, but
# inside what a plot's axis arithmetic survives.
RANGES = {"step": (0, 2**53, True), "epoch": (0, 2**53, True), "loss": (-1e300, 1e300, False),
          "train_accuracy": (0, 1, False), "test_accuracy": (0, 1, False)}


def _number(x: float) -> str:
    return str(int(x)) if abs(x) < 1e16 else f"{x:g}"


def _check(field: str, value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "needs a number"
    low, high, whole = RANGES[field]
    if not (low <= value <= high):  # NaN fails here too
        return f"needs a number from {_number(low)} to {_number(high)}"
    if whole and value != int(value):
        return "needs a whole number"
    return None


def read_records(path: Path) -> list[dict]:
    """The metrics records, each checked for what draw() reads; any other line is one clear error."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: cannot read: not UTF-8 text (a metrics.jsonl is)") from None
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                record = json.loads(line, parse_int=yaml_text.json_int)
            except (ValueError, RecursionError) as e:
                raise UserError(f"{path}:{number}: not a JSON line ({getattr(e, 'msg', 'nested too deeply')})") from None
            if not isinstance(record, dict):
                raise UserError(f"{path}:{number}: not a metrics record (a JSON object)")
            event = record.get("event")
            if "event" in record and not isinstance(event, str):
                raise UserError(f"{path}:{number}: not a metrics record ('event' must be a string)")
            for field in NUMBER_FIELDS.get(event, ()):
                problem = _check(field, record.get(field))
                if problem:
                    raise UserError(f"{path}:{number}: {excerpt(event)} record {problem} in {field!r}")
            records.append(record)
    return records


def curves(records: list[dict]) -> tuple[dict[int, float], dict[int, dict]]:
    """Loss by step and epoch records by epoch; a resumed run's repeated steps keep the last value."""
    steps = {r["step"]: r["loss"] for r in records if r.get("event") == "step"}
    epochs = {r["epoch"]: r for r in records if r.get("event") == "epoch"}
    return dict(sorted(steps.items())), dict(sorted(epochs.items()))


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
@click.argument("metrics", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("curves.png"),
              show_default=True, help="Image to write (format from the suffix: png, svg, pdf).")
def plot_command(metrics, output):
    """Draw loss and accuracy curves from a trainer's metrics.jsonl."""
    if problem := missing("matplotlib", "plot", "jaxgen plot"):
        raise UserError(problem)
    draw(read_records(metrics), output, str(metrics))
    click.echo(f"wrote {output}")

"""The trained model as a file the field reads: `model/model.safetensors` (the parameters, named by
layer, no optimizer state), `model/config.json` (what the parameters mean) and `model/README.md`
(its card).

safetensors, not npz, Orbax or flax's msgpack: loading it runs no code (npz may hold pickles), it is
read by JAX, NumPy, PyTorch and Hugging Face tooling alike through one small, widely kept library
(Orbax and flax serialization are checkpoint formats for their own stacks), its header names every
tensor with its dtype and shape, and it is memory-mapped rather than copied. Without jax: this module
reads and writes host arrays only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from trainer import __version__, models
from trainer.errors import CheckpointError, ConfigError
from trainer.outputs import (MODEL, MODEL_CARD, MODEL_CONFIG, MODEL_FILE, evaluate_command, predict_command,
                             umask)

MAX_CONFIG_BYTES = 1 << 20  # the most of a config.json read

# How an image becomes the model's input; stated in config.json so other code can do the same.
PREPROCESSING = "flatten each 28x28 uint8 image (row-major) to 784 values and divide by 255 (float32)"


def _config(cfg, test_accuracy: float | None, steps: int) -> dict:
    model = models.get(cfg.model)
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.model_settings().items()}
    return {
        "format": model.export_format, "model": cfg.model, "inputs": model.inputs, "classes": model.classes,
        **settings, "layers": model.layers(settings), "precision": cfg.precision,
        "preprocessing": PREPROCESSING, "parameters": model.parameters, "forward": model.forward,
        "test_accuracy": test_accuracy, "steps": steps, "version": __version__,
    }


def load_snippet(model: str) -> str:
    """How to use the model without this project (in its card; a test runs it): the model's own."""
    return models.get(model).load_snippet


def _figure(value) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) else "n/a"


def _card(cfg, config: dict, summary: dict) -> str:
    model = models.get(cfg.model)
    settings = summary.get("config", {})
    return f"""---
library_name: jax
tags: [jax, mnist, image-classification, jax-training]
datasets: [mnist]
metrics: [accuracy]
---
# {summary.get('name', 'model')}: an MNIST digit classifier

{model.card(cfg.model_settings())} trained data-parallel by jax-training {__version__}
on {summary.get('processes', '?')} process(es) x {summary.get('local_devices', '?')} device(s).

| | |
|---|---|
| test accuracy (MNIST, 10,000 images) | {_figure(summary.get('test_accuracy'))} |
| train accuracy (last epoch) | {_figure(summary.get('train_accuracy'))} |
| steps, epochs | {summary.get('steps')}, {summary.get('epochs')} |
| optimizer, learning rate, batch | {settings.get('optimizer')}, {settings.get('learning_rate')}, {settings.get('batch_size')} |
| precision of the matmuls | {config['precision']} (parameters are float32) |

## Input and output
Input: {config['preprocessing']}. Output: 10 logits; the digit is their argmax.

## Use it
`{MODEL_FILE}` holds the float32 parameters ({', '.join(f'`{k}`' for k in model.parameters)}; no
optimizer state). With NumPy and the `safetensors` package only, from the folder that holds `model/`:

```python
{model.load_snippet}```

From the same folder, `{evaluate_command(MODEL)}` re-scores the MNIST test set and
`{predict_command(MODEL)}` classifies an IDX file or PNG images.

## Limitations
Trained on MNIST only: centred, white-on-black 28x28 handwritten digits. Other images (black on
white, photos, other sizes) need the same preprocessing and still fall outside what it has seen.
"""


def save(directory: str | os.PathLike, params: dict[str, np.ndarray], cfg, summary: dict) -> Path:
    """Write model.safetensors, config.json and README.md into `directory` (each replaced atomically)."""
    from safetensors.numpy import save_file

    directory = Path(directory)
    config = _config(cfg, summary.get("test_accuracy"), summary.get("steps", 0))
    tensors = {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in params.items()}
    metadata = {"format": "np", "model": cfg.model, "layers": config["layers"]}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _replace(directory / MODEL_FILE, lambda tmp: _readable(tmp, lambda: save_file(tensors, str(tmp),
                                                                                      metadata=metadata)))
        _replace(directory / MODEL_CONFIG, lambda tmp: tmp.write_text(json.dumps(config, indent=1) + "\n"))
        _replace(directory / MODEL_CARD, lambda tmp: tmp.write_text(_card(cfg, config, summary)))
    except OSError as e:
        raise CheckpointError(f"cannot write the model to {directory}: {e.strerror or e}") from None
    return directory / MODEL_FILE


def _readable(path: Path, write) -> None:
    """write(), then give the file the mode its siblings get (0644 under umask 022): safetensors writes
    it 0600, and the model is a result to hand on, as the config and card beside it are."""
    write()
    os.chmod(path, 0o666 & ~umask())


def _replace(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict]:
    """(params, config) of an exported model: its directory or its .safetensors file."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(path)
    file = path / MODEL_FILE if path.is_dir() else path
    try:
        with open(file.parent / MODEL_CONFIG, "rb") as f:
            text = f.read(MAX_CONFIG_BYTES + 1)  # a config is a few hundred bytes; /dev/zero has no end
        if len(text) > MAX_CONFIG_BYTES:
            raise ValueError(f"{MODEL_CONFIG} is larger than {MAX_CONFIG_BYTES} bytes")
        config = json.loads(text)
        params = load_file(str(file))
    except (OSError, ValueError, RecursionError, SafetensorError) as e:
        raise ConfigError(f"--model {path}: not an exported model ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(config, dict) or config.get("model") not in models.NAMES:
        raise ConfigError(f"--model {path}: {file.parent / MODEL_CONFIG} names no known model")
    _check(path, file.parent / MODEL_CONFIG, params, config)
    return params, config


def _check(path: Path, config_file: Path, params: dict[str, np.ndarray], config: dict) -> None:
    """What the model's config.json says must hold of its tensors: its precision, settings and
    tensor names, float tensors of finite values (a diverged training leaves NaN)."""
    from trainer.config import PRECISIONS

    def refuse(reason: str):
        return ConfigError(f"--model {path}: {reason}")

    if config.get("precision") not in PRECISIONS:
        raise refuse(f"{config_file} gives no precision ({' or '.join(PRECISIONS)})")
    model = models.get(config["model"])
    settings = {}
    for setting in model.settings:
        value = config.get(setting.name)
        try:
            if isinstance(value, bool) or not isinstance(value, list if setting.is_list else int):
                raise TypeError
            settings[setting.name] = setting.parse(",".join(map(str, value)) if setting.is_list else str(value))
        except Exception:  # noqa: BLE001  (TypeError, argparse's ArgumentTypeError, int digits)
            raise refuse(f"{config_file}: {setting.name} is not a valid {model.name} setting") from None
    expected, found = sorted(model.param_specs(settings)), sorted(params)
    if expected != found:
        missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
        raise refuse(f"its tensors are not those of the {model.name} {config_file.name} describes ("
                     + "; ".join(part for part in (missing and f"missing {', '.join(missing[:5])}",
                                                   extra and f"unexpected {', '.join(extra[:5])[:200]}") if part) + ")")
    for name, tensor in params.items():
        if tensor.dtype.kind != "f":
            raise refuse(f"tensor {name} is {tensor.dtype}, not floating point")
        if not np.isfinite(tensor).all():
            raise refuse(f"tensor {name} holds NaN or infinite values (the training diverged); it predicts nothing")

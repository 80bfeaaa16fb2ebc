"""`jax-trainer evaluate|predict --model PATH`: use an exported model (trainer/export.py) in one
process: re-score the MNIST test set, or classify images from an IDX file or PNGs."""

from __future__ import annotations

import os
import sys
import urllib.parse
import warnings
from pathlib import Path

import numpy as np

from trainer import data, export, outputs
from trainer.config import DEFAULT_DATA_DIR, DEFAULT_MIRROR
from trainer.outputs import MODEL
from trainer.errors import ConfigError, DataError, first_line, write_stdout

SIDE = 28  # MNIST images are 28 x 28


def _jax(platform: str):
    from trainer.runtime import configure_platform, create_backend

    jax = configure_platform(platform, 1)
    create_backend(jax, platform)
    return jax


def cache_data_dir() -> Path:
    """The MNIST files of this machine's jax-training cache ($JAXT_CACHE, as scripts/setup.sh uses it)."""
    cache = os.environ.get("JAXT_CACHE")
    return Path(cache) / "mnist" if cache else Path(DEFAULT_DATA_DIR)


def recorded_data(model_path: str) -> dict:
    """The data settings of the run that trained the model (its summary.json, beside model/), or {}."""
    model = Path(model_path)
    folder = model.parent if model.name == MODEL else model.parent.parent
    config = (outputs.read_summary(folder) or {}).get("config")
    return config if isinstance(config, dict) else {}


def _local_dir(mirror) -> Path | None:
    return Path(urllib.parse.urlparse(mirror).path) if isinstance(mirror, str) and mirror.startswith("file://") else None


def _holds_test_files(directory: Path) -> bool:
    """Whether `directory` is no folder, or holds a test file of its own (readable or not)."""
    names = (data.FILES["test_images"][0], data.FILES["test_labels"][0])
    return directory.exists() and (not directory.is_dir() or any((directory / n).exists() for n in names))


def find_test_set(model_path: str, data_dir: str | None, download: bool,
                  mirror: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The MNIST test set (images, labels) without a download where its files are already here:
    --data-dir, then the data the model's run read (its data directory, its file:// mirror), then
    $JAXT_CACHE's copy. A download of the two test files, into --data-dir or the cache, from
    --mirror, the run's mirror or the default, is the last resort."""
    run = recorded_data(model_path)
    if data_dir:
        return _given_test_set(Path(data_dir), download, mirror or run.get("mirror") or DEFAULT_MIRROR)
    local = [p for p in (Path(run["data_dir"]) if isinstance(run.get("data_dir"), str) else None,
                         _local_dir(run.get("mirror")), _local_dir(mirror), cache_data_dir()) if p]
    for directory in dict.fromkeys(local):
        try:
            return data.load_split(directory, "test", download=False)
        except DataError:
            continue
    target = cache_data_dir()
    if not download:
        raise DataError(f"the MNIST files are in none of {', '.join(map(str, dict.fromkeys(local)))} "
                        f"(and downloading is disabled); {data.where_else()}")
    return data.load_split(target, "test", True, mirror or run.get("mirror") or DEFAULT_MIRROR)


def _given_test_set(directory: Path, download: bool, mirror: str) -> tuple[np.ndarray, np.ndarray]:
    """The test set of --data-dir and of no other folder: a folder that is not there is a data error
    (a typing mistake never scores another copy); one without the files is downloaded into, or refused
    under --no-download, as a corrupt copy is."""
    if not directory.exists():
        raise DataError(f"--data-dir {directory}: no such directory (create it to download the test set into it, "
                        "or leave out --data-dir to read the model's run data or the cache's copy)")
    return data.load_split(directory, "test", download, mirror)


def _fit(jax, model_path: str, params: dict, config: dict) -> None:
    """The tensors in the shapes the network multiplies (checked on shapes alone, nothing computed)."""
    from trainer import models

    network = models.get(config["model"]).network()
    try:
        out = jax.eval_shape(lambda p, x: network.apply(p, x, config["precision"]), params,
                             jax.ShapeDtypeStruct((1, models.base.INPUTS), np.float32))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"--model {model_path}: its tensors' shapes do not fit a {config['model']} "
                          f"({first_line(e, 200)})") from None
    if out.shape != (1, models.base.CLASSES):
        raise ConfigError(f"--model {model_path}: it gives outputs of shape {out.shape[1:]}, not "
                          f"{models.base.CLASSES} logits")


def evaluate(model_path: str, data_dir: str | None, download: bool, mirror: str | None, platform: str) -> int:
    params, config = export.load(model_path)
    images, labels = find_test_set(model_path, data_dir, download, mirror)
    _fit(_jax(platform), model_path, params, config)
    from trainer.strategies import count_correct

    correct = count_correct(params, images, labels, precision=config["precision"], model=config["model"])
    total = len(labels)
    write_stdout(f"test accuracy={correct / total:.4f} ({correct}/{total} MNIST test images, {model_path})\n")
    return 0


# The most image bytes one IDX file given to predict may hold: eight times MNIST's test set (7.8 MB). A
# gzipped file of zeros 1000 times smaller could announce the trainer's own limit (1 GiB), four times
# that as float32 input.
MAX_IDX_BYTES = 64 << 20
# Images classified at a time: the float32 input of one chunk is 25 MB.
CHUNK = 8192

# The most pixels a PNG may have: far more than any digit needs, far less than Pillow's own bomb
# limit (89M pixels; 178M and more it refuses), whose decoding alone would take hundreds of MB.
MAX_PNG_PIXELS = 4096 * 4096


def read_images(path: Path) -> tuple[list[str], np.ndarray]:
    """(names, uint8 images (n, 28, 28)) of an IDX image file (gzipped or not) or one PNG. Only the
    first bytes say which (an endless input, /dev/zero, is read no further)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror}") from None
    if head.startswith(b"\x89PNG"):
        return [str(path)], _png(path)[None]
    if head[:2] == b"\x1f\x8b" or head[:3] == b"\x00\x00\x08":
        images = data.parse_idx(path, gzipped=head[:2] == b"\x1f\x8b", limit=MAX_IDX_BYTES)
        if images.ndim != 3 or images.shape[1:] != (SIDE, SIDE):
            raise DataError(f"{path}: IDX images of shape {images.shape[1:]}, expected ({SIDE}, {SIDE})")
        return [f"{path}[{i}]" for i in range(len(images))], images
    raise DataError(f"{path}: neither a PNG nor an IDX image file")


def _png(path: Path) -> np.ndarray:
    """A PNG as a 28 x 28 grayscale image, white on black as MNIST's digits are: one on a light ground
    (black on white) is inverted, one of another size is scaled as MNIST's were (see _as_mnist); each is
    said on stderr. A transparent one is laid onto black; one drawn in its alpha channel alone (one colour, or ink so dark
    that it would vanish on black: the shape is in the transparency) is read from its alpha channel, which
    is said on stderr."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)  # one line, as every other refusal
            with Image.open(path) as image:
                if image.width * image.height > MAX_PNG_PIXELS:
                    raise DataError(f"{path}: {image.width} x {image.height} pixels, more than the {MAX_PNG_PIXELS} "
                                    "this reader decodes")
                gray = _light_ground_inverted(_gray(image, path), path)
                if gray.size != (SIDE, SIDE):
                    gray = _as_mnist(gray, path)
                return np.asarray(gray, np.uint8)
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001  (Pillow raises OSError, ValueError, SyntaxError, its bomb errors...)
        raise DataError(f"{path}: not a readable PNG ({first_line(e, 200)})") from None


# A grayscale image brighter than mid-grey on average is a dark digit on a light ground.
MID_GREY = 127.5
# MNIST's convention: the digit's bounding box scaled (aspect kept) to fit 20 x 20, placed in the
# 28 x 28 field with its centre of mass at the centre.
BOX = 20
# Pixels at most this bright (of 255) are ground, not ink, when the digit's bounding box is found.
FAINT = 32


def _light_ground_inverted(gray, path: Path):
    """`gray` as white ink on black: inverted when its mean is above mid-grey (black on white)."""
    from PIL import ImageOps, ImageStat

    if ImageStat.Stat(gray).mean[0] <= MID_GREY:
        return gray
    print(f"note: {path}: a dark digit on a light ground: inverted to MNIST's white digit on black", file=sys.stderr)
    return ImageOps.invert(gray)


def _as_mnist(gray, path: Path):
    """A white-on-black image of another size as a 28 x 28 MNIST digit: its ink's bounding box scaled,
    aspect kept, to fit 20 x 20 and placed with its centre of mass at the field's centre. An image
    without ink is scaled whole."""
    from PIL import Image

    box = gray.point(lambda v: 255 if v > FAINT else 0).getbbox()
    if box is None:
        return gray.resize((SIDE, SIDE), Image.Resampling.LANCZOS)
    digit = gray.crop(box)
    scale = BOX / max(digit.width, digit.height)
    size = (max(1, round(digit.width * scale)), max(1, round(digit.height * scale)))
    small = np.asarray(digit.resize(size, Image.Resampling.LANCZOS), np.float64)
    mass = small.sum()
    rows, cols = np.indices(small.shape)
    centre_row = (rows * small).sum() / mass if mass else small.shape[0] / 2
    centre_col = (cols * small).sum() / mass if mass else small.shape[1] / 2
    top = min(max(round(SIDE / 2 - centre_row), 0), SIDE - size[1])
    left = min(max(round(SIDE / 2 - centre_col), 0), SIDE - size[0])
    field = np.zeros((SIDE, SIDE), np.uint8)
    field[top:top + size[1], left:left + size[0]] = np.clip(np.rint(small), 0, 255).astype(np.uint8)
    print(f"note: {path}: {gray.width} x {gray.height} pixels: scaled to {SIDE} x {SIDE} as MNIST's digits are "
          f"(the digit in {BOX} x {BOX}, centred by its mass)", file=sys.stderr)
    return Image.fromarray(field, "L")


# Below this brightness (of 255) everywhere once laid onto black, a transparent drawing is dark ink that
# MNIST's white-on-black reading would see as a blank image.
DARK_INK = 64


def _gray(image, path: Path):
    from PIL import Image

    if image.mode not in ("RGBA", "LA", "PA") and "transparency" not in image.info:
        return image.convert("L")
    rgba = image.convert("RGBA")
    alpha = rgba.getchannel("A")
    gray = rgba.convert("L")
    if alpha.getextrema()[0] == 255:  # opaque after all
        return gray
    on_black = Image.composite(gray, Image.new("L", gray.size, 0), alpha)
    visible = np.asarray(gray)[np.asarray(alpha) > 0]
    if visible.size and visible.min() == visible.max():  # one colour: the digit is the shape of the transparency
        how = "in one colour"
    elif visible.size and np.asarray(on_black).max() < DARK_INK:  # dark ink: laid onto black it would vanish
        how = "in dark ink"
    else:
        return on_black
    print(f"note: {path}: drawn {how} on a transparent ground: reading the digit from its alpha channel",
          file=sys.stderr)
    return alpha


def predict(model_path: str, inputs: list[str], platform: str) -> int:
    params, config = export.load(model_path)
    names, batches = [], []
    for item in inputs:
        found, images = read_images(Path(item))
        names += found
        batches.append(images)
    if not names:
        raise ConfigError("predict needs at least one image file")
    jax = _jax(platform)
    _fit(jax, model_path, params, config)
    from trainer import models

    network, on_device = models.get(config["model"]).network(), jax.device_put(params)
    images = np.concatenate([batch.reshape(len(batch), -1) for batch in batches])
    del batches
    for start in range(0, len(names), CHUNK):  # in chunks: the float32 input of every image at once is not needed
        x = images[start:start + CHUNK].astype(np.float32) / np.float32(255.0)
        probabilities = np.asarray(jax.nn.softmax(network.apply(on_device, x, config["precision"]), axis=-1))
        chunk_names = names[start:start + CHUNK]
        unusable = next((name for name, p in zip(chunk_names, probabilities) if not np.isfinite(p).all()), None)
        if unusable is not None:
            raise ConfigError(f"--model {model_path}: its outputs for {unusable} are not finite numbers "
                              "(weights too large)")
        for name, p in zip(chunk_names, probabilities):
            write_stdout(f"{name}: {int(p.argmax())} (p={p.max():.3f})\n")
    return 0

"""`predict` and `evaluate` on models and images that are not what they claim: each is one line and a
documented exit code (a model: config, 2; an image file: data, 3), in bounded memory and time."""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from tests.support.paths import MNIST_DIR, REPO_ROOT
from trainer import exit_codes, models
from trainer.config import TrainConfig

MEMORY_LIMIT = 1 << 30  # address space of a child refused before it loads jax


def export_model(directory, change=None, config_change=None):
    """A real export (trainer/export.py) of an untrained small MLP, then changed as a foreign tool might."""
    from safetensors.numpy import load_file, save_file

    from trainer import export
    from trainer.models.mlp import network

    cfg = TrainConfig(mlp_hidden_sizes=(16,))
    export.save(directory, network.init_params(0, cfg.model_settings()), cfg, {"test_accuracy": 0.1, "steps": 1})
    if change:
        tensors = change(load_file(str(directory / "model.safetensors")))
        save_file(tensors, str(directory / "model.safetensors"))
    if config_change:
        config = json.loads((directory / "config.json").read_text())
        (directory / "config.json").write_text(json.dumps(config_change(config)))
    return directory


def run(*args, memory: int | None = None, timeout: int = 120):
    limit = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory})); " if memory else "")
    code = f"{limit}import sys; from trainer.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout, env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})


def one_line(proc, code: int, text: str) -> None:
    assert proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0] and len(lines[0]) < 600, proc.stderr[-2000:]


def png(path, width, height, mode="L", chunks=b"", pixels=None):
    """A PNG written chunk by chunk (a bomb needs no pixels in memory here: the IDAT is compressed zeros)."""
    colour = {"L": 0, "RGBA": 6}[mode]
    channels = {"L": 1, "RGBA": 4}[mode]

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    compressor = zlib.compressobj()
    row = bytes(1 + width * channels)
    if pixels is None:
        body = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    else:
        body = zlib.compress(b"".join(b"\x00" + bytes(r) for r in pixels))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0))
                     + chunks + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


def _ztxt_bomb() -> bytes:
    body = b"Comment\x00\x00" + zlib.compress(b"x" * (64 << 20), 9)
    return struct.pack(">I", len(body)) + b"zTXt" + body + struct.pack(">I", zlib.crc32(b"zTXt" + body))


MODELS = {
    "missing-tensor": (lambda t: {k: v for k, v in t.items() if k != "b1"}, None, "missing b1"),
    "extra-tensor": (lambda t: {**t, "w9": np.zeros(3, np.float32)}, None, "unexpected w9"),
    "another-shape": (lambda t: {**t, "w0": np.zeros((784, 17), np.float32)}, None, "shapes do not fit a mlp"),
    "integer-tensor": (lambda t: {**t, "b0": np.zeros(16, np.int32)}, None, "tensor b0 is int32"),
    "nan-weights": (lambda t: {**t, "w1": np.full((16, 10), np.nan, np.float32)}, None, "tensor w1 holds NaN"),
    "inf-weights": (lambda t: {**t, "b1": np.full(10, np.inf, np.float32)}, None, "tensor b1 holds NaN or infinite"),
    "overflowing-weights": (lambda t: {**t, "b0": np.full(16, 3e38, np.float32), "w1": np.full((16, 10), 1e10, np.float32)},
                            None, "are not finite"),
    "other-model": (None, lambda c: {**c, "model": "cnn"}, "channels is not a valid cnn setting"),
    "other-model-settings": (None, lambda c: {**c, "model": "cnn", **{k: list(v) if isinstance(v, tuple) else v
                                                                     for k, v in models.get("cnn").resolve().items()}},
                             "missing conv"),
    "no-precision": (None, lambda c: {k: v for k, v in c.items() if k != "precision"}, "gives no precision"),
    "odd-precision": (None, lambda c: {**c, "precision": ["x"]}, "gives no precision"),
    "no-settings": (None, lambda c: {k: v for k, v in c.items() if k != "hidden_sizes"}, "hidden_sizes is not a valid"),
    "huge-settings": (None, lambda c: {**c, "hidden_sizes": [10**9] * 16}, "hidden_sizes is not a valid"),
    "config-not-object": (None, lambda c: [c], "names no known model"),
}


@pytest.mark.parametrize("case", MODELS)
def test_a_foreign_or_inconsistent_model_is_one_line(tmp_path, case):
    change, config_change, message = MODELS[case]
    model = export_model(tmp_path / "model", change, config_change)
    image = png(tmp_path / "digit.png", 28, 28)
    one_line(run("predict", "--model", model, image), exit_codes.CONFIG, message)


@pytest.mark.slow
def test_evaluate_refuses_a_model_as_predict_does(tmp_path):
    model = export_model(tmp_path / "model", MODELS["another-shape"][0])
    one_line(run("evaluate", "--model", model, "--data-dir", MNIST_DIR, "--no-download"), exit_codes.CONFIG,
             "shapes do not fit a mlp")


@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_gpu_platform_without_a_gpu_is_one_line(tmp_path, command):
    """As train's: the backend is created before the first use of a device, not inside jax's traceback."""
    model = export_model(tmp_path / "model")
    inputs = ["--data-dir", MNIST_DIR, "--no-download"] if command == "evaluate" else [png(tmp_path / "d.png", 28, 28)]
    proc = subprocess.run([sys.executable, "-m", "trainer", command, "--model", str(model), "--platform", "gpu",
                           *map(str, inputs)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""})
    one_line(proc, exit_codes.DEVICE_COUNT, "error: --platform gpu: no usable GPU backend (")
    assert not proc.stderr.startswith("Rank"), proc.stderr  # not a distributed command


def idx(path, dims, data: bytes, compress=False):
    raw = struct.pack(">HBB", 0, 8, len(dims)) + struct.pack(f">{len(dims)}I", *dims) + data
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


IMAGES = {
    "product-overflow": (lambda p: idx(p, (2**32 - 1, 2**32 - 1, 2**32 - 1), b"\x00" * 100), "announces"),
    "product-overflow-gz": (lambda p: idx(p, (2**32 - 1,) * 3, b"\x00" * 100, compress=True), "announces"),
    "fewer-bytes": (lambda p: idx(p, (3, 28, 28), b"\x00" * 100), "100 data bytes, header announces 2352"),
    "more-bytes": (lambda p: idx(p, (1, 28, 28), b"\x00" * 785), "more data bytes, header announces 784"),
    "other-side": (lambda p: idx(p, (1, 2, 2), b"\x00" * 4), "IDX images of shape (2, 2)"),
    "short-header": (lambda p: p.write_bytes(b"\x00\x00\x08\x03\x00") and p, "too short for an IDX header"),
    "gzip-bomb": (lambda p: p.write_bytes(gzip.compress(b"\x00" * (256 << 20))) and p, "not an IDX ubyte file"),
    # 78 MB of real images in 76 KB: more than predict takes, though less than the trainer's own data limit
    "gzip-idx-bomb": (lambda p: idx(p, (100_000, 28, 28), bytes(100_000 * 784), compress=True),
                      "announces 78400000 data bytes (100000 x 28 x 28), more than the 67108864 this reader takes"),
    "png-pixels": (lambda p: png(p, 5000, 5000), "5000 x 5000 pixels, more than"),
    "png-pixels-over-pillow-warning": (lambda p: png(p, 10000, 9000), "could be decompression bomb"),
    "png-pixels-over-pillow-limit": (lambda p: png(p, 20000, 9000), "could be decompression bomb"),
    "png-ztxt-bomb": (lambda p: png(p, 28, 28, chunks=_ztxt_bomb()), "not a readable PNG"),
    "png-truncated": (lambda p: p.write_bytes(png(p, 28, 28).read_bytes()[:40]) and p, "not a readable PNG"),
    "dev-zero": ("/dev/zero", "neither a PNG nor an IDX image file"),
    "directory": (lambda p: p.mkdir() or p, "cannot read"),
}


@pytest.mark.parametrize("case", IMAGES)
def test_a_hostile_image_file_is_one_line_in_bounded_memory(tmp_path, case):
    make, message = IMAGES[case]
    image = make if isinstance(make, str) else make(tmp_path / "input")
    model = export_model(tmp_path / "model")
    one_line(run("predict", "--model", model, image, memory=MEMORY_LIMIT, timeout=60), exit_codes.DATA, message)


def test_a_digit_drawn_in_the_alpha_channel_is_read_from_it(tmp_path, capsys):
    from PIL import Image

    from trainer.data import parse_idx
    from trainer.inference import read_images

    digit = parse_idx(MNIST_DIR / "t10k-images-idx3-ubyte.gz")[0]
    rgba = np.zeros((28, 28, 4), np.uint8)  # black ink: the digit is only in the transparency
    rgba[..., 3] = digit
    Image.fromarray(rgba, "RGBA").save(tmp_path / "alpha.png")
    white_ink = rgba.copy()
    white_ink[..., :3] = 255
    Image.fromarray(white_ink, "RGBA").save(tmp_path / "white.png")
    shades = rgba.copy()  # dark ink of many shades, as an anti-aliased drawing program leaves it
    shades[..., :3] = np.random.default_rng(0).integers(0, 40, (28, 28, 3))
    Image.fromarray(shades, "RGBA").save(tmp_path / "shades.png")
    gray_alpha = np.stack([shades[..., 0], digit], axis=-1)
    Image.fromarray(gray_alpha, "LA").save(tmp_path / "gray-alpha.png")
    for name, how in (("alpha.png", "in one colour"), ("white.png", "in one colour"), ("shades.png", "in dark ink"),
                      ("gray-alpha.png", "in dark ink")):
        _, images = read_images(tmp_path / name)
        np.testing.assert_array_equal(images[0], digit, err_msg=name)
        said = capsys.readouterr().err
        assert said == (f"note: {tmp_path / name}: drawn {how} on a transparent ground: reading the digit from its "
                        "alpha channel\n"), said


def test_a_white_digit_on_a_partly_transparent_ground_is_read_as_drawn(tmp_path, capsys):
    from PIL import Image

    from trainer.data import parse_idx
    from trainer.inference import read_images

    digit = parse_idx(MNIST_DIR / "t10k-images-idx3-ubyte.gz")[0]
    rgba = np.stack([digit, digit, digit, np.full((28, 28), 255, np.uint8)], axis=-1)
    rgba[:4, :, 3] = 0  # a transparent margin at the top, where the ground is black anyway
    Image.fromarray(rgba, "RGBA").save(tmp_path / "margin.png")
    _, images = read_images(tmp_path / "margin.png")
    np.testing.assert_array_equal(images[0], digit)
    assert capsys.readouterr().err == ""


def peak_rss_of_predict(model, image) -> tuple[int, str]:
    """(peak resident memory in KiB, output) of `predict --model MODEL IMAGE` in a process of its own."""
    code = ("import atexit, resource, sys; atexit.register(lambda: print('peak', resource.getrusage("
            "resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)); from trainer.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "predict", "--model", str(model), str(image)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return int(done.stderr.split("peak ")[-1]), done.stdout


@pytest.mark.slow
def test_the_largest_png_predict_reads_costs_no_more_memory_than_jax_itself(tmp_path):
    """4096 x 4096 16-bit RGBA, compressed to 130 KB: decoded, converted and laid onto black in one
    process whose peak stays within 128 MiB of predicting a 28 x 28 digit (jax's own footprint)."""
    from trainer.inference import MAX_PNG_PIXELS

    model = export_model(tmp_path / "model")
    side = int(MAX_PNG_PIXELS ** 0.5)
    big = tmp_path / "big.png"
    compressor = zlib.compressobj(9)
    row = bytes(1 + side * 8)
    body = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    big.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 16, 6, 0, 0, 0))
                    + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    small_peak, _ = peak_rss_of_predict(model, png(tmp_path / "digit.png", 28, 28))
    big_peak, said = peak_rss_of_predict(model, big)
    assert said.startswith(f"{big}: ") and big.stat().st_size < 200_000
    assert big_peak < small_peak + 128 * 1024, (big_peak, small_peak)


@pytest.mark.parametrize("bad", ["corrupt", "not-a-folder"])
def test_evaluate_never_scores_another_copy_when_data_dir_is_corrupt(tmp_path, bad):
    """A --data-dir whose test files are corrupt (or that is a file) is a data error naming the file,
    not a score on the good copy that evaluate falls back to where --data-dir has no files at all."""
    import os

    (tmp_path / "cache").mkdir()
    os.symlink(MNIST_DIR, tmp_path / "cache" / "mnist")  # the fallback: a good copy in $JAXT_CACHE
    model = export_model(tmp_path / "model")
    data_dir = tmp_path / "data"
    if bad == "corrupt":
        data_dir.mkdir()
        for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
            (data_dir / name).write_bytes(b"\x1f\x8b not MNIST")
    else:
        data_dir.write_text("a file")

    def evaluate(where):
        return subprocess.run([sys.executable, "-m", "trainer", "evaluate", "--model", str(model), "--data-dir",
                               str(where), "--no-download"], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=120, env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu",
                                                "JAXT_CACHE": str(tmp_path / "cache")})

    said = "corrupt or truncated" if bad == "corrupt" else "the data directory is not a directory"
    one_line(evaluate(data_dir), exit_codes.DATA, said)
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line(evaluate(empty), exit_codes.DATA, "missing (and downloading is disabled)")


def test_evaluate_refuses_a_data_dir_that_is_not_there(tmp_path):
    """A --data-dir that is not there (a typing mistake) is one line and the data error's code, never
    a score on the copy in $JAXT_CACHE (which is read when no --data-dir is given)."""
    import os

    (tmp_path / "cache").mkdir()
    os.symlink(MNIST_DIR, tmp_path / "cache" / "mnist")
    model = export_model(tmp_path / "model")
    env = {"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "JAXT_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "trainer", "evaluate", "--model", str(model)]
    for download in ([], ["--no-download"]):
        refused = subprocess.run([*command, "--data-dir", str(tmp_path / "absent"), *download], cwd=REPO_ROOT,
                                 capture_output=True, text=True, timeout=120, env=env)
        one_line(refused, exit_codes.DATA, f"--data-dir {tmp_path / 'absent'}: no such directory")
        assert refused.stdout == "" and not (tmp_path / "absent").exists()
    scored = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert scored.returncode == 0 and "test accuracy=" in scored.stdout, scored.stderr[-2000:]


def test_a_large_black_on_white_digit_is_read_as_mnist_draws_it(tmp_path, capsys):
    """MNIST test digits drawn black on white, enlarged tenfold and set off-centre in a larger white
    page, are read back as MNIST's own 28 x 28 white-on-black digits: inverted (the mean is above
    mid-grey), the ink's box scaled into 20 x 20 and centred by its mass. A nearest neighbour among
    MNIST's training digits names the true digit for nearly all of them (the image read as drawn,
    inverted and squeezed whole, matches almost none), and each change is said on stderr."""
    from PIL import Image

    from trainer.data import parse_idx
    from trainer.inference import read_images

    digits = parse_idx(MNIST_DIR / "t10k-images-idx3-ubyte.gz")[:30]
    labels = parse_idx(MNIST_DIR / "t10k-labels-idx1-ubyte.gz")[:30]
    train = parse_idx(MNIST_DIR / "train-images-idx3-ubyte.gz")[:6000].reshape(6000, -1).astype(np.float32)
    train_labels = parse_idx(MNIST_DIR / "train-labels-idx1-ubyte.gz")[:6000]

    def nearest(image):
        return train_labels[((train - image.reshape(-1).astype(np.float32)) ** 2).sum(axis=1).argmin()]

    read, plain = [], []
    for i, digit in enumerate(digits):
        page = Image.new("L", (400, 330), 255)
        page.paste(Image.fromarray(255 - digit, "L").resize((280, 280), Image.Resampling.BILINEAR), (90 + i, 20 + i))
        page.save(tmp_path / f"{i}.png")
        _, images = read_images(tmp_path / f"{i}.png")
        said = capsys.readouterr().err.splitlines()
        assert said == [f"note: {tmp_path / f'{i}.png'}: a dark digit on a light ground: inverted to MNIST's white "
                        "digit on black",
                        f"note: {tmp_path / f'{i}.png'}: 400 x 330 pixels: scaled to 28 x 28 as MNIST's digits are "
                        "(the digit in 20 x 20, centred by its mass)"], said
        assert np.corrcoef(images[0].reshape(-1), digit.reshape(-1))[0, 1] > 0.7, i
        read.append(nearest(images[0]))
        plain.append(nearest(np.asarray(page.resize((28, 28), Image.Resampling.LANCZOS))))
    assert (np.array(read) == labels).mean() >= 0.8, (read, labels)  # MNIST's own 28 x 28 digits: 0.87
    assert (np.array(plain) == labels).mean() <= 0.3, (plain, labels)
    digit_on_black = tmp_path / "mnist.png"  # a 28 x 28 MNIST digit is read as it is, without a note
    Image.fromarray(digits[0], "L").save(digit_on_black)
    np.testing.assert_array_equal(read_images(digit_on_black)[1][0], digits[0])
    assert capsys.readouterr().err == ""

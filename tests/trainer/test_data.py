"""MNIST files: verified download from a file:// mirror, errors that name the file, batch order."""

import gzip
import shutil

import numpy as np
import pytest

from tests.support.paths import MNIST_DIR
from trainer import data, exit_codes
from trainer.config import FROM_VARIABLES_ENV
from trainer.errors import DataError

MIRROR = MNIST_DIR.as_uri() + "/"


@pytest.fixture(scope="module")
def mnist():
    return data.load_mnist(MNIST_DIR, download=False)


def test_full_mnist_shapes(mnist):
    assert mnist.train_images.shape == (60000, 784) and mnist.train_images.dtype == np.uint8
    assert mnist.test_images.shape == (10000, 784)
    assert mnist.train_labels.shape == (60000,) and set(np.unique(mnist.test_labels)) == set(range(10))


def test_download_from_mirror_verifies_and_caches(tmp_path):
    path = data.ensure_file(tmp_path, "test_labels", download=True, mirror=MIRROR)
    assert path == tmp_path / "t10k-labels-idx1-ubyte.gz"
    assert data.sha256_of(path) == data.FILES["test_labels"][1]
    assert not list(tmp_path.glob(".*part"))  # no temporary file left behind
    stamp = path.stat().st_mtime_ns
    data.ensure_file(tmp_path, "test_labels", download=True, mirror=MIRROR.rstrip("/"))
    assert path.stat().st_mtime_ns == stamp  # cached: not downloaded again


def test_missing_file_without_download_names_it(tmp_path):
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte\.gz: missing"):
        data.ensure_file(tmp_path, "test_images", download=False, mirror=MIRROR)


def test_truncated_file_names_it(tmp_path):
    src = MNIST_DIR / "t10k-labels-idx1-ubyte.gz"
    (tmp_path / src.name).write_bytes(src.read_bytes()[:1000])
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte\.gz: corrupt or truncated"):
        data.ensure_file(tmp_path, "test_labels", download=False, mirror=MIRROR)


def test_corrupt_file_is_replaced_when_downloading(tmp_path):
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(b"garbage")
    path = data.ensure_file(tmp_path, "test_labels", download=True, mirror=MIRROR, log=lambda m: None)
    assert data.sha256_of(path) == data.FILES["test_labels"][1]


def test_mirror_with_wrong_bytes_fails_after_retries(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "t10k-labels-idx1-ubyte.gz").write_bytes(b"not mnist")
    monkeypatch.setattr(data.time, "sleep", lambda s: None)
    messages = []
    with pytest.raises(DataError, match=r"cannot download t10k-labels-idx1-ubyte\.gz.*sha256"):
        data.ensure_file(tmp_path / "cache", "test_labels", True, mirror.as_uri() + "/", log=messages.append, attempts=3)
    assert len(messages) == 2  # two retries were logged
    assert not (tmp_path / "cache" / "t10k-labels-idx1-ubyte.gz").exists()


@pytest.mark.parametrize("under_jaxgen", [False, True])
def test_unreachable_mirror_names_the_file_and_where_else_to_get_it(tmp_path, monkeypatch, under_jaxgen):
    """The fix is named as the person running it sets it: the trainer's flags, or jaxgen's variables."""
    monkeypatch.setattr(data.time, "sleep", lambda s: None)
    if under_jaxgen:
        monkeypatch.setenv(FROM_VARIABLES_ENV, "1")
    with pytest.raises(DataError, match=r"cannot download train-labels-idx1-ubyte\.gz") as failed:
        data.ensure_file(tmp_path, "train_labels", True, (tmp_path / "nowhere").as_uri() + "/", log=lambda m: None)
    fixes = ("data.mirror", "data.volume") if under_jaxgen else ("--mirror", "--data-dir")
    assert all(fix in str(failed.value) for fix in fixes), failed.value
    assert under_jaxgen != ("--mirror" in str(failed.value))


@pytest.mark.parametrize("download", [True, False])
def test_a_data_dir_that_is_a_file_or_a_file_that_is_a_directory_is_one_data_error(tmp_path, download):
    mirror = MNIST_DIR.as_uri() + "/"
    (tmp_path / "file").write_text("")
    with pytest.raises(DataError, match=r"file: the data directory is not a directory"):
        data.ensure_file(tmp_path / "file", "train_images", download, mirror)
    (tmp_path / "dir" / "train-images-idx3-ubyte.gz").mkdir(parents=True)
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte.gz: not a file"):
        data.ensure_file(tmp_path / "dir", "train_images", download, mirror)


def test_a_data_dir_that_cannot_be_made_is_one_data_error(tmp_path):
    (tmp_path / "blocker").write_text("")  # a file where the data directory's parent should be
    with pytest.raises(DataError, match="mnist/train-images-idx3-ubyte.gz: cannot write the download: Not a directory"):
        data.ensure_file(tmp_path / "blocker" / "mnist", "train_images", True, MNIST_DIR.as_uri() + "/")


def test_parse_idx_rejects_inconsistent_header(tmp_path):
    bad = tmp_path / "bad.gz"
    raw = gzip.decompress((MNIST_DIR / "t10k-labels-idx1-ubyte.gz").read_bytes())
    bad.write_bytes(gzip.compress(raw[:-5]))
    with pytest.raises(DataError, match=r"bad\.gz: 9995 data bytes, header announces 10000"):
        data.parse_idx(bad)
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=r"bad\.gz: not a valid gzip file"):
        data.parse_idx(bad)


def test_trainer_cli_reports_a_corrupt_file_and_exits_non_zero(tmp_path):
    import subprocess
    import sys

    for f in MNIST_DIR.glob("*.gz"):
        shutil.copy(f, tmp_path / f.name)
    target = tmp_path / "train-images-idx3-ubyte.gz"
    target.write_bytes(target.read_bytes()[:4096])
    proc = subprocess.run([sys.executable, "-m", "trainer", "train", "--data-dir", str(tmp_path), "--no-download"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == exit_codes.DATA
    assert "train-images-idx3-ubyte.gz: corrupt or truncated" in proc.stderr


@pytest.mark.parametrize("processes", [1, 2, 4])
def test_global_batch_is_the_same_whatever_the_process_count(mnist, processes):
    images, labels = mnist.train_images[:1024], mnist.train_labels[:1024]
    perm = data.epoch_permutation(len(labels), seed=3, epoch=1)
    reference = data.local_batch(images, labels, perm, 5, 64, 0, 1)
    parts = [data.local_batch(images, labels, perm, 5, 64, p, processes) for p in range(processes)]
    np.testing.assert_array_equal(np.concatenate([x for x, _ in parts]), reference[0])
    np.testing.assert_array_equal(np.concatenate([y for _, y in parts]), reference[1])
    assert reference[0].dtype == np.float32 and reference[0].max() <= 1.0


def test_epochs_are_shuffled_differently_and_reproducibly():
    a, b = data.epoch_permutation(100, 0, 0), data.epoch_permutation(100, 0, 1)
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, data.epoch_permutation(100, 0, 0))


def test_decoded_copies_are_written_once_then_mapped_with_the_same_bits(tmp_path, mnist):
    copies = data.DecodedCopies(tmp_path / "decoded-data", write=True)
    copies.folder.mkdir()
    killed = copies.folder / f".{data.FILES['train_labels'][1]}.npy.4242"  # a writer killed mid-write
    killed.write_bytes(b"\x93NUMPY")
    first = data.load_mnist(MNIST_DIR, download=False, copies=copies)
    kept = sorted(p.name for p in copies.folder.iterdir())
    assert kept == sorted(f"{digest}.npy" for _, digest in data.FILES.values())  # no partial file left
    again = data.load_mnist(MNIST_DIR, download=False, copies=copies)
    for name in ("train_images", "train_labels", "test_images", "test_labels"):
        assert np.array_equal(getattr(first, name), getattr(mnist, name))
        assert np.array_equal(getattr(again, name), getattr(mnist, name))
    assert isinstance(again.train_images.base, np.memmap) or isinstance(again.train_images, np.memmap)
    assert not isinstance(first.train_images, np.memmap)


def test_a_reader_that_does_not_write_and_a_folder_that_cannot_be_made_decode_as_without_copies(tmp_path, mnist):
    reader = data.DecodedCopies(tmp_path / "decoded-data", write=False)
    assert np.array_equal(data.load_mnist(MNIST_DIR, download=False, copies=reader).test_images, mnist.test_images)
    assert not reader.folder.exists()
    (tmp_path / "a-file").write_text("")
    blocked = data.DecodedCopies(tmp_path / "a-file" / "decoded-data", write=True)
    assert np.array_equal(data.load_mnist(MNIST_DIR, download=False, copies=blocked).test_labels, mnist.test_labels)


@pytest.mark.parametrize("damage", ["truncated", "other dtype", "other shape", "an npz archive", "a folder",
                                    "not an array"])
def test_a_damaged_copy_is_decoded_again_and_replaced(tmp_path, mnist, damage):
    copies = data.DecodedCopies(tmp_path / "decoded-data", write=True)
    data.load_mnist(MNIST_DIR, download=False, copies=copies)
    copy = copies.folder / f"{data.FILES['test_images'][1]}.npy"
    if damage == "truncated":
        copy.write_bytes(copy.read_bytes()[:100_000])
    elif damage == "other dtype":
        np.save(copy, mnist.test_images.astype(np.float32))
    elif damage == "other shape":  # e.g. a hollow copy of another set: the file's own header decides
        np.save(copy, np.zeros((100, 28, 28), np.uint8))
    elif damage == "an npz archive":
        with open(copy, "wb") as f:
            np.savez(f, images=mnist.test_images)
    elif damage == "a folder":
        copy.unlink()
        copy.mkdir()
    else:
        copy.write_bytes(b"\x93NUMPY garbage")
    loaded = data.load_mnist(MNIST_DIR, download=False, copies=copies)
    assert np.array_equal(loaded.test_images, mnist.test_images) and loaded.test_images.dtype == np.uint8
    if damage != "a folder":  # a folder in its place is left as it is
        assert np.array_equal(np.load(copy, mmap_mode="r"), mnist.test_images.reshape(-1, 28, 28))

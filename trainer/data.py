"""MNIST: sha256-verified download (retried, cached) or a mounted copy, IDX parsing, batch order.

Batch order is defined globally: epoch e uses the permutation of the training set drawn from
(seed, e); global batch s of that epoch is perm[s*B:(s+1)*B]. Process p of P takes the p-th
contiguous slice of every global batch, so global batch b at step s holds the same examples
whatever the process count, and every process runs the same number of steps (the remainder of an
epoch that does not fill a global batch is dropped).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import math
import os
import struct
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainer.config import DEFAULT_MIRROR, from_variables
from trainer.errors import DataError

# The canonical MNIST files and their sha256 (the same bytes on every mirror of the originals).
FILES = {
    "train_images": ("train-images-idx3-ubyte.gz", "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
    "train_labels": ("train-labels-idx1-ubyte.gz", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
    "test_images": ("t10k-images-idx3-ubyte.gz", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
    "test_labels": ("t10k-labels-idx1-ubyte.gz", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
}


@dataclass
class Dataset:
    train_images: np.ndarray  # (N, 784) uint8
    train_labels: np.ndarray  # (N,) int32
    test_images: np.ndarray
    test_labels: np.ndarray


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download(url: str, dest: Path, expected: str, attempts: int, log) -> None:
    import urllib.request  # only when downloading: it pulls in http, email and ssl

    dest.parent.mkdir(parents=True, exist_ok=True)
    last_error = None
    for attempt in range(1, attempts + 1):
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            actual = sha256_of(Path(tmp))
            if actual != expected:
                raise DataError(f"{url}: sha256 {actual} != expected {expected}")
            os.replace(tmp, dest)  # atomic: concurrent readers see the old or the full file
            return
        except (OSError, DataError) as e:  # URLError is an OSError
            last_error = e
            if attempt < attempts:
                log(f"download of {url} failed ({e}); retry {attempt}/{attempts - 1}")
                time.sleep(min(2**attempt, 10))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise DataError(f"cannot download {dest.name} from {url}: {last_error}; {where_else()}")


def where_else() -> str:
    """Where else the MNIST files can come from, as the person running the trainer sets it."""
    if from_variables():
        return "set data.mirror to a reachable copy of the MNIST files (file:// works), or mount them with data.volume"
    return ("give --mirror URL, a reachable copy of the MNIST files (file:// works), or --data-dir DIR, a folder "
            "that holds them (variables: data.mirror, data.volume)")


def ensure_file(data_dir: Path, key: str, download: bool, mirror: str, log=print, attempts: int = 3) -> Path:
    """Return the verified path of one MNIST file, downloading it into data_dir if needed."""
    name, expected = FILES[key]
    path = data_dir / name
    if data_dir.exists() and not data_dir.is_dir():
        raise DataError(f"{data_dir}: the data directory is not a directory")
    if path.exists():
        if not path.is_file():
            raise DataError(f"{path}: not a file (the MNIST file {name} is expected there)")
        try:
            actual = sha256_of(path)
        except OSError as e:
            raise DataError(f"{path}: cannot read: {e.strerror or e}") from None
        if actual == expected:
            return path
        if not download:
            raise DataError(f"{path}: corrupt or truncated (sha256 {actual}, expected {expected})")
        log(f"{path}: sha256 mismatch, downloading it again")
    elif not download:
        raise DataError(f"{path}: missing (and downloading is disabled); {where_else()}")
    url = mirror if mirror.endswith("/") else mirror + "/"
    try:
        _download(url + name, path, expected, attempts, log)
    except OSError as e:  # the data directory cannot be made or written (download errors are DataError)
        raise DataError(f"{path}: cannot write the download: {e.strerror or e}") from None
    return path


# The most data bytes an IDX file may announce: MNIST's largest holds 47 MB; a header that says more is
# a lie or another data set, and is refused before anything that size is read or allocated.
MAX_IDX_BYTES = 1 << 30


def _idx_header(f, path: Path, limit: int) -> tuple[int, ...]:
    """The dimensions an open IDX ubyte file's header announces (its data bytes at most `limit`)."""
    head = f.read(4)
    if len(head) < 4:
        raise DataError(f"{path}: too short for an IDX header")
    zero, dtype, ndim = struct.unpack(">HBB", head)
    if zero != 0 or dtype != 0x08:
        raise DataError(f"{path}: not an IDX ubyte file (magic {head.hex()})")
    sizes = f.read(4 * ndim)
    if len(sizes) < 4 * ndim:
        raise DataError(f"{path}: too short for an IDX header of {ndim} dimensions")
    dims = struct.unpack(f">{ndim}I", sizes)
    if math.prod(dims) > limit:
        raise DataError(f"{path}: the IDX header announces {math.prod(dims)} data bytes ({' x '.join(map(str, dims))}), "
                        f"more than the {limit} this reader takes")
    return dims


def _open_idx(path: Path, gzipped: bool, read):
    """read(open file) on an IDX file, gzipped (as MNIST ships) or not; errors name the file."""
    try:
        with (gzip.open(path, "rb") if gzipped else open(path, "rb")) as f:
            return read(f)
    except (OSError, EOFError, zlib.error) as e:
        what = "not a valid gzip file" if gzipped else "cannot read"
        raise DataError(f"{path}: {what} ({getattr(e, 'strerror', None) or e})") from None


def idx_dims(path: Path, gzipped: bool = True, limit: int = MAX_IDX_BYTES) -> tuple[int, ...]:
    """The dimensions of an IDX ubyte file's array, from its header alone."""
    return _open_idx(path, gzipped, lambda f: _idx_header(f, path, limit))


def parse_idx(path: Path, gzipped: bool = True, limit: int = MAX_IDX_BYTES) -> np.ndarray:
    """Decode an IDX ubyte file into an array. Only the bytes its header announces are read (at most
    `limit`), so neither a lying header nor a decompression bomb nor an endless file (/dev/zero) costs
    more than that."""
    def read(f):
        dims = _idx_header(f, path, limit)
        return dims, f.read(math.prod(dims) + 1)
    dims, raw = _open_idx(path, gzipped, read)
    expected = math.prod(dims)
    if len(raw) != expected:
        found = f"{len(raw)}" if len(raw) < expected else "more"
        raise DataError(f"{path}: {found} data bytes, header announces {expected}")
    return np.frombuffer(raw, dtype=np.uint8).reshape(dims)


# Where the decoded copies go instead of the job's outputs: a folder several jobs share, or '' for none.
DECODED_DATA_ENV = "JAX_TRAINING_DECODED_DATA"


@dataclass(frozen=True)
class DecodedCopies:
    """Where the verified files' arrays are kept decoded (`<sha256 of the file>.npy`), and whether this
    process writes them: a restart memory-maps them instead of decompressing again (a fifth of a
    second of CPU per process, on the path to its first step). A copy that cannot be written or read
    is no error: the file is decoded as without one."""

    folder: Path
    write: bool

    def array(self, path: Path, digest: str) -> np.ndarray:
        copy = self.folder / f"{digest}.npy"
        kept = self._mapped(copy)
        if kept is not None and kept.dtype == np.uint8 and kept.shape == idx_dims(path):
            return kept
        array = parse_idx(path)
        if self.write:
            self._keep(array, copy)
        return array

    @staticmethod
    def _mapped(copy: Path) -> np.ndarray | None:
        """The copy's array, memory-mapped; None when there is no whole array there (only os.replace
        makes one: a partial write never has the name)."""
        try:
            kept = np.load(copy, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None
        if isinstance(kept, np.ndarray):
            return kept
        kept.close()  # an .npz archive
        return None

    def _keep(self, array: np.ndarray, copy: Path) -> None:
        partial = copy.with_name(f".{copy.name}.{os.getpid()}")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for stale in self.folder.glob(f".{copy.name}.*"):  # a killed writer's (one process 0 at a time)
                stale.unlink(missing_ok=True)
            with open(partial, "wb") as f:
                np.save(f, array, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())  # on disk before it has the name: a crash leaves no hollow copy
            os.replace(partial, copy)
        except OSError:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)


def _decoded(path: Path, key: str, copies: DecodedCopies | None) -> np.ndarray:
    return copies.array(path, FILES[key][1]) if copies else parse_idx(path)


def load_split(data_dir: str | os.PathLike, split: str, download: bool = True, mirror: str = DEFAULT_MIRROR,
               log=print, copies: DecodedCopies | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 784) uint8, labels (N,) int32) of the "train" or "test" split, its files only."""
    data_dir = Path(data_dir)
    images = _decoded(ensure_file(data_dir, f"{split}_images", download, mirror, log), f"{split}_images", copies)
    labels = _decoded(ensure_file(data_dir, f"{split}_labels", download, mirror, log), f"{split}_labels", copies)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataError(f"{data_dir / FILES[split + '_images'][0]}: {images.shape} images vs {labels.shape} labels")
    return images.reshape(len(images), -1), labels.astype(np.int32)


def load_mnist(data_dir: str | os.PathLike, download: bool = True, mirror: str = DEFAULT_MIRROR, log=print,
               copies: DecodedCopies | None = None) -> Dataset:
    train = load_split(data_dir, "train", download, mirror, log, copies)
    return Dataset(*train, *load_split(data_dir, "test", download, mirror, log, copies))


def epoch_permutation(num_examples: int, seed: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(num_examples)


def steps_per_epoch(num_examples: int, global_batch: int) -> int:
    return num_examples // global_batch


def local_indices(perm: np.ndarray, step: int, global_batch: int, process_id: int, num_processes: int) -> np.ndarray:
    """Training-set indices of this process's slice of global batch `step`."""
    per_process = global_batch // num_processes
    start = step * global_batch + process_id * per_process
    return perm[start:start + per_process]


def local_batch(images: np.ndarray, labels: np.ndarray, perm: np.ndarray, step: int, global_batch: int,
                process_id: int, num_processes: int) -> tuple[np.ndarray, np.ndarray]:
    """This process's slice of global batch `step`: float32 images in [0, 1] and int32 labels."""
    idx = local_indices(perm, step, global_batch, process_id, num_processes)
    return images[idx].astype(np.float32) / np.float32(255.0), labels[idx]

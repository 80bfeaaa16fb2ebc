"""A job on a stock image (image.source stock) on the real node: a stand-in built here with Debian's
Python and only jax and jaxlib (stock/standin-image.sh: nothing of this project). The trainer of this
checkout travels in the job's ConfigMap and the packages the image lacks come, pinned by version and
hash, from a package index on the host that the pods reach through the node's bridge (they reach
nothing else). The built-in trainer trains MNIST, a fifth of an epoch to keep the tier lean; an
unmodified program of the user's own runs from its shipped folder.

Each training run reports the seconds from the job's creation to rank 0's first logged step (the
images are on the node already). By hand: JAXT_STARTUP_BENCH=1 runs the built image's twin too, for
benchmarks/README.md's figures; JAXT_STOCK_EPOCHS=N trains N whole epochs (held to 98 %), and
JAXT_STOCK_TARGET another target (jobset)."""

from __future__ import annotations

import contextlib
import datetime
import functools
import http.server
import ipaddress
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.e2e_k8s.kube import SCRIPTS, finish, pod_index, prepare, release_selector, start_run
from tests.e2e_k8s.real import containerd_cli, final_accuracy, node_setting, train
from tests.support.paths import SHARED_DIR

STANDIN = Path(__file__).resolve().parent / "stock" / "standin-image.sh"
SOURCES = ["stock", "built"] if os.environ.get("JAXT_STARTUP_BENCH") == "1" else ["stock"]
EPOCHS = int(os.environ.get("JAXT_STOCK_EPOCHS", "0"))
# 100 steps of cpu-local.json's batch, or whole epochs by hand
TRAINING = [f"training.epochs={EPOCHS}", "training.train_examples=0"] if EPOCHS else ["training.train_examples=12800"]
MIN_ACCURACY = 0.98 if EPOCHS else 0.9
TARGET = os.environ.get("JAXT_STOCK_TARGET", "indexed-job")


@pytest.fixture(scope="session")
def standin() -> str:
    proc = subprocess.run([str(STANDIN)], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout.strip()


@pytest.fixture(scope="session")
def package_index(real_node):
    """The local wheelhouse over HTTP on every address of the host (pip's --find-links reads the
    listing); the URL by the node's bridge address, the host as the pods see it."""
    wheelhouse = Path(subprocess.run(["bash", "-c", f'source {SCRIPTS}/lib/common.sh; echo "$JAXT_CACHE"'],
                                     capture_output=True, text=True, check=True).stdout.strip()) / "wheelhouse"
    handler = functools.partial(_QuietHandler, directory=str(wheelhouse))
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield lambda: f"http://{_bridge_address()}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _bridge_address() -> str:
    """The node bridge's own address (its pod subnet's first, CNI's gateway), made with the first pod."""
    return str(ipaddress.ip_network(node_setting("POD_SUBNET"))[1])


@pytest.fixture
def stock(real, standin, package_index):
    """The real node with the stand-in imported, and the --set overrides of a stock job on it."""
    cluster, sets = real
    archive = Path(subprocess.run(["bash", "-c", f'source {SCRIPTS}/lib/common.sh; echo "$JAXT_CACHE"'],
                                  capture_output=True, text=True, check=True).stdout.strip()) / "images" / "stock-standin.tar"
    ctr = containerd_cli()
    if standin not in cluster.run([*ctr, "images", "ls", "-q"]).stdout.split():
        cluster.run([*ctr, "images", "import", archive], timeout=300)
    repository, tag = standin.rsplit(":", 1)
    return cluster, [*sets, "image.source=stock", f"image.repository={repository}", f"image.tag={tag}",
                     f'image.pip_args=["--no-index", "--find-links", "{package_index()}", "--trusted-host", "{_bridge_address()}"]']


@pytest.mark.timeout(900 + 600 * EPOCHS)
@pytest.mark.parametrize("source", SOURCES)
def test_the_built_in_trainer_trains_on_a_stock_image(request, stock, source, tmp_path):
    cluster, sets = stock
    if source == "built":  # the same job on the built image (real_sets' image)
        sets = request.getfixturevalue("real")[1]
    name = f"real-{source}"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, *TRAINING, base="cpu-local.json", target=TARGET)
    with pod_start_logs_on_failure(cluster, name):
        output = train(cluster, build, 600 + 600 * EPOCHS)
    accuracy = final_accuracy(output)
    assert accuracy >= MIN_ACCURACY, output[-3000:]
    seconds = apply_to_first_step(cluster, name)
    print(json.dumps({"image": source, "target": TARGET, "test_accuracy": accuracy,
                      "apply_to_first_step_s": round(seconds, 1)}), file=sys.stderr)
    cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
    assert cluster.release_objects(name) == []
    assert cluster.items("configmaps", release_selector(name)) == []


@contextlib.contextmanager
def pod_start_logs_on_failure(cluster, name: str):
    """A failed run's first containers' logs (run.sh streams the trainer's only)."""
    try:
        yield
    except AssertionError as error:
        logs = cluster.kubectl("logs", "-l", release_selector(name), "-c", "pod-start", "--tail", "30",
                               check=False)
        raise AssertionError(f"{error}\npod-start logs:\n{logs.stdout}{logs.stderr}") from None


def apply_to_first_step(cluster, name: str) -> float:
    """Seconds from the job object's creation to the first step rank 0 logged (kubectl logs --timestamps)."""
    kind = {"indexed-job": "jobs", "jobset": "jobsets.jobset.x-k8s.io"}[TARGET]
    created = cluster.get(kind, name)["metadata"]["creationTimestamp"]
    pod = next(p["metadata"]["name"] for p in cluster.items("pods", release_selector(name)) if pod_index(p) == 0)
    logs = cluster.kubectl("logs", pod, "-c", "jax", "--timestamps").stdout.splitlines()
    first = next(line.split(" ", 1)[0] for line in logs if "loss=" in line)
    return (_time(first) - _time(created)).total_seconds()


def _time(stamp: str) -> datetime.datetime:
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.datetime.fromisoformat(whole).replace(microsecond=int((fraction + "000000")[:6]))


@pytest.mark.timeout(600)
def test_an_unmodified_program_runs_from_its_shipped_folder(stock, tmp_path):
    cluster, sets = stock
    build = tmp_path / "build"
    prepare(cluster, build, "real-stock-own", *sets, "hosts_count=2", "local_device_count=1",
            f"program.dir={SHARED_DIR / 'seed-programs'}", 'program.command=["python", "allreduce.py"]',
            base="cpu-local.json")
    code, output = finish(start_run(cluster, build, timeout=300), timeout=360)
    with pod_start_logs_on_failure(cluster, "real-stock-own"):
        assert code == 0, output[-6000:]
    assert "Total devices: 2  |  Devices per task: 1" in output, output[-3000:]
    assert "Process 0 has y=[2.]" in output, output[-3000:]
    cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
    assert cluster.release_objects("real-stock-own") == []
    assert cluster.items("configmaps", release_selector("real-stock-own")) == []

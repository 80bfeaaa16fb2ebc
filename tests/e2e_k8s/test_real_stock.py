"""A job on a stock image (image.source stock) on the real node: a stand-in built here with Debian's
Python and only jax and jaxlib (stock/standin-image.sh: nothing of this project). The trainer of this
checkout travels in the job's ConfigMap and the packages the image lacks come, pinned by version and
hash, from a package index on the host that the pods reach through the node's bridge (they reach
nothing else). The cluster guide's stock path (docs/your-cluster.md, its commands read from its
blocks by guide.py) runs as written: the built-in trainer trains MNIST, a fifth of an epoch to keep
the tier lean, and the model is evaluated where the guide finds it; an unmodified program of the
user's own runs from its shipped folder.

The training run reports the seconds from the job's creation to rank 0's first logged step (the
images are on the node already). By hand: JAXT_STARTUP_BENCH=1 runs the built image's twin too, for
benchmarks/README.md's figures; JAXT_STOCK_EPOCHS=N trains N whole epochs (held to 98 %), and
JAXT_STOCK_TARGET another target than the guide example's (indexed-job)."""

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
import time
from pathlib import Path

import pytest

from tests.e2e_k8s import guide
from tests.e2e_k8s.kube import SCRIPTS, finish, pod_index, prepare, release_selector, start_run
from tests.e2e_k8s.real import containerd_cli, final_accuracy, node_setting, outputs_volume
from tests.support.paths import SHARED_DIR

STANDIN = Path(__file__).resolve().parent / "stock" / "standin-image.sh"
SOURCES = ["stock", "built"] if os.environ.get("JAXT_STARTUP_BENCH") == "1" else ["stock"]
EPOCHS = int(os.environ.get("JAXT_STOCK_EPOCHS", "0"))
# a fifth of an epoch (50 steps of the guide's example's batch), or whole epochs by hand
TRAINING = [f"training.epochs={EPOCHS}", "training.train_examples=0"] if EPOCHS else ["training.train_examples=12800"]
MIN_ACCURACY = 0.98 if EPOCHS else 0.9
TARGET = os.environ.get("JAXT_STOCK_TARGET")  # the guide's example's unless set


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
def test_the_guides_stock_path_runs_verbatim_and_trains(request, stock, source, tmp_path):
    """docs/your-cluster.md's commands of the stock path, as its fenced blocks have them: the render
    on a stock image, run, results, evaluate, clean up. The built-in trainer of the checkout trains
    on the stand-in and the model is found where step 5 reads it."""
    cluster, sets = stock
    if source == "built":  # the same job on the built image (real_sets' image)
        sets = [*request.getfixturevalue("real")[1], "image.source=built"]
    started = time.monotonic()
    render, *rest = guide.stock_commands()
    name = guide.release_name(render)
    checkout = guide.checkout_copy(tmp_path / "checkout")
    env = guide.environment(cluster.env, tmp_path / "cache")
    outputs = {}
    with pod_start_logs_on_failure(cluster, name):
        guide.run(render + guide.appended([*sets, *guide.TEST_CLUSTER, *TRAINING], TARGET), checkout, env, 60)
        outputs_volume(cluster, name)  # the claim's volume, where the reader's storage class makes one
        target = guide.target(checkout, render)
        seconds_each = {}
        for command in rest:
            begun = time.monotonic()
            outputs[command] = guide.run(command, checkout, env, 600 + 600 * EPOCHS)
            seconds_each[" ".join(command.split()[:2])] = round(time.monotonic() - begun, 1)
            if command.startswith("scripts/run.sh "):  # while the job's pods are there
                seconds = apply_to_first_step(cluster, name, target)
    [trained] = [out for command, out in outputs.items() if command.startswith("scripts/run.sh ")]
    accuracy = final_accuracy(trained)
    assert accuracy >= MIN_ACCURACY, trained[-3000:]
    # step 5 found the model: evaluated on the test set, it scores what the run reported
    [evaluated] = [out for command, out in outputs.items() if command.startswith("jax-trainer evaluate ")]
    assert f"test accuracy={accuracy:.4f}" in evaluated, evaluated
    assert cluster.release_objects(name) == []
    assert cluster.items("configmaps", release_selector(name)) == []
    assert cluster.kubectl("get", "pvc", f"{name}-outputs", check=False).returncode != 0  # --delete-outputs
    print(json.dumps({"image": source, "target": target, "test_accuracy": accuracy,
                      "apply_to_first_step_s": round(seconds, 1),
                      "guide_commands_s": round(time.monotonic() - started, 1), "each_s": seconds_each}), file=sys.stderr)


@contextlib.contextmanager
def pod_start_logs_on_failure(cluster, name: str):
    """A failed run's first containers' logs (run.sh streams the trainer's only)."""
    try:
        yield
    except AssertionError as error:
        logs = cluster.kubectl("logs", "-l", release_selector(name), "-c", "pod-start", "--tail", "30",
                               check=False)
        raise AssertionError(f"{error}\npod-start logs:\n{logs.stdout}{logs.stderr}") from None


def apply_to_first_step(cluster, name: str, target: str) -> float:
    """Seconds from the job object's creation to the first step rank 0 logged (kubectl logs --timestamps)."""
    kind = {"indexed-job": "jobs", "jobset": "jobsets.jobset.x-k8s.io"}[target]
    created = cluster.get(kind, name)["metadata"]["creationTimestamp"]
    workers = [p for p in cluster.items("pods", release_selector(name))  # not run.sh's results pod
               if any(c["name"] == "jax" for c in p["spec"]["containers"])]
    pod = next(p["metadata"]["name"] for p in workers if pod_index(p) == 0)
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

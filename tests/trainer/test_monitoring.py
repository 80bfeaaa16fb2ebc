"""The trainer's Prometheus endpoint (trainer/monitoring.py), scraped over HTTP and read with
prometheus_client's own text parser; the documented series come from trainer/README.md's table."""

import json
import math
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.support import prometheus
from tests.support.prometheus import documented_series
from tests.support import procs
from tests.support.procs import free_port
from trainer import checkpoint, goodput, monitoring
from trainer.metrics import MetricsFile
from trainer.results import read_records


def scrape(port: int) -> dict[str, float]:
    return prometheus.scrape(f"http://127.0.0.1:{port}/metrics")


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def served(tmp_path):
    """An exporter of a job's outputs directory, served on a free port, with a fake clock."""
    clock, port = FakeClock(), free_port()
    exporter = monitoring.Exporter(tmp_path / "metrics.jsonl", tmp_path / "checkpoints", clock=clock)
    server = exporter.serve(port, print, addr="127.0.0.1")
    assert server is not None
    yield exporter, clock, port, tmp_path
    server.shutdown()
    server.server_close()


def test_the_documented_series_are_the_exporters():
    documented = documented_series()
    assert documented, "trainer/README.md has no metrics table"
    assert sorted(documented) == sorted(monitoring.PREFIX + name for name in monitoring.SERIES)


def test_every_documented_series_is_served_with_its_help(served):
    exporter, clock, port, _ = served
    families = prometheus.families(f"http://127.0.0.1:{port}/metrics")
    for name in documented_series():
        assert name in families, f"{name} not served"
        assert families[name].documentation, f"{name} has no HELP text"
        assert families[name].type == "gauge"


def test_the_records_of_a_run_set_the_series(served):
    exporter, clock, port, directory = served
    metrics = MetricsFile(directory / "metrics.jsonl", exporter.observe)
    metrics.write({"event": "start", "step": 0, "total_steps": 64})
    metrics.write({"event": "preempted", "step": 24})
    metrics.write({"event": "start", "step": 24, "total_steps": 64})  # a second attempt, resumed
    clock.now += 3
    exporter.stepped(32)
    metrics.write({"event": "step", "epoch": 1, "step": 32, "loss": 0.25})
    metrics.write({"event": "epoch", "epoch": 1, "step": 32, "loss": 0.3, "test_accuracy": 0.91,
                   "examples_per_second": 1234.5})
    got = scrape(port)
    want = {"step": 32, "total_steps": 64, "epoch": 1, "loss": 0.25, "test_accuracy_ratio": 0.91,
            "examples_per_second": 1234.5, "restarts": 1, "resumed_from_step": 24, "seconds_since_last_step": 0}
    assert {name: got[monitoring.PREFIX + name] for name in want} == want
    starts = [r for r in map(json.loads, (directory / "metrics.jsonl").read_text().splitlines())
              if r["event"] == "start"]
    assert len(starts) == 2  # the exporter reads what the file holds, it writes nothing


def test_seconds_since_the_last_step_grow_between_scrapes(served):
    """Computed at scrape time: a trainer that makes no progress shows it without doing anything."""
    exporter, clock, port, _ = served
    exporter.stepped(8)
    clock.now += 5
    first = scrape(port)["jax_training_seconds_since_last_step"]
    clock.now += 7
    second = scrape(port)["jax_training_seconds_since_last_step"]
    assert (first, second) == (5, 12)
    exporter.stepped(16)
    assert scrape(port)["jax_training_seconds_since_last_step"] == 0


def test_the_time_to_go_is_computed_at_scrape_time(served):
    exporter, clock, port, directory = served
    MetricsFile(None, exporter.observe).write({"event": "start", "step": 0, "total_steps": 64})
    exporter.stepped(8)  # the first chunk (with its compilation) is not the pace
    assert math.isnan(scrape(port)["jax_training_estimated_remaining_seconds"])
    clock.now += 4
    exporter.stepped(16)  # 8 steps in 4 s, 48 to go
    assert scrape(port)["jax_training_estimated_remaining_seconds"] == 24
    clock.now += 4  # no step since: the pace slows down, the time to go grows
    assert scrape(port)["jax_training_estimated_remaining_seconds"] == 48


def test_the_newest_checkpoint_is_read_at_scrape_time(served):
    exporter, clock, port, directory = served
    got = scrape(port)
    assert got["jax_training_last_checkpoint_step"] == 0
    assert math.isnan(got["jax_training_last_checkpoint_age_seconds"])
    leaves = [np.zeros(2)]
    checkpoint.save(directory / "checkpoints", 8, leaves, {})
    checkpoint.save(directory / "checkpoints", 16, leaves, {})
    got = scrape(port)
    assert got["jax_training_last_checkpoint_step"] == 16
    assert 0 <= got["jax_training_last_checkpoint_age_seconds"] < 60


def test_a_port_in_use_is_one_warning_and_no_server(tmp_path):
    lines = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert monitoring.Exporter().serve(port, lines.append, addr="127.0.0.1") is None
    assert len(lines) == 1 and lines[0].startswith("warning: metrics endpoint not served") and str(port) in lines[0]


def test_port_zero_serves_nothing():
    lines = []
    assert monitoring.Exporter().serve(0, lines.append) is None
    assert lines == []


def scrape_when(port: int, ready, proc, timeout: float = 150) -> dict[str, float]:
    """Scrape until ready(samples) holds (the trainer still running); the samples."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.popen.poll() is None, proc.output
        try:
            samples = scrape(port)
        except OSError:  # not listening yet
            samples = {}
        if samples and ready(samples):
            return samples
        time.sleep(0.2)
    raise AssertionError(f"the endpoint never showed what the test waits for:\n{proc.output}")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_training_process_0_serves_its_progress_and_a_stopped_one_shows_it(tmp_path):
    """A real run: process 0 answers during training; once the trainer makes no progress (the hidden
    --hang-after-step hook) and is then stopped with SIGSTOP, the seconds since the last step grow by
    at least the time it was stopped. A stopped process answers nothing, but the kernel queues the
    connection: the scrape sent during the stop is answered after SIGCONT, computed then."""
    port = free_port()
    proc = procs.start(procs.trainer_argv(*procs.small_train_args(tmp_path, "--metrics-port", str(port),
                                                                  "--checkpoint-every", "8",
                                                                  "--hang-after-step", "16")),
                       tmp_path / "train.log")
    try:
        hung = scrape_when(port, lambda s: s["jax_training_step"] == 16, proc)
        assert set(documented_series()) <= set(hung)
        assert hung["jax_training_total_steps"] == 32 and hung["jax_training_epoch"] == 1
        assert 0 < hung["jax_training_loss"] < 10
        assert hung["jax_training_last_checkpoint_step"] in (8, 16)
        assert (hung["jax_training_restarts"], hung["jax_training_resumed_from_step"]) == (0, 0)
        before = scrape(port)["jax_training_seconds_since_last_step"]
        os.kill(proc.popen.pid, signal.SIGSTOP)
        try:
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(scrape, port)
                time.sleep(3)
                assert not pending.done()  # a stopped process does not answer
                os.kill(proc.popen.pid, signal.SIGCONT)
                during = pending.result(timeout=30)
        finally:
            os.kill(proc.popen.pid, signal.SIGCONT)
        assert during["jax_training_step"] == 16
        assert during["jax_training_seconds_since_last_step"] >= before + 3
        assert "hang injection" in proc.output and "warning: metrics endpoint" not in proc.output
    finally:
        procs.kill(proc)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_stopped_peer_stops_the_job_and_process_0_shows_it(tmp_path):
    """Two processes; process 1 is stopped with SIGSTOP mid-run: process 0 waits for it in the
    all-reduce, completes no step, and its endpoint, answering all along, shows the seconds since
    the last step grow; after SIGCONT the run completes."""
    port, coordinator = free_port(), free_port()
    argv = procs.small_train_args(tmp_path, "--epochs", "30", "--local-device-count", "1")
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{coordinator}", "JAX_NUM_PROCESSES": "2"}
    run = [procs.start(procs.trainer_argv(*argv, "--metrics-port", str(port) if rank == 0 else "0"),
                       tmp_path / f"rank{rank}.log", {**env, "JAX_PROCESS_ID": str(rank)}) for rank in range(2)]
    try:
        scrape_when(port, lambda s: s["jax_training_step"] >= 16, run[0])
        os.killpg(run[1].popen.pid, signal.SIGSTOP)  # the process group: the trainer runs under a supervisor
        try:
            # the chunk in flight ends (however slowly, on a loaded machine); the next one waits for process 1
            first = scrape_when(port, lambda s: s["jax_training_seconds_since_last_step"] >= 2, run[0], timeout=60)
            time.sleep(4)
            second = scrape(port)
        finally:
            os.killpg(run[1].popen.pid, signal.SIGCONT)
        assert second["jax_training_step"] == first["jax_training_step"] < 30 * 32
        grown = second["jax_training_seconds_since_last_step"] - first["jax_training_seconds_since_last_step"]
        assert 3.5 <= grown <= 10, (first, second)
        assert procs.wait_all(run, 240) == [0, 0], run[0].output[-3000:] + run[1].output[-3000:]
    finally:
        for proc in run:
            procs.kill(proc)


def test_the_goodput_series_are_the_runs_account(served):
    """goodput_ratio and badput_seconds{kind} are trainer/goodput.py's account of metrics.jsonl at
    scrape time (a two-attempt run; its figures are checked against real runs in test_goodput.py)."""
    exporter, clock, port, directory = served
    assert math.isnan(scrape(port)["jax_training_goodput_ratio"])  # no record yet
    metrics = MetricsFile(directory / "metrics.jsonl", exporter.observe)
    for step in (0, 24):
        metrics.write({"event": "start", "step": step, "total_steps": 64, "launched": time.time() - 2,
                       "phases": {"program_startup": 1.0, "training_prep": 0.5}})
        for done in range(step + 8, step + 40, 8):
            metrics.write({"event": "step", "epoch": 1, "step": done, "loss": 0.5})
    metrics.write({"event": "end", "step": 56, "save_seconds": 0.1})
    account = goodput.account(read_records(directory / "metrics.jsonl"))
    served_families = prometheus.families(f"http://127.0.0.1:{port}/metrics")
    assert served_families["jax_training_goodput_ratio"].samples[0].value == account["goodput"]
    lost = {s.labels["kind"]: s.value for s in served_families["jax_training_badput_seconds"].samples}
    assert lost == account["badput_seconds"] and set(lost) == set(goodput.BADPUT)
    assert account["steps_redone"] == 32 - 24

"""The trainer's Prometheus endpoint: the run's progress as a platform scrapes it (GET /metrics).

Every process serves one (each pod of a job declares the port, so every scraped pod answers); the
training figures are the job's on every process, process 0 alone reads the run's restarts, and each
process reports its own seconds since its last step (a stuck peer shows).

The exporter follows the records the trainer writes to metrics.jsonl (start, log steps, epochs) and
every completed chunk of steps; the seconds since the last completed step and the checkpoint's age
are computed when the endpoint is scraped, so they grow while the trainer makes no progress (a hung,
stopped or paused process 0: the server runs in a thread of its own). The newest checkpoint is read
from the outputs directory at scrape time, whoever wrote it (this attempt or an earlier one).

The HTTP server is prometheus_client's, in a daemon thread; it never stops training: a port that
cannot be bound is one warning line. SERIES is the one list of the series and their help texts
(trainer/README.md documents them).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, start_http_server
from prometheus_client.core import GaugeMetricFamily

from trainer import checkpoint, goodput, results
from trainer.contract import METRICS_PATH
from trainer.metrics import Pace

PREFIX = "jax_training_"
SERIES = {
    "step": "Global training steps completed",
    "total_steps": "Global training steps of the whole run (epochs x steps per epoch)",
    "epoch": "Epoch being trained (1-based); after an epoch's evaluation, that epoch",
    "loss": "Training loss of the last logged step",
    "test_accuracy_ratio": "Test-set accuracy after the last completed epoch (0 to 1)",
    "examples_per_second": "Training throughput of the last completed epoch (examples per second, all processes)",
    "seconds_since_last_step": "Seconds since the last completed training step (since the trainer started "
                               "when none has completed); grows while training makes no progress",
    "last_checkpoint_step": "Global step of the newest checkpoint in the outputs directory (0 = none)",
    "last_checkpoint_age_seconds": "Seconds since the newest checkpoint was written (NaN = none)",
    "estimated_remaining_seconds": "Seconds to the run's last step at this attempt's pace so far (NaN until "
                                   "two chunks of steps have completed; 0 at the end)",
    "restarts": "Earlier attempts of this run (start records in metrics.jsonl before this one; process 0, 0 elsewhere)",
    "resumed_from_step": "Step this attempt resumed from (0 = started from scratch)",
    "goodput_ratio": "Productive training time / wall time of the run so far, every attempt's (docs/goodput.md; "
                     "process 0, NaN elsewhere)",
    "badput_seconds": "Seconds of the run lost to each kind of loss (label kind, docs/goodput.md; process 0, "
                      "NaN elsewhere)",
}
# The series computed when scraped (by the collectors below), not set by the exporter.
COLLECTED = ("last_checkpoint_step", "last_checkpoint_age_seconds", "goodput_ratio", "badput_seconds")


class _Checkpoints:
    """The newest checkpoint's step and age, read from the outputs directory at scrape time."""

    def __init__(self, directory: Path | None, now=time.time):
        self.directory, self.now = directory, now

    def collect(self):
        step, age = 0, math.nan
        try:
            steps = checkpoint.list_steps(self.directory) if self.directory else []
            if steps:
                step = steps[-1]
                age = max(self.now() - os.stat(checkpoint.path_of(self.directory, step)).st_mtime, 0.0)
        except OSError:  # rotated away between the listing and the stat
            pass
        for name, value in (("last_checkpoint_step", step), ("last_checkpoint_age_seconds", age)):
            yield GaugeMetricFamily(PREFIX + name, SERIES[name], value=value)


class _Goodput:
    """The run's goodput account (trainer/goodput.py) from metrics.jsonl, at scrape time."""

    def __init__(self, metrics_path: Path | None):
        self.metrics_path = metrics_path

    def collect(self):
        account = goodput.account(results.Records(self.metrics_path)) if self.metrics_path else None
        ratio = GaugeMetricFamily(PREFIX + "goodput_ratio", SERIES["goodput_ratio"],
                                  value=account["goodput"] if account and account["goodput"] is not None else math.nan)
        lost = GaugeMetricFamily(PREFIX + "badput_seconds", SERIES["badput_seconds"], labels=["kind"])
        for kind in goodput.BADPUT:
            lost.add_metric([kind], account["badput_seconds"][kind] if account else math.nan)
        yield ratio
        yield lost


class Exporter:
    """The series of one trainer process; serve() publishes them."""

    def __init__(self, metrics_path: Path | None = None, checkpoints: Path | None = None, clock=time.monotonic):
        self.metrics_path, self.clock = metrics_path, clock
        self.registry = CollectorRegistry()
        self.gauges = {name: Gauge(PREFIX + name, help_, registry=self.registry)
                       for name, help_ in SERIES.items() if name not in COLLECTED}
        self.gauges["test_accuracy_ratio"].set(math.nan)
        self.gauges["examples_per_second"].set(math.nan)
        self.gauges["loss"].set(math.nan)
        self._last_step_at = clock()
        self.gauges["seconds_since_last_step"].set_function(lambda: self.clock() - self._last_step_at)
        self._pace = Pace(0, 0, clock)
        self.gauges["estimated_remaining_seconds"].set_function(self._remaining_seconds)
        self.registry.register(_Checkpoints(checkpoints))
        self.registry.register(_Goodput(metrics_path))

    def _remaining_seconds(self) -> float:
        remaining = self._pace.remaining_seconds() if self._pace.total else None
        return math.nan if remaining is None else remaining

    def stepped(self, step: int) -> None:
        """A chunk of steps completed, up to global step `step`."""
        self._last_step_at = self.clock()
        self._pace.stepped(step)
        self.gauges["step"].set(step)

    def observe(self, record: dict) -> None:
        """A metrics.jsonl record (trainer/metrics.py's MetricsFile passes each one, written or not)."""
        event, set_ = record.get("event"), lambda name, key: self.gauges[name].set(record[key])
        if event == "start":
            set_("step", "step")
            set_("total_steps", "total_steps")
            set_("resumed_from_step", "step")
            self._pace = Pace(record["total_steps"], 0, self.clock)
            self._pace.step = record["step"]
            starts = sum(r.get("event") == "start" for r in results.iter_records(self.metrics_path))
            self.gauges["restarts"].set(max(starts - 1, 0))
        elif event == "step":
            set_("epoch", "epoch")
            set_("loss", "loss")
        elif event == "epoch":
            set_("epoch", "epoch")
            set_("test_accuracy_ratio", "test_accuracy")
            set_("examples_per_second", "examples_per_second")

    def serve(self, port: int, log, addr: str = "0.0.0.0"):
        """Serve /metrics on addr:port in a daemon thread; the server, or None (port 0, or the port
        could not be bound: one warning line, training goes on)."""
        if not port:
            return None
        try:
            server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        except OSError as e:
            log(f"warning: metrics endpoint not served: cannot listen on {addr}:{port} ({e.strerror or e}); "
                f"training continues")
            return None
        log(f"metrics: serving Prometheus metrics on http://{addr}:{port}{METRICS_PATH}")
        return server

"""Progress reports to the Kubeflow Trainer status server: what `status.trainerStatus` of a TrainJob
shows (progress percentage, estimated remaining seconds, a few metrics).

Kubeflow Trainer (v2.2+, with its TrainJobStatus feature gate on) gives the pods of a TrainJob's
trainer three variables: the HTTPS URL to POST an UpdateTrainJobStatusRequest to, the CA file that
verifies the server, and a projected service-account token file (it rotates: it is read again for
every request). Without them nothing is reported.

Process 0 reports, from a daemon thread of its own: the step loop only records figures in memory,
so a slow, failing or unreachable server never stalls or stops training. One request every
INTERVAL seconds at most (the rate the Trainer's documentation asks for) when the figures changed,
each bounded by TIMEOUT; the first failure is one warning line, later ones are silent. The last
figures (progress 100 at the end) are sent at once by close().
"""

from __future__ import annotations

import http.client
import json
import math
import os
import ssl
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

from trainer.metrics import Pace

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
INTERVAL = 5.0  # seconds between reports: "at most once every 5 seconds" (Trainer's TrainJob progress guide)
TIMEOUT = 5.0  # seconds one report may take
MAX_REPLY = 64 * 1024  # bytes of a reply read (a reply is a few hundred; a larger one is not read whole)
MAX_MESSAGE = 300  # characters of a server's error message in the warning line
# The metrics reported, by name: the metrics.jsonl records and field each comes from (as the
# Prometheus series of the same figures, trainer/monitoring.py), and its format.
METRICS = {
    "epoch": (("step", "epoch"), "epoch", "{:.0f}"),
    "loss": (("step",), "loss", "{:.4f}"),  # of the last logged step
    "test_accuracy": (("epoch",), "test_accuracy", "{:.4f}"),
    "examples_per_second": (("epoch",), "examples_per_second", "{:.0f}"),
}


def from_env(log, environ=os.environ) -> Reporter | None:
    """A started Reporter when the runtime provides the status server, else None."""
    url, ca_file, token_file = (environ.get(name) for name in (ENV_URL, ENV_CA_CERT, ENV_TOKEN))
    if not (url and ca_file and token_file):
        return None
    reporter = Reporter(url, ca_file, token_file, log)
    reporter.start()
    log(f"TrainJob status: reporting progress to {url} every {reporter.interval:g} s")
    return reporter


class Reporter:
    """The run's progress as the trainer records it (observe, stepped), posted by a daemon thread."""

    def __init__(self, url: str, ca_file: str, token_file: str, log, interval: float = INTERVAL,
                 timeout: float = TIMEOUT, clock=time.monotonic):
        self.url, self.ca_file, self.token_file, self.log = url, ca_file, token_file, log
        self.interval, self.timeout, self.clock = interval, timeout, clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._pace = Pace(0, 0, clock)
        self._finished = False
        self._metrics: dict[str, str] = {}
        self._version = self._sent_version = 0  # the figures' change count, and the one last posted
        self._failing = self._warned = False
        self._thread = threading.Thread(target=self._run, name="trainjob-status", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # --- called by the training loop: in-memory updates only

    def observe(self, record: dict) -> None:
        """A metrics.jsonl record (trainer/metrics.py's MetricsFile passes each one)."""
        event = record.get("event")
        with self._lock:
            if event == "start":
                self._pace = Pace(record["total_steps"], 0, self.clock)
                self._pace.step = record["step"]
            elif event in ("end", "preempted"):
                self._pace.step = record["step"]
                self._finished = event == "end"
            for name, (events, key, fmt) in METRICS.items():
                value = record.get(key) if event in events else None
                if isinstance(value, (int, float)) and math.isfinite(value):
                    self._metrics[name] = fmt.format(value)
            self._version += 1

    def stepped(self, step: int) -> None:
        """A chunk of steps completed, up to global step `step`."""
        with self._lock:
            self._pace.stepped(step)
            self._version += 1

    def close(self) -> None:
        """Send the last figures at once and wait at most TIMEOUT seconds for it (not at all while
        the server fails), then stop reporting."""
        self._closed = True
        self._wake.set()
        if self._thread.is_alive() and not self._failing:
            self._thread.join(self.timeout)

    # --- the reporting thread

    def status(self) -> dict:
        """The UpdateTrainJobStatusRequest of the current figures."""
        with self._lock:
            trainer_status: dict = {"lastUpdatedTime": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
            if self._pace.total:
                progress = 100 if self._finished else min(int(100 * self._pace.step / self._pace.total), 99)
                trainer_status["progressPercentage"] = progress
                remaining = self._remaining_seconds()
                if remaining is not None:
                    trainer_status["estimatedRemainingSeconds"] = remaining
            if self._metrics:
                trainer_status["metrics"] = [{"name": n, "value": v} for n, v in self._metrics.items()]
            return {"trainerStatus": trainer_status}

    def _remaining_seconds(self) -> int | None:
        if self._finished:
            return 0
        remaining = self._pace.remaining_seconds()
        return None if remaining is None else max(round(remaining), 0)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)  # only close() wakes it early
            self._wake.clear()
            closing = self._closed  # read first: a close() during the report gets one more round
            with self._lock:
                version = self._version
            if version != self._sent_version and self._post(self.status()):
                self._sent_version = version
            if closing:
                return

    def _post(self, body: dict) -> bool:
        try:
            with open(self.token_file) as f:
                token = f.read().strip()
            context = ssl.create_default_context(cafile=self.ca_file)
            # The server is in the cluster: an egress proxy of the environment is not the way there.
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                 urllib.request.HTTPSHandler(context=context))
            request = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                             headers={"Authorization": f"Bearer {token}",
                                                      "Content-Type": "application/json"})
            with opener.open(request, timeout=self.timeout) as response:
                response.read(MAX_REPLY)  # what the server says is not used: read a bounded part, then close
        except (OSError, ValueError, http.client.HTTPException) as e:  # URLError, HTTPError, TLS, timeouts: OSError
            warned, self._failing, self._warned = self._warned, True, True  # failing before the line is seen
            if not warned:
                self.log(f"warning: TrainJob status not reported to {self.url} ({_reason(e)}); "
                         f"training continues, later reports are tried without further warnings")
            return False
        self._failing = False
        return True


def _reason(error: Exception) -> str:
    """Why a report failed, as one line of at most MAX_MESSAGE characters (a server's message is read
    from at most MAX_REPLY bytes of its reply)."""
    if isinstance(error, urllib.error.HTTPError):
        try:
            reply = error.read(MAX_REPLY)
        except OSError:
            reply = b""
        try:
            message = json.loads(reply or b"{}").get("message", "")  # a Kubernetes Status object's
        except (ValueError, AttributeError, RecursionError):  # not JSON, or cut at MAX_REPLY: its start
            message = reply.decode(errors="replace")
        reason = f"HTTP {error.code}" + (f": {message}" if isinstance(message, str) and message else "")
    elif isinstance(error, urllib.error.URLError):
        reason = str(error.reason)
    else:
        reason = str(error) or type(error).__name__
    line = " ".join(reason.split())
    return line if len(line) <= MAX_MESSAGE else line[:MAX_MESSAGE] + "…"

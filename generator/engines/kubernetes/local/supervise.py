"""Supervision of a local run: the processes of a LocalJob started together, their output tagged with
the pod's name, and all of them restarted on any failure as the rendered failure policy would
(trainer/exit_codes.py): a permanent error fails the job at once, a stop signal's 143 and a lost
peer's 141 restart it without using the restart budget, other failures use it."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import click

from trainer import exit_codes
from trainer.fencing import ATTEMPT_ENV
from trainer.supervisor import die_with_parent

from ....errors import UserError
from ....runstore.runs import log_name
from ..policy import CHECKPOINTS_VOLUME
from .collect import outputs_of, resumes_from
from .plan import LocalJob, engine_env, free_ports

SETTLE_SECONDS = 2.0  # after a lost peer's exit, how long to look for the failure that caused it
LINE_BYTES = 64 * 1024  # the most of one line of a process's output that is shown; the rest is cut
READ_BYTES = 64 * 1024  # what one read of a process's output takes
LOG_BYTES = 64 << 20  # the most of a process's output its log file keeps (all attempts); the rest is shown only


def bounded_lines(fd: int, limit: int = LINE_BYTES):
    """The lines read from `fd` until its end, in chunks of READ_BYTES, each as (its first `limit` bytes
    without the newline, how many bytes more it had): a line of any length costs at most `limit` bytes."""
    line, cut = bytearray(), 0
    while chunk := os.read(fd, READ_BYTES):
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end
            room = max(limit - len(line), 0)
            line += chunk[start:min(stop, start + room)]
            cut += max(stop - start - room, 0)
            if end < 0:
                break
            yield bytes(line), cut
            line, cut, start = bytearray(), 0, end + 1
    if line or cut:
        yield bytes(line), cut


class Runner:
    """Runs the processes of a LocalJob, restarting all of them on any failure. `inherited`: descriptors
    every process inherits (the job's lock, held until the last of them ends)."""

    def __init__(self, job: LocalJob, restarts: int, deadline: float | None, echo=click.echo,
                 inherited: tuple[int, ...] = (), log_dir: Path | None = None):
        self.job, self.restarts, self.deadline, self.echo = job, restarts, deadline, echo
        self.inherited = inherited
        self.children: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.logs = ProcessLogs(log_dir)

    def say(self, message: str, rank: int | None = None) -> None:
        """A line of jaxgen's, also in the log of process `rank`, else in every log begun."""
        with self.lock:
            self.echo(f"[jaxgen] {message}")
            for each in [rank] if rank is not None else list(self.logs.files):
                self.logs.write(each, f"[jaxgen] {message}")

    def _pump(self, name: str, rank: int, stream) -> None:
        """Show the process's output line by line, tagged with its pod's name, a line past LINE_BYTES cut,
        and keep it in its log."""
        for line, cut in bounded_lines(stream.fileno()):
            text = line.decode(errors="replace") + (f" [... {cut} more bytes of this line not shown]" if cut else "")
            with self.lock:
                sys.stdout.write(f"[{name}] {text}\n")
                sys.stdout.flush()
                self.logs.write(rank, text)
        stream.close()

    def _start_all(self, attempt: int) -> list[threading.Thread]:
        # a fresh port per attempt (the previous one may linger in TIME_WAIT), never process 0's metrics port
        [port] = free_ports(1, taken={self.job.metrics_port})
        self.children, threads = [], []
        for plan in self.job.plans:
            env = dict(plan.env)
            if self.job.target:
                env.update(engine_env(self.job.target, plan.rank, len(self.job.plans), port))
            env[ATTEMPT_ENV] = str(attempt)  # trainer/fencing.py: an older attempt's process cannot join
            try:
                # each process dies with jaxgen, a SIGKILL included (its own session: a terminal's
                # signals reach jaxgen, which stops them), and holds the job's lock while it lives
                child = subprocess.Popen(plan.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=self.inherited,
                                         preexec_fn=functools.partial(die_with_parent, os.getpid()))
            except OSError as error:
                raise UserError(f"$.program.command: cannot start {plan.argv[0]!r}: {error.strerror}") from None
            self.children.append(child)
            self.say(f"attempt {attempt}: started {plan.name} (pid {child.pid})", rank=plan.rank)
            thread = threading.Thread(target=self._pump, args=(plan.name, plan.rank, child.stdout), daemon=True)
            thread.start()
            threads.append(thread)
        return threads

    def stop_all(self) -> None:
        """SIGTERM every child's process group, then SIGKILL what is left after a grace period."""
        for child in self.children:
            if child.poll() is None:
                _signal_group(child, signal.SIGTERM)
        end = time.monotonic() + self.job.grace_seconds
        for child in self.children:
            try:
                child.wait(timeout=max(end - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                pass
        for child in self.children:
            _signal_group(child, signal.SIGKILL)  # also reaps grandchildren left in the group
            child.wait()

    def kill_all(self) -> None:
        """SIGKILL every process group now (a second stop signal: no more grace)."""
        for child in self.children:
            _signal_group(child, signal.SIGKILL)

    def _failures(self) -> list[tuple[int, str]]:
        return [(code, plan.name) for code, plan in zip((c.poll() for c in self.children), self.job.plans)
                if code not in (None, 0)]

    def _wait(self) -> tuple[int, str] | None:
        """None when every process succeeded, else (exit code, pod name) of the failure that decides."""
        while True:
            if self.deadline is not None and time.monotonic() > self.deadline:
                return 124, "deadline"
            failures = self._failures()
            if failures:
                if failures[0][0] == exit_codes.PEER_LOST:
                    # The peer that died is the cause: give its exit a moment to be seen.
                    end = time.monotonic() + SETTLE_SECONDS
                    while time.monotonic() < end and all(c == exit_codes.PEER_LOST for c, _ in failures):
                        time.sleep(0.1)
                        failures = self._failures()
                return next((f for f in failures if f[0] != exit_codes.PEER_LOST), failures[0])
            if all(c.poll() == 0 for c in self.children):
                return None
            time.sleep(0.1)

    def _new_pods(self) -> None:
        """Restarted pods get new, empty emptyDirs, as on a cluster."""
        checkpoints = self.job.volume_dirs.get(CHECKPOINTS_VOLUME, {}).get(0)
        if checkpoints in self.job.pod_dirs:
            where = resumes_from(self.job, outputs_of(self.job))  # the bucket's copy, restored into the new one
            self.say(f"the {CHECKPOINTS_VOLUME} volume is a scratch folder of each process, new with each restart: the "
                     "restarted processes "
                     + (f"resume from {where}" if where else
                        "start over at step 0, as on a cluster (persistence.enabled=true keeps it)"))
        for directory in self.job.pod_dirs:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True, exist_ok=True)

    def run(self) -> int:
        attempt = restarts = 0
        while True:
            if attempt:
                self._new_pods()
            threads = self._start_all(attempt)
            failure = self._wait()
            if failure is None:
                for thread in threads:
                    thread.join(timeout=5)
                self.say(f"all {len(self.job.plans)} processes completed")
                return 0
            code, name = failure
            if name == "deadline":
                self.say("the job's active deadline passed: stopping every process")
            else:
                self.say(f"{name} failed: {exit_codes.describe_exit(code)}; stopping every process")
            self.stop_all()
            for thread in threads:
                thread.join(timeout=5)
            if name == "deadline":
                return code
            action = exit_codes.action_of(code)
            if action == "fail":
                self.say(f"exit code {code} is a permanent error: the job failed without a restart")
                return code
            attempt += 1
            if action == "ignore":
                self.say(f"restarting all processes (exit code {code} does not count against the {self.restarts} "
                         "restarts); they resume from the last checkpoint")
                continue
            if restarts >= self.restarts:
                self.say(f"no restarts left ({self.restarts} allowed): the job failed")
                return code if code > 0 else 128 - code
            restarts += 1
            self.say(f"restarting all processes ({restarts}/{self.restarts}); they resume from the last checkpoint")


class ProcessLogs:
    """The output of each process of a run, every attempt's, in <log_dir>/rank-<rank>.log (`jaxgen logs
    --local`), up to LOG_BYTES each; nothing without a log_dir. A log that cannot be written is given up
    (the output is still shown)."""

    def __init__(self, log_dir: Path | None):
        self.log_dir, self.files, self.written = log_dir, {}, {}

    def write(self, rank: int, text: str) -> None:
        if self.log_dir is None:
            return
        try:
            if rank not in self.files:
                self.log_dir.mkdir(exist_ok=True)
                self.files[rank], self.written[rank] = open(self.log_dir / log_name(rank), "ab", buffering=0), 0
            data = (text + "\n").encode()
            if self.written[rank] >= LOG_BYTES:
                return
            if self.written[rank] + len(data) > LOG_BYTES:
                data = f"[jaxgen] the rest of this process's output is not kept (over {LOG_BYTES} bytes)\n".encode()
            self.files[rank].write(data)
            self.written[rank] += len(data)
        except OSError:
            self.files[rank], self.written[rank] = open(os.devnull, "wb"), LOG_BYTES

    def close(self) -> None:
        """The logs are complete: what is said later (the run's end) is shown only."""
        for f in self.files.values():
            f.close()
        self.log_dir, self.files = None, {}


def _signal_group(child: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(child.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


"""Stop on SIGTERM or SIGUSR1 at one step every process agrees on, checkpoint it, exit 143; on
SIGINT (Ctrl-C) the same, exiting 130 as an interrupted command does.

A pod deletion, a node drain or a preemption sends SIGTERM to one pod at a time; SLURM's
`--signal` warning before the time limit sends SIGUSR1 (or what it is told) to every task, a few
milliseconds apart. The processes must still stop after the same step, or the checkpoint would mix
steps (or a process would wait forever in a collective its peers left). So a signal only sets a
flag, and at every chunk boundary all processes all-gather their flags: one set flag stops all of
them after that same chunk.

Why not JAX's preemption service (on by default: it takes over SIGTERM inside
jax.distributed.initialize, and `multihost_utils.reached_preemption_sync_point(step)` then tells
every process the same step)? It is disabled here (runtime.initialize), because:
- it watches SIGTERM only: SLURM's time-limit warning is a signal of the user's choice (SIGUSR1);
- it exists only with jax.distributed: a single process would need a second mechanism;
- it agrees per call counter and must be reached by every process at every step; the training
  runs up to --steps-per-dispatch steps in one device loop, so it could only be asked at chunk
  boundaries, which is exactly where one tiny all-gather already agrees (~ms, once per chunk);
- while it holds SIGTERM a process that never asks it (setup, evaluation) ignores the signal
  until the grace period ends in SIGKILL, which is what pods did before this module existed.

The signal's arrival is also seen by a thread through signal.set_wakeup_fd, at once, even while
the main thread waits in C++ (JAX's init, a compilation): before training starts there is nothing
to save, and that thread exits 143 at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import numpy as np

from trainer.exit_codes import INTERRUPTED, PREEMPTED

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)


def exit_code_of(signal_name: str | None) -> tuple[int, str]:
    """The exit code of a run stopped by `signal_name` (None: a peer's signal stopped it), and its word."""
    return (INTERRUPTED, "interrupted") if signal_name == signal.SIGINT.name else (PREEMPTED, "preempted")


def flush_and_exit(code: int) -> None:
    """Exit now, skipping atexit: JAX's shutdown would wait for peers that are gone or stopping."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


class StopRequest:
    def __init__(self, log):
        self.log = log
        self.signal_name: str | None = None
        self.training = False  # set once the state is restored: from then on a stop saves it

    def install(self) -> None:
        """Catch the stop signals (main thread only). A Python handler must exist for the wakeup
        fd to be written; it does nothing itself. The fd comes first: a signal between the two would
        find the new handler and no fd, and be lost (Ctrl-C's KeyboardInterrupt, before, is not)."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda signum, frame: None)
        threading.Thread(target=self._watch, args=(read_fd,), name="stop-signals", daemon=True).start()

    def _watch(self, read_fd: int) -> None:
        while True:
            for number in os.read(read_fd, 64):
                if number not in STOP_SIGNALS or self.signal_name:
                    continue
                self.signal_name = signal.Signals(number).name
                if not self.training:
                    code, word = exit_code_of(self.signal_name)
                    self.log(f"received {self.signal_name} before training started: nothing to save, "
                             f"exiting with {code} ({word})")
                    flush_and_exit(code)
                self.log(f"received {self.signal_name}: stopping after the current chunk of steps")

    def agreed(self, distributed: bool) -> bool:
        """True on every process if any process received a stop signal. Collective when
        distributed: every process calls it after the same chunks."""
        mine = self.signal_name is not None
        if not distributed:
            return mine
        from jax.experimental import multihost_utils

        return bool(np.any(multihost_utils.process_allgather(np.array([mine], np.int32))))

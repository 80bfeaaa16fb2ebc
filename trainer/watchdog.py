"""Hang watchdog: when no training step completes within the timeout, dump every thread's Python
stack (faulthandler) and exit with the hang code, so the failure policy restarts the job from its
checkpoint instead of letting a wedged collective sit until the deadline.

It is armed by the first completed chunk, so compilation and data loading never count; evaluation
and checkpoint saves beat it too. os._exit works from this thread even when the main thread is
stuck in C++ and ignores signals.
"""

from __future__ import annotations

import faulthandler
import sys
import threading
import time

from trainer.exit_codes import HANG
from trainer.preemption import flush_and_exit


class Watchdog:
    def __init__(self, timeout: float, log):
        self.timeout, self.log = timeout, log
        self.last = None
        self.step = 0
        self._thread = None

    def beat(self, step: int) -> None:
        """Work up to `step` completed now; starts the watch on the first call (timeout 0 = off)."""
        self.last, self.step = time.monotonic(), step
        if self._thread is None and self.timeout > 0:
            self._thread = threading.Thread(target=self._watch, name="hang-watchdog", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        while True:
            time.sleep(min(1.0, self.timeout / 4))
            idle = time.monotonic() - self.last
            if idle > self.timeout:
                self.log(f"hang: no training step completed for {idle:.0f} s (hang timeout {self.timeout:g} s, "
                         f"last completed step {self.step}); stacks of every thread follow; exiting with {HANG}")
                sys.stdout.flush()
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                flush_and_exit(HANG)

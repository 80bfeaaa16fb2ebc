"""Stop signals during a local run: the first stops every process with its grace period, a second
kills them at once."""

from __future__ import annotations

import signal

from .supervise import Runner

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """A stop signal reached jaxgen: every process is stopped, then jaxgen exits 128 + signum."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def trap_stop_signals(runner: Runner) -> dict:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal) stop the job: the first one raises Stopped in
    the main thread, which stops every process with its grace period; any later one kills every
    process group at once and lets the cleanup finish. The processes run in sessions of their own,
    so nothing else would reach them. Set here, whatever disposition jaxgen inherited (a background
    shell hands SIGINT down ignored). Returns the previous handlers."""
    received: list[int] = []

    def handler(signum, _frame):
        if received:
            runner.kill_all()
            return
        received.append(signum)
        raise Stopped(signum)

    return {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}


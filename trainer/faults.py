"""Fault injection, for the tests of lost peers, hangs, interrupted checkpoint writes and lost nodes:
hidden flags of `train` that are no setting of the run (TrainConfig holds none of them). The training
loop calls them at two points: after each chunk of steps (after_step) and before a checkpoint's rename
(before_rename); the chunks end at their steps (stops) so that after_step sees each one."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainer.integers import ascii_int

HOLD_RELEASED = "hold-released"
HOLD_SECONDS = 540  # under the watchdog's default 600 s without a step


def _flag(help: str):
    return field(default=0, metadata={"help": help})


@dataclass(frozen=True)
class Faults:
    fault_after_step: int = _flag("SIGKILL this process after that global step (once the checkpoint write in "
                                  "flight is on disk)")
    hang_after_step: int = _flag("stop making progress after that global step")
    stall_save_at_step: int = _flag("the background write of that step's checkpoint stops for good before its "
                                    "rename (the step loop goes on)")
    hold_after_step: int = _flag(f"after that global step (its checkpoint on disk), wait until the outputs "
                                 f"directory (<checkpoint-dir>/<run-name>) holds a file {HOLD_RELEASED} (at most "
                                 f"{HOLD_SECONDS} s; every process looks, so the folder must be shared): jobs "
                                 "started in turn all train when a test's fault comes")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Faults:
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})

    def stops(self) -> tuple[int, ...]:
        """The global steps after which a chunk of steps must end."""
        return tuple(step for step in (self.fault_after_step, self.hang_after_step, self.hold_after_step) if step)

    def after_step(self, step: int, writer, log, outputs: Path | None = None, stopping=lambda: False) -> None:
        """After the chunk that ended at `step`: kill, hang or hold this process there (a hold ends
        early when stopping() holds: a stop signal, which the step loop then acts on)."""
        if self.hold_after_step and step == self.hold_after_step and outputs:
            writer.wait()
            released = outputs / HOLD_RELEASED
            log(f"hold injection: waiting after step {step} for {released}")
            deadline = time.monotonic() + HOLD_SECONDS
            while not released.exists() and not stopping():
                if time.monotonic() > deadline:
                    log(f"hold injection: not released in {HOLD_SECONDS} s; going on")
                    break
                time.sleep(0.1)
        if self.fault_after_step and step == self.fault_after_step:
            writer.wait()  # a kill mid-write is --stall-save-at-step's: this one's resume step is known
            log(f"fault injection: killing this process after step {step}")
            os.kill(os.getpid(), signal.SIGKILL)
        if self.hang_after_step and step == self.hang_after_step:
            log(f"hang injection: this process stops making progress after step {step}")
            _hang_forever()

    def before_rename(self, log):
        """The checkpoint writer's hook before it renames the write of a step into place, or None."""
        if not self.stall_save_at_step:
            return None

        def hook(step: int) -> None:
            if step == self.stall_save_at_step:
                log(f"fault injection: the checkpoint write of step {step} stops before its rename")
                _hang_forever()

        return hook


NO_FAULTS = Faults()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The hidden flags (--fault-after-step, ...): one per field of Faults."""
    for f in dataclasses.fields(Faults):
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=ascii_int, default=f.default,
                            help=argparse.SUPPRESS)


def _hang_forever() -> None:
    while True:
        time.sleep(3600)

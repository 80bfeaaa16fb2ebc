"""Launch trainer processes for tests: own process groups, hard timeouts, output captured."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import MNIST_DIR, REPO_ROOT
from trainer import checkpoint, outputs
from trainer.config import TrainConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trainer_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainer", *args]


def outputs_of(checkpoint_dir) -> Path:
    """The outputs directory of a job with the trainer's default --run-name under `checkpoint_dir`."""
    return outputs.run_dir(checkpoint_dir, TrainConfig().run_name)


def checkpoints_of(checkpoint_dir) -> Path:
    return outputs_of(checkpoint_dir) / outputs.CHECKPOINTS


def latest_checkpoint(checkpoint_dir) -> Path:
    """The newest checkpoint file of a job with the default --run-name under `checkpoint_dir`."""
    directory = checkpoints_of(checkpoint_dir)
    return checkpoint.path_of(directory, checkpoint.list_steps(directory)[-1])


def small_train_args(checkpoint_dir, *extra: str) -> list[str]:
    """A fast configuration: small MLP, 2048 examples, batch 64 (32 steps per epoch)."""
    return ["train", "--data-dir", str(MNIST_DIR), "--no-download", "--mlp-hidden-sizes", "64,64",
            "--train-examples", "2048", "--batch-size", "64", "--epochs", "1", "--log-every", "8",
            "--checkpoint-dir", str(checkpoint_dir), *extra]


@dataclass
class Proc:
    popen: subprocess.Popen
    log: Path
    started: float

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start(argv: list[str], log: Path, env: dict | None = None) -> Proc:
    """`env` over this process's environment; a name given None is left out."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env = {name: value for name, value in full_env.items() if value is not None}
    with open(log, "wb") as out:
        # SIGINT as at an interactive prompt whatever launched the suite: children of a background,
        # non-interactive shell inherit SIGINT ignored, and a Ctrl-C test would then test nothing.
        popen = subprocess.Popen(argv, cwd=REPO_ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return Proc(popen, log, time.monotonic())


def kill(proc: Proc) -> None:
    try:
        os.killpg(proc.popen.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.popen.wait()


def wait_all(procs: list[Proc], timeout: float) -> list[int]:
    """Return codes of every process; on timeout kill them all and fail with their output."""
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            proc.popen.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        for proc in procs:
            kill(proc)
        raise AssertionError(f"processes still running after {timeout} s:\n" + "\n".join(
            f"--- {p.log.name}\n{p.output[-3000:]}" for p in procs)) from None
    return [p.popen.returncode for p in procs]


def wait_for_text(proc: Proc, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in proc.output:
            return
        if proc.popen.poll() is not None:
            raise AssertionError(f"{proc.log.name} exited ({proc.popen.returncode}) before printing {text!r}:\n{proc.output[-3000:]}")
        time.sleep(0.1)
    kill(proc)
    raise AssertionError(f"{proc.log.name} did not print {text!r} within {timeout} s:\n{proc.output[-3000:]}")


def run_cluster(tmp_path: Path, name: str, argv_for_rank, processes: int, local_devices: int,
                timeout: float, env: dict | None = None) -> list[Proc]:
    """Run `processes` trainer processes on 127.0.0.1 (a free port); assert they all exit 0."""
    port = free_port()
    procs, extra = [], env or {}
    for rank in range(processes):
        env = dict(extra)
        if processes > 1:
            env |= {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": str(processes),
                    "JAX_PROCESS_ID": str(rank)}
        argv = argv_for_rank(rank) + ["--local-device-count", str(local_devices)]
        procs.append(start(argv, tmp_path / f"{name}-rank{rank}.log", env))
    codes = wait_all(procs, timeout)
    assert codes == [0] * processes, "\n".join(f"--- {p.log.name} ({c})\n{p.output[-3000:]}" for p, c in zip(procs, codes))
    return procs

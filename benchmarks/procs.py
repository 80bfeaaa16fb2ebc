"""Launch the trainer or a baseline as N local processes, wall-clocked from process start.

Each process gets its own process group and a hard deadline (SIGKILL of the group: a distributed
JAX process that lost a peer may ignore SIGTERM). Every output line is timestamped as it arrives,
so the phases of a start-up can be read off rank 0's log.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from trainer.errors import first_line

REPO_ROOT = Path(__file__).resolve().parents[1]
MNIST_DIR = (REPO_ROOT / ".." / "shared" / "data" / "mnist").resolve()


class RunFailed(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Run:
    program: str
    processes: int
    started: float  # time.time() just before the first Popen
    records: list[dict] = field(default_factory=list)  # rank 0's metrics JSONL
    lines: list[tuple[float, str]] = field(default_factory=list)  # rank 0's output, (arrival time, line)
    wall: float = 0.0  # process start -> last process exited

    def epochs(self) -> list[dict]:
        return [r for r in self.records if r.get("event") == "epoch"]

    def first_step_wall(self) -> float:
        for r in self.records:
            if r.get("event") == "step" and r.get("step") == 1:
                return r["time"] - self.started
        raise RunFailed(f"{self.program}: no record of step 1 (run with a step record per step)")

    def line_wall(self, text: str) -> float | None:
        """Seconds from process start to the first rank-0 output line containing `text`."""
        return next((t - self.started for t, line in self.lines if text in line), None)


def argv_for(program: str, args: list[str], processes: int, rank: int, port: int, metrics: Path) -> list[str]:
    cluster = ["--num-processes", str(processes), "--process-id", str(rank)]
    if processes > 1:
        cluster += ["--coordinator-address", f"127.0.0.1:{port}"]
    if program == "trainer":
        return [sys.executable, "-m", "trainer", "train", "--data-dir", str(MNIST_DIR), "--no-download",
                "--metrics-file", str(metrics), "--local-device-count", "1", "--init-timeout", "60",
                *cluster, *args]
    if program in ("baseline", "baseline_synced"):
        loop = "synced" if program == "baseline_synced" else "async"
        return [sys.executable, "-m", "benchmarks.baseline", "--loop", loop, "--data-dir", str(MNIST_DIR),
                "--metrics-file", str(metrics), *cluster, *args]
    raise ValueError(f"unknown program {program!r}")


def _pump(stream, sink: list, keep: bool) -> None:
    for raw in iter(stream.readline, b""):
        if keep:
            sink.append((time.time(), raw.decode(errors="replace").rstrip("\n")))
    stream.close()


def run(program: str, args: list[str], processes: int = 1, timeout: float = 600, env: dict | None = None,
        root: Path = REPO_ROOT) -> Run:
    """Start `processes` local processes of `program` (trainer|baseline|baseline_synced); wait for all.
    `root`: the source tree whose program runs (another checkout, for an A/B of two revisions)."""
    port = free_port()
    full_env = {**os.environ, "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1", **(env or {})}
    with tempfile.TemporaryDirectory(prefix="jaxt-bench-") as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        outputs: list[list] = [[] for _ in range(processes)]
        popens, pumps = [], []
        result = Run(program, processes, time.time())
        try:
            for rank in range(processes):
                p = subprocess.Popen(argv_for(program, args, processes, rank, port, metrics), cwd=root,
                                     env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
                popens.append(p)
                t = threading.Thread(target=_pump, args=(p.stdout, outputs[rank], True), daemon=True)
                t.start()
                pumps.append(t)
            deadline = time.monotonic() + timeout
            for p in popens:
                p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            result.wall = time.time() - result.started
        except subprocess.TimeoutExpired:
            raise RunFailed(f"{program} x{processes} still running after {timeout:g} s: "
                            + _tail(outputs)) from None
        finally:
            for p in popens:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
            for t in pumps:
                t.join(timeout=5)
        codes = [p.returncode for p in popens]
        if any(codes):
            raise RunFailed(f"{program} x{processes} exited with {codes}: " + _tail(outputs))
        result.lines = outputs[0]
        if metrics.exists():
            result.records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return result


def _tail(outputs: list[list]) -> str:
    return " | ".join(f"rank {i}: " + " / ".join(line for _, line in out[-5:]) for i, out in enumerate(outputs))


def run_json(module: str, args: list[str], timeout: float = 600) -> dict:
    """Run `python -m module args` (a helper of this package) and parse the JSON it prints last."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    try:
        done = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env, capture_output=True,
                              text=True, timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise RunFailed(f"{module} still running after {timeout:g} s") from None
    if done.returncode:
        raise RunFailed(f"{module} exited with {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def publish(report: dict, load_before: tuple, output: str | None, text=lambda r: json.dumps(r, indent=2)) -> None:
    """A real-node report's end: the load average before and after, the report on stdout and, with
    --output, in that file."""
    report["load_average_before_after"] = [list(load_before), list(os.getloadavg())]
    written = text(report)
    print(written)
    if output:
        write_report(output, written)


def write_report(path: str | Path, text: str) -> None:
    """A report's JSON text in `path`, gzip-compressed where the name ends in .gz (as the committed
    reports in benchmarks/results/ are)."""
    data = (text + "\n").encode()
    Path(path).write_bytes(gzip.compress(data, mtime=0) if str(path).endswith(".gz") else data)


def read_report(path: str | Path) -> dict:
    """A saved report, plain JSON or gzip-compressed (.gz)."""
    data = Path(path).read_bytes()
    return json.loads(gzip.decompress(data) if str(path).endswith(".gz") else data)


def saved_report(path: str) -> dict:
    """The argparse type of an option that names a saved report (--markdown): the report, or an
    argparse error that says in one line why it cannot be read."""
    try:
        report = read_report(path)
    except (EOFError, ValueError, zlib.error, gzip.BadGzipFile) as e:  # cut short, not JSON, not gzip
        raise argparse.ArgumentTypeError(f"{path}: not a saved report ({first_line(e)})") from None
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e.strerror or e}") from None
    if not isinstance(report, dict):
        raise argparse.ArgumentTypeError(f"{path}: not a saved report (JSON, but not an object)")
    return report


def saved_report_of(benchmark: str, *keys: str):
    """saved_report for the reports of `benchmark`, which all hold `keys`: another benchmark's report
    is refused in one line, not read into a KeyError."""
    def read(path: str) -> dict:
        report = saved_report(path)
        missing = next((key for key in keys if key not in report), None)
        if missing:
            raise argparse.ArgumentTypeError(f"{path}: not a report of {benchmark} (it has no {missing!r})")
        return report

    return read

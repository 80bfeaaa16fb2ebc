"""A handle on the local SLURM of the e2e tier: submit, poll (never `sbatch --wait`), read states."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO_ROOT, SCRIPTS_DIR

SCRIPTS = SCRIPTS_DIR / "slurm"
TERMINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")


@dataclass
class Slurm:
    state_dir: Path
    env: dict
    partition: str

    def run(self, *argv: str, timeout: float = 30, cwd: Path | None = None, check: bool = True):
        proc = subprocess.run(list(argv), env=self.env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
        return proc

    def sbatch(self, script: Path, *options: str, cwd: Path) -> int:
        out = self.run("sbatch", "--parsable", *options, str(script), cwd=cwd).stdout.strip()
        return int(out.split(";")[0])

    def in_queue(self, job_id: int) -> bool:
        return bool(self.run("squeue", "-h", "-j", str(job_id), "-o", "%i", check=False).stdout.strip())

    def wait(self, job_id: int, timeout: float) -> float:
        """Seconds until the job left the queue; cancels it and fails after `timeout`."""
        start = time.monotonic()
        while self.in_queue(job_id):
            if time.monotonic() - start > timeout:
                self.run("scancel", str(job_id), check=False)
                raise AssertionError(f"job {job_id} still in the queue after {timeout}s (cancelled)\n"
                                     f"{self.log_tail()}")
            time.sleep(0.5)
        return time.monotonic() - start

    def accounting(self, job_id: int, timeout: float = 15) -> tuple[str, str]:
        """(State, ExitCode) from `sacct -c` (the jobcomp file; whole jobs, not steps)."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.run("sacct", "-c", "-n", "-P", "-j", str(job_id), "-o", "JobID,State,ExitCode",
                           check=False).stdout
            for line in out.splitlines():
                job, state, code = line.split("|")
                if job == str(job_id) and state.split()[0] in TERMINAL_STATES:
                    return state.split()[0], code
            if time.monotonic() > deadline:
                raise AssertionError(f"sacct has no final state for job {job_id}: {out!r}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for log in sorted((self.state_dir / "log").glob("*.log")):
            text += f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text


def job_processes(job_id: int, tasks_only: bool = False) -> dict[int, dict[str, str]]:
    """{pid: SLURM_* environment} of the trainer processes that belong to a job (read from /proc);
    tasks_only: each task's own process only, not the child a distributed trainer trains in
    (trainer/supervisor.py: a fork, whose parent is a trainer process of the job)."""
    found, parents = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            raw = (entry / "environ").read_bytes()
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"trainer" not in cmdline:
            continue
        env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        if env.get("SLURM_JOB_ID") == str(job_id):
            found[int(entry.name)] = env
    return {pid: env for pid, env in found.items() if not (tasks_only and parents.get(pid) in found)}


def render_script(variables: dict, out_dir: Path) -> Path:
    """`jaxgen render --target slurm -o DIR` of a variables file: the real CLI, as a user runs it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    vars_file = out_dir / "variables.json"
    vars_file.write_text(json.dumps(variables, indent=2))
    proc = subprocess.run([sys.executable, "-m", "generator", "render", str(vars_file), "--target", "slurm",
                           "-o", str(out_dir / "rendered")],
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return out_dir / "rendered" / f"{variables['name']}.sbatch"


def rank_lines(output: str, rank: int) -> list[str]:
    return [line for line in output.splitlines() if re.match(rf"^Rank {rank}: ", line)]

"""`jaxgen run`'s supervisor and the processes it starts: they die with it, a SIGKILL included, and
hold the job's lock while any of them lives, so a second run of the job is refused until the last is
gone; their output is read in bounded chunks, a line past the bound cut with a marker."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from generator.runstore import runs
from generator.engines.kubernetes.local.supervise import LINE_BYTES
from tests.support.paths import EXAMPLES_DIR, REPO_ROOT
from tests.support.procs import kill, start, wait_all, wait_for_text

CPU_LOCAL = str(EXAMPLES_DIR / "cpu-local.json")


def own_run(tmp_path, script: str, *extra: str) -> list[str]:
    """jaxgen run of the cpu-local example whose processes run the shell `script`."""
    return [sys.executable, "-m", "generator", "run", CPU_LOCAL, "--outputs", str(tmp_path / "outputs"),
            "--set-json", f"program.command={json.dumps(['sh', '-c', script])}", "--set-json", "program.args=[]",
            *extra]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"  # a zombie is dead: its files are closed
    except FileNotFoundError:
        return False


def wait_until(done, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def again(tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(own_run(tmp_path, "echo again", "--set", "hosts_count=1"), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


@pytest.mark.timeout(120)
def test_a_killed_supervisors_processes_die_with_it_and_then_free_the_job(tmp_path):
    proc = start(own_run(tmp_path, 'echo "up $$"; exec sleep 300'), tmp_path / "run.log")
    pids: list[int] = []
    try:
        wait_for_text(proc, "[mnist-cpu-1] up ", 60)
        wait_for_text(proc, "[mnist-cpu-0] up ", 10)
        pids = [int(pid) for pid in re.findall(r"started \S+ \(pid (\d+)\)", proc.output)]
        assert len(pids) == 2 and all(map(alive, pids))
        os.kill(proc.popen.pid, signal.SIGKILL)
        assert wait_all([proc], 10) == [-signal.SIGKILL]
        wait_until(lambda: not any(map(alive, pids)), 10, f"the processes {pids} end with their jaxgen")
    finally:
        kill(proc)
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert runs.running(tmp_path / "outputs" / "mnist-cpu") is None
    second = again(tmp_path)
    assert second.returncode == 0 and "[mnist-cpu-0] again" in second.stdout, second.stdout + second.stderr


@pytest.mark.timeout(120)
def test_what_a_killed_supervisors_processes_leave_holds_the_job_until_it_ends(tmp_path):
    """A process the job's own left behind (its child in the background) inherited the job's lock:
    a second run is refused (exit 75) while it lives, naming it, and admitted once it is gone."""
    proc = start(own_run(tmp_path, 'sleep 300 & echo "left $!"; wait', "--set", "hosts_count=1"),
                 tmp_path / "run.log")
    left = None
    try:
        wait_for_text(proc, "[mnist-cpu-0] left ", 60)
        left = int(re.search(r"\[mnist-cpu-0\] left (\d+)", proc.output).group(1))
        [shell] = [int(pid) for pid in re.findall(r"started \S+ \(pid (\d+)\)", proc.output)]
        os.kill(proc.popen.pid, signal.SIGKILL)
        assert wait_all([proc], 10) == [-signal.SIGKILL]
        wait_until(lambda: not alive(shell), 10, "the job's process ends with its jaxgen")
        assert alive(left)
        second = again(tmp_path)
        assert second.returncode == runs.BUSY and "Traceback" not in second.stderr, second.stdout + second.stderr
        assert second.stderr.strip() == (
            f"error: job 'mnist-cpu' is still running: its jaxgen (pid {proc.popen.pid}) is gone, and processes it "
            f"started hold the job's lock (pid {left}, results in {tmp_path / 'outputs' / 'mnist-cpu'}); wait for "
            "them to end or stop them"), second.stderr
        assert "again" not in second.stdout
        os.kill(left, signal.SIGKILL)
        wait_until(lambda: not alive(left), 10, "the leftover process ends")
    finally:
        kill(proc)
        if left is not None and alive(left):
            os.kill(left, signal.SIGKILL)
    third = again(tmp_path)
    assert third.returncode == 0 and "[mnist-cpu-0] again" in third.stdout, third.stdout + third.stderr


@pytest.mark.timeout(120)
def test_a_huge_output_line_is_cut_and_read_in_bounded_memory(tmp_path):
    """A process's 300 MB line, under a 1 GiB address space limit: jaxgen held the whole line (and
    twice more to decode and tag it) and ended in a MemoryError traceback."""
    size = 300_000_000
    script = f"echo first; head -c {size} /dev/zero | tr '\\0' x; echo; echo last"
    command = ["prlimit", f"--as={1 << 30}", *own_run(tmp_path, script, "--set", "hosts_count=1")]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, timeout=100,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    out = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    assert done.returncode == 0 and "Traceback" not in out and "MemoryError" not in out, out[-2000:]
    lines = done.stdout.decode().splitlines()
    cut = [line for line in lines if line.startswith("[mnist-cpu-0] xxx")]
    assert cut == [f"[mnist-cpu-0] {'x' * LINE_BYTES} [... {size - LINE_BYTES} more bytes of this line not shown]"]
    assert lines.index("[mnist-cpu-0] first") < lines.index(cut[0]) < lines.index("[mnist-cpu-0] last")


def run_in(tmp_path, work_dir, *extra: str) -> subprocess.CompletedProcess:
    """One process that says what its emptyDir volume (/checkpoints) holds, then writes a file there."""
    script = 'echo "found: $(ls "$0")"; echo data > "$0/f"'
    argv = own_run(tmp_path, script, "--set", "hosts_count=1", "--work-dir", str(work_dir), *extra)
    argv[argv.index("program.args=[]")] = 'program.args=["/checkpoints"]'
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


@pytest.mark.timeout(120)
def test_the_emptydir_volumes_in_a_work_dir_do_not_outlive_the_run(tmp_path):
    """--work-dir keeps the folder, not the pods' emptyDir volumes in it: they go with the run (--keep keeps
    them), and a kept one is new and empty for the next run's pods; the user's files there stay."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "mine.txt").write_text("mine")
    first = run_in(tmp_path, work)
    assert first.returncode == 0 and "[mnist-cpu-0] found: \n" in first.stdout, first.stdout + first.stderr
    assert f"removed the processes' scratch folders from {work} (--keep keeps them)" in first.stdout
    assert "emptyDir" not in first.stdout + first.stderr
    assert sorted(p.name for p in work.iterdir()) == ["mine.txt"]

    kept = run_in(tmp_path, work, "--keep")
    assert kept.returncode == 0 and f"kept the scratch directory {work}" in kept.stdout, kept.stdout + kept.stderr
    assert (work / "rank-0" / "checkpoints" / "f").read_text() == "data\n"

    again = run_in(tmp_path, work, "--discard")
    assert again.returncode == 0 and "[mnist-cpu-0] found: \n" in again.stdout, again.stdout + again.stderr
    assert f"removed the processes' scratch folders and claims from {work}" in again.stdout
    assert sorted(p.name for p in work.iterdir()) == ["mine.txt"]


def logs(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "generator", "logs", "mnist-cpu", "--local", "--outputs",
                           str(tmp_path / "outputs"), *extra], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


@pytest.mark.timeout(120)
def test_a_failed_local_run_keeps_its_processes_logs_and_jaxgen_logs_local_prints_them(tmp_path):
    """Each process's output, every attempt's, is kept in the run folder (logs/rank-<i>.log), a failed
    run's too; `jaxgen logs --local` prints rank 0's (or --rank N's) of the newest run, where it was refused."""
    # each process fails only once both have spoken, or the first failure may stop its peer before it says a word
    said = tmp_path / "said"
    said.mkdir()
    script = (f'echo "rank $JOB_COMPLETION_INDEX says hello"; echo "going wrong" >&2; touch {said}/$JOB_COMPLETION_INDEX; '
              f'for _ in $(seq 400); do [ -e {said}/0 ] && [ -e {said}/1 ] && break; sleep 0.05; done; exit 1')
    failed = subprocess.run(own_run(tmp_path, script, "--set", "backoff_limit=1"), cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert failed.returncode == 1, failed.stdout + failed.stderr
    [run] = runs.runs(tmp_path / "outputs" / "mnist-cpu")
    assert runs.read_record(run)["status"] == "failed"
    for rank in (0, 1):
        kept = (run / "logs" / f"rank-{rank}.log").read_text().splitlines()
        # both attempts (in the second, a process may be stopped before it says anything: its peer failed)
        assert [line.split(" (pid ")[0] for line in kept if line.startswith("[jaxgen] attempt ")] == [
            f"[jaxgen] attempt {attempt}: started mnist-cpu-{rank}" for attempt in (0, 1)], kept
        assert f"rank {rank} says hello" in kept and "going wrong" in kept, kept  # its stderr too
        assert any("failed: exit code 1" in line for line in kept), kept
    shown = logs(tmp_path)
    assert shown.returncode == 0 and shown.stdout == (run / "logs" / "rank-0.log").read_text(), shown.stderr
    assert logs(tmp_path, "--rank", "1", "--no-follow").stdout == (run / "logs" / "rank-1.log").read_text()
    missing = logs(tmp_path, "--rank", "7")
    assert missing.returncode == 2 and missing.stderr.startswith("error: mnist-cpu: no log of rank 7 in "), \
        missing.stderr
    assert len(missing.stderr.splitlines()) == 1
    other = subprocess.run([sys.executable, "-m", "generator", "logs", "no-such-job", "--local", "--outputs",
                            str(tmp_path / "outputs")], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert other.returncode == 2 and len(other.stderr.splitlines()) == 1 and "no run by that name" in other.stderr


@pytest.mark.timeout(120)
def test_jaxgen_logs_local_follows_a_running_run_until_it_ends(tmp_path):
    proc = start(own_run(tmp_path, 'echo first; sleep 4; echo last', "--set", "hosts_count=1"), tmp_path / "run.log")
    try:
        wait_for_text(proc, "[mnist-cpu-0] first", 60)
        now = logs(tmp_path, "--no-follow")
        assert now.returncode == 0 and "first\n" in now.stdout and "last" not in now.stdout, now.stdout + now.stderr
        followed = logs(tmp_path)
        assert wait_all([proc], 60) == [0], proc.output[-2000:]
    finally:
        kill(proc)
    assert followed.returncode == 0 and followed.stdout.endswith("last\n[jaxgen] all 1 processes completed\n"), \
        followed.stdout
    [run] = runs.runs(tmp_path / "outputs" / "mnist-cpu")
    assert (run / "logs" / "rank-0.log").read_text() == followed.stdout
    assert not list((tmp_path / "outputs" / "mnist-cpu").glob(".*logs"))

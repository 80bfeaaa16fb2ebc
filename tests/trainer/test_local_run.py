"""`jaxgen run --local`: the rendered pod spec as local processes, restart-all on failure, cleanup."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from generator.runstore import runs
from generator.engines.kubernetes.local.plan import local_values, plan_job
from generator.targets import restart_budget
from generator.engines.kubernetes import render_documents
from generator.targets import LOCAL, TARGETS
from generator.values import load_values
from tests.support import prometheus
from tests.support.paths import EXAMPLES_DIR, MNIST_DIR
from tests.support.procs import kill, start, wait_all, wait_for_text
from trainer import checkpoint, exit_codes
from trainer.cluster import resolve_cluster
from trainer.rejoin import POD_UID_ENV

CPU_LOCAL = str(EXAMPLES_DIR / "cpu-local.json")
MIRROR = f"data.mirror={MNIST_DIR.as_uri()}/"


def jaxgen_run(tmp_path, *extra: str) -> list[str]:
    """jaxgen run of the cpu-local example, keeping its results in tmp_path/outputs."""
    return [sys.executable, "-m", "generator", "run", "--local", CPU_LOCAL, "--set", MIRROR,
            "--outputs", str(tmp_path / "outputs"), *extra]


def started_pids(output: str) -> dict[str, int]:
    return {name: int(pid) for name, pid in re.findall(r"started (\S+) \(pid (\d+)\)", output)}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it only waits to be reaped.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


def test_the_trainer_runs_on_cpu_devices_and_an_own_programs_arguments_stay_as_written(tmp_path):
    gpu = load_values([CPU_LOCAL], ["accelerator=gpu"])
    [plan, _] = plan_job(gpu, render_documents(local_values(gpu)), tmp_path).plans
    assert plan.argv[plan.argv.index("--platform") + 1] == "cpu"
    for own in (["--platform", "gpu", "x"], ["x", "--platform"]):
        values = load_values([CPU_LOCAL], set_jsons=['program.command=["python3", "mine.py"]',
                                                     f"program.args={json.dumps(own)}"])
        [plan, _] = plan_job(values, render_documents(local_values(values)), tmp_path).plans
        assert plan.argv[2:] == own


@pytest.mark.parametrize("target", LOCAL)
def test_plan_maps_the_pod_spec_to_local_processes(tmp_path, target):
    values = load_values([CPU_LOCAL], [MIRROR, "local_device_count=2", "training.batch_size=64"], target)
    job = plan_job(values, render_documents(values), tmp_path)
    row = TARGETS[target]
    assert len(job.plans) == 2
    for rank, plan in enumerate(job.plans):
        assert plan.argv[:3] == [sys.executable, "-m", "trainer"]
        args = plan.argv[3:]
        assert args[0] == "train"
        assert args[args.index("--local-device-count") + 1] == "2"
        assert args[args.index("--platform") + 1] == "cpu"
        assert args[args.index("--mirror") + 1] == f"{MNIST_DIR.as_uri()}/"
        assert args[args.index("--checkpoint-dir") + 1] == str(tmp_path / f"rank-{rank}" / "checkpoints")
        assert args[args.index("--data-dir") + 1] == str(tmp_path / f"rank-{rank}" / "data")
        # What the engine sets is there, and the trainer finds its place from it, the coordinator here.
        env = plan.env
        for launcher in row.engine_sets:
            assert set(launcher.env(0, 2, "h", 1)) <= set(env), launcher.name
        assert set(row.workload.engine_env.items()) <= set(env.items())
        spec = resolve_cluster(env, fqdn=lambda: "not-consulted")
        assert (spec.process_id, spec.num_processes) == (rank, 2)
        # rendered where the container restarts in place, empty here: a local process is never restarted alone
        assert env.get(POD_UID_ENV) == ("" if row.workload.restarts_in_place else None)
        assert re.fullmatch(r"127\.0\.0\.1:\d+", spec.coordinator_address)
    assert [p.name for p in job.plans] == [row.workload.hosts.host("mnist-cpu", i) for i in range(2)]


def test_process_0_alone_serves_metrics_on_a_free_port(tmp_path):
    """The processes share this machine: process 0 gets a free port, the others none."""
    values = load_values([CPU_LOCAL], ["metrics.port=1025"])
    job = plan_job(values, render_documents(local_values(values)), tmp_path)
    served = [plan.argv[len(plan.argv) - 1 - plan.argv[::-1].index("--metrics-port") + 1] for plan in job.plans]
    assert served == [str(job.metrics_port), "0"] and job.metrics_port not in (0, 1025)
    off = load_values([CPU_LOCAL], ["metrics.port=0"])
    job = plan_job(off, render_documents(local_values(off)), tmp_path)
    assert job.metrics_port == 0
    assert all(plan.argv[plan.argv.index("--metrics-port") + 1] == "0" for plan in job.plans)
    # program.args turning it off, in argparse's other spelling, is the last word too
    off = load_values([CPU_LOCAL], ["metrics.port=1025", "program.args[0]=--metrics-port=0"])
    job = plan_job(off, render_documents(local_values(off)), tmp_path)
    assert job.metrics_port == 0 and all(plan.argv[-1] == "--metrics-port=0" for plan in job.plans)


class HandedOut:
    """A socket the kernel bound to `port`, as plan._bound_socket gives it."""

    def __init__(self, port: int):
        self.port = port

    def getsockname(self):
        return ("127.0.0.1", self.port)

    def close(self):
        pass


def test_the_coordinator_never_gets_process_0s_metrics_port_even_when_the_kernel_hands_it_out_twice(
        tmp_path, monkeypatch):
    """Ports picked one by one, each let go at once, came out equal once ('Address already in use')."""
    from generator.engines.kubernetes.local import plan as local_plan
    from generator.engines.kubernetes.local.supervise import Runner

    handed = iter([41000, 41000, 41001, 41001, 41002])  # the kernel gives each port twice
    monkeypatch.setattr(local_plan, "_bound_socket", lambda: HandedOut(next(handed)))
    assert local_plan.free_ports(2) == [41000, 41001]
    assert local_plan.free_ports(1, taken={41001}) == [41002]

    handed = iter([42000, 42000, 42001, 42001, 42002])
    values = load_values([CPU_LOCAL], ["metrics.port=1025"])
    job = plan_job(values, render_documents(local_values(values)), tmp_path)
    coordinators = {resolve_cluster(p.env, fqdn=lambda: "-").coordinator_address for p in job.plans}
    assert job.metrics_port == 42001 and coordinators == {"127.0.0.1:42000"}
    # Each attempt picks its coordinator's port again, never the metrics port that process 0 serves on.
    handed = iter([42001, 42001, 42002])
    for plan in job.plans:
        plan.argv = [sys.executable, "-c", "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))",
                     str(tmp_path / f"env-{plan.rank}.json")]
    assert Runner(job, 0, None, echo=lambda line: None).run() == 0
    envs = [json.loads((tmp_path / f"env-{plan.rank}.json").read_text()) for plan in job.plans]
    assert {resolve_cluster(env, fqdn=lambda: "-").coordinator_address for env in envs} == {"127.0.0.1:42002"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_run_prints_where_process_0_serves_its_metrics_and_it_answers(tmp_path):
    proc = start(jaxgen_run(tmp_path, "--set", "training.epochs=1", "--set", "training.train_examples=4096",
                            "--discard"), tmp_path / "run.log")
    try:
        wait_for_text(proc, "metrics of process 0: ", 60)
        url = re.search(r"metrics of process 0: (http://127\.0\.0\.1:\d+/metrics)", proc.output).group(1)
        deadline, samples = time.monotonic() + 120, {}
        while not samples and time.monotonic() < deadline and proc.popen.poll() is None:
            try:
                samples = prometheus.scrape(url)
            except OSError:  # process 0 not listening yet
                time.sleep(0.1)
        assert set(prometheus.documented_series()) <= set(samples), proc.output[-3000:]
        assert wait_all([proc], 240) == [0]
    finally:
        kill(proc)
    assert "warning: metrics endpoint" not in proc.output  # process 1 did not try the same port


def test_restart_budget_follows_the_target():
    values = load_values([CPU_LOCAL], ["backoff_limit=3", "jobset.max_restarts=1"])
    assert restart_budget(values) == 3
    assert restart_budget(load_values([CPU_LOCAL], ["backoff_limit=3", "jobset.max_restarts=1"], "jobset")) == 1


def test_slurm_target_is_refused_with_a_clear_error(tmp_path):
    proc = start([sys.executable, "-m", "generator", "run", "--local", str(EXAMPLES_DIR / "slurm.json")], tmp_path / "s.log")
    assert wait_all([proc], 30) == [2]
    assert "cannot run locally" in proc.output


def test_a_program_folder_is_refused_in_one_line(tmp_path):
    """Nothing travels on this machine: program.dir is refused before anything starts, naming the field."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.py").write_text("print('hi')\n")
    proc = start([sys.executable, "-m", "generator", "run", "--local", str(EXAMPLES_DIR / "cpu-local.json"),
                  "--set", f"program.dir={tmp_path / 'mine'}", "--set", "program.command={python,train.py}",
                  "--outputs", str(tmp_path / "out")], tmp_path / "p.log")
    assert wait_all([proc], 60) == [2]
    errors = [line for line in proc.output.splitlines() if line.startswith("error:")]
    assert errors == ["error: $.program.dir: a folder sent with the job is for a cluster; jaxgen run starts the "
                      "processes in the current folder: leave program.dir empty and run it from your folder"], proc.output
    assert "Traceback" not in proc.output and not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_worker_restarts_all_resumes_and_succeeds(tmp_path):
    work = tmp_path / "work"
    proc = start(jaxgen_run(tmp_path, "--set", "training.epochs=1", "--set", "checkpoint.every_steps=100",
                            "--set", "backoff_limit=2", "--set", "persistence.enabled=true", "--work-dir", str(work)),
                 tmp_path / "run.log")
    try:
        wait_for_text(proc, "checkpoint saved at step 200", 300)
        victim = started_pids(proc.output)["mnist-cpu-1"]
        os.kill(victim, signal.SIGKILL)
        codes = wait_all([proc], 400)
    finally:
        kill(proc)
    out = proc.output
    assert codes == [0], out[-4000:]
    assert "mnist-cpu-1 failed: killed by SIGKILL; stopping every process" in out
    assert "restarting all processes (1/2)" in out
    resumed = re.search(r"\[mnist-cpu-0\] Rank 0: resuming from the checkpoint of step (\d+)", out)
    assert resumed and int(resumed.group(1)) >= 200, out[-4000:]
    assert "[mnist-cpu-1] Rank 1: resuming from the checkpoint of step" in out  # broadcast from rank 0
    assert out.count("training completed.") == 2  # both processes of the second attempt only
    assert "all 2 processes completed" in out
    claim = tmp_path / "outputs" / "claims" / "mnist-cpu-outputs" / "mnist-cpu"
    assert (claim / "checkpoints" / "ckpt-0000000468.npz").exists()
    assert re.search(r"Rank 0: epoch 1/1, train accuracy=0\.9\d+, test accuracy=0\.9[5-9]", out), out[-2000:]
    # The results are collected beside the claim, in the run's own folder, and summarized, with how to resume.
    results = (tmp_path / "outputs" / "mnist-cpu" / "latest").resolve()
    summary = json.loads((results / "summary.json").read_text())
    assert summary["restarts"] == 1 and summary["resumed_from"] == [int(resumed.group(1))]
    assert sorted(p.name for p in results.iterdir()) == ["curves.png", "jaxgen-run.json", "logs", "metrics.jsonl",
                                                         "model", "run.json", "summary.json"]
    assert f"result: test accuracy {summary['test_accuracy']:.4f}" in out
    assert (f"  resume:   finished: the same command again trains nothing (its checkpoints: {claim / 'checkpoints'}). "
            "To train it again, give it another name (--set name=NEW)") in out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_restart_gets_new_emptydirs_and_starts_over(tmp_path):
    """As new pods on a cluster would: the default checkpoint volume does not survive a restart."""
    proc = start(jaxgen_run(tmp_path, "--set", "training.epochs=1", "--set", "training.mlp.hidden_sizes={32}",
                            "--set", "checkpoint.every_steps=100", "--set", "backoff_limit=1"), tmp_path / "run.log")
    try:
        wait_for_text(proc, "checkpoint saved at step 200", 200)
        os.kill(started_pids(proc.output)["mnist-cpu-1"], signal.SIGKILL)
        codes = wait_all([proc], 200)
    finally:
        kill(proc)
    out = proc.output
    assert codes == [0], out[-3000:]
    assert ("the checkpoints volume is a scratch folder of each process, new with each restart: the restarted "
            "processes start over at step 0, as on a cluster") in out
    assert "emptyDir" not in out
    assert "resuming from the checkpoint" not in out
    summary = json.loads((tmp_path / "outputs" / "mnist-cpu" / "latest" / "summary.json").read_text())
    assert summary["restarts"] == 0 and summary["steps"] == 468  # the new pods' volume knew nothing of the first
    assert "  resume:   none: the checkpoints were in the processes' scratch folders, removed when" in out
    # The collected model scores as the run ended.
    scored = subprocess.run([sys.executable, "-m", "trainer", "evaluate", "--model",
                             str(tmp_path / "outputs" / "mnist-cpu" / "latest" / "model"), "--data-dir", str(MNIST_DIR),
                             "--no-download"], capture_output=True, text=True, timeout=120)
    assert scored.stdout.startswith(f"test accuracy={summary['test_accuracy']:.4f} ("), scored.stdout + scored.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_failure_without_restart_budget_fails_the_job(tmp_path):
    proc = start(jaxgen_run(tmp_path, "--set", "training.epochs=1", "--set", "backoff_limit=0"), tmp_path / "run.log")
    try:
        wait_for_text(proc, "batch 100/468", 200)
        os.kill(started_pids(proc.output)["mnist-cpu-0"], signal.SIGKILL)
        codes = wait_all([proc], 60)
    finally:
        kill(proc)
    assert codes[0] == 128 + signal.SIGKILL
    assert "no restarts left (0 allowed): the job failed" in proc.output
    assert not any(alive(pid) for pid in started_pids(proc.output).values())


def test_claim_name_cannot_leave_the_work_dir(tmp_path):
    work = tmp_path / "deep" / "work"
    proc = start(jaxgen_run(tmp_path, "--set", "checkpoint.volume.persistentVolumeClaim.claimName=../../escaped",
                            "--work-dir", str(work)), tmp_path / "run.log")
    assert wait_all([proc], 60) == [2]
    assert "$.checkpoint.volume.persistentVolumeClaim.claimName" in proc.output
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "deep" / "escaped").exists()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_ctrl_c_stops_every_child(tmp_path):
    proc = start(jaxgen_run(tmp_path), tmp_path / "run.log", env={"TMPDIR": str(tmp_path)})
    try:
        wait_for_text(proc, "started mnist-cpu-1", 60)
        work_dir = re.search(r"scratch (\S+?),", proc.output).group(1)
        assert work_dir.startswith(str(tmp_path)) and os.path.isdir(work_dir)
        time.sleep(1)
        pids = started_pids(proc.output)
        assert len(pids) == 2 and all(alive(pid) for pid in pids.values())
        os.kill(proc.popen.pid, signal.SIGINT)
        codes = wait_all([proc], 30)
    finally:
        kill(proc)
    assert codes == [130]
    assert "SIGINT: stopping every process" in proc.output
    assert not any(alive(pid) for pid in pids.values())
    assert not os.path.exists(work_dir)  # the run-scoped directory is removed


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigterm_to_a_worker_checkpoints_restarts_uncounted_and_ends_as_an_uninterrupted_run(tmp_path):
    settings = ["--set", "training.epochs=1", "--set", "checkpoint.every_steps=0", "--set", "backoff_limit=0",
                "--set", "persistence.enabled=true"]
    straight = start(jaxgen_run(tmp_path / "straight", *settings), tmp_path / "straight.log")
    assert wait_all([straight], 400) == [0], straight.output[-3000:]

    proc = start(jaxgen_run(tmp_path / "stopped", *settings), tmp_path / "run.log")
    try:
        wait_for_text(proc, "[mnist-cpu-0] Rank 0: epoch 1/1, batch 100/468", 300)
        os.kill(started_pids(proc.output)["mnist-cpu-1"], signal.SIGTERM)
        codes = wait_all([proc], 400)
    finally:
        kill(proc)
    out = proc.output
    assert codes == [0], out[-4000:]
    steps = re.findall(r"\[mnist-cpu-(\d)\] Rank \d: preempted \(([^)]*)\): every process stops after step (\d+)", out)
    assert sorted(s[:2] for s in steps) == [("0", "a peer received a stop signal"), ("1", "received SIGTERM")], out[-4000:]
    step = int(steps[0][2])
    assert step == int(steps[1][2]) and 100 <= step < 468
    assert f"[mnist-cpu-0] Rank 0: checkpoint saved at step {step}" in out
    # Both processes checkpoint and exit 143; the supervisor names whichever it sees first.
    assert re.search(rf"mnist-cpu-[01] failed: {re.escape(exit_codes.describe(exit_codes.PREEMPTED))}; "
                     "stopping every process", out), out[-4000:]
    assert f"restarting all processes (exit code {exit_codes.PREEMPTED} does not count against the 0 restarts)" in out
    assert f"[mnist-cpu-1] Rank 1: resuming from the checkpoint of step {step}" in out
    assert "all 2 processes completed" in out
    final = "outputs/claims/mnist-cpu-outputs/mnist-cpu/checkpoints/ckpt-0000000468.npz"
    (_, a), (_, b) = checkpoint.read(tmp_path / "straight" / final), checkpoint.read(tmp_path / "stopped" / final)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.timeout(120)
def test_permanent_error_fails_the_job_without_a_restart(tmp_path):
    # A flag the trainer refuses at start (jaxgen itself refuses env that would shadow the job's).
    proc = start(jaxgen_run(tmp_path, "--set", "backoff_limit=3",
                            "--set", "program.command={python,-m,trainer,train,--coordinator-port,x}"),
                 tmp_path / "run.log")
    assert wait_all([proc], 90) == [exit_codes.CONFIG], proc.output[-3000:]
    assert "argument --coordinator-port: 'x' is not an integer" in proc.output
    assert "exit code 2 is a permanent error: the job failed without a restart" in proc.output
    assert "restarting" not in proc.output


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("signals", [("SIGINT", "SIGINT"), ("SIGTERM", "SIGTERM"), ("SIGHUP",)])
def test_stop_signals_leave_no_process_and_no_work_dir(tmp_path, signals):
    """A second Ctrl-C or SIGTERM during the graceful stop kills at once; a closed terminal (SIGHUP)
    stops like Ctrl-C. Either way no trainer is left running and the work dir is removed."""
    proc = start(jaxgen_run(tmp_path), tmp_path / "run.log", env={"TMPDIR": str(tmp_path)})
    try:
        wait_for_text(proc, "started mnist-cpu-1", 60)
        work_dir = re.search(r"scratch (\S+?),", proc.output).group(1)
        time.sleep(1)
        pids = started_pids(proc.output)
        for name in signals:
            os.kill(proc.popen.pid, getattr(signal, name))
            time.sleep(0.3)
        codes = wait_all([proc], 60)
    finally:
        kill(proc)
    assert codes == [128 + getattr(signal, signals[0])]
    assert f"{signals[0]}: stopping every process" in proc.output
    assert not any(alive(pid) for pid in pids.values())
    assert not os.path.exists(work_dir)


def test_a_program_that_cannot_start_is_one_line_and_leaves_nothing(tmp_path):
    proc = start(jaxgen_run(tmp_path, "--set", "program.command={/no/such/program}"), tmp_path / "run.log",
                 env={"TMPDIR": str(tmp_path)})
    assert wait_all([proc], 60) == [2]
    assert "error: $.program.command: cannot start '/no/such/program'" in proc.output
    assert "Traceback" not in proc.output
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jaxgen-")]
    assert runs.runs(tmp_path / "outputs" / "mnist-cpu") == []  # nothing ran, nothing collected


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_discard_keeps_nothing(tmp_path):
    proc = start(jaxgen_run(tmp_path, "--discard", "--set", "training.epochs=1", "--set", "training.mlp.hidden_sizes={32}",
                            "--set", "persistence.enabled=true"), tmp_path / "run.log", env={"TMPDIR": str(tmp_path)})
    assert wait_all([proc], 180) == [0], proc.output[-3000:]
    assert "result: test accuracy" in proc.output  # the trainer's own last line
    assert not (tmp_path / "outputs").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jaxgen-")]


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_diverged_job_completes_and_its_result_says_so(tmp_path):
    """The largest learning rate the schema takes makes the loss NaN: the job still completed (exit 0),
    and the result jaxgen prints from the kept summary says it diverged."""
    proc = start(jaxgen_run(tmp_path, "--set", "hosts_count=1", "--set", "training.epochs=1",
                            "--set", "training.train_examples=2048", "--set", "training.batch_size=64",
                            "--set", "training.learning_rate=10"), tmp_path / "run.log")
    assert wait_all([proc], 180) == [0], proc.output[-3000:]
    [result] = [line for line in proc.output.splitlines() if line.startswith("result: ")]
    assert result.endswith("; diverged: the loss is nan"), result
    assert "Traceback" not in proc.output

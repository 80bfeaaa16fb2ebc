"""Failures in real pods, handled by the job's own failure policy (rendered from trainer/exit_codes.py).

- A worker deleted mid-training (`kubectl delete pod`, the default grace period), of an Indexed
  Job and of a JobSet, with the outputs on a claim (persistence): every process checkpoints the
  same step on SIGTERM and exits 143; the job does not count that against its backoff limit (0
  here), replaces the pods (the JobSet recreates its child Job) and the run resumes from exactly
  that step; run.sh brings the results into the build folder.
- A JobSet worker killed mid-training (SIGKILL: 137) counts against max_restarts (0: the JobSet
  fails), though its peer sees it die first: the peer waits before it exits with 141.
- A configuration error (an impossible flag) fails the Job on the first pod failure, no retries.
- A hang (a test-only flag stops one process's progress) is dumped (every thread's stack) by the
  watchdog, which exits with the hang code, and the Job starts the rank again: `jaxgen status` says
  which rank, what its exit code means, the attempt and the time lost.
- An image whose registry does not answer: `jaxgen status` names the reference and the registry's answer.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e_k8s.kube import (SCRIPTS, assert_complete, finish, prepare, release_selector, set_option, start_run,
                                wait_until)
from tests.e2e_k8s.real import (PERSISTENCE, assert_results_fetched, containerd_cli, containerd_task, delete_pod,
                                 final_accuracy, outputs_volume, uninterrupted_accuracy)
from tests.e2e_k8s.test_job_commands import jaxgen
from tests.support.paths import EXAMPLES_DIR
from trainer import exit_codes


def add_trainer_args(build: Path, name: str, *args: str) -> None:
    """Append trainer flags to the rendered Job in `build` (what no variable can express: test hooks)."""
    path = build / f"job-{name}.yaml"  # prepare.sh writes one file per object: <kind>-<name>.yaml
    job = yaml.safe_load(path.read_text())
    job["spec"]["template"]["spec"]["containers"][0]["args"] += list(args)
    path.write_text(yaml.safe_dump(job))


def pods_of(cluster, name: str) -> list[dict]:
    return cluster.items("pods", f"batch.kubernetes.io/job-name={name}")


def exit_code(pod: dict) -> int | None:
    for status in pod["status"].get("containerStatuses", []):
        if status["state"].get("terminated"):
            return status["state"]["terminated"]["exitCode"]
    return None


def failed_condition(cluster, name: str):
    job = cluster.get("job", name)
    return next((c for c in job["status"].get("conditions", []) if c["type"] == "Failed" and c["status"] == "True"),
                None)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("target", ["indexed-job", "jobset", "jaxjob"])
def test_deleted_worker_saves_and_resumes_without_counting(real, tmp_path, target):
    cluster, sets = real
    name = f"real-preempt-{target}"
    outputs = outputs_volume(cluster, name) / name
    build = tmp_path / "build"
    # No periodic checkpoint: the only one before the end is the one written on SIGTERM.
    prepare(cluster, build, name, *sets, "backoff_limit=0", "checkpoint.every_steps=0", *PERSISTENCE,
            base="cpu-local.json", target=target)
    run = start_run(cluster, build, timeout=600)
    followed = None
    try:
        metrics = outputs / "metrics.jsonl"
        wait_until("training past step 150", lambda: metrics.exists() and re.search(
            r'"step": (1[5-9]\d|[2-9]\d\d)', metrics.read_text()), timeout=300, interval=0.5, run=run)
        # `jaxgen logs --follow` of rank 0, as a user would watch it, across the restart
        with open(tmp_path / "logs.txt", "w") as out:  # a file: a full pipe would hold the stream back
            followed = subprocess.Popen([sys.executable, "-m", "generator", "logs", name, "--follow", "--namespace",
                                         cluster.namespace], env=cluster.env, stdout=out, stderr=subprocess.STDOUT)
        # Its stream of the running container ends early once (a kubelet's reader that fails, a dropped
        # connection: here its kubectl is killed), after some lines: the follower goes on where it ended.
        wait_until("the follower showing rank 0's lines", lambda: (tmp_path / "logs.txt").read_text().count("\n") >= 3,
                   timeout=120, interval=0.2, run=run)
        assert subprocess.run(["pkill", "-P", str(followed.pid), "-f", "logs pod/"]).returncode == 0
        before_break = (tmp_path / "logs.txt").read_text().splitlines()[1:]
        delete_pod(cluster, name, 1)
        code, output = finish(run, timeout=660)
        logs_code = followed.wait(timeout=120)
        logs = (tmp_path / "logs.txt").read_text()
    finally:
        for proc in (run, followed):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert code == 0, output[-6000:]
    # One stream per container of rank 0 (a new pod, or the same pod restarted in place), the stop
    # and the resume both shown, to the end.
    assert logs_code == 0 and len(re.findall(r"^==> pod \S+ \(rank 0", logs, re.M)) >= 2, logs[-6000:]
    assert "every process stops after step" in logs and "resuming from the checkpoint of step" in logs, logs[-6000:]
    first_container = logs.split("==> pod ")[1].splitlines()[1:]  # the lines after the break: shown once
    assert before_break and all(first_container.count(line) == 1 for line in before_break), logs[-6000:]
    assert "training completed." in logs, logs[-6000:]
    saved = re.findall(r"every process stops after step (\d+)\n.*checkpoint saved at step \1:", output)
    resumed = re.findall(r"resuming from the checkpoint of step (\d+)", output)
    assert saved and resumed, output[-6000:]
    assert resumed[0] == saved[0], (saved, resumed)  # exactly the step saved on SIGTERM
    assert int(resumed[0]) < 468
    if target == "indexed-job":
        job = cluster.get("job", name)
        assert_complete(job)
        assert job["status"].get("failed", 0) == 0, job["status"]  # the stop was not counted
    elif target == "jobset":
        # its child Job failed on the stop, and the JobSet recreated it without counting the restart
        status = cluster.get("jobset", name)["status"]
        assert status.get("restarts") == 1 and not status.get("restartsCountTowardsMax"), status
    else:
        # the operator restarted the stopped pods (143: restartPolicy ExitCode; the resume above) and
        # backoff_limit 0, rendered as the floor of 1, did not fail it (0 fails it on a stopped pod)
        job = cluster.get("jaxjob", name)
        assert job["spec"]["runPolicy"]["backoffLimit"] == 1, job["spec"]
        conditions = {c["type"]: c["status"] for c in job["status"]["conditions"]}
        assert conditions.get("Succeeded") == "True" and conditions.get("Failed") != "True", job["status"]
    accuracy = final_accuracy(output)
    assert abs(accuracy - uninterrupted_accuracy()) <= 0.003, (accuracy, uninterrupted_accuracy())
    summary = assert_results_fetched(build, name, output)
    assert summary["test_accuracy"] == accuracy and summary["resumed_from"] == [int(resumed[0])]
    cluster.run([SCRIPTS / "clean.sh", "--delete-outputs", build], timeout=180)


@pytest.mark.timeout(600)
def test_a_killed_jobset_worker_counts_against_max_restarts(real, tmp_path):
    """A crash (rank 1's container SIGKILLed: 137) is what the JobSet sees, not its peer's 141, which
    waits (JAX_TRAINING_PEER_LOST_WAIT) and would restart it uncounted: with max_restarts 0 it fails."""
    cluster, sets = real
    name = "real-crash-jobset"
    outputs = outputs_volume(cluster, name) / name
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, "jobset.max_restarts=0", *PERSISTENCE, base="cpu-local.json",
            target="jobset")
    run = start_run(cluster, build, "--no-logs", timeout=420)
    try:
        metrics = outputs / "metrics.jsonl"
        wait_until("training past step 50", lambda: metrics.exists() and re.search(
            r'"step": ([5-9]\d|\d\d\d)', metrics.read_text()), timeout=300, interval=0.5, run=run)
        cluster.run([*containerd_cli(), "tasks", "kill", "--signal", "SIGKILL",
                     containerd_task(cluster, f"{name}-worker-0-1-")])
        code, output = finish(run, timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    status = cluster.get("jobset", name)["status"]
    assert code != 0 and not status.get("restarts"), (status, output[-3000:])
    failed = next(c for c in status["conditions"] if c["type"] == "Failed" and c["status"] == "True")
    assert failed["reason"] == "ReachedMaxRestarts", status
    cluster.run([SCRIPTS / "clean.sh", "--delete-outputs", build], timeout=180)


@pytest.mark.timeout(600)
def test_config_error_fails_the_job_at_once(real, tmp_path):
    cluster, sets = real
    name = "real-config-error"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, "backoff_limit=3", base="cpu-local.json")
    add_trainer_args(build, name, "--model-parallelism", "3")  # divides no device count here
    code, output = finish(start_run(cluster, build, "--no-logs", timeout=300), timeout=360)
    assert code == 1, output
    condition = failed_condition(cluster, name)
    assert condition and condition["reason"] == "PodFailurePolicy", cluster.get("job", name)["status"]
    codes = [exit_code(p) for p in pods_of(cluster, name)]
    assert exit_codes.CONFIG in codes, codes
    assert len(codes) <= 2  # no pod was started again
    cluster.run([SCRIPTS / "clean.sh", build], timeout=180)


@pytest.mark.timeout(900)
def test_hang_is_dumped_and_restarted(real, tmp_path):
    cluster, sets = real
    name = "real-hang"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, "backoff_limit=1", base="cpu-local.json")
    add_trainer_args(build, name, "--hang-after-step", "150", "--hang-timeout", "20")
    run = start_run(cluster, build, "--no-logs", timeout=600)
    try:
        def hung_pod():
            return next((p for p in pods_of(cluster, name) if exit_code(p) == exit_codes.HANG), None)
        pod = wait_until("a pod that exits with the hang code", hung_pod, timeout=400, interval=1, run=run)
        log = cluster.kubectl("logs", pod["metadata"]["name"], "-c", "jax").stdout
        assert "Thread 0x" in log or "Current thread" in log, log[-3000:]  # faulthandler's dump
        index = pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
        wait_until(f"a new pod for index {index}", lambda: len(
            [p for p in pods_of(cluster, name)
             if p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == index]) >= 2,
            timeout=120, interval=1)
        observed = time.monotonic()
        cause = json.loads(jaxgen(cluster, "status", name, "-o", "json").stdout).get("cause", "")
        print(f"cause: {cause} ({time.monotonic() - observed:.1f} s)")
        hang = re.escape(exit_codes.describe(exit_codes.HANG))
        # every process hangs, so the cause may name either rank; attempt 2, or 3 where the peer's
        # in-place restart (it lost that rank) was counted first
        matched = re.fullmatch(rf"restart(ed|ing): rank (\d+) ended with {hang}; attempt [23], \d:\d\d:\d\d lost"
                               r"( so far)?", cause)
        assert matched, cause
        hung_ranks = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
                      for p in pods_of(cluster, name) for s in p["status"].get("containerStatuses", [])
                      for state in (s["state"], s.get("lastState", {}))
                      if state.get("terminated", {}).get("exitCode") == exit_codes.HANG}
        assert matched[2] in hung_ranks, (cause, hung_ranks)
    finally:
        if run.poll() is None:
            run.kill()
        cluster.run([SCRIPTS / "clean.sh", build], timeout=180)


@pytest.mark.timeout(180)
def test_an_image_whose_registry_does_not_answer_is_the_cause(real):
    cluster, sets = real
    name, image = "real-no-registry", "127.0.0.1:1/jax-training/nothing"
    rendered = subprocess.run(
        [sys.executable, "-m", "generator", "render", str(EXAMPLES_DIR / "cpu-local.json"), "--set", f"name={name}",
         "--set", f"namespace={cluster.namespace}", *[arg for value in sets for arg in (set_option(value), value)],
         "--set", f"image.repository={image}", "--set", "image.tag=v0", "--set", "image.pull_policy=IfNotPresent"],
        capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    cluster.run(["kubectl", "apply", "--server-side", "-f", "-"], input=rendered.stdout)
    started = time.monotonic()
    try:
        def pull_cause():
            cause = json.loads(jaxgen(cluster, "status", name, "-o", "json").stdout).get("cause", "")
            return cause if cause.startswith(f"image {image}:v0 cannot be pulled (rank ") else None
        cause = wait_until("the image pull's cause", pull_cause, timeout=90, interval=1,
                           diagnose=lambda: jaxgen(cluster, "status", name).stdout)
        print(f"cause: {cause} ({time.monotonic() - started:.1f} s)")
        assert "connect: connection refused" in cause and "127.0.0.1:1" in cause, cause  # the registry's answer
        assert "failed to pull and unpack image" not in cause and "rpc error" not in cause, cause  # once, no wrapper
    finally:
        cluster.kubectl("delete", "jobs.batch,services,networkpolicies", "-l", release_selector(name),
                        "--ignore-not-found", "--wait=false", check=False)

"""`jaxgen status|list|logs` on what needs no cluster: a real trainer's outputs folder (--local), and
the one-line failures of bad names, no cluster and no scheduler, through the installed command."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.engines.kubernetes import jobs

from tests.support import procs
from tests.support.paths import REPO_ROOT
from tests.support.procs import small_train_args, trainer_argv

JAXGEN = str(Path(sys.executable).with_name("jaxgen"))


def jaxgen(*args, env=None, timeout=60):
    return subprocess.run([JAXGEN, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT,
                          env={**os.environ, **(env or {})})


def status_json(name, outputs):
    proc = jaxgen("status", name, "--local", "--outputs", str(outputs), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_status_and_list_of_a_local_run_during_and_after(tmp_path):
    outputs = tmp_path / "outputs"
    claim = outputs / "claims" / "demo-outputs"  # where a running job with persistence writes
    # Long enough (minutes) that it is still running when the three commands below look; killed after.
    args = small_train_args(claim, "--run-name", "demo", "--epochs", "2000", "--checkpoint-every", "16",
                            "--log-every", "4")
    proc = procs.start(trainer_argv(*args), tmp_path / "train.log")
    try:
        deadline = time.monotonic() + 240
        while True:
            assert time.monotonic() < deadline, proc.output[-3000:]
            if (claim / "demo" / "metrics.jsonl").exists():
                during = status_json("demo", outputs)
                if during.get("eta_seconds") is not None and during.get("checkpoint_step"):
                    break
            time.sleep(1)
        assert during["phase"] == "Running" and during["kind"] == "local"
        assert during["total_steps"] == 2000 * 32 and 0 < during["step"] < during["total_steps"]
        assert during["eta_seconds"] > 0 and during["loss"] > 0 and during["results"] == str(claim / "demo")
        text = jaxgen("status", "demo", "--local", "--outputs", str(outputs)).stdout
        assert "phase:      Running" in text and ", ETA " in text and "checkpoint: step " in text, text
        listed = jaxgen("list", "--local", "--outputs", str(outputs)).stdout.splitlines()
        assert listed[0].split() == ["NAME", "KIND", "PHASE", "PROGRESS", "ETA", "AGE"]
        assert listed[1].split()[:3] == ["demo", "local", "Running"], listed
    finally:
        procs.kill(proc)

    # A finished run: its result, and the directory it is in.
    shutil.rmtree(claim)
    done = subprocess.run(trainer_argv(*small_train_args(outputs, "--run-name", "done")), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    after = status_json("done", outputs)
    assert after["phase"] == "Succeeded" and after["step"] == after["total_steps"] == 32
    assert after["result"].startswith("test accuracy ") and after["results"] == str(outputs / "done")
    assert "eta_seconds" not in after


def test_bad_names_and_missing_engines_are_one_line_with_their_exit_code(tmp_path):
    bad = jaxgen("status", "Not_A_Name", "--local")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "NAME: 'Not_A_Name'" in bad.stderr
    logs = jaxgen("logs", "demo", "--local", "--outputs", str(tmp_path))
    assert logs.returncode == 2 and logs.stderr.count("\n") == 1, logs.stderr
    assert logs.stderr.startswith(f"error: demo: no run by that name under {tmp_path}"), logs.stderr
    missing = jaxgen("status", "nothing", "--local", "--outputs", str(tmp_path))
    assert missing.returncode == 2 and missing.stderr.startswith("error: nothing: no run by that name")
    # No cluster: a kubeconfig that points nowhere.
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                      "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
                      "users: [{name: u, user: {token: t}}]\n")
    no_kubectl = shutil.which("kubectl") is None
    for args in (["list"], ["status", "demo"], ["logs", "demo"]):
        proc = jaxgen(*args, env={"KUBECONFIG": str(config)})
        assert proc.returncode == 3 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert proc.stderr.startswith("error: kubectl: not found" if no_kubectl else
                                      "error: cannot reach the cluster: "), proc.stderr
    unknown = jaxgen("status", "demo", "--context", "nowhere", env={"KUBECONFIG": str(config)})
    assert unknown.returncode == 3 and "nowhere" in unknown.stderr and unknown.stderr.count("\n") == 1
    # No SLURM here: a PATH without squeue.
    slurm = jaxgen("list", "--slurm", env={"PATH": str(tmp_path)})
    assert slurm.returncode == 3 and slurm.stderr == "error: squeue: not found on PATH (is this a SLURM login node?)\n"


@pytest.mark.parametrize("namespace", ["BAD NS", "Upper", "ok\n", "-x", "a" * 64, "\u0661"])
def test_a_bad_namespace_is_refused_before_the_cluster_is_asked(tmp_path, namespace):
    called = tmp_path / "kubectl-called"
    kubectl = tmp_path / "bin" / "kubectl"
    kubectl.parent.mkdir()
    kubectl.write_text(f"#!/bin/sh\ntouch '{called}'\nexit 1\n")
    kubectl.chmod(0o755)
    env = {"KUBECONFIG": str(tmp_path / "nonexistent"), "PATH": f"{kubectl.parent}:{os.environ['PATH']}"}
    for args in (["list"], ["status", "demo"], ["logs", "demo"]):
        proc = jaxgen(*args, "-n", namespace, env=env)
        assert proc.returncode == 2 and proc.stderr == (
            f"error: -n/--namespace: {namespace!r} is not a namespace (lowercase letters, digits and '-', at most 63 "
            "characters, starting and ending with a letter or digit)\n"), (args, proc.stderr)
    assert not called.exists()
    context = jaxgen("list", "-n", "", env=env)  # the context's namespace, as kubectl takes -n ''
    assert context.returncode == 3 and called.exists(), context.stderr


def test_list_of_local_runs_whose_run_records_are_odd(tmp_path):
    """A run record that names no string (a list) or never ends (/dev/zero): the run is listed by its
    folder's name, and the record is read bounded."""
    for folder, record in (("listed", '{"name": ["x"]}'), ("endless", None)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "metrics.jsonl").write_text('{"event": "start", "step": 0, "time": 1}\n')
        if record:
            (tmp_path / folder / "run.json").write_text(record)
        else:
            (tmp_path / folder / "run.json").symlink_to("/dev/zero")
    proc = subprocess.run(["prlimit", f"--as={1 << 30}", JAXGEN, "list", "--local", "--outputs", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert sorted(line.split()[0] for line in proc.stdout.splitlines()[1:]) == ["endless", "listed"], proc.stdout


@pytest.mark.parametrize("record", [
    {"event": "step", "step": 3, "epoch": 1, "loss": "abc", "time": 2},
    {"event": "epoch", "step": 3, "epoch": 1, "loss": 0.5, "test_accuracy": "x", "time": 2},
    {"event": "epoch", "step": 3, "epoch": 1, "loss": 0.5, "train_accuracy": [1], "time": 2},
    {"event": "step", "step": 3, "epoch": 1, "loss": True, "time": 2},
], ids=["loss", "test-accuracy", "train-accuracy", "bool"])
def test_status_of_a_local_run_whose_figures_are_not_numbers(tmp_path, record):
    """A metrics record whose loss or accuracy is not a number (an edited or foreign line) is left
    out: status and list show the rest, never a traceback; a diverged run's NaN loss still counts."""
    run = tmp_path / "odd"
    run.mkdir()
    lines = [{"event": "start", "step": 0, "total_steps": 10, "time": 1},
             {"event": "step", "step": 2, "epoch": 1, "loss": float("nan"), "time": 1.5}, record]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    for args in (["status", "odd"], ["status", "odd", "-o", "json"], ["list"], ["list", "-o", "json"]):
        proc = jaxgen(*args, "--local", "--outputs", str(tmp_path))
        assert proc.returncode == 0 and proc.stderr == "", (args, proc.stderr[-2000:])
    text = jaxgen("status", "odd", "--local", "--outputs", str(tmp_path)).stdout
    assert "progress:   step 2/10 (20%), epoch 1" in text and "last:       loss nan" in text, text


@pytest.mark.parametrize("seconds", ["nan", "inf", "1e400", "0", "86401"])
def test_watch_takes_only_a_finite_interval_above_zero(tmp_path, seconds):
    """time.sleep fails on NaN or infinity (a traceback, once the first screen was shown) and 0
    showed it once, as if --watch were not given: each is a usage error naming --watch."""
    for args in (["list"], ["status", "demo"]):
        proc = jaxgen(*args, "--local", "--outputs", str(tmp_path), f"--watch={seconds}", timeout=10)
        assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert "Invalid value for '-w' / '--watch'" in proc.stderr and "seconds above 0" in proc.stderr, proc.stderr


def test_a_metrics_line_of_50_mb_is_skipped_in_bounded_memory(tmp_path):
    """status/list/results read metrics.jsonl a line at a time: a line of 50 MB (no record) is
    skipped in pieces, never held whole, and the records around it still count."""
    import tracemalloc

    from generator.runstore import local as local_jobs
    from trainer.results import read_records

    run = tmp_path / "huge"
    run.mkdir()
    with open(run / "metrics.jsonl", "w") as f:
        f.write('{"event": "start", "step": 0, "total_steps": 10, "time": 1}\n')
        f.write('{"a": "' + "x" * 50_000_000 + '"}\n')
        f.write('{"event": "step", "step": 4, "epoch": 1, "loss": 0.5, "time": 2}\n')
    tracemalloc.start()
    try:
        records = read_records(run / "metrics.jsonl")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, peak
    assert [r.get("event") for r in records] == ["start", "step"]
    assert local_jobs.status("huge", tmp_path).step == 4


def test_a_run_record_whose_name_is_no_job_name_is_listed_by_its_folder(tmp_path):
    """A run.json naming the job with a newline or an escape sequence garbled the listing and could not
    be asked for by `status`; a name with a trailing newline passed the name check."""
    run = tmp_path / "odd"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"event": "start", "step": 0, "total_steps": 4, "time": 1}\n')
    (run / "run.json").write_text(json.dumps({"name": "evil\x1b[2J\nsecond line"}))
    listed = jaxgen("list", "--local", "--outputs", str(tmp_path))
    assert listed.returncode == 0 and [line.split()[0] for line in listed.stdout.splitlines()] == ["NAME", "odd"], \
        listed.stdout
    assert jaxgen("status", "odd", "--local", "--outputs", str(tmp_path)).returncode == 0
    newline = jaxgen("status", "odd\n", "--local", "--outputs", str(tmp_path))
    assert newline.returncode == 2 and newline.stderr.startswith("error: NAME: 'odd\\n' is not a job name"), newline.stderr


@pytest.mark.parametrize("label,rank", [("3", 3), ("03", 3), ("\u00b2", None), ("\u0663", None), ("+3", None),
                                        (" 3", None), ("", None), (None, None)])
def test_a_pods_rank_is_its_index_label_in_ascii_digits(label, rank):
    """str.isdigit() took '²', which int() then refused: `jaxgen status` ended in a traceback."""
    job = jobs._Job({"kind": "Job", "metadata": {"name": "demo", "uid": "1"}}, [], [])
    labels = {} if label is None else {job.workload.index_label: label}
    assert job.rank({"metadata": {"labels": labels}}) == rank


class _Nodes:
    """A kubectl that answers `get nodes` with these nodes (or refuses it), for jobs._lost_nodes."""

    def __init__(self, nodes, refuse=False):
        self.nodes, self.refuse = nodes, refuse

    def run(self, *args, **kwargs):
        from generator.engines.kubernetes.kubectl import ClusterError

        if self.refuse:
            raise ClusterError('nodes is forbidden: User "dev" cannot list resource "nodes"')
        found = [n for n in self.nodes if n["metadata"]["name"] in args]
        return subprocess.CompletedProcess(args, 0, json.dumps({"kind": "List", "items": found}), "")


def test_status_names_a_lost_node_its_ranks_and_what_the_job_waits_for():
    """Not yet evicted: the seconds left of the pods' toleration; evicted: the person's ways out;
    tainted out of service, a deleted Node, a Ready node, and a user who may not read nodes."""
    job = jobs._Job({"kind": "Job", "metadata": {"name": "demo", "uid": "1"}}, [], [])
    toleration = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                  "tolerationSeconds": 30}

    def pod(rank, node, deleted=False):
        meta = {"name": f"demo-{rank}", "labels": {job.workload.index_label: str(rank)}}
        return {"metadata": {**meta, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleted else {})},
                "spec": {"nodeName": node, "tolerations": [toleration]}, "status": {"phase": "Running"}}

    def node(name, ready, *taints):
        return {"metadata": {"name": name}, "spec": {"taints": [{"key": k, "effect": "NoExecute",
                                                                 "timeAdded": "2026-01-01T00:00:00Z"} for k in taints]},
                "status": {"conditions": [{"type": "Ready", "status": ready,
                                           "message": "Kubelet stopped posting node status."}]}}

    now = 1767225610.0  # 10 s after the taints were added
    job.pods = [pod(0, "a"), pod(1, "b"), pod(2, "b")]
    lost = node("b", "Unknown", "node.kubernetes.io/unreachable")
    assert jobs._lost_nodes(job, _Nodes([node("a", "True"), lost]), now) == [
        "b NotReady (Kubelet stopped posting node status): ranks 1, 2 on it; Kubernetes evicts them in 20 s "
        "(tolerationSeconds 30: failure.node_lost_seconds); the pods of a node that does not come back then end "
        "only once its Node is deleted or tainted out of service"]
    job.pods = [pod(0, "a"), pod(1, "b", deleted=True)]
    [line] = jobs._lost_nodes(job, _Nodes([node("a", "True"), lost]), now)
    assert line.startswith("b NotReady (Kubelet stopped posting node status): rank 1 on it; they are evicted but only "
                           "the node's kubelet can end them: the job waits (the ranks are not replaced) until the node "
                           "is back, or, if it is down for good, until its Node is deleted (kubectl delete node b) or "
                           "tainted out of service (kubectl taint node b node.kubernetes.io/out-of-service="
                           "nodeshutdown:NoExecute)"), line
    out = node("b", "Unknown", "node.kubernetes.io/unreachable", "node.kubernetes.io/out-of-service")
    assert "Kubernetes deletes its pods, then the job replaces them" in jobs._lost_nodes(job, _Nodes([out]), now)[1]
    assert jobs._lost_nodes(job, _Nodes([node("a", "True")]), now) == [
        "b is gone (its Node was deleted): rank 1 on it waits for the pod garbage collector to delete its pod, "
        "then is replaced"]
    assert jobs._lost_nodes(job, _Nodes([node("a", "True"), node("b", "True")]), now) == []
    assert jobs._lost_nodes(job, _Nodes([], refuse=True), now) == []


def test_a_slurm_job_s_script_is_read_with_a_bound(tmp_path):
    """The script squeue names is the job's: /dev/zero has no end, a FIFO has no writer, a huge file
    is no script of prepare.sh's; each gives no flags, at once."""
    from generator.engines.slurm import jobs

    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\nsrun jax-trainer train --checkpoint-dir /ckpt --run-name demo\n")
    assert jobs._flags(script) == {"--checkpoint-dir": "/ckpt", "--run-name": "demo"}
    (tmp_path / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "huge").write_text("--run-name x\n" * (1 << 17))
    for name in ("zero", "fifo", "huge"):
        assert jobs._flags(tmp_path / name) == {}, name

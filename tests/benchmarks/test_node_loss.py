"""The node-loss benchmark's marks, phases and table from watch events of a made-up round (the
real rounds run on two real nodes: benchmarks/node-loss.md, and tests/e2e_k8s/two_nodes)."""

import subprocess
import sys

import pytest

from benchmarks import node_loss
from benchmarks.procs import read_report
from tests.support.paths import REPO_ROOT

FAULT = 1000.0
TAINTS = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]


def watch(*events) -> node_loss.Watch:
    """A Watch holding these (seconds after the fault, type, object) events, no kubectl behind it."""
    made = node_loss.Watch.__new__(node_loss.Watch)
    made.events = [(FAULT + t, {"type": kind, "object": obj}) for t, kind, obj in events]
    return made


def node(ready: str, taints=()) -> dict:
    return {"metadata": {"name": "jax-training-node-2"}, "spec": {"taints": list(taints)},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def pod(uid: str, index: str, node_name: str, deleting=False, evicted=False, running=True) -> dict:
    return {"metadata": {"uid": uid, "labels": {"batch.kubernetes.io/job-completion-index": index},
                         **({"deletionTimestamp": "t"} if deleting else {})},
            "spec": {"nodeName": node_name, "tolerations": [{"key": "node.kubernetes.io/unreachable",
                                                             "effect": "NoExecute", "tolerationSeconds": 30}]},
            "status": {"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "True"}] if evicted else [],
                       "containerStatuses": [{"state": {"running": {}} if running else {"waiting": {}},
                                              "restartCount": 0}]}}


def test_a_lost_node_round_gives_its_marks_phases_and_table():
    nodes = watch((-1, "ADDED", node("True")), (41.9, "MODIFIED", node("Unknown")),
                  (42.0, "MODIFIED", node("Unknown", TAINTS)))
    marks = node_loss.node_marks(nodes, FAULT)
    assert marks == {"node_not_ready": 41.9, "node_tainted": 42.0}
    victim, survivor = pod("v", "1", "jax-training-node-2"), pod("s", "0", "jax-training-node")
    pods = watch((-1, "ADDED", victim), (-1, "ADDED", survivor),
                 (72.3, "MODIFIED", pod("v", "1", "jax-training-node-2", deleting=True, evicted=True)),
                 (222.1, "DELETED", pod("v", "1", "jax-training-node-2", deleting=True, evicted=True)),
                 (222.9, "ADDED", pod("n", "1", "", running=False)),
                 (223.0, "MODIFIED", pod("n", "1", "jax-training-node", running=False)),
                 (224.7, "MODIFIED", pod("n", "1", "jax-training-node")))
    marks.update(node_loss.pod_marks(pods, FAULT, [victim, survivor], victim, "indexed-job"))
    assert (marks["victim_deleting"], marks["victim_evicted"], marks["victim_gone"]) == (72.3, 72.3, 222.1)
    assert (marks["new_pods_created"], marks["new_pods_scheduled"]) == (222.9, 223.0)
    assert node_loss.node_lost_seconds(victim) == 30
    marks.update({"fault": 0.0, "person_action": 212.6, "freed": 212.6, "distributed_initialised": 240.6,
                  "first_step": 256.9})
    phases = node_loss.recovery.phases(marks, node_loss.PHASES)
    assert phases["not_ready_detection"] == 41.9 and phases["toleration"] == 30.3
    assert phases["pod_end"] == 9.5 and phases["replacement"] == 0.8 and phases["to_first_step"] == 16.3
    run = {**marks, "stuck_after": 200.0, "resumed_step": 80, "test_accuracy": 0.9555, "completed": True,
           "phases": phases}
    runs = [run, {**run, "first_step": 300.0}]
    summary = node_loss.summarize(runs)
    assert summary["first_step"] == 278.45 and summary["needed_a_person"] == 2 and summary["completed"] == 2
    report = {"results": {"indexed-job × power-off × rank 1": {"runs": runs, "median": summary, "errors": []},
                          "jobset × drain × rank 0": {"runs": [], "median": None, "errors": ["drain failed"]}},
              "undisturbed_accuracy": 0.9555, "cpus": 2, "person_after": 200, "revision": {"commit": "abc"}}
    table = node_loss.markdown(report)
    row = next(line for line in table.splitlines() if line.startswith("| indexed-job × power-off × rank 1 | 2 |"))
    assert "| 278.4 |" in row and "| 80 | 0.9555 (0.9555) | 2 of 2 |" in row, row
    assert "| jobset × drain × rank 0 | 0 | failed: drain failed |" in table


@pytest.mark.parametrize("args, option", [(["--faults", "unplug"], "--faults"), (["--victim-ranks", "2"], "--victim-ranks"),
                                          (["--targets", "slurm"], "--targets"), (["--repeats", "0"], "--repeats"),
                                          (["--rounds", "reboot:1,unplug:1"], "--rounds"),
                                          (["--rounds", "drain"], "--rounds")])
def test_bad_options_are_refused_before_anything_starts(args, option):
    done = subprocess.run([sys.executable, "-m", "benchmarks.node_loss", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and option in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_committed_report_makes_its_table():
    report = read_report(REPO_ROOT / "benchmarks" / "results" / "node-loss.json.gz")
    table = node_loss.markdown(report)
    for key, result in report["results"].items():
        row = next(line for line in table.splitlines() if line.startswith(f"| {key} | {len(result['runs'])} |"))
        assert f"| {node_loss.summarize(result['runs'])['first_step']:.1f} |" in row, row
    shown = subprocess.run([sys.executable, "-m", "benchmarks.node_loss", "--markdown",
                            str(REPO_ROOT / "benchmarks" / "results" / "node-loss.json.gz")],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stdout == table + "\n", shown.stderr

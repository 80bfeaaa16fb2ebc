"""A node taken away under a job of every Kubernetes target at once (benchmarks/node_loss.py's round:
rank 0 of each on node 1, rank 1 on node 2; scripts/cluster/node-fault.sh takes node 2 away).

- power-off (kubelet, containerd and containers SIGKILLed, never to return): the node is NotReady
  and tainted within the node controller's grace period, every rank-1 pod is evicted
  failure.node_lost_seconds later, and then no target goes on alone: only the node's kubelet ends
  an evicted pod, so no rank 1 is replaced (`jaxgen status` says so and names the action). The
  out-of-service taint (the documented action) lets the pod garbage collector delete the pods; every
  target then replaces rank 1 on node 1, resumes from its last checkpoint and finishes.
- drain: the graceful path; rank 1 of each job saves on SIGTERM, every target replaces it on node 1
  without a person and resumes from exactly that step.
Each test gives the node back (powered on; uncordoned) before it ends. The jobs are short (PLAN):
the round starts the jobs in turn (node_loss.START_ORDER), each holds after PLAN.after_step (its
checkpoint written) until all are there, and the node goes once each has trained past it; the pods
tolerate the lost node for PLAN's seconds, not the default 30 (the same eviction, sooner).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchmarks import node_loss
from generator.targets import KUBERNETES
from tests.e2e_k8s.kube import SCRIPTS

TARGETS = list(KUBERNETES)
PLAN = node_loss.Plan(train_examples=120 * 128, checkpoint_every=10, after_step=15, node_lost_seconds=5)


def assert_resumed_from_a_checkpoint_of_the_fault(r: dict, shown) -> None:
    """The resume is from a periodic checkpoint written by the time of the fault: the last step logged
    before the fault's mark, or the checkpoint after it, which a chunk in flight as the node's
    processes were being killed (node-fault.sh marks the time, then kills) may still complete."""
    assert r["resumed_step"] % PLAN.checkpoint_every == 0, shown
    assert PLAN.checkpoint_every <= r["resumed_step"] <= r["last_step_logged_before"] + PLAN.checkpoint_every, shown


def nodes_of(two_nodes, image) -> node_loss.Nodes:
    cluster, _ = two_nodes
    return node_loss.Nodes(cluster.state_dir, cluster.env, cluster.namespace, image[0])


def test_node_fault_takes_only_nodes_2_to_n(two_nodes):
    cluster, _ = two_nodes
    fault = [SCRIPTS / "cluster" / "node-fault.sh", cluster.state_dir]
    for args, said in ((["1", "power-off"], "runs the cluster DNS"),
                       (["jax-training-node-3", "power-off"], "is no real node 2..N"),
                       (["2", "unplug"], "unknown fault 'unplug'")):
        done = cluster.run([*fault, *args], check=False)
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.node_loss
@pytest.mark.timeout(1500)
def test_power_off_every_target_waits_for_the_out_of_service_taint_then_resumes(two_nodes, image, tmp_path):
    results = node_loss.fault_round(nodes_of(two_nodes, image), TARGETS, "power-off", 1, tmp_path,
                                    person_after=300, act_on_eviction=True, plan=PLAN)
    print(json.dumps(results, indent=1))  # the measurement, shown with pytest -rP
    for target, r in results.items():
        assert 0 < r["node_not_ready"] <= 75 and r["node_tainted"] <= r["node_not_ready"] + 5, (target, r)
        # evicted node_lost_seconds after the taint (a JobSet's and a TrainJob's restart deletes it earlier).
        # Both marks are when this round's watches saw the change, each late by its own delivery lag (the node
        # watch under load more than the pod watch), so the gap may read a little under node_lost_seconds.
        assert r["victim_deleting"] <= r["node_tainted"] + PLAN.node_lost_seconds + 10, (target, r)
        if r["victim_evicted"] is not None:
            waited = r["victim_evicted"] - r["node_tainted"]
            assert PLAN.node_lost_seconds - 1.5 <= waited <= PLAN.node_lost_seconds + 10, (target, r)
        # and then no step since the fault: stuck, and jaxgen status says on what
        assert "stuck_after" in r, (target, r)
        status = r["status_when_stuck"]
        assert "jax-training-node-2 NotReady" in status and "only the node's kubelet can end them" in status, status
        assert "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" in status, status
        # nothing replaced rank 1 before the taint; then it went, was replaced, and the job went on
        assert r["person_action"] < r["victim_gone"] and r["person_action"] < r["new_pods_created"], (target, r)
        assert r["new_pods_created"] < r["first_step"], (target, r)
        assert "still_stuck_after_action" not in r and r["completed"], (target, r)
        assert_resumed_from_a_checkpoint_of_the_fault(r, (target, r))


@pytest.mark.node_loss
@pytest.mark.timeout(900)
def test_power_off_an_indexed_job_with_the_default_backoff_limit_waits_past_its_init_timeout(two_nodes, image,
                                                                                           tmp_path):
    """The survivor restarts in place and waits for its lost peer without the init timeout (trainer/rejoin.py):
    with backoff_limit 0 its exit 4 at that timeout would fail the Job before the person's action."""
    init_timeout = 20
    plan = dataclasses.replace(PLAN, extra=("backoff_limit=0", f"init_timeout_seconds={init_timeout}"))
    r = node_loss.fault_round(nodes_of(two_nodes, image), ["indexed-job"], "power-off", 1, tmp_path,
                              person_after=300, act_on_eviction=True, plan=plan)["indexed-job"]
    print(json.dumps(r, indent=1))
    assert r["person_action"] > init_timeout + 10, r  # the survivor's wait outlasted its init timeout
    assert r["person_action"] < r["new_pods_created"] < r["first_step"], r
    assert "still_stuck_after_action" not in r and r["completed"], r
    assert_resumed_from_a_checkpoint_of_the_fault(r, r)


@pytest.mark.node_loss
@pytest.mark.timeout(1200)
def test_drain_moves_rank_1_of_every_target_gracefully(two_nodes, image, tmp_path):
    results = node_loss.fault_round(nodes_of(two_nodes, image), TARGETS, "drain", 1, tmp_path, person_after=300,
                                    plan=PLAN)
    print(json.dumps(results, indent=1))
    for target, r in results.items():
        assert "stuck_after" not in r and r["completed"], (target, r)
        assert r["node_not_ready"] is None, (target, r)  # the node stayed Ready, cordoned
        # the step saved on SIGTERM is the one every rank resumes from
        assert r["stop_saved_step"] is not None and r["resumed_step"] == r["stop_saved_step"], (target, r)
        assert r["victim_deleting"] < r["new_pods_created"] < r["first_step"], (target, r)


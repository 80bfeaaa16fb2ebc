"""Kueue preempts a training job on the real node and it loses nothing.

A low-priority Indexed Job (or JobSet) trains with its outputs on a claim; a high-priority job queued to the same
ClusterQueue (quota for one job, preemption of lower priorities) makes Kueue evict it. Kueue suspends
the job, its controller deletes the pods, every process saves the same step on SIGTERM and exits
143 (not 0: a completed index would leave the re-admitted gang short). When the high-priority job has
finished, Kueue admits the low one again and it resumes from the saved step, to the accuracy of an
uninterrupted run.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading

import pytest

from generator.targets import workload
from tests.e2e_k8s.kube import SCRIPTS, Cluster, finish, prepare, release_selector, start_run, wait_until
from tests.e2e_k8s.kueue import (apply, create_queue, delete_queue, diagnose, priority_class, true_condition,
                                 workload_of)
from tests.e2e_k8s.real import (PERSISTENCE, assert_results_fetched, final_accuracy, outputs_volume, train,
                                uninterrupted_accuracy)
from trainer.exit_codes import PREEMPTED

QUEUE = "real-queue"
CLUSTER_QUEUE = "real-one-job"
# The `real` fixture's jobs request 2 × (500m, 1Gi): the quota holds one of them.
QUOTA = {"cpu": "1", "memory": "2Gi"}
PRIORITIES = {"real-low": 100, "real-high": 1000}


class PodWatch:
    """Every state the API server reports for the pods of a selector (a `kubectl get -w` in the
    background): the kubelet posts a container's exit code before the pod object is removed."""

    def __init__(self, cluster: Cluster, selector: str):
        self.states: list[dict] = []
        self._proc = subprocess.Popen(["kubectl", "--namespace", cluster.namespace, "get", "pods", "-l", selector,
                                       "--watch", "-o", "json"], env=cluster.env, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        decoder, buffer = json.JSONDecoder(), ""
        for line in self._proc.stdout:
            buffer += line
            try:
                pod, end = decoder.raw_decode(buffer.lstrip())
            except json.JSONDecodeError:
                continue
            self.states.append(pod)
            buffer = buffer.lstrip()[end:]

    def exit_codes(self) -> dict[str, set[int]]:
        """Pod name → the exit codes its trainer container was seen terminated with."""
        codes: dict[str, set[int]] = {}
        for pod in self.states:
            for status in pod["status"].get("containerStatuses", []):
                terminated = status["state"].get("terminated")
                if terminated:
                    codes.setdefault(pod["metadata"]["name"], set()).add(terminated["exitCode"])
        return codes

    def stop(self) -> None:
        self._proc.kill()
        self._proc.wait()
        self._thread.join(timeout=10)


@pytest.fixture
def preempting_queue(real):
    cluster, _ = real
    apply(cluster, [priority_class(name, value) for name, value in PRIORITIES.items()])
    create_queue(cluster, CLUSTER_QUEUE, QUEUE, QUOTA, preemption={"withinClusterQueue": "LowerPriority"})
    yield QUEUE
    delete_queue(cluster, CLUSTER_QUEUE, QUEUE)
    cluster.run(["kubectl", "delete", "workloadpriorityclasses", *PRIORITIES, "--wait=false"], check=False)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("target", ["indexed-job", "jobset"])
def test_preempted_by_kueue_saves_and_resumes_from_that_step(real, preempting_queue, target, tmp_path):
    cluster, sets = real
    low, high = f"real-kq-{target}-low", f"real-kq-{target}-high"
    resource = workload(target).resource
    outputs = outputs_volume(cluster, low) / low
    # No periodic checkpoint: the only one before the end is the one written on SIGTERM.
    prepare(cluster, tmp_path / low, low, *sets, "checkpoint.every_steps=0", *PERSISTENCE,
            f"queue_name={preempting_queue}", "kueue.priority_class=real-low", base="cpu-local.json", target=target)
    prepare(cluster, tmp_path / high, high, *sets, "training.train_examples=6400",
            f"queue_name={preempting_queue}", "kueue.priority_class=real-high", base="cpu-local.json", target=target)
    watch = PodWatch(cluster, release_selector(low))
    run = start_run(cluster, tmp_path / low, timeout=900)
    try:
        metrics = outputs / "metrics.jsonl"
        wait_until("the low-priority job training past step 150", lambda: metrics.exists() and re.search(
            r'"step": (1[5-9]\d|[2-9]\d\d)', metrics.read_text()), timeout=300, interval=0.5, run=run)
        # admitted by preempting the low one; no preflight (seconds of it on a loaded host) between the
        # look at the low one's step and the apply, so the low one is still training when preempted
        high_output = train(cluster, tmp_path / high, 400, "--no-check")
        evictions = workload_of(cluster, resource, low)["status"].get("schedulingStats", {}).get("evictions", [])
        assert [e for e in evictions if e["reason"] == "Preempted"], evictions  # Kueue preempted it
        code, output = finish(run, timeout=960)
    finally:
        watch.stop()
        if run.poll() is None:
            run.kill()
    assert code == 0, output[-6000:] + diagnose(cluster)
    assert "training completed." in high_output
    # Both processes of the first gang stopped with the preemption code, none with 0.
    first_gang = [codes for codes in watch.exit_codes().values() if PREEMPTED in codes]
    assert len(first_gang) == 2 and all(codes == {PREEMPTED} for codes in first_gang), watch.exit_codes()
    # The step saved on the stop, from rank 0's metrics as run.sh fetched them (its log stream of a pod
    # that Kueue's suspension deletes may end before the pod's last lines).
    fetched = (tmp_path / low / "results" / low / "latest" / "metrics.jsonl").read_text()
    events = [json.loads(line) for line in fetched.splitlines() if line.strip()]
    saved = [str(event["step"]) for event in events if event.get("event") == "preempted"]
    resumed = re.findall(r"resuming from the checkpoint of step (\d+)", output)
    assert saved and resumed and resumed[0] == saved[0], (saved, resumed, output[-6000:])
    assert true_condition(workload_of(cluster, resource, low), "Finished")
    accuracy = final_accuracy(output)
    assert abs(accuracy - uninterrupted_accuracy()) <= 0.003, (accuracy, uninterrupted_accuracy())
    summary = assert_results_fetched(tmp_path / low, low, output)
    assert summary["resumed_from"] == [int(saved[0])]
    for name in (low, high):
        cluster.run([SCRIPTS / "clean.sh", "--delete-outputs", tmp_path / name], timeout=180)

"""The trainer's metrics endpoint in real pods, scraped as a platform's Prometheus would: over the
pod network (this host is the pod bridge's gateway), at the address and path the pod's scrape
annotations give, on the container port the pod declares.

The documented series are there while the job trains; when process 1 is stopped with SIGSTOP
(containerd's task kill, to every process of the container), process 0 waits for it in the all-reduce and completes no step, and its
endpoint, which answers all along, shows the seconds since the last completed step grow; the
stopped process's own endpoint answers nothing. After SIGCONT the job completes.
"""

from __future__ import annotations

import socket
import time
import urllib.error

import pytest

from tests.e2e_k8s.kube import SCRIPTS, finish, pod_index, prepare, release_selector, start_run, wait_until
from tests.e2e_k8s.real import HOSTS, containerd_cli, containerd_task
from tests.support import prometheus
from generator.engines.kubernetes.policy import METRICS_PORT_NAME


def endpoint(pod: dict) -> str:
    """The URL the pod's scrape annotations point a scraper at (the port must also be declared)."""
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    port = int(annotations["prometheus.io/port"])
    declared = [p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])
                if p["name"] == METRICS_PORT_NAME]
    assert declared == [port], pod["spec"]["containers"]
    return f"http://{pod['status']['podIP']}:{port}{annotations['prometheus.io/path']}"


@pytest.mark.timeout(900)
def test_metrics_over_the_pod_network_and_a_stopped_process_shows(real, tmp_path):
    cluster, sets = real
    name = "real-metrics"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, base="cpu-local.json")  # the endpoint is on by default
    run = start_run(cluster, build, "--no-logs", timeout=600)
    try:
        def pods_with_ips():
            pods = [p for p in cluster.items("pods", release_selector(name)) if p["status"].get("podIP")]
            return sorted(pods, key=pod_index) if len(pods) == HOSTS else None

        pods = wait_until("every pod with an IP", pods_with_ips, timeout=300, interval=1, run=run)
        urls = [endpoint(pod) for pod in pods]

        def training():
            try:
                samples = prometheus.scrape(urls[0], timeout=5)
            except (OSError, urllib.error.URLError):  # not listening yet
                return None
            return samples if samples["jax_training_step"] >= 50 else None

        samples = wait_until("process 0's endpoint past step 50", training, timeout=400, interval=1, run=run)
        assert set(prometheus.documented_series()) <= set(samples), sorted(samples)
        assert samples["jax_training_total_steps"] == 468  # one epoch of 60000 examples, batch 128
        assert prometheus.scrape(urls[1])["jax_training_step"] >= 50  # every pod's declared port answers

        task = containerd_task(cluster, f"{name}-1-")
        ctr = containerd_cli()
        # --all: the trainer runs under a supervisor process (trainer/supervisor.py), the container's first
        cluster.run([*ctr, "tasks", "kill", "--all", "--signal", "SIGSTOP", task])
        try:
            time.sleep(3)  # the chunk in flight ends; the next one waits for process 1
            first = prometheus.scrape(urls[0])
            with pytest.raises((socket.timeout, TimeoutError, urllib.error.URLError)):
                prometheus.scrape(urls[1], timeout=3)  # a stopped process answers nothing
            time.sleep(5)
            second = prometheus.scrape(urls[0])
        finally:
            cluster.run([*ctr, "tasks", "kill", "--all", "--signal", "SIGCONT", task])
        assert second["jax_training_step"] == first["jax_training_step"] < 468
        grown = second["jax_training_seconds_since_last_step"] - first["jax_training_seconds_since_last_step"]
        assert grown >= 7, (first, second)
        code, output = finish(run, timeout=660)
        assert code == 0, output[-6000:]
    finally:
        if run.poll() is None:
            run.kill()
        cluster.run([SCRIPTS / "clean.sh", build], timeout=180)

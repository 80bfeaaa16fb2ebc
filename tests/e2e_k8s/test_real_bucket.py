"""Outputs in an S3-compatible bucket on the real node: the test starts a real S3 server (moto_server) on
this host, which the pods reach over the pod network (this host is the pod bridge's gateway), and a
Secret with its credentials. The job keeps its outputs on an emptyDir and in the bucket
(outputs.uri, outputs.endpoint, outputs.secret); process 0's pod is deleted mid-run, and its
replacement, on an empty disk, resumes from the checkpoint the stop uploaded; run.sh then fetches the
results from the bucket into the build folder.
"""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e_k8s.kube import SCRIPTS, assert_complete, finish, pod_index, prepare, release_selector, wait_until
from tests.e2e_k8s.real import (assert_results_fetched, delete_pod, final_accuracy, node_setting,
                                 uninterrupted_accuracy)
from tests.support.s3 import CREDENTIALS, S3Server

BUCKET = "jaxt-real"
JAXGEN = str(Path(sys.executable).with_name("jaxgen"))


def pod_gateway() -> str:
    """This host's address on the pod bridge: the first address of the pod subnet."""
    return str(next(ipaddress.ip_network(node_setting("POD_SUBNET")).hosts()))


@pytest.mark.timeout(1200)
def test_a_deleted_pod_resumes_from_the_bucket_and_the_results_are_fetched(real, tmp_path):
    cluster, sets = real
    name = "real-bucket"
    server = S3Server(tmp_path / "moto.log", host="0.0.0.0")
    try:
        server.bucket(BUCKET)
        endpoint = f"http://{pod_gateway()}:{server.port}"
        cluster.kubectl("delete", "secret", "s3-credentials", "--ignore-not-found")
        cluster.kubectl("create", "secret", "generic", "s3-credentials",
                        *(f"--from-literal={key}={CREDENTIALS[key]}" for key in
                          ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")))
        build = tmp_path / "build"
        # No periodic checkpoint: the only one before the end is the one the stop uploads.
        prepare(cluster, build, name, *sets, "backoff_limit=0", "checkpoint.every_steps=0",
                f"outputs.uri=s3://{BUCKET}/runs", f"outputs.endpoint={endpoint}", "outputs.secret=s3-credentials",
                base="cpu-local.json", target="indexed-job")
        # run.sh fetches the results with this machine's credentials (the user's, in real life)
        run = subprocess.Popen([str(SCRIPTS / "run.sh"), "--timeout", "600", str(build)],
                               env={**cluster.env, **CREDENTIALS}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
        try:
            pods = release_selector(name)
            wait_until("process 0 training past step 150", lambda: any(
                pod_index(p) == 0 and re.search(r"batch (1[5-9]\d|[2-9]\d\d)/", cluster.kubectl(
                    "logs", p["metadata"]["name"], check=False).stdout)
                for p in cluster.items("pods", pods) if p["status"].get("phase") == "Running"),
                timeout=300, interval=1, run=run)
            assert not server.keys(BUCKET, f"runs/{name}/checkpoints/")  # nothing saved yet
            delete_pod(cluster, name, 0)  # process 0's: its replacement starts on an empty disk
            code, output = finish(run, timeout=660)
        finally:
            if run.poll() is None:
                run.kill()
        assert code == 0, output[-6000:]
        uri = f"s3://{BUCKET}/runs/{name}"
        saved = re.findall(r"every process stops after step (\d+)\n.*checkpoint saved at step \1: .*, uploaded to "
                           + re.escape(uri), output)
        downloaded = re.findall(rf"downloaded the checkpoint of step (\d+) from {re.escape(uri)}", output)
        resumed = re.findall(r"resuming from the checkpoint of step (\d+)", output)
        assert saved and downloaded and resumed, output[-6000:]
        # the new pod 0 started on an empty disk and resumed exactly where the stop left the bucket
        assert saved[0] == downloaded[0] == resumed[0], (saved, downloaded, resumed)
        assert_complete(cluster.get("job", name))
        accuracy = final_accuracy(output)
        assert abs(accuracy - uninterrupted_accuracy()) <= 0.003, (accuracy, uninterrupted_accuracy())
        summary = assert_results_fetched(build, name, output)
        assert summary["test_accuracy"] == accuracy and summary["resumed_from"] == [int(resumed[0])]
        assert f"fetching the results from {uri}" in output
        assert json.loads(server.read(BUCKET, f"runs/{name}/summary.json")) == summary
        status = cluster.run([JAXGEN, "status", name, "-o", "json", "--namespace", cluster.namespace])
        assert json.loads(status.stdout)["results"] == f"{uri} (jaxgen results {uri} fetches it)", status.stdout
        cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
    finally:
        cluster.kubectl("delete", "secret", "s3-credentials", "--ignore-not-found", check=False)
        server.stop()

"""NOTES.txt tells the user how to follow rank 0's logs; the helm test hook checks that the
coordinator is reachable, and its check really runs (here against a local TCP listener)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from generator.engines.kubernetes.checks import EMPTYDIR_WARNING, UNBOUNDED_RESTARTS_WARNING
from generator.program import OWN_PROGRAM_WARNING
from generator.targets import KUBERNETES, target as target_of, workload
from tests.support.jaxgen import jaxgen
from trainer.config import TrainConfig
from trainer.contract import METRICS_PATH

from .helm import CHART_DIR, helm, helm_template, write_values

# What NOTES.txt follows for rank 0, and the coordinator (the chart's lookup must agree with
# generator/targets.py).
# Per target: what `kubectl logs` follows for process 0, and process 0's name, of the release "nt".
TARGETS = {name: (f"-l '{w.rank0_selector('nt')}'", w.hosts.coordinator("nt"))
           for name, w in ((name, target_of(name).workload) for name in KUBERNETES)}


def _hook(values_file) -> dict:
    result = helm_template("nt", values_file, extra=("--show-only", "templates/tests/test-coordinator.yaml"))
    assert result.returncode == 0, result.stderr
    (pod,) = result.documents()
    return pod


@pytest.mark.parametrize("target", KUBERNETES)
def test_notes_follow_rank_zero(target, tmp_path):
    path = write_values(tmp_path, target, {"name": "nt", "namespace": "ml", "target": target})
    result = helm("install", "nt", str(CHART_DIR), "-f", str(path), "--dry-run=client", "--namespace", "ml")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    selector, coordinator = TARGETS[target]
    assert f"kubectl logs -n ml -f {selector}" in notes
    assert f"coordinator {coordinator}:{target_of(target).workload.engine_port or 1234}" in notes
    assert f"kubectl get {target_of(target).workload.resource} nt -n ml" in notes
    assert "helm test nt" in notes
    pod = (f"pod/$(kubectl get pod -n ml {selector} --field-selector=status.phase=Running "
           "-o jsonpath='{.items[0].metadata.name}')")
    port = TrainConfig().metrics_port
    assert f"kubectl port-forward -n ml {pod} {port}\n  curl -s localhost:{port}{METRICS_PATH}" in notes
    off = write_values(tmp_path, f"{target}-off", {"name": "nt", "target": target, "metrics": {"port": 0}})
    result = helm("install", "nt", str(CHART_DIR), "-f", str(off), "--dry-run=client", "--namespace", "ml")
    assert result.returncode == 0 and "port-forward" not in result.stdout.split("NOTES:", 1)[1]


@pytest.mark.parametrize("target", KUBERNETES)
def test_hook_targets_the_coordinator(target, tmp_path):
    pod = _hook(write_values(tmp_path, target, {"name": "nt", "target": target, "coordinator_port": 4321}))
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    container = pod["spec"]["containers"][0]
    assert container["command"][:2] == ["python", "-c"]
    assert container["command"][3:] == [TARGETS[target][1], str(target_of(target).workload.engine_port or 4321), "300"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def _run_check(pod: dict, host: str, port: int, wait: str) -> subprocess.CompletedProcess:
    script = pod["spec"]["containers"][0]["command"][2]
    return subprocess.run([sys.executable, "-c", script, host, str(port), wait],
                          capture_output=True, text=True, timeout=60)


def test_hook_script_connects(tmp_path):
    pod = _hook(write_values(tmp_path, "v", {"name": "nt"}))
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        result = _run_check(pod, "localhost", port, "10")
    assert result.returncode == 0, result.stderr
    assert f"coordinator localhost:{port}" in result.stdout and "accepts connections" in result.stdout


def test_hook_script_fails_when_nothing_listens(tmp_path):
    pod = _hook(write_values(tmp_path, "v", {"name": "nt"}))
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]  # closed again before the check runs
    result = _run_check(pod, "127.0.0.1", port, "1")
    assert result.returncode != 0
    assert "not reachable after 1 s" in result.stderr


NOTES_CASES = {
    # values -> (jaxgen warns, the claim NOTES names or None, the ReadWriteOnce line)
    "default": ({}, True, None, False),
    "sized-emptydir": ({"checkpoint": {"volume": {"emptyDir": {"sizeLimit": "1Gi"}}}}, True, None, False),
    "own-volume": ({"checkpoint": {"volume": {"persistentVolumeClaim": {"claimName": "mine"}}}}, False, None, False),
    "persistence": ({"persistence": {"enabled": True}}, False, "nt-outputs", True),
    "persistence-rwx": ({"persistence": {"enabled": True, "access_mode": "ReadWriteMany"}}, False, "nt-outputs", False),
    "persistence-one-host": ({"hosts_count": 1, "persistence": {"enabled": True}}, False, "nt-outputs", False),
    "existing-claim": ({"persistence": {"existing_claim": "results"}}, False, "results", False),
    "own-program": ({"program": {"command": ["python3", "/app/mine.py"]}}, True, None, False),
    "own-program-persistence": ({"program": {"command": ["python3", "/app/mine.py"]}, "persistence": {"enabled": True}},
                                False, "nt-outputs", True),
    "bucket": ({"outputs": {"uri": "s3://team-results/runs/"}}, False, None, False),
    "deadline": ({"active_deadline_seconds": 86400}, True, None, False),
}


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("case", sorted(NOTES_CASES))
def test_notes_say_where_the_outputs_live_as_jaxgen_warns(case, target, tmp_path):
    """The emptyDir warning once in NOTES exactly when jaxgen render warns on stderr; a claim is named
    with the command that deletes it; ReadWriteOnce with several hosts says all pods share its node."""
    values, warns, claim, one_node = NOTES_CASES[case]
    path = write_values(tmp_path, case, {"name": "nt", "namespace": "ml", "target": target, **values})
    expected = [EMPTYDIR_WARNING] if warns else []
    if not workload(target).counts_restarts and "active_deadline_seconds" not in values:
        expected.append(UNBOUNDED_RESTARTS_WARNING)  # (a JAXJob: nothing else bounds its restarts)
    if "program" in values:  # a program of the user's own: the call it needs on this engine
        expected.append(OWN_PROGRAM_WARNING % target_of(target).own_program_init)
    rendered = jaxgen("render", str(path))
    assert rendered.exit_code == 0 and rendered.stderr == "".join(f"warning: {w}\n" for w in expected)
    result = helm("install", "nt", str(CHART_DIR), "-f", str(path), "--dry-run=client", "--namespace", "ml")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    for warning in expected:
        assert notes.count(f"warning: {warning}\n") == 1, notes
    assert notes.count("warning:") == len(expected)
    assert ("PersistentVolumeClaim" in notes) == (claim is not None)
    if claim:
        assert f"kubectl delete pvc {claim} -n ml" in notes and "helm uninstall keeps the claim" in notes
    assert ("all 2 pods must run on the claim's node" in notes) == one_node
    if "outputs" in values:
        assert ("Rank 0 also keeps them in s3://team-results/runs/nt/ (outputs.uri): a restarted pod resumes from the "
                "bucket's last checkpoint; jaxgen results s3://team-results/runs/nt fetches the results.") in notes


@pytest.mark.parametrize("target", KUBERNETES)
def test_the_network_policy_admits_the_hook_to_the_coordinator_port_only(target, tmp_path):
    """The job's NetworkPolicy lets the helm test pod reach the coordinator port, and no other."""
    path = write_values(tmp_path, target, {"name": "nt", "target": target, "coordinator_port": 2345})
    pod = _hook(path)
    result = helm_template("nt", path, extra=("--show-only", "templates/networkpolicy.yaml"))
    assert result.returncode == 0, result.stderr
    (policy,) = result.documents()
    admitted = [rule for rule in policy["spec"]["ingress"]
                if any(peer.get("podSelector", {}).get("matchLabels", {}).items() <= pod["metadata"]["labels"].items()
                       for peer in rule["from"] if peer.keys() == {"podSelector"})]
    assert [rule["ports"] for rule in admitted] == [[{"port": 2345, "protocol": "TCP"}]]


@pytest.mark.parametrize("target", [t for t in KUBERNETES if t != "trainjob"])  # a TrainJob ships no folder
def test_a_shipped_program_folder_is_not_warned_about_its_initialize(target, tmp_path):
    """program.dir ships a sitecustomize with which jax.distributed.initialize() with no arguments finds
    its peers: neither renderer warns that it cannot."""
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "mine.py").write_text("import jax\njax.distributed.initialize()\n")
    values = {"name": "nt", "namespace": "ml", "target": target,
              "program": {"command": ["python3", "mine.py"], "dir": str(folder), "archive": "aGVsbG8="}}
    path = write_values(tmp_path, "shipped", values)
    expected = [EMPTYDIR_WARNING] + ([] if workload(target).counts_restarts else [UNBOUNDED_RESTARTS_WARNING])
    rendered = jaxgen("render", str(path))
    assert rendered.exit_code == 0 and rendered.stderr == "".join(f"warning: {w}\n" for w in expected), rendered.stderr
    result = helm("install", "nt", str(CHART_DIR), "-f", str(path), "--dry-run=client", "--namespace", "ml")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert notes.count("warning:") == len(expected) and all(f"warning: {w}\n" in notes for w in expected), notes

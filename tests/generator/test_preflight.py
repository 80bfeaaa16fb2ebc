"""What `jaxgen check` knows without a cluster: the upstream versions it names are the ones the test
cluster runs (scripts/cluster/controlplane/go.mod), and its failures before the cluster is asked."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from generator.engines.kubernetes import render_documents
from generator.engines.kubernetes.preflight import COMPONENTS, KUEUE, TRAINER_RUNTIMES, version_gap
from generator.values import load_values
from tests.support.paths import EXAMPLES_DIR, SCRIPTS_DIR

JAXGEN = str(Path(sys.executable).with_name("jaxgen"))
MODULES = {"jobset.x-k8s.io": "sigs.k8s.io/jobset",
           "kubeflow.org": "github.com/kubeflow/training-operator",
           "trainer.kubeflow.org": "github.com/kubeflow/trainer/v2"}


def version_tested(module: str) -> str:
    text = (SCRIPTS_DIR / "cluster" / "controlplane" / "go.mod").read_text()
    return re.search(rf"^\s*{re.escape(module)} (v\S+)", text, re.M).group(1)


@pytest.mark.parametrize("group", sorted(MODULES))
def test_each_install_command_is_of_the_version_the_tests_run(group):
    version = version_tested(MODULES[group])
    assert COMPONENTS[group].version == version
    assert version in COMPONENTS[group].install
    if group == "trainer.kubeflow.org":
        assert f"ref={version}" in TRAINER_RUNTIMES


def test_kueue_is_the_version_the_tests_run():
    version = version_tested("sigs.k8s.io/kueue")
    assert KUEUE.version == version and f"/{version}/" in KUEUE.install


def test_a_slurm_render_and_no_cluster_are_one_line_each(tmp_path):
    slurm = subprocess.run([JAXGEN, "check", str(EXAMPLES_DIR / "slurm.json")], capture_output=True, text=True,
                           timeout=60)
    assert slurm.returncode == 2 and slurm.stderr.count("\n") == 1 and "sbatch --test-only" in slurm.stderr
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                      "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
                      "users: [{name: u, user: {token: t}}]\n")
    down = subprocess.run([JAXGEN, "check", str(EXAMPLES_DIR / "jobset.json"), "--kubeconfig", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert down.returncode == 3 and down.stderr.count("\n") == 1, down.stderr
    invalid = subprocess.run([JAXGEN, "check", str(EXAMPLES_DIR / "jobset.json"), "--set", "hosts_count=0"],
                             capture_output=True, text=True, timeout=60)
    assert invalid.returncode == 2 and "$.hosts_count" in invalid.stderr, invalid.stderr


@pytest.mark.parametrize("server, gap", [("v1.33.4", True), ("v1.34.2-gke.1", True), ("v1.35.0", False),
                                         ("v1.36.3", False)])
def test_a_render_for_a_newer_kubernetes_than_the_clusters_is_one_line(server, gap):
    """The default render (for the newest Kubernetes) restarts processes in place; a cluster older than
    the restart rules' version would refuse (or drop) them: jaxgen check says how to render for it,
    and a render for that version has no gap."""
    values = load_values([str(EXAMPLES_DIR / "cpu-local.json")], [])
    lines = version_gap(values, server, render_documents(values))
    assert bool(lines) == gap, lines
    if gap:
        [line] = lines
        assert f"--set kube_version={server[1:]}" in line and "kube_version is empty" in line
        fitted = load_values([str(EXAMPLES_DIR / "cpu-local.json")], [f"kube_version={server[1:]}"])
        assert version_gap(fitted, server, render_documents(fitted)) == []


@pytest.mark.parametrize("server", ["v1.\u0663\u0665.0", "v\uff11.\uff13\uff15", "v1." + "9" * 5000, "garbage"])
def test_a_cluster_version_that_is_not_ascii_digits_is_one_line(server):
    """\\d took any Unicode digit, so v1.٣٥.0 read as 1.35; a text that is no version at all (or one of
    thousands of digits) ended in a TypeError (a ValueError) traceback. Each is now the check's one line."""
    from generator import kubernetes_versions

    with pytest.raises(ValueError, match="is not a Kubernetes version"):
        kubernetes_versions.parse(server)
    values = load_values([str(EXAMPLES_DIR / "cpu-local.json")], [])
    [line] = version_gap(values, server, render_documents(values))
    assert line.startswith(f"this cluster's version cannot be compared with the render's ({kubernetes_versions.NEWEST}): "), line
    assert len(line) < 300, line


@pytest.mark.parametrize("toleration, tolerated", [
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),  # no effect: every effect
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "nvidia.com/gpu", "value": "present"}, True),  # Equal, the default operator
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, False),
    ({"operator": "Exists"}, True),  # an empty key with Exists: every taint
    ({"key": "dedicated", "operator": "Exists"}, False)])
def test_a_nodes_taint_keeps_pods_off_unless_a_toleration_matches(toleration, tolerated):
    """Which nodes `jaxgen check` counts for a ReadWriteOnce claim: Kubernetes' toleration rule."""
    from generator.engines.kubernetes.preflight import _tolerated

    assert _tolerated({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, [toleration]) is tolerated


def test_a_required_affinity_pins_the_pods():
    """A required pod affinity keeps them together; a required node affinity admits the nodes its terms
    match (any term, every expression), a preferred one every node."""
    from generator.engines.kubernetes.preflight import _admits, _pins_pods

    assert _pins_pods({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname"}]}})
    assert not _pins_pods({}) and not _pins_pods({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}})
    node = {"metadata": {"name": "n1", "labels": {"zone": "a", "cores": "16"}}}

    def required(*terms):
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}

    def term(key, operator, *values, field=False):
        return {"matchFields" if field else "matchExpressions": [{"key": key, "operator": operator,
                                                                  **({"values": list(values)} if values else {})}]}
    assert _admits(node, {}) and _admits(node, {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}})
    for admitted in (term("zone", "In", "a", "b"), term("zone", "NotIn", "b"), term("zone", "Exists"),
                     term("gpu", "DoesNotExist"), term("cores", "Gt", "8"), term("cores", "Lt", "32"),
                     term("metadata.name", "In", "n1", field=True)):
        assert _admits(node, required(admitted)) and _admits(node, required(term("zone", "In", "b"), admitted))
    for refused in (term("zone", "In", "b"), term("zone", "NotIn", "a"), term("gpu", "Exists"),
                    term("zone", "DoesNotExist"), term("cores", "Gt", "16"), term("zone", "Lt", "3"),
                    term("metadata.name", "In", "n2", field=True), {}):
        assert not _admits(node, required(refused)), refused

"""What `jaxgen check` knows without a cluster: the upstream versions it names are the ones the test
cluster runs (scripts/cluster/controlplane/go.mod), and its failures before the cluster is asked."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from generator.engines.kubernetes import render_documents
from generator.engines.kubernetes.kubectl import Forbidden, Kubectl, error_of, forbidden
from generator.engines.kubernetes.preflight import COMPONENTS, KUEUE, TRAINER_RUNTIMES, Preflight, version_gap
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


def closed_port_kubeconfig(path: Path) -> Path:
    """A kubeconfig whose server refuses: nothing listens on port 1."""
    path.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                    "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
                    "users: [{name: u, user: {token: t}}]\n")
    return path


def check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """jaxgen check; env's None values are unset."""
    environ = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    return subprocess.run([JAXGEN, "check", *args], capture_output=True, text=True, timeout=60, env=environ)


def test_a_slurm_render_and_invalid_values_are_one_line_each():
    slurm = check(str(EXAMPLES_DIR / "slurm.json"))
    assert slurm.returncode == 2 and slurm.stderr.count("\n") == 1 and "sbatch --test-only" in slurm.stderr
    invalid = check(str(EXAMPLES_DIR / "jobset.json"), "--set", "hosts_count=0")
    assert invalid.returncode == 2 and "$.hosts_count" in invalid.stderr, invalid.stderr


OWN_IMAGE = ("--set", "image.repository=registry.example/jax-training")


def test_a_server_that_refuses_is_one_line_naming_the_context_and_the_offline_checks_still_run(tmp_path):
    config = closed_port_kubeconfig(tmp_path / "kubeconfig")
    for how, env in ((["--kubeconfig", str(config)], {}), ([], {"KUBECONFIG": str(config)})):
        down = check(str(EXAMPLES_DIR / "jobset.json"), *OWN_IMAGE, *how, env=env)
        assert down.returncode == 3 and down.stderr.count("\n") == 1, down.stderr
        source = f"--kubeconfig {config}" if how else f"KUBECONFIG={config}"
        assert down.stderr.startswith(f"error: context c (https://127.0.0.1:1) of {source}: cannot reach the "
                                      "cluster: "), down.stderr
        assert "connection refused" in down.stderr and "localhost:8080" not in down.stderr, down.stderr
        assert down.stderr.rstrip().endswith("the cluster's checks were skipped, the offline ones ran")
        assert down.stdout == ("jobset mnist-jobset: offline checks passed (values, rules, image); "
                               "no cluster was asked\n"), down.stdout


def test_no_kubeconfig_is_one_line_and_the_offline_checks_still_report(tmp_path):
    """kubectl, given no kubeconfig, asks localhost:8080; jaxgen check says which file is missing and
    still reports what the render alone shows: an unpublished image (an error), several pods on a
    ReadWriteOnce claim (the warning the chart's NOTES.txt gives too), invalid values (exit 2)."""
    missing = tmp_path / "nowhere" / "kubeconfig"
    env = {"KUBECONFIG": str(missing)}
    ok = check(str(EXAMPLES_DIR / "jobset.json"), *OWN_IMAGE, env=env)
    assert (ok.returncode, ok.stderr) == (3, f"error: no kubeconfig: KUBECONFIG={missing} names no file; the "
                                             "cluster's checks were skipped, the offline ones ran\n"), ok.stderr
    assert "offline checks passed (values, rules, image)" in ok.stdout
    home = check(str(EXAMPLES_DIR / "jobset.json"), *OWN_IMAGE, env={"KUBECONFIG": None, "HOME": str(tmp_path)})
    assert home.returncode == 3 and home.stderr.startswith(
        "error: no kubeconfig: ~/.kube/config (KUBECONFIG is unset) names no file;"), home.stderr
    named = check(str(EXAMPLES_DIR / "jobset.json"), *OWN_IMAGE, "--kubeconfig", str(missing))
    assert named.returncode == 3 and named.stderr.startswith(f"error: no kubeconfig: --kubeconfig {missing} names no "
                                                             "file;"), named.stderr
    lacking = check(str(EXAMPLES_DIR / "jobset.json"), "--set", "persistence.enabled=true", env=env)
    assert lacking.returncode == 3, lacking.stderr
    first, warning, image = lacking.stderr.splitlines()
    assert first.startswith("error: no kubeconfig: ")
    assert warning.startswith("warning: persistence: claim mnist-jobset-outputs is ReadWriteOnce and the 2 pods "
                              "that mount it must all run on one node"), warning
    assert image.startswith("error: image ghcr.io/jax-training/trainer:") and "is not published" in image, image
    assert "offline checks failed" in lacking.stdout
    invalid = check(str(EXAMPLES_DIR / "jobset.json"), "--set", "hosts_count=0", env=env)
    assert invalid.returncode == 2 and "$.hosts_count" in invalid.stderr, invalid.stderr
    empty = tmp_path / "empty"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    no_context = check(str(EXAMPLES_DIR / "jobset.json"), *OWN_IMAGE, env={"KUBECONFIG": str(empty)})
    assert no_context.returncode == 3 and no_context.stderr.startswith(
        f"error: no context: KUBECONFIG={empty} has no current-context (pass --context"), no_context.stderr


# What kubectl prints when RBAC refuses a server-side dry run (kubectl create --dry-run=server -f -).
FORBIDDEN_CREATE = ('Error from server (Forbidden): error when creating "STDIN": networkpolicies.networking.k8s.io is '
                    'forbidden: User "system:serviceaccount:team-a:alice" cannot create resource "networkpolicies" in '
                    'API group "networking.k8s.io" in the namespace "team-a"\n')
FORBIDDEN_PODS = ('Error from server (Forbidden): error when creating "STDIN": pods is forbidden: User "alice" cannot '
                  'create resource "pods" in API group "" in the namespace "team-a"\n')
FORBIDDEN_NODES = ('Error from server (Forbidden): nodes is forbidden: User "alice" cannot list resource "nodes" in '
                   'API group "" at the cluster scope\n')


def test_a_forbidden_answer_is_parsed_into_the_rule_that_allows_it():
    refused = error_of(FORBIDDEN_CREATE)
    assert isinstance(refused, Forbidden)
    assert (refused.user, refused.verb, refused.resource, refused.group, refused.namespace) == (
        "system:serviceaccount:team-a:alice", "create", "networkpolicies", "networking.k8s.io", "team-a")
    assert refused.rule_line() == ('a Role rule that allows it: {apiGroups: ["networking.k8s.io"], '
                                   'resources: ["networkpolicies"], verbs: [create]}')
    nodes = error_of(FORBIDDEN_NODES)
    assert isinstance(nodes, Forbidden) and nodes.namespace is None
    assert str(nodes) == ('user "alice" may not list nodes (core API group) at the cluster scope: a ClusterRole rule '
                          'that allows it: {apiGroups: [""], resources: ["nodes"], verbs: [list]}')
    log = forbidden('pods "p-0" is forbidden: User "bob" cannot get resource "pods/log" in API group "" in the '
                    'namespace "t"')
    assert log.resource == "pods/log" and log.verb == "get"
    assert forbidden("(Forbidden): pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\"") is None
    assert not isinstance(error_of("The connection to the server localhost:8080 was refused"), Forbidden)


class DryRuns(Kubectl):
    """A cluster whose RBAC refuses the dry run of some kinds, with kubectl's own words."""

    def __init__(self, refused: dict[str, str]):
        self.binary, self.global_args, self.namespace, self.refused = "kubectl", [], "team-a", refused
        self.kubeconfig = self.context = None

    def run(self, *args, namespaced=True, check=True, timeout=20, stdin=None):
        assert args[:2] == ("create", "--dry-run=server"), args
        [doc] = json.loads(stdin)["items"]
        stderr = self.refused.get(doc["kind"], "")
        return subprocess.CompletedProcess(args, 1 if stderr else 0, "", stderr)


def test_every_object_of_the_render_is_dry_run_and_a_forbidden_one_is_named_with_its_rule():
    values = load_values([str(EXAMPLES_DIR / "jobset.json")], ["persistence.enabled=true"])
    kinds = {d["kind"] for d in render_documents(values)}
    assert {"JobSet", "NetworkPolicy", "PersistentVolumeClaim"} <= kinds, kinds
    preflight = Preflight(values, DryRuns({}))
    preflight.notes = []
    assert preflight.admission() == [] and preflight.notes == []
    preflight = Preflight(values, DryRuns({"NetworkPolicy": FORBIDDEN_CREATE, "Pod": FORBIDDEN_PODS}))
    preflight.notes = []
    assert preflight.admission() == [
        'namespace team-a may not create NetworkPolicy mnist-jobset (RBAC, user "system:serviceaccount:team-a:alice"): '
        'a Role rule that allows it: {apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], '
        'verbs: [create]}']
    [note] = preflight.notes  # the controller creates the pods: the user need not
    assert note.startswith("the pods' admission (PodSecurity, webhooks) not checked: the JobSet controller creates "
                           'them, and user "alice" may not create pods'), note
    job = Preflight(values, DryRuns({"JobSet": FORBIDDEN_CREATE.replace("networkpolicies.networking.k8s.io",
                                                                        "jobsets.jobset.x-k8s.io").replace(
        '"networkpolicies" in API group "networking.k8s.io"', '"jobsets" in API group "jobset.x-k8s.io"'),
        "Pod": 'Error from server (Forbidden): error when creating "STDIN": pods "x" is forbidden: violates '
               'PodSecurity "restricted:latest": hostPath volumes (volume "checkpoint")\n'}))
    job.notes = []
    assert [line.split(":")[0] for line in job.admission()] == [  # RBAC refuses the job; admission its pods
        'namespace team-a may not create JobSet mnist-jobset (RBAC, user "system',
        "the pods of mnist-jobset are refused by the cluster"]
    denied = Preflight(values, DryRuns({"JobSet": 'Error from server (Forbidden): error when creating "STDIN": '
                                                  'admission webhook "vjobset.kb.io" denied the request: spec: bad\n',
                                        "Pod": FORBIDDEN_PODS}))
    denied.notes = []
    assert denied.admission() == ['JobSet mnist-jobset is refused by the cluster: (Forbidden): error when creating '
                                  '"STDIN": admission webhook "vjobset.kb.io" denied the request: spec: bad']
    claim = Preflight(values, DryRuns({"PersistentVolumeClaim": FORBIDDEN_CREATE.replace(
        "networkpolicies.networking.k8s.io", "persistentvolumeclaims").replace(
        '"networkpolicies" in API group "networking.k8s.io"', '"persistentvolumeclaims" in API group ""')}))
    claim.notes = []
    [line] = claim.admission()
    assert line.startswith("namespace team-a may not create PersistentVolumeClaim mnist-jobset-outputs "), line
    assert line.endswith('{apiGroups: [""], resources: ["persistentvolumeclaims"], verbs: [create]}'), line


def test_a_read_rbac_refuses_is_a_warning_naming_the_rule_and_the_check_is_not_passed():
    """A namespace's Role may not read nodes, StorageClasses or namespaces (cluster-scoped): the check
    that needs them is not done, and a warning says which rule would let it."""
    values = load_values([str(EXAMPLES_DIR / "jobset.json")], [])
    preflight = Preflight(values, DryRuns({}))
    preflight.notes = []

    def gpus():
        raise error_of(FORBIDDEN_NODES)

    assert preflight._guarded("GPUs", gpus)() is None
    assert preflight.notes == ['GPUs not checked: user "alice" may not list nodes (core API group) at the cluster '
                               'scope: a ClusterRole rule that allows it: {apiGroups: [""], resources: ["nodes"], '
                               "verbs: [list]}"]
    preflight.kube.get = lambda *args, **kwargs: (_ for _ in ()).throw(error_of(FORBIDDEN_NODES))
    assert preflight.namespace_exists()  # unknown: the dry runs in it answer instead


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
